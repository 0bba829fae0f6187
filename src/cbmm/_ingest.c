/*
 * cbmm._ingest: validation and coding of response matrices in one pass (see cbmm/responses.py).
 *
 * A scan reads each input cell once and writes the paper's int8 coding (+1 correct, -1
 * incorrect, 0 missing) while counting, per row and per column, the observed and the correct
 * cells.  Those four count vectors give empty rows/columns, accuracies and all-correct or
 * all-wrong items and models without another pass over the data.
 *
 * Cell values are compared as doubles: 1 is correct; 0 is incorrect (binary coding) or missing
 * (signed coding); -1 is incorrect (signed; an error in binary coding); NaN is missing; anything
 * else is a bad value.  In the "infer" mode 0 and -1 are both written as -1: that is the right
 * coding whenever the input holds only one of them, and an input holding both is refused by the
 * caller, which reads the counts.  Besides the counts a scan keeps, per category (0, -1, bad
 * value, duplicate), the K smallest (row, column) cells for the error messages.  It finds them by
 * re-reading a tile of rows only when the tile holds such a cell that could be among the K
 * smallest, so a clean input is read once.
 *
 * Dtypes: float64, float32, int8/16/32/64, uint8/16/32/64 and bool, native byte order, any
 * strides; the caller converts other dtypes in blocks.  Wide inputs are scanned row by row
 * (scan_rows, for row-major data) or column by column in tiles of rows (scan_columns, for
 * column-major data and the columns of a DataFrame, each with its own dtype).  Long inputs (one
 * (row, column, value) triplet per record) become CSR: triplets_count classifies and counts,
 * triplets_fill places the kept cells by two counting-sort passes (rows come out sorted by
 * column) and finds duplicated cells.  dense_to_csr, csr_to_dense and the two count functions
 * convert and summarise coded matrices.  Memory is the outputs plus O(rows + columns).
 *
 * Every entry point checks its arguments (sizes, dtypes, index ranges) and raises ValueError or
 * TypeError instead of reading out of bounds; the GIL is released while the loops run.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_buffer.h"

enum { T_F64, T_F32, T_I8, T_U8, T_BOOL, T_I16, T_U16, T_I32, T_U32, T_I64, T_U64, T_COUNT };
static const Py_ssize_t ITEMSIZE[T_COUNT] = {8, 4, 1, 1, 1, 2, 2, 4, 4, 8, 8};

enum { MODE_INFER, MODE_BINARY, MODE_SIGNED };
enum { CAT_ZERO, CAT_MINUS, CAT_BAD, CAT_DUP, N_CAT };
#define K_CELLS 5
#define TILE_ROWS 128   /* <= 255: byte column counters per tile */
#define TILE_COLUMNS 16 /* columns read side by side (scan_columns) */

/* Laid over an int64 array allocated by the caller (cbmm.responses._Scan). */
typedef struct {
    int64_t count[N_CAT];
    int64_t found[N_CAT];
    int64_t cell[N_CAT][K_CELLS][2]; /* the smallest (row, column) cells, sorted */
} Cells;

/* ---- cell bookkeeping ------------------------------------------------------------------- */

static inline int cell_less(int64_t r0, int64_t c0, int64_t r1, int64_t c1)
{
    return r0 < r1 || (r0 == r1 && c0 < c1);
}

static void record(Cells *cells, int cat, int64_t row, int64_t col)
{
    int64_t (*list)[2] = cells->cell[cat];
    int64_t k = cells->found[cat];
    if (k == K_CELLS) {
        if (!cell_less(row, col, list[K_CELLS - 1][0], list[K_CELLS - 1][1]))
            return;
        k = K_CELLS - 1;
    } else {
        cells->found[cat]++;
    }
    for (; k > 0 && cell_less(row, col, list[k - 1][0], list[k - 1][1]); k--) {
        list[k][0] = list[k - 1][0];
        list[k][1] = list[k - 1][1];
    }
    list[k][0] = row;
    list[k][1] = col;
}

/* Whether a tile whose first row and column are row0, col0 may hold one of the K smallest cells
 * of `cat` (its smallest cell is (row0, col0)). */
static inline int wanted(const Cells *cells, int cat, int64_t row0, int64_t col0)
{
    const int64_t *last = cells->cell[cat][K_CELLS - 1];
    return cells->found[cat] < K_CELLS || cell_less(row0, col0, last[0], last[1]);
}

static inline double load(int code, const char *p)
{
    switch (code) {
    case T_F64: return *(const double *)p;
    case T_F32: return *(const float *)p;
    case T_I8: return *(const int8_t *)p;
    case T_U8: case T_BOOL: return *(const uint8_t *)p;
    case T_I16: return *(const int16_t *)p;
    case T_U16: return *(const uint16_t *)p;
    case T_I32: return *(const int32_t *)p;
    case T_U32: return *(const uint32_t *)p;
    case T_I64: return (double)*(const int64_t *)p;
    default: return (double)*(const uint64_t *)p;
    }
}

static inline int64_t load_index(int code, const char *p)
{
    switch (code) {
    case T_I8: return *(const int8_t *)p;
    case T_U8: case T_BOOL: return *(const uint8_t *)p;
    case T_I16: return *(const int16_t *)p;
    case T_U16: return *(const uint16_t *)p;
    case T_I32: return *(const int32_t *)p;
    case T_U32: return *(const uint32_t *)p;
    case T_I64: return *(const int64_t *)p;
    default: return (int64_t)*(const uint64_t *)p; /* > INT64_MAX wraps negative: out of range */
    }
}

/* The category of one value (-1 if it is 1, NaN, or a 0 that the mode keeps as an answer). */
static inline int category(double v, int mode)
{
    if (v == 0.0)
        return CAT_ZERO;
    if (v == -1.0)
        return mode == MODE_BINARY ? CAT_BAD : CAT_MINUS;
    if (v == 1.0 || v != v)
        return -1;
    return CAT_BAD;
}

/* Per-cell coding of a value of type T, compared in T (no conversion, so integer loops vectorise
 * too), branch-free.  zero_neg: 0 codes as -1 (incorrect); minus_bad: -1 is a bad value (binary
 * coding).  Unsigned types hold no -1. */
#define CLASSIFY(T, v)                                                                          \
    const T v_ = (v);                                                                           \
    const int one = v_ == (T)1, zero = v_ == (T)0;                                              \
    const int minus = ((T)-1 < (T)0) && v_ == (T)-1, nan = v_ != v_;                            \
    const int bad = ((one | zero | minus | nan) ^ 1) | (minus & minus_bad);                     \
    const int8_t out = (int8_t)(one - minus - (zero & zero_neg));                               \
    (void)out;

/* Kernels, instantiated per dtype and (on x86-64 with GCC) once more for AVX2.
 *
 * rows: rows [r0, r1) of a row-major block, at most TILE_ROWS of them, coded into y (the tile's
 * first row).  Each row is coded in one loop and counted in a second loop over its int8 codes
 * (still in L1); the column counts of the
 * tile go to byte counters tobs/tcor (so the loops stay in 8-bit lanes), which the caller adds
 * to the int64 totals after the tile.
 * column: rows [r0, r1) of one column of a column list, coded into a contiguous buffer (the
 * caller copies a tile of such columns into the rows of y, so the loop vectorises). */
