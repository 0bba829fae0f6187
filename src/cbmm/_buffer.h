/* Held Python buffers of the C extensions (_fused, _ingest): a view and whether it is
 * held, released together when an entry point returns or fails.  Include after Python.h. */
#ifndef CBMM_BUFFER_H
#define CBMM_BUFFER_H

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static void release(Buffer *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i].held) {
            PyBuffer_Release(&bufs[i].view);
            bufs[i].held = 0;
        }
}

#endif
