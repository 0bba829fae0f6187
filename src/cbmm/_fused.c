/*
 * cbmm._fused: the two fused passes of one cBMM iteration (see cbmm/solver.py).
 *
 * Per entry an MM iteration needs w = y expit(z) and the loss term
 * softplus(z), z = -y x / sigma, x = theta_i a_j + b_j.  Both come from one
 * e = exp(-|z|): expit(z) = 1/(1+e) or e/(1+e), softplus(z) = max(z,0) + log1p(e).
 *
 * exp(-t) = 2^-k exp(-r), k = round(t / ln 2), |r| <= ln2/2: exp(-r) by its
 * Taylor polynomial (degree 12 in double, 7 in single precision) evaluated
 * with Estrin's scheme, 2^-k written into the exponent bits.  t is clamped at
 * 40 (exp(-40) = 4e-18, so w and each loss term move by < 5e-18).
 * log1p(e) = 2 atanh(s), s = e / (2 + e) <= 1/3, odd series to 16 (double) or
 * 8 (single) terms.  Relative errors: < 2e-15 (double), < 5e-7 (single).
 * No libm call per entry, so the compiler vectorises the loops (4 double or 8
 * float lanes with AVX2); x86-64 builds carry an AVX2/FMA copy of the kernels
 * (_fused_kernels.h) next to the baseline one, picked when the module loads.
 *
 * Responses are int8 in the paper's coding (+1 correct, -1 incorrect, 0
 * missing).  W is stored as float32 (4 bytes per entry) so the theta-step
 * needs no second exp.  Sums are accumulated in double.  Threads: POSIX
 * threads started per pass, one chunk of rows each (see parallel_chunks);
 * the GIL is released while the passes run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define T_MAX 40.0

static const double EXP64[16] = {
    1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040, 1.0 / 40320,
    1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800, 1.0 / 479001600, 0.0, 0.0, 0.0};
static const double LOG64[16] = {
    1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9, 1.0 / 11, 1.0 / 13, 1.0 / 15,
    1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23, 1.0 / 25, 1.0 / 27, 1.0 / 29, 1.0 / 31};
static const float EXP32[8] = {
    1.0f, 1.0f, 1.0f / 2, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040};
static const float LOG32[8] = {
    1.0f, 1.0f / 3, 1.0f / 5, 1.0f / 7, 1.0f / 9, 1.0f / 11, 1.0f / 13, 1.0f / 15};

#define CONCAT_(a, b) a##b
#define CONCAT(a, b) CONCAT_(a, b)
#define KERNEL(name) CONCAT(name, KERNEL_SUFFIX)

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_AVX2_KERNELS 1
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define KERNEL_SUFFIX _avx2
#include "_fused_kernels.h"
#undef KERNEL_SUFFIX
#pragma GCC pop_options
#endif

#define KERNEL_SUFFIX _generic
#include "_fused_kernels.h"
#undef KERNEL_SUFFIX

/* Which copy of the kernels runs: chosen once, when the module is loaded. */
typedef double (*column_rows64_fn)(const int8_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                    const double *, const double *, const double *, double,
                                    float *, double *, double *);
typedef double (*column_rows32_fn)(const int8_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                    const float *, const float *, const float *, float, float *,
                                    double *, double *);
typedef void (*mask_rows_fn)(const int8_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t, const double *,
                             double *, double *, double *);
typedef void (*theta_rows_fn)(const int8_t *, const float *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                              const double *, const double *, const double *, const double *,
                              const double *, double, int, double, double, double, double *);
typedef double (*gradient_rows_fn)(const int8_t *, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                                   const double *, const double *, const double *, double,
                                   double *, double *, double *, double *);
typedef void (*elementwise64_fn)(const int8_t *, const double *, double, double *, double *,
                                 Py_ssize_t);
typedef void (*elementwise32_fn)(const int8_t *, const float *, float, float *, float *,
                                 Py_ssize_t);
static column_rows64_fn column_rows64 = column_rows64_generic;
static column_rows32_fn column_rows32 = column_rows32_generic;
static mask_rows_fn mask_rows = mask_rows_generic;
static theta_rows_fn theta_rows = theta_rows_generic;
static gradient_rows_fn gradient_rows = gradient_rows_generic;
static elementwise64_fn elementwise64 = elementwise64_generic;
static elementwise32_fn elementwise32 = elementwise32_generic;
static const char *kernel_target = "generic";