#define DEFINE_ROWS(NAME, T)                                                                     \
    static void NAME(const char *base, Py_ssize_t s0, Py_ssize_t s1, Py_ssize_t r0,             \
                     Py_ssize_t r1, Py_ssize_t n_cols, int8_t *restrict y,                      \
                     int64_t *row_obs, int64_t *row_cor, uint8_t *restrict tobs,                 \
                     uint8_t *restrict tcor, int zero_neg, int minus_bad, int64_t *tile)        \
    {                                                                                            \
        for (Py_ssize_t i = r0; i < r1; i++) {                                                   \
            const char *p = base + i * s0;                                                       \
            int8_t *restrict yr = y + (i - r0) * n_cols;                                         \
            int32_t z = 0, m = 0, b = 0, ro = 0, rc = 0;                                         \
            if (s1 == (Py_ssize_t)sizeof(T)) {                                                   \
                const T *restrict q = (const T *)p;                                              \
                for (Py_ssize_t j = 0; j < n_cols; j++) {                                        \
                    CLASSIFY(T, q[j]);                                                           \
                    yr[j] = out;                                                                 \
                    z += zero;                                                                   \
                    m += minus;                                                                  \
                    b += bad;                                                                    \
                }                                                                                \
            } else {                                                                             \
                for (Py_ssize_t j = 0; j < n_cols; j++) {                                        \
                    CLASSIFY(T, *(const T *)(p + j * s1));                                       \
                    yr[j] = out;                                                                 \
                    z += zero;                                                                   \
                    m += minus;                                                                  \
                    b += bad;                                                                    \
                }                                                                                \
            }                                                                                    \
            for (Py_ssize_t j = 0; j < n_cols; j++) {                                            \
                const uint8_t obs = yr[j] != 0, one = yr[j] == 1;                                \
                tobs[j] += obs;                                                                  \
                tcor[j] += one;                                                                  \
                ro += obs;                                                                       \
                rc += one;                                                                       \
            }                                                                                    \
            row_obs[i] += ro;                                                                    \
            row_cor[i] += rc;                                                                    \
            tile[CAT_ZERO] += z;                                                                 \
            tile[CAT_MINUS] += m;                                                                \
            tile[CAT_BAD] += b;                                                                  \
        }                                                                                        \
    }

#define COLUMN_LOOP(T, ACCESS)                                                                     \
    for (Py_ssize_t i = 0; i < len; i++) {                                                       \
        CLASSIFY(T, ACCESS);                                                                     \
        const int obs = out != 0;                                                                \
        out_col[i] = out;                                                                        \
        trow_obs[i] += obs;                                                                      \
        trow_cor[i] += one;                                                                      \
        co += obs;                                                                               \
        cc += one;                                                                               \
        z += zero;                                                                               \
        m += minus;                                                                              \
        b += bad;                                                                                \
    }

#define DEFINE_COLUMN(NAME, T)                                                                   \
    static void NAME(const Column *c, Py_ssize_t r0, Py_ssize_t r1, int8_t *restrict out_col,    \
                     int32_t *restrict trow_obs, int32_t *restrict trow_cor, int64_t *col_obs,   \
                     int64_t *col_cor, int zero_neg, int minus_bad, int64_t *tile)               \
    {                                                                                            \
        int32_t co = 0, cc = 0, z = 0, m = 0, b = 0;                                             \
        const char *p = c->ptr + r0 * c->stride;                                                 \
        const Py_ssize_t s = c->stride, len = r1 - r0;                                           \
        if (s == (Py_ssize_t)sizeof(T)) {                                                        \
            const T *restrict q = (const T *)p;                                                  \
            COLUMN_LOOP(T, q[i])                                                                 \
        } else {                                                                                 \
            COLUMN_LOOP(T, *(const T *)(p + i * s))                                              \
        }                                                                                        \
        *col_obs += co;                                                                          \
        *col_cor += cc;                                                                          \
        tile[CAT_ZERO] += z;                                                                     \
        tile[CAT_MINUS] += m;                                                                    \
        tile[CAT_BAD] += b;                                                                      \
    }

typedef struct {
    const char *ptr;
    Py_ssize_t stride;
    int code;
} Column;

typedef void (*rows_fn)(const char *, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t, Py_ssize_t,
                        int8_t *, int64_t *, int64_t *, uint8_t *, uint8_t *, int, int, int64_t *);
typedef void (*column_fn)(const Column *, Py_ssize_t, Py_ssize_t, int8_t *, int32_t *, int32_t *,
                          int64_t *, int64_t *, int, int, int64_t *);

#define CONCAT_(a, b) a##b
#define CONCAT(a, b) CONCAT_(a, b)
/* One kernel per dtype code (bool reads as uint8), in the order of the T_* codes. */
#define DEFINE_KERNELS(SUFFIX)                                                                   \
    DEFINE_ROWS(CONCAT(rows_f64, SUFFIX), double)                                                \
    DEFINE_ROWS(CONCAT(rows_f32, SUFFIX), float)                                                 \
    DEFINE_ROWS(CONCAT(rows_i8, SUFFIX), int8_t)                                                 \
    DEFINE_ROWS(CONCAT(rows_u8, SUFFIX), uint8_t)                                                \
    DEFINE_ROWS(CONCAT(rows_i16, SUFFIX), int16_t)                                               \
    DEFINE_ROWS(CONCAT(rows_u16, SUFFIX), uint16_t)                                              \
    DEFINE_ROWS(CONCAT(rows_i32, SUFFIX), int32_t)                                               \
    DEFINE_ROWS(CONCAT(rows_u32, SUFFIX), uint32_t)                                              \
    DEFINE_ROWS(CONCAT(rows_i64, SUFFIX), int64_t)                                               \
    DEFINE_ROWS(CONCAT(rows_u64, SUFFIX), uint64_t)                                              \
    DEFINE_COLUMN(CONCAT(col_f64, SUFFIX), double)                                               \
    DEFINE_COLUMN(CONCAT(col_f32, SUFFIX), float)                                                \
    DEFINE_COLUMN(CONCAT(col_i8, SUFFIX), int8_t)                                                \
    DEFINE_COLUMN(CONCAT(col_u8, SUFFIX), uint8_t)                                               \
    DEFINE_COLUMN(CONCAT(col_i16, SUFFIX), int16_t)                                              \
    DEFINE_COLUMN(CONCAT(col_u16, SUFFIX), uint16_t)                                             \
    DEFINE_COLUMN(CONCAT(col_i32, SUFFIX), int32_t)                                              \
    DEFINE_COLUMN(CONCAT(col_u32, SUFFIX), uint32_t)                                             \
    DEFINE_COLUMN(CONCAT(col_i64, SUFFIX), int64_t)                                              \
    DEFINE_COLUMN(CONCAT(col_u64, SUFFIX), uint64_t)                                             \
    static const rows_fn CONCAT(ROWS, SUFFIX)[T_COUNT] = {                                       \
        CONCAT(rows_f64, SUFFIX), CONCAT(rows_f32, SUFFIX), CONCAT(rows_i8, SUFFIX),             \
        CONCAT(rows_u8, SUFFIX),  CONCAT(rows_u8, SUFFIX),  CONCAT(rows_i16, SUFFIX),            \
        CONCAT(rows_u16, SUFFIX), CONCAT(rows_i32, SUFFIX), CONCAT(rows_u32, SUFFIX),            \
        CONCAT(rows_i64, SUFFIX), CONCAT(rows_u64, SUFFIX)};                                     \
    static const column_fn CONCAT(COLUMNS, SUFFIX)[T_COUNT] = {                                  \
        CONCAT(col_f64, SUFFIX), CONCAT(col_f32, SUFFIX), CONCAT(col_i8, SUFFIX),                \
        CONCAT(col_u8, SUFFIX),  CONCAT(col_u8, SUFFIX),  CONCAT(col_i16, SUFFIX),               \
        CONCAT(col_u16, SUFFIX), CONCAT(col_i32, SUFFIX), CONCAT(col_u32, SUFFIX),               \
        CONCAT(col_i64, SUFFIX), CONCAT(col_u64, SUFFIX)};

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_AVX2_KERNELS 1
#pragma GCC push_options
#pragma GCC target("avx2")
DEFINE_KERNELS(_avx2)
#pragma GCC pop_options
#endif
DEFINE_KERNELS(_generic)

