/*
 * cbmm._fused: the passes of the cBMM engine and of the gradient methods over
 * a response matrix (see cbmm/solver.py and cbmm/model.py).
 *
 * Responses are int8 in the paper's coding (+1 correct, -1 incorrect, 0
 * missing), stored dense (N x J) or as CSR (the observed cells of each row:
 * indptr int64, indices int32, values int8 +-1).  A Matrix object checks the
 * storage once; its methods are the passes:
 *
 *   evaluate / mm_step  one cBMM iteration per pass (sigma = 1, see
 *                       _fused_mm_rows.h): the theta-step of each row at the
 *                       current point, then the loss and the column statistics
 *                       at the new point; float32 or float64 per-entry math;
 *   loss / loss_gradient  loss (3) and its gradient in float64 at any sigma.
 *
 * One module function works on no response matrix: loo_scores, each step's
 * pass of the predictive item selection (cbmm/efficient/selection.py).
 *
 * Per entry a pass needs w = y expit(z) and the loss term softplus(z),
 * z = -y x / sigma, x = theta_i a_j + b_j.  Both come from one
 * e = exp(-|z|): expit(z) = 1/(1+e) or e/(1+e), softplus(z) = max(z,0) + log1p(e).
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
 * Sums are accumulated in double.  Threads: POSIX threads started per pass,
 * one chunk of rows each with its own column accumulators (see
 * parallel_chunks); the GIL is released while a pass runs.  Every argument is
 * checked (sizes, types, lengths, thread counts): bad calls raise, never crash.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_buffer.h"

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

/* A response matrix: dense (y) or CSR (indptr, indices, values). */
typedef struct {
    Py_ssize_t n, j;
    const int8_t *y;
    const int64_t *indptr;
    const int32_t *indices;
    const int8_t *values;
} Data;

/* Arguments of the cBMM pass (see _fused_mm_rows.h); item arrays of the
 * per-entry math are in the pass precision (void: float or double). */
typedef struct {
    const Data *d;
    int update, masked;
    const double *theta;
    double *theta_out;
    const void *a_old, *b_old, *a_eval, *b_eval;
    const double *a_new, *pa, *pb, *p2;
    double aa_full, ba_full, a2_full;
    double ridge;     /* added to the theta-step's denominator: 4 x the prior precision */
    double *row_sums; /* optional: sum_j w'_ij a_eval_j per row */
} MMArgs;

/* Arguments of the float64 loss / gradient passes. */
typedef struct {
    const Data *d;
    const double *theta, *a, *b;
    double inv_sigma;
    double *grad_theta;
} LossArgs;

typedef struct {
    double (*mm64)(const MMArgs *, Py_ssize_t, Py_ssize_t, double *, double *, double *);
    double (*mm32)(const MMArgs *, Py_ssize_t, Py_ssize_t, double *, float *, double *);
    double (*loss)(const LossArgs *, Py_ssize_t, Py_ssize_t);
    double (*gradient)(const LossArgs *, Py_ssize_t, Py_ssize_t, double *, double *, double *);
    void (*curvature)(const LossArgs *, Py_ssize_t, Py_ssize_t, double *, double *, double *);
    Py_ssize_t (*count)(const Data *, Py_ssize_t, Py_ssize_t, double *, int32_t *);
    void (*elementwise64)(const int8_t *, const double *, double, double *, double *, Py_ssize_t);
    void (*elementwise32)(const int8_t *, const float *, float, float *, float *, Py_ssize_t);
    void (*loo_scores)(double *, Py_ssize_t, Py_ssize_t, Py_ssize_t, const double *,
                       const double *, const double *, const double *, const double *,
                       const double *, double *);
} Kernels;

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
static const Kernels *kernels = &kernels_generic;
static const char *kernel_target = "generic";

static void select_kernels(void)
{
#ifdef HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        kernels = &kernels_avx2;
        kernel_target = "avx2+fma";
    }
#endif
}

/* ---- Threads -------------------------------------------------------------- */

/* Threads are plain POSIX threads started for one pass and joined before it
 * returns: no thread, lock or runtime outlives a call, so a process may fork
 * at any time and its child can run passes of its own (an OpenMP runtime's
 * idle pool hangs a forked child).  Chunk 0 runs on the calling thread; a
 * chunk whose thread cannot be started runs there too, after the others. */
#define MAX_THREADS 256

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

/* One pass split into chunks of rows: bounds[c] .. bounds[c + 1] for chunk c,
 * cut so that the chunks hold about equal numbers of stored cells.  Each
 * chunk has `width` doubles of accumulators and a row buffer of J doubles,
 * zeroed. */