static void select_kernels(void)
{
#ifdef HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        column_rows64 = column_rows64_avx2;
        column_rows32 = column_rows32_avx2;
        mask_rows = mask_rows_avx2;
        theta_rows = theta_rows_avx2;
        gradient_rows = gradient_rows_avx2;
        elementwise64 = elementwise64_avx2;
        elementwise32 = elementwise32_avx2;
        kernel_target = "avx2+fma";
    }
#endif
}


/* ---- Threads -------------------------------------------------------------- */

/* Threads are plain POSIX threads started for one pass and joined before it
 * returns: no thread, lock or runtime outlives a call, so a process may fork
 * at any time and its child can run passes of its own (an OpenMP runtime's
 * idle pool hangs a forked child).  Chunk 0 runs on the calling thread; a
 * chunk whose thread cannot be started also runs there, after the others. */
typedef void (*chunk_fn)(void *context, Py_ssize_t chunk);

typedef struct {
    chunk_fn fn;
    void *context;
    Py_ssize_t chunk;
} ChunkJob;

static void *run_chunk_job(void *arg)
{
    ChunkJob *job = arg;
    job->fn(job->context, job->chunk);
    return NULL;
}

#define MAX_THREADS 1024

static void parallel_chunks(Py_ssize_t n_chunks, chunk_fn fn, void *context)
{
    pthread_t threads[MAX_THREADS];
    ChunkJob jobs[MAX_THREADS];
    int started[MAX_THREADS];
    for (Py_ssize_t c = 1; c < n_chunks; c++) {
        jobs[c] = (ChunkJob){fn, context, c};
        started[c] = pthread_create(&threads[c], NULL, run_chunk_job, &jobs[c]) == 0;
    }
    fn(context, 0);
    for (Py_ssize_t c = 1; c < n_chunks; c++) {
        if (started[c])
            pthread_join(threads[c], NULL);
        else
            fn(context, c);
    }
}

/* ---- Python bindings ------------------------------------------------------ */

typedef struct {
    Py_buffer view;
    int held;
} Buffer;

static int get_buffer(PyObject *obj, Buffer *buf, const char *name, char format,
                      Py_ssize_t count, int writable)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->view, flags) < 0)
        return -1;
    buf->held = 1;
    const char *fmt = buf->view.format ? buf->view.format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@')
        fmt++;
    if (fmt[0] != format || fmt[1] != '\0' || (count >= 0 && buf->view.len != count * buf->view.itemsize)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a C-contiguous buffer of %zd items of type '%c'",
                     name, count, format);
        return -1;
    }
    return 0;
}

/* 'f' if obj is a float32 buffer, 'd' otherwise (get_buffer then checks it);
 * 0 with an exception set if obj has no buffer. */
static char float_format(PyObject *obj)
{
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        return 0;
    char format = view.format && strchr(view.format, 'f') ? 'f' : 'd';
    PyBuffer_Release(&view);
    return format;
}

/* Rows [*r0, *r1) of chunk c when n rows are cut into chunks of `per`. */
static inline void chunk_rows(Py_ssize_t c, Py_ssize_t per, Py_ssize_t n, Py_ssize_t *r0,
                              Py_ssize_t *r1)
{
    *r0 = c * per;
    *r1 = (c + 1) * per < n ? (c + 1) * per : n;
}

static void release(Buffer *bufs, int n)
{
    for (int i = 0; i < n; i++)
        if (bufs[i].held)
            PyBuffer_Release(&bufs[i].view);
}

typedef struct {
    const int8_t *y;
    Py_ssize_t j, n, per;
    int single, need_mask;
    const void *theta, *a, *b;
    const double *theta64;
    double inv_sigma;
    float *w;
    double *wt, *ws, *cn, *ct, *ctt, *loss;
} ColumnContext;