/* The kernels that run: chosen once, when the module is loaded. */
static const rows_fn *ROWS = ROWS_generic;
static const column_fn *COLUMNS = COLUMNS_generic;
static const char *kernel_target = "generic";

static void select_kernels(void)
{
#ifdef HAVE_AVX2_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        ROWS = ROWS_avx2;
        COLUMNS = COLUMNS_avx2;
        kernel_target = "avx2";
    }
#endif
}

/* Re-read the tile rows [r0, r1) x columns [k0, k1) (local indices) row-major and record the
 * cells of the categories whose tile count is positive and that may still improve the K
 * smallest.  VALUE_AT reads cell (i, j). */
#define RESCAN(VALUE_AT, k0, k1)                                                                 \
    do {                                                                                         \
        int want[3];                                                                             \
        int any = 0;                                                                             \
        for (int cat = 0; cat < 3; cat++) {                                                      \
            want[cat] = tile[cat] > 0 && (cat == CAT_BAD || mode == MODE_INFER) &&              \
                        wanted(cells, cat, r0 + row_offset, (k0) + col_offset);                  \
            any |= want[cat];                                                                    \
        }                                                                                        \
        if (!any)                                                                                \
            break;                                                                               \
        for (Py_ssize_t i = r0; i < r1; i++)                                                     \
            for (Py_ssize_t j = (k0); j < (k1); j++) {                                           \
                int cat = category(VALUE_AT, mode);                                              \
                if (cat >= 0 && want[cat])                                                       \
                    record(cells, cat, i + row_offset, j + col_offset);                          \
            }                                                                                    \
    } while (0)

/* ---- Python bindings ------------------------------------------------------------------------ */

/* A C-contiguous buffer of `count` items of `itemsize` bytes (count < 0: any length). */
static int contiguous(PyObject *obj, Buffer *buf, const char *name, Py_ssize_t itemsize,
                      Py_ssize_t count, int writable)
{
    int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, &buf->view, flags) < 0)
        return -1;
    buf->held = 1;
    if (buf->view.itemsize != itemsize ||
        (count >= 0 && buf->view.len != count * itemsize) || buf->view.len % itemsize) {
        PyErr_Format(PyExc_ValueError, "%s: expected a C-contiguous buffer of %zd items of %zd bytes",
                     name, count, itemsize);
        return -1;
    }
    return 0;
}

/* A strided buffer of `ndim` dimensions holding items of type `code`. */
static int strided(PyObject *obj, Buffer *buf, const char *name, int code, int ndim)
{
    if (code < 0 || code >= T_COUNT) {
        PyErr_Format(PyExc_ValueError, "%s: unknown dtype code %d", name, code);
        return -1;
    }
    if (PyObject_GetBuffer(obj, &buf->view, PyBUF_STRIDED_RO) < 0)
        return -1;
    buf->held = 1;
    if (buf->view.ndim != ndim || buf->view.itemsize != ITEMSIZE[code]) {
        PyErr_Format(PyExc_ValueError, "%s: expected a %d-D buffer of %zd-byte items", name, ndim,
                     ITEMSIZE[code]);
        return -1;
    }
    return 0;
}

static int check_mode(int mode)
{
    if (mode < MODE_INFER || mode > MODE_SIGNED) {
        PyErr_Format(PyExc_ValueError, "mode must be 0, 1 or 2, got %d", mode);
        return -1;
    }
    return 0;
}

static Cells *cells_of(Buffer *buf)
{
    return (Cells *)buf->view.buf;
}

static PyObject *py_scan_rows(PyObject *self, PyObject *args)
{
    PyObject *ov, *oy, *oro, *orc, *oco, *occ, *ost;
    int code, mode;
    Py_ssize_t row_offset;
    Buffer b[7] = {0};
    if (!PyArg_ParseTuple(args, "OiiOOOOOnO", &ov, &code, &mode, &oy, &oro, &orc, &oco, &occ,
                          &row_offset, &ost))
        return NULL;
    if (check_mode(mode) < 0 || strided(ov, &b[0], "values", code, 2) < 0)
        goto fail;
    const Py_ssize_t n = b[0].view.shape[0], n_cols = b[0].view.shape[1];
    if (row_offset < 0) {
        PyErr_SetString(PyExc_ValueError, "row_offset must be >= 0");
        goto fail;
    }
    const int check_only = oy == Py_None;
    if ((!check_only && contiguous(oy, &b[1], "y", 1, n * n_cols, 1) < 0) ||
        contiguous(oro, &b[2], "row_obs", 8, n, 1) < 0 ||
        contiguous(orc, &b[3], "row_cor", 8, n, 1) < 0 ||
        contiguous(oco, &b[4], "col_obs", 8, n_cols, 1) < 0 ||
        contiguous(occ, &b[5], "col_cor", 8, n_cols, 1) < 0 ||
        contiguous(ost, &b[6], "stats", 8, sizeof(Cells) / 8, 1) < 0)
        goto fail;
    const char *base = b[0].view.buf;
    const Py_ssize_t s0 = b[0].view.strides[0], s1 = b[0].view.strides[1];
    int64_t *row_obs = b[2].view.buf, *row_cor = b[3].view.buf;
    int64_t *col_obs = b[4].view.buf, *col_cor = b[5].view.buf;
    Cells *cells = cells_of(&b[6]);
    const int zero_neg = mode != MODE_SIGNED, minus_bad = mode == MODE_BINARY;
    const Py_ssize_t col_offset = 0;
    /* check_only: codes go to a scratch tile (the caller keeps the input as the coded matrix) */
    int8_t *scratch = check_only ? PyMem_Malloc(TILE_ROWS * (n_cols ? n_cols : 1)) : NULL;
    int8_t *y = check_only ? scratch : b[1].view.buf;
    uint8_t *tobs = PyMem_Calloc(2 * (n_cols ? n_cols : 1), 1);
    if (!tobs || (check_only && !scratch)) {
        PyMem_Free(tobs);
        PyMem_Free(scratch);
        PyErr_NoMemory();
        goto fail;
    }
    uint8_t *tcor = tobs + n_cols;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r0 = 0; r0 < n; r0 += TILE_ROWS) {
        const Py_ssize_t r1 = r0 + TILE_ROWS < n ? r0 + TILE_ROWS : n;
        int64_t tile[3] = {0, 0, 0};
        ROWS[code](base, s0, s1, r0, r1, n_cols, check_only ? y : y + r0 * n_cols, row_obs,
                   row_cor, tobs, tcor, zero_neg, minus_bad, tile);
        for (Py_ssize_t j = 0; j < n_cols; j++) {
            col_obs[j] += tobs[j];
            col_cor[j] += tcor[j];
        }
        memset(tobs, 0, 2 * n_cols);
        for (int cat = 0; cat < 3; cat++)
            cells->count[cat] += tile[cat];
        RESCAN(load(code, base + i * s0 + j * s1), 0, n_cols);
    }
    Py_END_ALLOW_THREADS
    PyMem_Free(tobs);
    PyMem_Free(scratch);
    release(b, 7);
    Py_RETURN_NONE;