typedef struct {
    const Data *d;
    Py_ssize_t n_chunks, width;
    Py_ssize_t bounds[MAX_THREADS + 1];
    double *acc;         /* n_chunks x width */
    double *rows;        /* n_chunks x J */
    double totals[MAX_THREADS][2];
    double loss[MAX_THREADS];
    Py_ssize_t bad[MAX_THREADS];
    const void *args;
} Pass;

static int pass_init(Pass *p, const Data *d, Py_ssize_t threads, Py_ssize_t width, int row_buffer)
{
    memset(p, 0, sizeof *p);
    p->d = d;
    p->n_chunks = threads < d->n ? threads : d->n;
    p->width = width;
    int64_t nnz = d->y ? (int64_t)d->n * d->j : d->indptr[d->n];
    Py_ssize_t row = 0;
    for (Py_ssize_t c = 0; c <= p->n_chunks; c++) {
        if (d->y) {
            row = (Py_ssize_t)(((int64_t)d->n * c) / p->n_chunks);
        } else { /* first row whose start reaches the chunk's share of cells */
            int64_t target = (int64_t)((double)nnz * c / p->n_chunks);
            while (row < d->n && d->indptr[row] < target)
                row++;
        }
        p->bounds[c] = c == p->n_chunks ? d->n : row;
    }
    if (width > 0) {
        p->acc = calloc((size_t)(p->n_chunks * width), sizeof(double));
        if (!p->acc)
            return -1;
    }
    if (row_buffer) {
        p->rows = malloc((size_t)(p->n_chunks * d->j) * sizeof(double));
        if (!p->rows) {
            free(p->acc);
            p->acc = NULL;
            return -1;
        }
    }
    return 0;
}

static void pass_free(Pass *p)
{
    free(p->acc);
    free(p->rows);
}

/* out[k] = sum over chunks of acc[c][offset + k], k < count. */
static void pass_reduce(const Pass *p, Py_ssize_t offset, Py_ssize_t count, double *out)
{
    memcpy(out, p->acc + offset, count * sizeof(double));
    for (Py_ssize_t c = 1; c < p->n_chunks; c++) {
        const double *part = p->acc + c * p->width + offset;
        for (Py_ssize_t k = 0; k < count; k++)
            out[k] += part[k];
    }
}

static double pass_loss(const Pass *p)
{
    double total = 0.0;
    for (Py_ssize_t c = 0; c < p->n_chunks; c++)
        total += p->loss[c];
    return total;
}

static void mm64_chunk(void *context, Py_ssize_t c)
{
    Pass *p = context;
    p->loss[c] = kernels->mm64(p->args, p->bounds[c], p->bounds[c + 1], p->acc + c * p->width,
                               p->rows + c * p->d->j, p->totals[c]);
}

static void mm32_chunk(void *context, Py_ssize_t c)
{
    Pass *p = context;
    p->loss[c] = kernels->mm32(p->args, p->bounds[c], p->bounds[c + 1], p->acc + c * p->width,
                               (float *)(p->rows + c * p->d->j), p->totals[c]);
}

static void loss_chunk(void *context, Py_ssize_t c)
{
    Pass *p = context;
    p->loss[c] = kernels->loss(p->args, p->bounds[c], p->bounds[c + 1]);
}

static void gradient_chunk(void *context, Py_ssize_t c)
{
    Pass *p = context;
    double *acc = p->acc + c * p->width;
    p->loss[c] = kernels->gradient(p->args, p->bounds[c], p->bounds[c + 1], acc, acc + p->d->j,
                                   p->rows + c * p->d->j);
}

static void curvature_chunk(void *context, Py_ssize_t c)
{
    Pass *p = context;
    double *acc = p->acc + c * p->width;
    kernels->curvature(p->args, p->bounds[c], p->bounds[c + 1], acc, acc + p->d->j,
                       p->rows + c * p->d->j);
}

static void count_chunk(void *context, Py_ssize_t c)
{
    Pass *p = context;
    p->bad[c] = kernels->count(p->d, p->bounds[c], p->bounds[c + 1], p->acc + c * p->width,
                               (int32_t *)(p->rows + c * p->d->j));
}

/* ---- Argument checks ------------------------------------------------------ */

/* A C-contiguous buffer whose items have one of the format characters in
 * `formats` and size `itemsize`, holding `count` items unless count < 0. */