static void column_chunk(void *context, Py_ssize_t c)
{
    const ColumnContext *x = context;
    Py_ssize_t r0, r1, j = x->j;
    chunk_rows(c, x->per, x->n, &r0, &r1);
    memset(x->wt + c * j, 0, j * sizeof(double));
    memset(x->ws + c * j, 0, j * sizeof(double));
    if (x->single)
        x->loss[c] = column_rows32(x->y, j, r0, r1, x->theta, x->a, x->b, (float)x->inv_sigma,
                                   x->w, x->wt + c * j, x->ws + c * j);
    else
        x->loss[c] = column_rows64(x->y, j, r0, r1, x->theta, x->a, x->b, x->inv_sigma, x->w,
                                   x->wt + c * j, x->ws + c * j);
    if (x->need_mask) {
        memset(x->cn + c * j, 0, j * sizeof(double));
        memset(x->ct + c * j, 0, j * sizeof(double));
        memset(x->ctt + c * j, 0, j * sizeof(double));
        mask_rows(x->y, j, r0, r1, x->theta64, x->cn + c * j, x->ct + c * j, x->ctt + c * j);
    }
}

static PyObject *py_column_pass(PyObject *self, PyObject *args)
{
    PyObject *oy, *otheta, *otheta64, *oa, *ob, *owt, *ows, *on, *ot, *ott, *oloss, *ow;
    Py_ssize_t n, j, n_chunks;
    double inv_sigma;
    int need_mask;
    if (!PyArg_ParseTuple(args, "OnnOOOOdnpOOOOOOO", &oy, &n, &j, &otheta, &otheta64, &oa, &ob,
                          &inv_sigma, &n_chunks, &need_mask, &owt, &ows, &on, &ot, &ott, &oloss,
                          &ow))
        return NULL;
    if (n_chunks < 1 || n_chunks > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "n_chunks must be in [1, %d]", MAX_THREADS);
        return NULL;
    }
    Buffer b[12];
    memset(b, 0, sizeof b);
    char ft = float_format(otheta);  /* the precision of the pass */
    if (!ft || get_buffer(oy, &b[0], "y", 'b', n * j, 0) < 0)
        goto fail;
    int single = ft == 'f';
    Py_ssize_t stats = need_mask ? n_chunks * j : -1;
    if (get_buffer(otheta, &b[1], "theta", ft, n, 0) < 0 || get_buffer(oa, &b[2], "a", ft, j, 0) < 0
        || get_buffer(ob, &b[3], "b", ft, j, 0) < 0
        || get_buffer(owt, &b[4], "acc_wt", 'd', n_chunks * j, 1) < 0
        || get_buffer(ows, &b[5], "acc_w", 'd', n_chunks * j, 1) < 0
        || get_buffer(on, &b[6], "acc_n", 'd', stats, 1) < 0
        || get_buffer(ot, &b[7], "acc_t", 'd', stats, 1) < 0
        || get_buffer(ott, &b[8], "acc_tt", 'd', stats, 1) < 0
        || get_buffer(oloss, &b[9], "loss_parts", 'd', n_chunks, 1) < 0
        || get_buffer(ow, &b[10], "w_store", 'f', n * j, 1) < 0
        || get_buffer(otheta64, &b[11], "theta64", 'd', n, 0) < 0)
        goto fail;
    const int8_t *y = b[0].view.buf;
    double *wt = b[4].view.buf, *ws = b[5].view.buf, *loss = b[9].view.buf;
    double *cn = b[6].view.buf, *ct = b[7].view.buf, *ctt = b[8].view.buf;
    float *w = b[10].view.buf;
    ColumnContext ctx = {y, j, n, (n + n_chunks - 1) / n_chunks, single, need_mask,
                         b[1].view.buf, b[2].view.buf, b[3].view.buf, b[11].view.buf, inv_sigma,
                         w, wt, ws, cn, ct, ctt, loss};
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(n_chunks, column_chunk, &ctx);
    Py_END_ALLOW_THREADS
    release(b, 12);
    Py_RETURN_NONE;
fail:
    release(b, 12);
    return NULL;
}

typedef struct {
    const int8_t *y;
    const float *w;
    Py_ssize_t j, n, per;
    const double *theta, *a, *b, *a_new, *b_new;
    double four_sigma;
    int masked;
    double aa_full, ba_full, a2_full;
    double *theta_out;
} RowContext;