fail:
    release(b, 7);
    return NULL;
}

static PyObject *py_scan_columns(PyObject *self, PyObject *args)
{
    PyObject *ocols, *ocodes, *oy, *oro, *orc, *oco, *occ, *ost;
    int mode;
    Py_ssize_t n, n_total, col_offset;
    Buffer b[6] = {0};
    Buffer *cb = NULL;
    Column *cols = NULL;
    int32_t *trow = NULL;
    int8_t *buf = NULL;
    Py_ssize_t n_cols = 0;
    if (!PyArg_ParseTuple(args, "OOinOnnOOOOO", &ocols, &ocodes, &mode, &n, &oy, &n_total,
                          &col_offset, &oro, &orc, &oco, &occ, &ost))
        return NULL;
    if (check_mode(mode) < 0)
        return NULL;
    if (!PyList_Check(ocols) || !PyList_Check(ocodes) ||
        PyList_GET_SIZE(ocols) != PyList_GET_SIZE(ocodes)) {
        PyErr_SetString(PyExc_TypeError, "columns and codes must be lists of the same length");
        return NULL;
    }
    n_cols = PyList_GET_SIZE(ocols);
    if (n < 0 || n_total < 0 || col_offset < 0 || col_offset + n_cols > n_total) {
        PyErr_SetString(PyExc_ValueError, "column range outside the output");
        return NULL;
    }
    cb = PyMem_Calloc(n_cols ? n_cols : 1, sizeof(Buffer));
    cols = PyMem_Calloc(n_cols ? n_cols : 1, sizeof(Column));
    trow = PyMem_Calloc(2 * TILE_ROWS, sizeof(int32_t));
    buf = PyMem_Malloc(TILE_ROWS * TILE_COLUMNS);
    if (!cb || !cols || !trow || !buf) {
        PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t k = 0; k < n_cols; k++) {
        int code = (int)PyLong_AsLong(PyList_GET_ITEM(ocodes, k));
        if (code == -1 && PyErr_Occurred())
            goto fail;
        if (strided(PyList_GET_ITEM(ocols, k), &cb[k], "column", code, 1) < 0)
            goto fail;
        if (cb[k].view.shape[0] != n) {
            PyErr_Format(PyExc_ValueError, "column %zd: expected %zd rows", k, n);
            goto fail;
        }
        cols[k] = (Column){cb[k].view.buf, cb[k].view.strides[0], code};
    }
    if (contiguous(oy, &b[0], "y", 1, n * n_total, 1) < 0 ||
        contiguous(oro, &b[1], "row_obs", 8, n, 1) < 0 ||
        contiguous(orc, &b[2], "row_cor", 8, n, 1) < 0 ||
        contiguous(oco, &b[3], "col_obs", 8, n_total, 1) < 0 ||
        contiguous(occ, &b[4], "col_cor", 8, n_total, 1) < 0 ||
        contiguous(ost, &b[5], "stats", 8, sizeof(Cells) / 8, 1) < 0)
        goto fail;
    int8_t *y = b[0].view.buf;
    int64_t *row_obs = b[1].view.buf, *row_cor = b[2].view.buf;
    int64_t *col_obs = b[3].view.buf, *col_cor = b[4].view.buf;
    Cells *cells = cells_of(&b[5]);
    const int zero_neg = mode != MODE_SIGNED, minus_bad = mode == MODE_BINARY;
    const Py_ssize_t row_offset = 0;
    /* Column chunks outermost: each column is read as one stream down all rows (reading a short
     * piece of every column per tile of rows is several times slower: a new page per piece). */
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k0 = 0; k0 < n_cols; k0 += TILE_COLUMNS) {
        const Py_ssize_t k1 = k0 + TILE_COLUMNS < n_cols ? k0 + TILE_COLUMNS : n_cols;
        for (Py_ssize_t r0 = 0; r0 < n; r0 += TILE_ROWS) {
            const Py_ssize_t r1 = r0 + TILE_ROWS < n ? r0 + TILE_ROWS : n;
            int64_t tile[3] = {0, 0, 0};
            memset(trow, 0, 2 * TILE_ROWS * sizeof(int32_t));
            for (Py_ssize_t k = k0; k < k1; k++)
                COLUMNS[cols[k].code](&cols[k], r0, r1, buf + (k - k0) * TILE_ROWS, trow,
                                      trow + TILE_ROWS, col_obs + col_offset + k,
                                      col_cor + col_offset + k, zero_neg, minus_bad, tile);
            for (Py_ssize_t i = r0; i < r1; i++) { /* transpose the tile into the rows of y */
                int8_t *yr = y + i * n_total + col_offset;
                for (Py_ssize_t k = k0; k < k1; k++)
                    yr[k] = buf[(k - k0) * TILE_ROWS + (i - r0)];
                row_obs[i] += trow[i - r0];
                row_cor[i] += trow[TILE_ROWS + i - r0];
            }
            for (int cat = 0; cat < 3; cat++)
                cells->count[cat] += tile[cat];
            RESCAN(load(cols[j].code, cols[j].ptr + i * cols[j].stride), k0, k1);
        }
    }
    Py_END_ALLOW_THREADS
    release(b, 6);
    release(cb, (int)n_cols);
    PyMem_Free(cb);
    PyMem_Free(cols);
    PyMem_Free(trow);
    PyMem_Free(buf);
    Py_RETURN_NONE;
fail:
    release(b, 6);
    if (cb)
        release(cb, (int)n_cols);
    PyMem_Free(cb);
    PyMem_Free(cols);
    PyMem_Free(trow);
    PyMem_Free(buf);
    return NULL;
}

/* ---- long input: triplets -> CSR ------------------------------------------------------------ */

static int index_code(int code, const char *name)
{
    if (code < T_I8 || code == T_BOOL || code >= T_COUNT) {
        PyErr_Format(PyExc_ValueError, "%s: expected an integer dtype code, got %d", name, code);
        return -1;
    }
    return 0;
}