static int get_buffer(PyObject *obj, Buffer *buf, const char *name, const char *formats,
                      Py_ssize_t itemsize, Py_ssize_t count, int writable)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->view, flags) < 0)
        return -1;
    buf->held = 1;
    const char *fmt = buf->view.format ? buf->view.format : "B";
    if (fmt[0] == '<' || fmt[0] == '=' || fmt[0] == '@')
        fmt++;
    if (!fmt[0] || fmt[1] != '\0' || !strchr(formats, fmt[0]) || buf->view.itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of type '%c' (%zd bytes), got '%s'",
                     name, formats[0], itemsize, buf->view.format ? buf->view.format : "B");
        return -1;
    }
    if (count >= 0 && buf->view.len != count * itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected a buffer of %zd items, got %zd",
                     name, count, buf->view.len / itemsize);
        return -1;
    }
    return 0;
}

static int check_threads(Py_ssize_t threads)
{
    if (threads < 1 || threads > MAX_THREADS) {
        PyErr_Format(PyExc_ValueError, "threads must be in [1, %d], got %zd", MAX_THREADS, threads);
        return -1;
    }
    return 0;
}

/* ---- The Matrix type ------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    Data d;
    Buffer views[3];
    Py_ssize_t n_observed; /* -1 until counted (dense) */
    int masked;            /* some cell may be missing: observed-set statistics needed */
} MatrixObject;

static void matrix_dealloc(MatrixObject *self)
{
    release(self->views, 3);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* CSR structure: indptr starts at 0, never decreases, ends at nnz; columns
 * strictly increase within a row and lie in [0, J); values are +-1. */
static int check_csr(const Data *d, Py_ssize_t nnz)
{
    if (d->indptr[0] != 0 || d->indptr[d->n] != nnz) {
        PyErr_Format(PyExc_ValueError, "indptr must start at 0 and end at len(indices) = %zd",
                     nnz);
        return -1;
    }
    for (Py_ssize_t i = 0; i < d->n; i++) {
        int64_t start = d->indptr[i], stop = d->indptr[i + 1];
        if (stop < start || stop > nnz) {
            PyErr_Format(PyExc_ValueError, "indptr must not decrease or exceed %zd (row %zd)", nnz,
                         i);
            return -1;
        }
        int64_t previous = -1;
        for (int64_t k = start; k < stop; k++) {
            int64_t c = d->indices[k];
            if (c <= previous || c >= d->j) {
                PyErr_Format(PyExc_ValueError,
                             "row %zd: column indices must increase and lie in [0, %zd), got %lld",
                             i, d->j, (long long)c);
                return -1;
            }
            if (d->values[k] != 1 && d->values[k] != -1) {
                PyErr_Format(PyExc_ValueError, "row %zd, column %lld: value %d is not +1 or -1", i,
                             (long long)c, (int)d->values[k]);
                return -1;
            }
            previous = c;
        }
    }
    return 0;
}

static int matrix_init(MatrixObject *self, PyObject *args, PyObject *kwds)
{
    PyObject *o0, *o1 = NULL, *o2 = NULL;
    Py_ssize_t n_items = -1;
    if (kwds && PyDict_Size(kwds)) {
        PyErr_SetString(PyExc_TypeError, "Matrix() takes positional arguments only");
        return -1;
    }
    release(self->views, 3);
    memset(&self->d, 0, sizeof self->d);
    if (!PyArg_ParseTuple(args, "O|OOn", &o0, &o1, &o2, &n_items))
        return -1;
    if (!o1) { /* dense */
        Buffer *y = &self->views[0];
        if (get_buffer(o0, y, "y", "b", 1, -1, 0) < 0)
            goto fail;
        if (y->view.ndim != 2 || y->view.shape[0] < 1 || y->view.shape[1] < 1) {
            PyErr_SetString(PyExc_ValueError, "y: expected a non-empty 2-D int8 matrix");
            goto fail;
        }
        self->d.n = y->view.shape[0];
        self->d.j = y->view.shape[1];
        self->d.y = y->view.buf;
        self->n_observed = -1;
        self->masked = 1;
        return 0;
    }
    if (!o2 || n_items < 0) {
        PyErr_SetString(PyExc_TypeError,
                        "Matrix(y) or Matrix(indptr, indices, values, n_items) with n_items >= 1");
        goto fail;
    }
    if (get_buffer(o0, &self->views[0], "indptr", "lq", 8, -1, 0) < 0
        || get_buffer(o1, &self->views[1], "indices", "il", 4, -1, 0) < 0)
        goto fail;
    Py_ssize_t rows = self->views[0].view.len / 8 - 1, nnz = self->views[1].view.len / 4;
    if (get_buffer(o2, &self->views[2], "values", "b", 1, nnz, 0) < 0)
        goto fail;
    if (self->views[0].view.ndim != 1 || self->views[1].view.ndim != 1 || rows < 1 || n_items < 1
        || n_items > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "CSR: expected 1-D indptr of N + 1 >= 2 entries and 1 <= n_items < 2^31");
        goto fail;
    }
    self->d.n = rows;
    self->d.j = n_items;
    self->d.indptr = self->views[0].view.buf;
    self->d.indices = self->views[1].view.buf;
    self->d.values = self->views[2].view.buf;
    if (check_csr(&self->d, nnz) < 0)
        goto fail;
    self->n_observed = nnz;
    self->masked = 1; /* CSR keeps the observed-set statistics even when full */
    return 0;
fail:
    release(self->views, 3);
    memset(&self->d, 0, sizeof self->d);
    return -1;
}