static void row_chunk(void *context, Py_ssize_t c)
{
    const RowContext *x = context;
    Py_ssize_t r0, r1;
    chunk_rows(c, x->per, x->n, &r0, &r1);
    if (r0 < r1)
        theta_rows(x->y, x->w, x->j, r0, r1, x->theta, x->a, x->b, x->a_new, x->b_new,
                   x->four_sigma, x->masked, x->aa_full, x->ba_full, x->a2_full, x->theta_out);
}

static PyObject *py_row_pass(PyObject *self, PyObject *args)
{
    PyObject *oy, *ow, *otheta, *oa, *ob, *oan, *obn, *oout;
    Py_ssize_t n, j, n_threads;
    double four_sigma, aa_full, ba_full, a2_full;
    int masked;
    if (!PyArg_ParseTuple(args, "OnnOOOOOOdpdddOn", &oy, &n, &j, &ow, &otheta, &oa, &ob, &oan,
                          &obn, &four_sigma, &masked, &aa_full, &ba_full, &a2_full, &oout,
                          &n_threads))
        return NULL;
    Buffer b[8];
    memset(b, 0, sizeof b);
    if (get_buffer(oy, &b[0], "y", 'b', n * j, 0) < 0
        || get_buffer(ow, &b[1], "w_store", 'f', n * j, 0) < 0
        || get_buffer(otheta, &b[2], "theta", 'd', n, 0) < 0
        || get_buffer(oa, &b[3], "a", 'd', j, 0) < 0 || get_buffer(ob, &b[4], "b", 'd', j, 0) < 0
        || get_buffer(oan, &b[5], "a_new", 'd', j, 0) < 0
        || get_buffer(obn, &b[6], "b_new", 'd', j, 0) < 0
        || get_buffer(oout, &b[7], "theta_out", 'd', n, 1) < 0) {
        release(b, 8);
        return NULL;
    }
    if (n_threads < 1 || n_threads > MAX_THREADS) {
        release(b, 8);
        PyErr_Format(PyExc_ValueError, "n_threads must be in [1, %d]", MAX_THREADS);
        return NULL;
    }
    RowContext ctx = {b[0].view.buf, b[1].view.buf, j, n, (n + n_threads - 1) / n_threads,
                      b[2].view.buf, b[3].view.buf, b[4].view.buf, b[5].view.buf, b[6].view.buf,
                      four_sigma, masked, aa_full, ba_full, a2_full, b[7].view.buf};
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(n_threads, row_chunk, &ctx);
    Py_END_ALLOW_THREADS
    release(b, 8);
    Py_RETURN_NONE;
}

typedef struct {
    const int8_t *y;
    Py_ssize_t j, n, per;
    const double *theta, *a, *b;
    double inv_sigma;
    double *work, *grad_theta, *ga, *gb, *loss;
} GradientContext;

static void gradient_chunk(void *context, Py_ssize_t c)
{
    const GradientContext *x = context;
    Py_ssize_t r0, r1, j = x->j;
    chunk_rows(c, x->per, x->n, &r0, &r1);
    memset(x->ga + c * j, 0, j * sizeof(double));
    memset(x->gb + c * j, 0, j * sizeof(double));
    x->loss[c] = gradient_rows(x->y, j, r0, r1, x->theta, x->a, x->b, x->inv_sigma,
                               x->work + c * j, x->grad_theta, x->ga + c * j, x->gb + c * j);
}