static PyObject *py_triplets_count(PyObject *self, PyObject *args)
{
    PyObject *orow, *ocol, *oval, *oro, *orc, *oco, *occ, *ost;
    int rcode, ccode, vcode, mode;
    Py_ssize_t n, n_cols;
    Buffer b[8] = {0};
    if (!PyArg_ParseTuple(args, "OiOiOinniOOOOO", &orow, &rcode, &ocol, &ccode, &oval, &vcode,
                          &n, &n_cols, &mode, &oro, &orc, &oco, &occ, &ost))
        return NULL;
    if (check_mode(mode) < 0 || index_code(rcode, "rows") < 0 || index_code(ccode, "cols") < 0)
        return NULL;
    if (strided(orow, &b[0], "rows", rcode, 1) < 0 || strided(ocol, &b[1], "cols", ccode, 1) < 0 ||
        strided(oval, &b[2], "values", vcode, 1) < 0)
        goto fail;
    const Py_ssize_t m = b[0].view.shape[0];
    if (b[1].view.shape[0] != m || b[2].view.shape[0] != m || n < 0 || n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "rows, cols and values must have the same length");
        goto fail;
    }
    if (contiguous(oro, &b[3], "row_obs", 8, n, 1) < 0 ||
        contiguous(orc, &b[4], "row_cor", 8, n, 1) < 0 ||
        contiguous(oco, &b[5], "col_obs", 8, n_cols, 1) < 0 ||
        contiguous(occ, &b[6], "col_cor", 8, n_cols, 1) < 0 ||
        contiguous(ost, &b[7], "stats", 8, sizeof(Cells) / 8, 1) < 0)
        goto fail;
    const char *rp = b[0].view.buf, *cp = b[1].view.buf, *vp = b[2].view.buf;
    const Py_ssize_t rs = b[0].view.strides[0], cs = b[1].view.strides[0], vs = b[2].view.strides[0];
    int64_t *row_obs = b[3].view.buf, *row_cor = b[4].view.buf;
    int64_t *col_obs = b[5].view.buf, *col_cor = b[6].view.buf;
    Cells *cells = cells_of(&b[7]);
    const int zero_neg = mode != MODE_SIGNED, minus_bad = mode == MODE_BINARY;
    Py_ssize_t out_of_range = -1, kept = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < m; k++) {
        const int64_t r = load_index(rcode, rp + k * rs), c = load_index(ccode, cp + k * cs);
        if (r < 0 || r >= n || c < 0 || c >= n_cols) {
            out_of_range = k;
            break;
        }
        CLASSIFY(double, load(vcode, vp + k * vs));
        const int obs = out != 0;
        if (zero | minus | bad) {
            const int cat = bad ? CAT_BAD : (zero ? CAT_ZERO : CAT_MINUS);
            cells->count[cat]++;
            if (cells->found[cat] < K_CELLS)
                record(cells, cat, k, 0);
        }
        row_obs[r] += obs;
        row_cor[r] += one;
        col_obs[c] += obs;
        col_cor[c] += one;
        kept += obs;
    }
    Py_END_ALLOW_THREADS
    release(b, 8);
    if (out_of_range >= 0)
        return PyErr_Format(PyExc_ValueError, "record %zd: row or column index out of range",
                            out_of_range);
    return PyLong_FromSsize_t(kept);
fail:
    release(b, 8);
    return NULL;
}

static int check_indptr(const int64_t *indptr, Py_ssize_t n, Py_ssize_t nnz)
{
    if (indptr[0] != 0 || indptr[n] != nnz)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++)
        if (indptr[i + 1] < indptr[i])
            return -1;
    return 0;
}

/* Place the kept cells of the records in CSR order with two stable counting-sort passes (by
 * column into a buffer, then by row), so that each row comes out sorted by column whatever the
 * record order; then count duplicated cells (category CAT_DUP: extra entries) in stats. */
static PyObject *py_triplets_fill(PyObject *self, PyObject *args)
{
    PyObject *orow, *ocol, *oval, *optr, *ocptr, *oind, *oout, *ost;
    int rcode, ccode, vcode, mode;
    Buffer b[8] = {0};
    int64_t *next = NULL;
    int32_t *tmp_rows = NULL;
    int8_t *tmp_vals = NULL;
    if (!PyArg_ParseTuple(args, "OiOiOiiOOOOO", &orow, &rcode, &ocol, &ccode, &oval, &vcode,
                          &mode, &optr, &ocptr, &oind, &oout, &ost))
        return NULL;
    if (check_mode(mode) < 0 || index_code(rcode, "rows") < 0 || index_code(ccode, "cols") < 0)
        return NULL;
    if (strided(orow, &b[0], "rows", rcode, 1) < 0 || strided(ocol, &b[1], "cols", ccode, 1) < 0 ||
        strided(oval, &b[2], "values", vcode, 1) < 0 ||
        contiguous(optr, &b[3], "indptr", 8, -1, 0) < 0 ||
        contiguous(ocptr, &b[4], "col_ptr", 8, -1, 0) < 0 ||
        contiguous(oind, &b[5], "indices", 4, -1, 1) < 0 ||
        contiguous(oout, &b[6], "out", 1, -1, 1) < 0 ||
        contiguous(ost, &b[7], "stats", 8, sizeof(Cells) / 8, 1) < 0)
        goto fail;
    const Py_ssize_t m = b[0].view.shape[0], n = b[3].view.len / 8 - 1;
    const Py_ssize_t n_cols = b[4].view.len / 8 - 1, nnz = b[5].view.len / 4;
    const int64_t *indptr = b[3].view.buf, *col_ptr = b[4].view.buf;
    if (b[1].view.shape[0] != m || b[2].view.shape[0] != m || n < 0 || n_cols < 0 ||
        n_cols > INT32_MAX || b[6].view.len != nnz || check_indptr(indptr, n, nnz) < 0 ||
        check_indptr(col_ptr, n_cols, nnz) < 0) {
        PyErr_SetString(PyExc_ValueError, "inconsistent triplets or CSR layout");
        goto fail;
    }
    next = PyMem_Malloc(((n > n_cols ? n : n_cols) + 1) * sizeof(int64_t));
    tmp_rows = PyMem_Malloc((nnz ? nnz : 1) * sizeof(int32_t));
    tmp_vals = PyMem_Malloc(nnz ? nnz : 1);
    if (!next || !tmp_rows || !tmp_vals) {
        PyErr_NoMemory();
        goto fail;
    }
    const char *rp = b[0].view.buf, *cp = b[1].view.buf, *vp = b[2].view.buf;
    const Py_ssize_t rs = b[0].view.strides[0], cs = b[1].view.strides[0], vs = b[2].view.strides[0];
    int32_t *indices = b[5].view.buf;
    int8_t *values = b[6].view.buf;
    Cells *cells = cells_of(&b[7]);
    const int zero_neg = mode != MODE_SIGNED, minus_bad = mode == MODE_BINARY;
    int mismatch = 0;
    Py_BEGIN_ALLOW_THREADS
    memcpy(next, col_ptr, n_cols * sizeof(int64_t));
    for (Py_ssize_t k = 0; k < m && !mismatch; k++) {
        CLASSIFY(double, load(vcode, vp + k * vs));
        (void)bad, (void)zero, (void)minus, (void)one;
        if (!out)
            continue;
        const int64_t r = load_index(rcode, rp + k * rs), c = load_index(ccode, cp + k * cs);
        if (r < 0 || r >= n || c < 0 || c >= n_cols || next[c] >= col_ptr[c + 1]) {
            mismatch = 1;
            break;
        }
        tmp_rows[next[c]] = (int32_t)r;
        tmp_vals[next[c]++] = out;
    }
    if (!mismatch) {
        memcpy(next, indptr, n * sizeof(int64_t));
        for (Py_ssize_t c = 0; c < n_cols && !mismatch; c++)
            for (int64_t k = col_ptr[c]; k < col_ptr[c + 1]; k++) {
                const int32_t r = tmp_rows[k];
                if (r < 0 || r >= n || next[r] >= indptr[r + 1]) {
                    mismatch = 1;
                    break;
                }
                indices[next[r]] = (int32_t)c;
                values[next[r]++] = tmp_vals[k];
            }
    }
    if (!mismatch)
        for (Py_ssize_t i = 0; i < n; i++)
            for (int64_t k = indptr[i] + 1; k < indptr[i + 1]; k++)
                if (indices[k] == indices[k - 1]) {
                    cells->count[CAT_DUP]++;
                    record(cells, CAT_DUP, i, indices[k]);
                }
    Py_END_ALLOW_THREADS
    PyMem_Free(next);
    PyMem_Free(tmp_rows);
    PyMem_Free(tmp_vals);
    release(b, 8);
    if (mismatch)
        return PyErr_Format(PyExc_ValueError, "triplets do not match the row and column counts");
    Py_RETURN_NONE;
fail:
    PyMem_Free(next);
    PyMem_Free(tmp_rows);
    PyMem_Free(tmp_vals);
    release(b, 8);
    return NULL;
}