static int matrix_ready(MatrixObject *self)
{
    if (self->d.n < 1) {
        PyErr_SetString(PyExc_ValueError, "Matrix is not initialised");
        return -1;
    }
    return 0;
}

/* Observed cells per column into counts (J doubles); sets n_observed and
 * masked.  Dense: one threaded pass that also rejects values outside
 * {-1, 0, 1}. */
static int count_columns(MatrixObject *self, Py_ssize_t threads, double *counts)
{
    const Data *d = &self->d;
    if (!d->y) {
        memset(counts, 0, d->j * sizeof(double));
        for (int64_t k = 0; k < d->indptr[d->n]; k++)
            counts[d->indices[k]] += 1.0;
        return 0;
    }
    Pass p;
    if (pass_init(&p, d, threads, d->j, 1) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(p.n_chunks, count_chunk, &p);
    pass_reduce(&p, 0, d->j, counts);
    Py_END_ALLOW_THREADS
    Py_ssize_t bad = 0;
    for (Py_ssize_t c = 0; c < p.n_chunks; c++)
        bad += p.bad[c];
    pass_free(&p);
    if (bad) {
        PyErr_Format(PyExc_ValueError, "y: %zd entries outside {-1, 0, 1}", bad);
        return -1;
    }
    double total = 0.0;
    for (Py_ssize_t k = 0; k < d->j; k++)
        total += counts[k];
    self->n_observed = (Py_ssize_t)total;
    self->masked = self->n_observed < d->n * d->j;
    return 0;
}

/* counts(out, threads) -> n_observed */
static PyObject *matrix_counts(MatrixObject *self, PyObject *args)
{
    PyObject *oout;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "On", &oout, &threads) || matrix_ready(self) < 0
        || check_threads(threads) < 0)
        return NULL;
    Buffer out = {0};
    int status = get_buffer(oout, &out, "out", "d", 8, self->d.j, 1);
    if (status == 0)
        status = count_columns(self, threads, out.view.buf);
    release(&out, 1);
    return status < 0 ? NULL : PyLong_FromSsize_t(self->n_observed);
}

/* The item arrays of an MM pass in its precision, and the observed-set
 * products of the theta-step; one block of memory freed by the caller. */
static void *mm_items(const double *a_old, const double *b_old, const double *a_eval,
                      const double *b_eval, const double *a_new, const double *b_new,
                      Py_ssize_t j, int single, MMArgs *m)
{
    size_t item = single ? sizeof(float) : sizeof(double);
    char *block = malloc((size_t)j * (4 * item + 3 * sizeof(double)));
    if (!block)
        return NULL;
    double *pa = (double *)block, *pb = pa + j, *p2 = pb + j;
    void *cast[4] = {block + 3 * j * sizeof(double), block + (3 * sizeof(double) + item) * j,
                     block + (3 * sizeof(double) + 2 * item) * j,
                     block + (3 * sizeof(double) + 3 * item) * j};
    const double *src[4] = {a_old, b_old, a_eval, b_eval};
    for (int v = 0; v < 4; v++)
        for (Py_ssize_t k = 0; k < j; k++) {
            if (single)
                ((float *)cast[v])[k] = (float)src[v][k];
            else
                ((double *)cast[v])[k] = src[v][k];
        }
    m->aa_full = m->ba_full = m->a2_full = 0.0;
    for (Py_ssize_t k = 0; k < j; k++) {
        pa[k] = a_new[k] * a_old[k];
        pb[k] = a_new[k] * (b_old[k] - b_new[k]);
        p2[k] = a_new[k] * a_new[k];
        m->aa_full += pa[k];
        m->ba_full += pb[k];
        m->a2_full += p2[k];
    }
    m->a_old = cast[0];
    m->b_old = cast[1];
    m->a_eval = cast[2];
    m->b_eval = cast[3];
    m->a_new = a_new;
    m->pa = pa;
    m->pb = pb;
    m->p2 = p2;
    return block;
}