static PyObject *py_loss_gradient(PyObject *self, PyObject *args)
{
    PyObject *oy, *otheta, *oa, *ob, *owork, *ogt, *oga, *ogb, *oloss;
    Py_ssize_t n, j, n_chunks;
    double inv_sigma;
    if (!PyArg_ParseTuple(args, "OnnOOOdnOOOOO", &oy, &n, &j, &otheta, &oa, &ob, &inv_sigma,
                          &n_chunks, &owork, &ogt, &oga, &ogb, &oloss))
        return NULL;
    if (n_chunks < 1 || n_chunks > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "n_chunks must be in [1, %d]", MAX_THREADS);
        return NULL;
    }
    Buffer b[9];
    memset(b, 0, sizeof b);
    if (get_buffer(oy, &b[0], "y", 'b', n * j, 0) < 0
        || get_buffer(otheta, &b[1], "theta", 'd', n, 0) < 0
        || get_buffer(oa, &b[2], "a", 'd', j, 0) < 0 || get_buffer(ob, &b[3], "b", 'd', j, 0) < 0
        || get_buffer(owork, &b[4], "work", 'd', n_chunks * j, 1) < 0
        || get_buffer(ogt, &b[5], "grad_theta", 'd', n, 1) < 0
        || get_buffer(oga, &b[6], "acc_ga", 'd', n_chunks * j, 1) < 0
        || get_buffer(ogb, &b[7], "acc_gb", 'd', n_chunks * j, 1) < 0
        || get_buffer(oloss, &b[8], "loss_parts", 'd', n_chunks, 1) < 0) {
        release(b, 9);
        return NULL;
    }
    GradientContext ctx = {b[0].view.buf, j, n, (n + n_chunks - 1) / n_chunks, b[1].view.buf,
                           b[2].view.buf, b[3].view.buf, inv_sigma, b[4].view.buf, b[5].view.buf,
                           b[6].view.buf, b[7].view.buf, b[8].view.buf};
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(n_chunks, gradient_chunk, &ctx);
    Py_END_ALLOW_THREADS
    release(b, 9);
    Py_RETURN_NONE;
}

/* elementwise(y, x, inv_sigma, w_out, softplus_out): the per-entry math on 1-D
 * arrays, in the precision of x ('d' or 'f'); exposed for the tests. */
static PyObject *py_elementwise(PyObject *self, PyObject *args)
{
    PyObject *oy, *ox, *ow, *os;
    double inv_sigma;
    if (!PyArg_ParseTuple(args, "OOdOO", &oy, &ox, &inv_sigma, &ow, &os))
        return NULL;
    Buffer b[4];
    memset(b, 0, sizeof b);
    if (get_buffer(oy, &b[0], "y", 'b', -1, 0) < 0)
        goto fail;
    Py_ssize_t n = b[0].view.len;
    char ft = float_format(ox);
    if (!ft || get_buffer(ox, &b[1], "x", ft, n, 0) < 0 || get_buffer(ow, &b[2], "w_out", ft, n, 1) < 0
        || get_buffer(os, &b[3], "softplus_out", ft, n, 1) < 0)
        goto fail;
    if (ft == 'f')
        elementwise32(b[0].view.buf, b[1].view.buf, (float)inv_sigma, b[2].view.buf,
                      b[3].view.buf, n);
    else
        elementwise64(b[0].view.buf, b[1].view.buf, inv_sigma, b[2].view.buf, b[3].view.buf, n);
    release(b, 4);
    Py_RETURN_NONE;
fail:
    release(b, 4);
    return NULL;
}

static PyMethodDef methods[] = {
    {"column_pass", py_column_pass, METH_VARARGS,
     "column_pass(y, n, j, theta, theta64, a, b, inv_sigma, n_chunks, need_mask_stats, acc_wt, acc_w, "
     "acc_n, acc_t, acc_tt, loss_parts, w_store)\n\nLoss at (theta, a, b), W and its column "
     "sums (per chunk of rows); precision follows theta's dtype (float32 or float64)."},
    {"row_pass", py_row_pass, METH_VARARGS,
     "row_pass(y, n, j, w_store, theta, a, b, a_new, b_new, four_sigma, masked, aa_full, "
     "ba_full, a2_full, theta_out, n_threads)\n\nThe theta-step of one cBMM iteration."},
    {"loss_gradient", py_loss_gradient, METH_VARARGS,
     "loss_gradient(y, n, j, theta, a, b, inv_sigma, n_chunks, work, grad_theta, acc_ga, "
     "acc_gb, loss_parts)\n\nLoss (3) and its gradient in one pass (double precision); "
     "per-chunk parts of the a and b gradients and of the loss."},
    {"elementwise", py_elementwise, METH_VARARGS,
     "elementwise(y, x, inv_sigma, w_out, softplus_out)\n\nPer-entry w and softplus (tests)."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_fused",
                                    .m_doc = "Fused cBMM passes (see cbmm.solver).",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__fused(void)
{
    select_kernels();
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddStringConstant(m, "kernel_target", kernel_target) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