/* ---- conversions and counts of coded matrices ---------------------------------------------- */

static PyObject *py_dense_to_csr(PyObject *self, PyObject *args)
{
    PyObject *oy, *optr, *oind, *oval;
    Py_ssize_t n, n_cols;
    Buffer b[4] = {0};
    if (!PyArg_ParseTuple(args, "OnnOOO", &oy, &n, &n_cols, &optr, &oind, &oval))
        return NULL;
    if (n < 0 || n_cols < 0 || n_cols > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        return NULL;
    }
    if (contiguous(oy, &b[0], "y", 1, n * n_cols, 0) < 0 ||
        contiguous(optr, &b[1], "indptr", 8, n + 1, 0) < 0 ||
        contiguous(oind, &b[2], "indices", 4, -1, 1) < 0 ||
        contiguous(oval, &b[3], "values", 1, -1, 1) < 0)
        goto fail;
    const int8_t *y = b[0].view.buf;
    const int64_t *indptr = b[1].view.buf;
    int32_t *indices = b[2].view.buf;
    int8_t *values = b[3].view.buf;
    const Py_ssize_t nnz = b[2].view.len / 4;
    if (b[3].view.len != nnz || check_indptr(indptr, n, nnz) < 0) {
        PyErr_SetString(PyExc_ValueError, "inconsistent CSR layout");
        goto fail;
    }
    int mismatch = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n && !mismatch; i++) {
        int64_t k = indptr[i];
        const int8_t *yr = y + i * n_cols;
        for (Py_ssize_t j = 0; j < n_cols; j++)
            if (yr[j]) {
                if (k >= indptr[i + 1]) {
                    mismatch = 1;
                    break;
                }
                indices[k] = (int32_t)j;
                values[k++] = yr[j];
            }
        mismatch |= k != indptr[i + 1];
    }
    Py_END_ALLOW_THREADS
    release(b, 4);
    if (mismatch)
        return PyErr_Format(PyExc_ValueError, "indptr does not match the observed cells");
    Py_RETURN_NONE;
fail:
    release(b, 4);
    return NULL;
}

static PyObject *py_csr_to_dense(PyObject *self, PyObject *args)
{
    PyObject *optr, *oind, *oval, *oy;
    Py_ssize_t n_cols;
    Buffer b[4] = {0};
    if (!PyArg_ParseTuple(args, "OOOnO", &optr, &oind, &oval, &n_cols, &oy))
        return NULL;
    if (contiguous(optr, &b[0], "indptr", 8, -1, 0) < 0 ||
        contiguous(oind, &b[1], "indices", 4, -1, 0) < 0 ||
        contiguous(oval, &b[2], "values", 1, -1, 0) < 0)
        goto fail;
    const Py_ssize_t n = b[0].view.len / 8 - 1, nnz = b[1].view.len / 4;
    if (n < 0 || n_cols < 0 || b[2].view.len != nnz ||
        check_indptr(b[0].view.buf, n, nnz) < 0 ||
        contiguous(oy, &b[3], "y", 1, n * n_cols, 1) < 0)
        goto fail_layout;
    const int64_t *indptr = b[0].view.buf;
    const int32_t *indices = b[1].view.buf;
    const int8_t *values = b[2].view.buf;
    int8_t *y = b[3].view.buf;
    for (Py_ssize_t k = 0; k < nnz; k++)
        if (indices[k] < 0 || indices[k] >= n_cols) {
            PyErr_Format(PyExc_ValueError, "column index %d out of range", (int)indices[k]);
            goto fail;
        }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++)
        for (int64_t k = indptr[i]; k < indptr[i + 1]; k++)
            y[i * n_cols + indices[k]] = values[k];
    Py_END_ALLOW_THREADS
    release(b, 4);
    Py_RETURN_NONE;
fail_layout:
    if (!PyErr_Occurred())
        PyErr_SetString(PyExc_ValueError, "inconsistent CSR layout");
fail:
    release(b, 4);
    return NULL;
}

/* Observed and correct cells per row and per column of a coded matrix, dense (indptr None) or
 * CSR.  The count arrays are zeroed here. */
/* A coded matrix into b[0..2]: dense y (n x n_cols int8; optr None) or CSR (values,
 * indptr, indices), its layout and column indices checked. */
static int coded_matrix(PyObject *oy, PyObject *optr, PyObject *oind, Py_ssize_t n,
                        Py_ssize_t n_cols, Buffer *b)
{
    if (optr == Py_None)
        return contiguous(oy, &b[0], "y", 1, n * n_cols, 0);
    if (contiguous(optr, &b[1], "indptr", 8, n + 1, 0) < 0 ||
        contiguous(oind, &b[2], "indices", 4, -1, 0) < 0 ||
        contiguous(oy, &b[0], "values", 1, b[2].view.len / 4, 0) < 0)
        return -1;
    if (check_indptr(b[1].view.buf, n, b[2].view.len / 4) < 0) {
        PyErr_SetString(PyExc_ValueError, "inconsistent CSR layout");
        return -1;
    }
    const int32_t *ind = b[2].view.buf;
    for (Py_ssize_t k = 0; k < b[2].view.len / 4; k++)
        if (ind[k] < 0 || ind[k] >= n_cols) {
            PyErr_Format(PyExc_ValueError, "column index %d out of range", (int)ind[k]);
            return -1;
        }
    return 0;
}