/* Shared by evaluate and mm_step: one MM pass; stats (4 x J) receives
 * W'^T theta', W'^T 1, and the observed-set sums of theta' and theta'^2. */
static PyObject *mm_pass(MatrixObject *self, PyObject *otheta, PyObject *oa, PyObject *ob,
                         PyObject *oan, PyObject *obn, PyObject *oout, PyObject *ostats,
                         int single, Py_ssize_t threads, PyObject *orows, double ridge)
{
    const int update = oan != NULL, rows = orows != NULL && orows != Py_None;
    const Py_ssize_t n = self->d.n, j = self->d.j;
    Buffer b[8];
    memset(b, 0, sizeof b);
    if (get_buffer(otheta, &b[0], "theta", "d", 8, n, 0) < 0
        || get_buffer(oa, &b[1], "a", "d", 8, j, 0) < 0
        || get_buffer(ob, &b[2], "b", "d", 8, j, 0) < 0
        || get_buffer(ostats, &b[3], "stats", "d", 8, 4 * j, 1) < 0
        || (update
            && (get_buffer(oan, &b[4], "a_new", "d", 8, j, 0) < 0
                || get_buffer(obn, &b[5], "b_new", "d", 8, j, 0) < 0
                || get_buffer(oout, &b[6], "theta_out", "d", 8, n, 1) < 0))
        || (rows && get_buffer(orows, &b[7], "row_sums", "d", 8, n, 1) < 0)) {
        release(b, 8);
        return NULL;
    }
    const double *a = b[1].view.buf, *bb = b[2].view.buf;
    const double *a_new = update ? b[4].view.buf : a, *b_new = update ? b[5].view.buf : bb;
    MMArgs m = {.d = &self->d, .update = update, .masked = self->masked,
                .theta = b[0].view.buf, .theta_out = update ? b[6].view.buf : NULL,
                .ridge = ridge, .row_sums = rows ? b[7].view.buf : NULL};
    void *items = mm_items(a, bb, a_new, b_new, a_new, b_new, j, single, &m);
    Pass p;
    const Py_ssize_t width = (self->masked ? 4 : 2) * j;
    if (!items || pass_init(&p, &self->d, threads, width, 1) < 0) {
        free(items);
        release(b, 8);
        return PyErr_NoMemory();
    }
    p.args = &m;
    double *stats = b[3].view.buf;
    double total;
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(p.n_chunks, single ? mm32_chunk : mm64_chunk, &p);
    pass_reduce(&p, 0, width, stats);
    if (!self->masked) { /* every column sees every row */
        double sum_t = 0.0, sum_tt = 0.0;
        for (Py_ssize_t c = 0; c < p.n_chunks; c++) {
            sum_t += p.totals[c][0];
            sum_tt += p.totals[c][1];
        }
        for (Py_ssize_t k = 0; k < j; k++) {
            stats[2 * j + k] = sum_t;
            stats[3 * j + k] = sum_tt;
        }
    }
    total = pass_loss(&p);
    Py_END_ALLOW_THREADS
    pass_free(&p);
    free(items);
    release(b, 8);
    return PyFloat_FromDouble(total);
}

static PyObject *matrix_evaluate(MatrixObject *self, PyObject *args)
{
    PyObject *otheta, *oa, *ob, *ostats, *orows = NULL;
    int single;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "OOOOpn|O", &otheta, &oa, &ob, &ostats, &single, &threads, &orows)
        || matrix_ready(self) < 0 || check_threads(threads) < 0)
        return NULL;
    return mm_pass(self, otheta, oa, ob, NULL, NULL, NULL, ostats, single, threads, orows, 0.0);
}

static PyObject *matrix_mm_step(MatrixObject *self, PyObject *args)
{
    PyObject *otheta, *oa, *ob, *oan, *obn, *oout, *ostats, *orows = NULL;
    int single;
    Py_ssize_t threads;
    double ridge = 0.0;
    if (!PyArg_ParseTuple(args, "OOOOOOOpn|dO", &otheta, &oa, &ob, &oan, &obn, &oout, &ostats,
                          &single, &threads, &ridge, &orows)
        || matrix_ready(self) < 0 || check_threads(threads) < 0)
        return NULL;
    if (!(ridge >= 0.0) || !isfinite(ridge)) {
        PyErr_SetString(PyExc_ValueError, "ridge must be a finite number >= 0");
        return NULL;
    }
    return mm_pass(self, otheta, oa, ob, oan, obn, oout, ostats, single, threads, orows, ridge);
}