static PyObject *py_coded_counts(PyObject *self, PyObject *args)
{
    PyObject *oy, *optr, *oind, *oro, *orc, *oco, *occ;
    Py_ssize_t n, n_cols;
    Buffer b[7] = {0};
    if (!PyArg_ParseTuple(args, "OOOnnOOOO", &oy, &optr, &oind, &n, &n_cols, &oro, &orc, &oco,
                          &occ))
        return NULL;
    if (n < 0 || n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        return NULL;
    }
    const int sparse = optr != Py_None;
    if (contiguous(oro, &b[3], "row_obs", 8, n, 1) < 0 ||
        contiguous(orc, &b[4], "row_cor", 8, n, 1) < 0 ||
        contiguous(oco, &b[5], "col_obs", 8, n_cols, 1) < 0 ||
        contiguous(occ, &b[6], "col_cor", 8, n_cols, 1) < 0 ||
        coded_matrix(oy, optr, oind, n, n_cols, b) < 0)
        goto fail;
    const int8_t *v = b[0].view.buf;
    int64_t *row_obs = b[3].view.buf, *row_cor = b[4].view.buf;
    int64_t *col_obs = b[5].view.buf, *col_cor = b[6].view.buf;
    const int64_t *indptr = sparse ? b[1].view.buf : NULL;
    const int32_t *indices = sparse ? b[2].view.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    memset(col_obs, 0, n_cols * sizeof(int64_t));
    memset(col_cor, 0, n_cols * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t ro = 0, rc = 0;
        if (sparse) {
            for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
                const int obs = v[k] != 0, one = v[k] == 1;
                col_obs[indices[k]] += obs;
                col_cor[indices[k]] += one;
                ro += obs;
                rc += one;
            }
        } else {
            const int8_t *yr = v + i * n_cols;
            for (Py_ssize_t j = 0; j < n_cols; j++) {
                const int obs = yr[j] != 0, one = yr[j] == 1;
                col_obs[j] += obs;
                col_cor[j] += one;
                ro += obs;
                rc += one;
            }
        }
        row_obs[i] = ro;
        row_cor[i] = rc;
    }
    Py_END_ALLOW_THREADS
    release(b, 7);
    Py_RETURN_NONE;
fail:
    release(b, 7);
    return NULL;
}

/* Sums of each row's and each column's cells times random weights, modulo 2^64 (so exact
 * in any order): equal patterns give equal sums.  Weights and sums are (count, 2) uint64. */
static PyObject *py_pattern_sums(PyObject *self, PyObject *args)
{
    PyObject *oy, *optr, *oind, *orw, *ocw, *ors, *ocs;
    Py_ssize_t n, n_cols;
    Buffer b[7] = {0};
    if (!PyArg_ParseTuple(args, "OOOnnOOOO", &oy, &optr, &oind, &n, &n_cols, &orw, &ocw, &ors,
                          &ocs))
        return NULL;
    if (n < 0 || n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        return NULL;
    }
    const int sparse = optr != Py_None;
    if (contiguous(orw, &b[3], "row_weights", 8, 2 * n, 0) < 0 ||
        contiguous(ocw, &b[4], "col_weights", 8, 2 * n_cols, 0) < 0 ||
        contiguous(ors, &b[5], "row_sums", 8, 2 * n, 1) < 0 ||
        contiguous(ocs, &b[6], "col_sums", 8, 2 * n_cols, 1) < 0 ||
        coded_matrix(oy, optr, oind, n, n_cols, b) < 0)
        goto fail;
    const int8_t *v = b[0].view.buf;
    const uint64_t *rw = b[3].view.buf, *cw = b[4].view.buf;
    uint64_t *rs = b[5].view.buf, *cs = b[6].view.buf;
    const int64_t *indptr = sparse ? b[1].view.buf : NULL;
    const int32_t *indices = sparse ? b[2].view.buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    memset(cs, 0, 2 * n_cols * sizeof(uint64_t));
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t r0 = 0, r1 = 0;
        const uint64_t w0 = rw[2 * i], w1 = rw[2 * i + 1];
        if (sparse) {
            for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
                const uint64_t c = (uint64_t)(int64_t)v[k];
                const int32_t j = indices[k];
                r0 += c * cw[2 * j];
                r1 += c * cw[2 * j + 1];
                cs[2 * j] += c * w0;
                cs[2 * j + 1] += c * w1;
            }
        } else {
            const int8_t *yr = v + i * n_cols;
            for (Py_ssize_t j = 0; j < n_cols; j++) {
                const uint64_t c = (uint64_t)(int64_t)yr[j];
                r0 += c * cw[2 * j];
                r1 += c * cw[2 * j + 1];
                cs[2 * j] += c * w0;
                cs[2 * j + 1] += c * w1;
            }
        }
        rs[2 * i] = r0;
        rs[2 * i + 1] = r1;
    }
    Py_END_ALLOW_THREADS
    release(b, 7);
    Py_RETURN_NONE;
fail:
    release(b, 7);
    return NULL;
}

/* The root of node x, halving the path to it on the way. */
static int64_t find_root(int64_t *parent, int64_t x)
{
    while (parent[x] != x) {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    return x;
}

/* The connected components of the bipartite graph of a coded matrix's observed cells, by
 * union-find: nodes 0..n-1 are its rows, n..n+n_cols-1 its columns, and labels[x] ends as
 * the smallest node of x's component.  No memory beyond labels (the cells are read where
 * they lie), where a general graph search copies and transposes them. */
static PyObject *py_components(PyObject *self, PyObject *args)
{
    PyObject *oy, *optr, *oind, *olab;
    Py_ssize_t n, n_cols;
    Buffer b[4] = {0};
    if (!PyArg_ParseTuple(args, "OOOnnO", &oy, &optr, &oind, &n, &n_cols, &olab))
        return NULL;
    if (n < 0 || n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        return NULL;
    }
    const int sparse = optr != Py_None;
    if (contiguous(olab, &b[3], "labels", 8, n + n_cols, 1) < 0 ||
        coded_matrix(oy, optr, oind, n, n_cols, b) < 0)
        goto fail;
    const int8_t *v = b[0].view.buf;
    const int64_t *indptr = sparse ? b[1].view.buf : NULL;
    const int32_t *indices = sparse ? b[2].view.buf : NULL;
    int64_t *parent = b[3].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t x = 0; x < n + n_cols; x++)
        parent[x] = x;
    int64_t merges = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t lo = sparse ? indptr[i] : 0, hi = sparse ? indptr[i + 1] : n_cols;
        /* the rows before i and every column one group (the rows from i on are still
         * alone): row i joins it by its first answer, and the rest of its row adds nothing */
        const int joined = n + n_cols - merges == n - i + 1;
        for (int64_t k = lo; k < hi; k++) {
            int64_t j;
            if (sparse) {
                if (v[k] == 0)  /* a stored 0 is no answer */
                    continue;
                j = indices[k];
            } else {
                if (v[i * n_cols + k] == 0)
                    continue;
                j = k;
            }
            int64_t r = find_root(parent, i), c = find_root(parent, n + j);
            if (r != c) {
                parent[r < c ? c : r] = r < c ? r : c;
                merges++;
            }
            if (joined)
                break;
        }
    }
    for (int64_t x = 0; x < n + n_cols; x++)
        parent[x] = find_root(parent, x);
    Py_END_ALLOW_THREADS
    release(b, 4);
    Py_RETURN_NONE;
fail:
    release(b, 4);
    return NULL;
}

/* One pass over a coded matrix for cbmm.diagnostics.separation: per column the lowest
 * theta among its right answers and the highest among its wrong ones, per row its right
 * and wrong answers to informative columns.  The outputs start as the caller set them. */
static PyObject *py_separation_scan(PyObject *self, PyObject *args)
{
    PyObject *oy, *optr, *oind, *oth, *oinf, *olo, *ohi, *ori, *owr;
    Py_ssize_t n, n_cols;
    Buffer b[9] = {0};
    if (!PyArg_ParseTuple(args, "OOOnnOOOOOO", &oy, &optr, &oind, &n, &n_cols, &oth, &oinf,
                          &olo, &ohi, &ori, &owr))
        return NULL;
    if (n < 0 || n_cols < 0) {
        PyErr_SetString(PyExc_ValueError, "bad shape");
        return NULL;
    }
    const int sparse = optr != Py_None;
    if (contiguous(oth, &b[3], "theta", 8, n, 0) < 0 ||
        contiguous(oinf, &b[4], "informative", 1, n_cols, 0) < 0 ||
        contiguous(olo, &b[5], "lowest_correct", 8, n_cols, 1) < 0 ||
        contiguous(ohi, &b[6], "highest_wrong", 8, n_cols, 1) < 0 ||
        contiguous(ori, &b[7], "right", 8, n, 1) < 0 ||
        contiguous(owr, &b[8], "wrong", 8, n, 1) < 0 ||
        coded_matrix(oy, optr, oind, n, n_cols, b) < 0)
        goto fail;
    const int8_t *v = b[0].view.buf;
    const int64_t *indptr = sparse ? b[1].view.buf : NULL;
    const int32_t *indices = sparse ? b[2].view.buf : NULL;
    const double *theta = b[3].view.buf;
    const uint8_t *informative = b[4].view.buf;
    double *lo = b[5].view.buf, *hi = b[6].view.buf;
    int64_t *right = b[7].view.buf, *wrong = b[8].view.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const double t = theta[i];
        int64_t r = 0, w = 0;
        if (sparse) {
            for (int64_t k = indptr[i]; k < indptr[i + 1]; k++) {
                const int32_t j = indices[k];
                if (v[k] > 0) {
                    lo[j] = t < lo[j] ? t : lo[j];
                    r += informative[j];
                } else if (v[k] < 0) {
                    hi[j] = t > hi[j] ? t : hi[j];
                    w += informative[j];
                }
            }
        } else {  /* without branches or aliasing, so that the compiler vectorises the row */
            const int8_t *restrict yr = v + i * n_cols;
            double *restrict low = lo, *restrict high = hi;
            int32_t rr = 0, ww = 0;
            for (Py_ssize_t j = 0; j < n_cols; j++) {
                const int8_t c = yr[j];
                const double l = low[j], h = high[j];
                low[j] = ((c > 0) & (t < l)) ? t : l;
                high[j] = ((c < 0) & (t > h)) ? t : h;
                rr += (c > 0) & informative[j];
                ww += (c < 0) & informative[j];
            }
            r = rr;
            w = ww;
        }
        right[i] = r;
        wrong[i] = w;
    }
    Py_END_ALLOW_THREADS
    release(b, 9);
    Py_RETURN_NONE;
fail:
    release(b, 9);
    return NULL;
}

static PyMethodDef methods[] = {
    {"scan_rows", py_scan_rows, METH_VARARGS,
     "scan_rows(values, code, mode, y, row_obs, row_cor, col_obs, col_cor, row_offset, stats)\n\n"
     "Code a 2-D block row by row into y (None: only count and check), adding to the counts "
     "and to stats."},
    {"scan_columns", py_scan_columns, METH_VARARGS,
     "scan_columns(columns, codes, mode, n, y, n_total, col_offset, row_obs, row_cor, col_obs, "
     "col_cor, stats)\n\nCode a list of columns (each with its dtype code) into y[:, col_offset:]."},
    {"triplets_count", py_triplets_count, METH_VARARGS,
     "triplets_count(rows, rcode, cols, ccode, values, vcode, n, n_cols, mode, row_obs, row_cor, "
     "col_obs, col_cor, stats) -> kept\n\nClassify long-format records and count the kept cells."},
    {"triplets_fill", py_triplets_fill, METH_VARARGS,
     "triplets_fill(rows, rcode, cols, ccode, values, vcode, mode, indptr, col_ptr, indices, out, "
     "stats)\n\nPlace the kept cells in CSR order (rows sorted by column); count duplicates."},
    {"dense_to_csr", py_dense_to_csr, METH_VARARGS,
     "dense_to_csr(y, n, n_cols, indptr, indices, values)\n\nCSR of a coded dense matrix."},
    {"csr_to_dense", py_csr_to_dense, METH_VARARGS,
     "csr_to_dense(indptr, indices, values, n_cols, y)\n\nScatter CSR cells into a zeroed y."},
    {"coded_counts", py_coded_counts, METH_VARARGS,
     "coded_counts(y_or_values, indptr_or_None, indices_or_None, n, n_cols, row_obs, row_cor, "
     "col_obs, col_cor)\n\nObserved and correct cells per row and column of a coded matrix."},
    {"pattern_sums", py_pattern_sums, METH_VARARGS,
     "pattern_sums(y_or_values, indptr_or_None, indices_or_None, n, n_cols, row_weights, "
     "col_weights, row_sums, col_sums)\n\nSums of the cells of each row (times the column "
     "weights) and of each column (times the row weights), modulo 2**64."},
    {"components", py_components, METH_VARARGS,
     "components(y_or_values, indptr_or_None, indices_or_None, n, n_cols, labels)\n\n"
     "Connected components of the bipartite graph of the observed cells (rows 0..n-1, "
     "columns n..): labels[x] is the smallest node of x's component."},
    {"separation_scan", py_separation_scan, METH_VARARGS,
     "separation_scan(y_or_values, indptr_or_None, indices_or_None, n, n_cols, theta, "
     "informative, lowest_correct, highest_wrong, right, wrong)\n\nPer column the lowest "
     "theta of a right answer and the highest of a wrong one; per row the right and wrong "
     "answers to informative columns."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_ingest",
                                    .m_doc = "One-pass validation and coding of responses.",
                                    .m_size = -1, .m_methods = methods};

PyMODINIT_FUNC PyInit__ingest(void)
{
    select_kernels();
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "kernel_target", kernel_target) < 0 ||
        PyModule_AddIntConstant(m, "K_CELLS", K_CELLS) < 0 ||
        PyModule_AddIntConstant(m, "STATS_SIZE", (long)(sizeof(Cells) / 8)) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