/* Shared by loss, loss_gradient and curvature (the last two fill the three
 * output buffers). */
static PyObject *loss_pass(MatrixObject *self, PyObject *otheta, PyObject *oa, PyObject *ob,
                           double inv_sigma, Py_ssize_t threads, PyObject *ogt, PyObject *oga,
                           PyObject *ogb, chunk_fn kernel)
{
    const int gradient = ogt != NULL;
    const Py_ssize_t n = self->d.n, j = self->d.j;
    Buffer b[6];
    memset(b, 0, sizeof b);
    if (get_buffer(otheta, &b[0], "theta", "d", 8, n, 0) < 0
        || get_buffer(oa, &b[1], "a", "d", 8, j, 0) < 0
        || get_buffer(ob, &b[2], "b", "d", 8, j, 0) < 0
        || (gradient
            && (get_buffer(ogt, &b[3], "grad_theta", "d", 8, n, 1) < 0
                || get_buffer(oga, &b[4], "grad_a", "d", 8, j, 1) < 0
                || get_buffer(ogb, &b[5], "grad_b", "d", 8, j, 1) < 0))) {
        release(b, 6);
        return NULL;
    }
    LossArgs g = {&self->d, b[0].view.buf, b[1].view.buf, b[2].view.buf, inv_sigma,
                  gradient ? b[3].view.buf : NULL};
    Pass p;
    if (pass_init(&p, &self->d, threads, gradient ? 2 * j : 0, gradient) < 0) {
        release(b, 6);
        return PyErr_NoMemory();
    }
    p.args = &g;
    double total;
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(p.n_chunks, kernel, &p);
    if (gradient) {
        pass_reduce(&p, 0, j, b[4].view.buf);
        pass_reduce(&p, j, j, b[5].view.buf);
    }
    total = pass_loss(&p);
    Py_END_ALLOW_THREADS
    pass_free(&p);
    release(b, 6);
    return PyFloat_FromDouble(total);
}

static PyObject *matrix_loss(MatrixObject *self, PyObject *args)
{
    PyObject *otheta, *oa, *ob;
    double inv_sigma;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "OOOdn", &otheta, &oa, &ob, &inv_sigma, &threads)
        || matrix_ready(self) < 0 || check_threads(threads) < 0)
        return NULL;
    return loss_pass(self, otheta, oa, ob, inv_sigma, threads, NULL, NULL, NULL, loss_chunk);
}

static PyObject *matrix_loss_gradient(MatrixObject *self, PyObject *args)
{
    PyObject *otheta, *oa, *ob, *ogt, *oga, *ogb;
    double inv_sigma;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "OOOdnOOO", &otheta, &oa, &ob, &inv_sigma, &threads, &ogt, &oga,
                          &ogb)
        || matrix_ready(self) < 0 || check_threads(threads) < 0)
        return NULL;
    return loss_pass(self, otheta, oa, ob, inv_sigma, threads, ogt, oga, ogb, gradient_chunk);
}

static PyObject *matrix_curvature(MatrixObject *self, PyObject *args)
{
    PyObject *otheta, *oa, *ob, *ogt, *oga, *ogb;
    double inv_sigma;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "OOOdnOOO", &otheta, &oa, &ob, &inv_sigma, &threads, &ogt, &oga,
                          &ogb)
        || matrix_ready(self) < 0 || check_threads(threads) < 0)
        return NULL;
    PyObject *done = loss_pass(self, otheta, oa, ob, inv_sigma, threads, ogt, oga, ogb,
                               curvature_chunk);
    if (!done)
        return NULL;
    Py_DECREF(done);
    Py_RETURN_NONE;
}

static PyObject *matrix_get_shape(MatrixObject *self, void *closure)
{
    return Py_BuildValue("(nn)", self->d.n, self->d.j);
}

static PyObject *matrix_get_stored(MatrixObject *self, void *closure)
{
    if (self->d.n < 1)
        return PyLong_FromLong(0);
    return PyLong_FromSsize_t(self->d.y ? self->d.n * self->d.j : (Py_ssize_t)self->d.indptr[self->d.n]);
}

static PyObject *matrix_get_storage(MatrixObject *self, void *closure)
{
    return PyUnicode_FromString(self->d.y ? "dense" : "sparse");
}

static PyMethodDef matrix_methods[] = {
    {"counts", (PyCFunction)matrix_counts, METH_VARARGS,
     "counts(out, threads) -> n_observed\n\nObserved cells per column into out (J float64); "
     "dense: rejects values outside {-1, 0, 1}."},
    {"evaluate", (PyCFunction)matrix_evaluate, METH_VARARGS,
     "evaluate(theta, a, b, stats, single, threads[, row_sums]) -> loss\n\nLoss (3) at "
     "sigma = 1 and the column statistics (4 x J: W^T theta, W^T 1, observed-set sums of theta "
     "and theta^2) at (theta, a, b); single: float32 per-entry math; row_sums (N), if given, "
     "receives W a.  (-W a, -W^T theta, -W^T 1) is the gradient of the loss."},
    {"mm_step", (PyCFunction)matrix_mm_step, METH_VARARGS,
     "mm_step(theta, a, b, a_new, b_new, theta_out, stats, single, threads[, ridge[, "
     "row_sums]]) -> loss\n\n"
     "The theta-step from (theta, a, b) given the new items (a_new, b_new), then the loss and "
     "the column statistics at the new point (sigma = 1).  ridge (>= 0, default 0) is added to "
     "the theta-step's denominator: 4 x the precision of a normal prior on theta.  row_sums "
     "(N), if given, receives W' a_new at the new point (minus the theta gradient)."},
    {"loss", (PyCFunction)matrix_loss, METH_VARARGS,
     "loss(theta, a, b, inv_sigma, threads) -> loss (3) in float64."},
    {"loss_gradient", (PyCFunction)matrix_loss_gradient, METH_VARARGS,
     "loss_gradient(theta, a, b, inv_sigma, threads, grad_theta, grad_a, grad_b) -> loss\n\n"
     "Loss (3) and its gradient in float64, one pass."},
    {"curvature", (PyCFunction)matrix_curvature, METH_VARARGS,
     "curvature(theta, a, b, inv_sigma, threads, d_theta, d_a, d_b)\n\nDiagonal of the Fisher "
     "information: sums of a_j^2 q_ij over j, theta_i^2 q_ij and q_ij over i, "
     "q = Phi (1 - Phi) / sigma^2 on the observed cells."},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef matrix_getset[] = {
    {"shape", (getter)matrix_get_shape, NULL, "(N, J)", NULL},
    {"storage", (getter)matrix_get_storage, NULL, "'dense' or 'sparse'", NULL},
    {"stored", (getter)matrix_get_stored, NULL, "cells stored: N J (dense) or nnz (CSR)", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject MatrixType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "cbmm._fused.Matrix",
    .tp_basicsize = sizeof(MatrixObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Matrix(y) or Matrix(indptr, indices, values, n_items): int8 responses, dense "
              "(N x J, +1/-1/0) or CSR (int64 indptr, int32 indices, int8 +-1 values), checked "
              "once; its methods are the engine's passes.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)matrix_init,
    .tp_dealloc = (destructor)matrix_dealloc,
    .tp_methods = matrix_methods,
    .tp_getset = matrix_getset,
};

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
    if (get_buffer(oy, &b[0], "y", "b", 1, -1, 0) < 0 || b[0].view.ndim > 1) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "y: expected a 1-D buffer");
        goto fail;
    }
    Py_ssize_t n = b[0].view.len;
    Py_buffer probe; /* the precision follows x's type */
    if (PyObject_GetBuffer(ox, &probe, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0)
        goto fail;
    int single = probe.format && strchr(probe.format, 'f');
    PyBuffer_Release(&probe);
    const char *format = single ? "f" : "d";
    Py_ssize_t size = single ? 4 : 8;
    if (get_buffer(ox, &b[1], "x", format, size, n, 0) < 0
        || get_buffer(ow, &b[2], "w_out", format, size, n, 1) < 0
        || get_buffer(os, &b[3], "softplus_out", format, size, n, 1) < 0)
        goto fail;
    if (single)
        kernels->elementwise32(b[0].view.buf, b[1].view.buf, (float)inv_sigma, b[2].view.buf,
                               b[3].view.buf, n);
    else
        kernels->elementwise64(b[0].view.buf, b[1].view.buf, inv_sigma, b[2].view.buf,
                               b[3].view.buf, n);
    release(b, 4);
    Py_RETURN_NONE;
fail:
    release(b, 4);
    return NULL;
}

/* loo_scores: the items' scores of one step of the predictive strategy's forward
 * selection, threaded over chunks of items, each column first updated by the last
 * choice where u and coef are given. */
typedef struct {
    double *residual;
    const double *error, *keep, *gain, *inv_pivot, *u, *coef;
    double *out;
    Py_ssize_t n, j, n_chunks;
} LooArgs;

static void loo_chunk(void *context, Py_ssize_t chunk)
{
    const LooArgs *p = context;
    Py_ssize_t j0 = p->j * chunk / p->n_chunks, j1 = p->j * (chunk + 1) / p->n_chunks;
    kernels->loo_scores(p->residual, p->n, j0, j1, p->error, p->keep, p->gain, p->inv_pivot,
                        p->u, p->coef, p->out);
}

static PyObject *py_loo_scores(PyObject *self, PyObject *args)
{
    PyObject *ores, *oerr, *okeep, *ogain, *opiv, *oout, *ou = NULL, *ocoef = NULL;
    Py_ssize_t threads;
    if (!PyArg_ParseTuple(args, "OOOOOOn|OO", &ores, &oerr, &okeep, &ogain, &opiv, &oout,
                          &threads, &ou, &ocoef))
        return NULL;
    if (check_threads(threads) < 0)
        return NULL;
    if ((ou == NULL) != (ocoef == NULL)) {
        PyErr_SetString(PyExc_TypeError, "u and coef: give both or neither");
        return NULL;
    }
    int update = ou != NULL;
    Buffer b[8];
    memset(b, 0, sizeof b);
    if (get_buffer(oerr, &b[0], "error", "d", 8, -1, 0) < 0
        || get_buffer(ogain, &b[1], "gain", "d", 8, -1, 0) < 0)
        goto fail;
    Py_ssize_t n = b[0].view.len / 8, j = b[1].view.len / 8;
    if (get_buffer(ores, &b[2], "residual", "d", 8, n * j, update) < 0
        || get_buffer(okeep, &b[3], "keep", "d", 8, n, 0) < 0
        || get_buffer(opiv, &b[4], "inv_pivot", "d", 8, j, 0) < 0
        || get_buffer(oout, &b[5], "out", "d", 8, j, 1) < 0
        || (update && (get_buffer(ou, &b[6], "u", "d", 8, n, 0) < 0
                       || get_buffer(ocoef, &b[7], "coef", "d", 8, j, 0) < 0)))
        goto fail;
    if (b[2].view.ndim != 2 || b[2].view.shape[0] != j) {
        PyErr_SetString(PyExc_ValueError, "residual: expected items x models (C order)");
        goto fail;
    }
    LooArgs p = {b[2].view.buf, b[0].view.buf, b[3].view.buf, b[1].view.buf, b[4].view.buf,
                 update ? b[6].view.buf : NULL, update ? b[7].view.buf : NULL, b[5].view.buf,
                 n, j, threads < j ? threads : (j > 0 ? j : 1)};
    Py_BEGIN_ALLOW_THREADS
    parallel_chunks(p.n_chunks, loo_chunk, &p);
    Py_END_ALLOW_THREADS
    release(b, 8);
    Py_RETURN_NONE;
fail:
    release(b, 8);
    return NULL;
}

static PyMethodDef methods[] = {
    {"elementwise", py_elementwise, METH_VARARGS,
     "elementwise(y, x, inv_sigma, w_out, softplus_out)\n\nPer-entry w and softplus (tests)."},
    {"loo_scores", py_loo_scores, METH_VARARGS,
     "loo_scores(residual, error, keep, gain, inv_pivot, out, threads[, u, coef])\n\nPer item "
     "k (a row of residual, items x models): sum_i ((error_i - residual_ki gain_k) / (keep_i - "
     "residual_ki^2 inv_pivot_k))^2 into out (the predictive strategy's leave-one-out "
     "scores); with u (models) and coef (items), residual_k -= coef_k u first, in place."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_fused",
                                    .m_doc = "Fused cBMM passes (see cbmm.solver).",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__fused(void)
{
    select_kernels();
    if (PyType_Ready(&MatrixType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    Py_INCREF(&MatrixType);
    if (PyModule_AddObject(m, "Matrix", (PyObject *)&MatrixType) < 0
        || PyModule_AddStringConstant(m, "kernel_target", kernel_target) < 0
        || PyModule_AddIntConstant(m, "MAX_THREADS", MAX_THREADS) < 0) {
        Py_DECREF(&MatrixType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
