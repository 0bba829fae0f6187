/*
 * Kernels of cbmm._fused, included twice by _fused.c: once compiled for
 * AVX2 + FMA and once for the baseline target, with KERNEL(name) giving each
 * copy its own names.  See _fused.c for what they compute.  Every kernel
 * works on the rows [r0, r1) of one Data matrix (dense or CSR) and is called
 * by one thread with its own accumulators.
 */
static inline double KERNEL(estrin16)(double x, const double *c)
{
    double x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
    double low = ((c[0] + c[1] * x) + (c[2] + c[3] * x) * x2)
                 + ((c[4] + c[5] * x) + (c[6] + c[7] * x) * x2) * x4;
    double high = ((c[8] + c[9] * x) + (c[10] + c[11] * x) * x2)
                  + ((c[12] + c[13] * x) + (c[14] + c[15] * x) * x2) * x4;
    return low + high * x8;
}

static inline float KERNEL(estrin8)(float x, const float *c)
{
    float x2 = x * x, x4 = x2 * x2;
    return ((c[0] + c[1] * x) + (c[2] + c[3] * x) * x2)
           + ((c[4] + c[5] * x) + (c[6] + c[7] * x) * x2) * x4;
}

/* e = exp(-t) for 0 <= t <= T_MAX (double). */
static inline double KERNEL(exp_neg64)(double t)
{
    double kf = floor(t * 1.4426950408889634 + 0.5);
    double r = -(t - kf * 6.93147180369123816490e-01 - kf * 1.90821492927058770002e-10);
    /* via int32: AVX2 has no double -> int64 vector conversion */
    int64_t bits = (int64_t)(1023 - (int32_t)kf) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return KERNEL(estrin16)(r, EXP64) * scale;
}

static inline float KERNEL(exp_neg32)(float t)
{
    float kf = floorf(t * 1.44269504f + 0.5f);
    float r = -(t - kf * 0.693145751953125f - kf * 1.428606765330187045e-06f);
    int32_t bits = (int32_t)(127 - (int32_t)kf) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return KERNEL(estrin8)(r, EXP32) * scale;
}

/* w = y expit(z) and softplus(z) for z = -y x inv_sigma (double).  A missing
 * entry (y = 0) gives w = 0; callers mask its softplus. */
static inline void KERNEL(entry64)(int8_t y, double x, double inv_sigma, double *w, double *softplus)
{
    double yk = (double)y;
    double z = -yk * x * inv_sigma;
    double t = fabs(z);
    t = t < T_MAX ? t : T_MAX; /* also maps NaN to T_MAX: no undefined conversion */
    double e = KERNEL(exp_neg64)(t);
    double d = 1.0 / ((1.0 + e) * (2.0 + e)); /* one division: 1/(1+e) and e/(2+e) */
    double inv = (2.0 + e) * d;
    double s = e * (1.0 + e) * d;
    *w = yk * (z >= 0.0 ? inv : e * inv);
    *softplus = (z > 0.0 ? z : 0.0) + 2.0 * s * KERNEL(estrin16)(s * s, LOG64);
}

static inline void KERNEL(entry32)(int8_t y, float x, float inv_sigma, float *w, float *softplus)
{
    float yk = (float)y;
    float z = -yk * x * inv_sigma;
    float t = fabsf(z);
    t = t < (float)T_MAX ? t : (float)T_MAX;
    float e = KERNEL(exp_neg32)(t);
    float d = 1.0f / ((1.0f + e) * (2.0f + e));
    float inv = (2.0f + e) * d;
    float s = e * (1.0f + e) * d;
    *w = yk * (z >= 0.0f ? inv : e * inv);
    *softplus = (z > 0.0f ? z : 0.0f) + 2.0f * s * KERNEL(estrin8)(s * s, LOG32);
}

/* w = y expit(-y x) alone (sigma = 1): the theta-step needs no loss term. */
static inline double KERNEL(expit64)(int8_t y, double x)
{
    double yk = (double)y;
    double z = -yk * x;
    double t = fabs(z);
    t = t < T_MAX ? t : T_MAX;
    double e = KERNEL(exp_neg64)(t);
    return yk * (z >= 0.0 ? 1.0 : e) / (1.0 + e);
}

static inline float KERNEL(expit32)(int8_t y, float x)
{
    float yk = (float)y;
    float z = -yk * x;
    float t = fabsf(z);
    t = t < (float)T_MAX ? t : (float)T_MAX;
    float e = KERNEL(exp_neg32)(t);
    return yk * (z >= 0.0f ? 1.0f : e) / (1.0f + e);
}

/* The MM pass in both precisions (see _fused_mm_rows.h). */
#define REAL double
#define MM_ROWS KERNEL(mm_rows64)
#define ENTRY KERNEL(entry64)
#define EXPIT KERNEL(expit64)
#include "_fused_mm_rows.h"
#undef REAL
#undef MM_ROWS
#undef ENTRY
#undef EXPIT

#define REAL float
#define MM_ROWS KERNEL(mm_rows32)
#define ENTRY KERNEL(entry32)
#define EXPIT KERNEL(expit32)
#include "_fused_mm_rows.h"
#undef REAL
#undef MM_ROWS
#undef ENTRY
#undef EXPIT

/* Loss (3) over rows [r0, r1) in double precision. */
static double KERNEL(loss_rows)(const LossArgs *g, Py_ssize_t r0, Py_ssize_t r1)
{
    const Data *d = g->d;
    const double *a = g->a, *b = g->b, inv_sigma = g->inv_sigma;
    double total = 0.0;
    for (Py_ssize_t i = r0; i < r1; i++) {
        const double ti = g->theta[i];
        double part = 0.0;
        if (d->y) {
            const int8_t *yi = d->y + i * d->j;
            _Pragma("omp simd reduction(+ : part)") for (Py_ssize_t k = 0; k < d->j; k++)
            {
                double w, softplus;
                KERNEL(entry64)(yi[k], ti * a[k] + b[k], inv_sigma, &w, &softplus);
                part += yi[k] != 0 ? softplus : 0.0;
            }
        } else {
            const int64_t start = d->indptr[i], length = d->indptr[i + 1] - start;
            const int32_t *cols = d->indices + start;
            const int8_t *vals = d->values + start;
            _Pragma("omp simd reduction(+ : part)") for (int64_t k = 0; k < length; k++)
            {
                double w, softplus;
                const int32_t c = cols[k];
                KERNEL(entry64)(vals[k], ti * a[c] + b[c], inv_sigma, &w, &softplus);
                part += softplus;
            }
        }
        total += part;
    }
    return total;
}

/* Loss (3) and its gradient over rows [r0, r1) (double precision; the
 * gradient methods need accurate line searches).  With
 * G_ij = -(y_ij / sigma) expit(z_ij): grad_theta_i = sum_j G_ij a_j is written,
 * G^T theta and G^T 1 are added into ga, gb; g_row is scratch of J doubles. */
static double KERNEL(gradient_rows)(const LossArgs *g, Py_ssize_t r0, Py_ssize_t r1, double *ga,
                                    double *gb, double *g_row)
{
    const Data *d = g->d;
    const double *a = g->a, *b = g->b, inv_sigma = g->inv_sigma;
    double total = 0.0;
    for (Py_ssize_t i = r0; i < r1; i++) {
        const double ti = g->theta[i];
        double part = 0.0, gt = 0.0;
        if (d->y) {
            const int8_t *yi = d->y + i * d->j;
            _Pragma("omp simd reduction(+ : part, gt)") for (Py_ssize_t k = 0; k < d->j; k++)
            {
                double w, softplus;
                KERNEL(entry64)(yi[k], ti * a[k] + b[k], inv_sigma, &w, &softplus);
                double gk = -w * inv_sigma;
                g_row[k] = gk;
                gt += gk * a[k];
                part += yi[k] != 0 ? softplus : 0.0;
            }
            _Pragma("omp simd") for (Py_ssize_t k = 0; k < d->j; k++)
            {
                ga[k] += ti * g_row[k];
                gb[k] += g_row[k];
            }
        } else {
            const int64_t start = d->indptr[i], length = d->indptr[i + 1] - start;
            const int32_t *cols = d->indices + start;
            const int8_t *vals = d->values + start;
            _Pragma("omp simd reduction(+ : part, gt)") for (int64_t k = 0; k < length; k++)
            {
                double w, softplus;
                const int32_t c = cols[k];
                KERNEL(entry64)(vals[k], ti * a[c] + b[c], inv_sigma, &w, &softplus);
                double gk = -w * inv_sigma;
                g_row[k] = gk;
                gt += gk * a[c];
                part += softplus;
            }
            for (int64_t k = 0; k < length; k++) { /* scatter: columns are distinct */
                ga[cols[k]] += ti * g_row[k];
                gb[cols[k]] += g_row[k];
            }
        }
        g->grad_theta[i] = gt;
        total += part;
    }
    return total;
}

/* Diagonal of the Fisher information of loss (3) over rows [r0, r1): with
 * q_ij = Phi(x_ij)(1 - Phi(x_ij)) / sigma^2 on Omega, sum_j a_j^2 q_ij is
 * written to g->grad_theta[i], sum_i theta_i^2 q_ij and sum_i q_ij are added
 * into ca, cb; q_row is scratch of J doubles. */
static void KERNEL(curvature_rows)(const LossArgs *g, Py_ssize_t r0, Py_ssize_t r1, double *ca,
                                   double *cb, double *q_row)
{
    const Data *d = g->d;
    const double *a = g->a, *b = g->b, inv_sigma = g->inv_sigma;
    const double inv_sigma2 = inv_sigma * inv_sigma;
    for (Py_ssize_t i = r0; i < r1; i++) {
        const double ti = g->theta[i], ti2 = ti * ti;
        double qa = 0.0;
        if (d->y) {
            const int8_t *yi = d->y + i * d->j;
            _Pragma("omp simd reduction(+ : qa)") for (Py_ssize_t k = 0; k < d->j; k++)
            {
                double w, softplus;
                KERNEL(entry64)(yi[k], ti * a[k] + b[k], inv_sigma, &w, &softplus);
                const double p = yi[k] * w; /* expit(z) for observed cells, 0 otherwise */
                const double q = p * (1.0 - p) * inv_sigma2;
                q_row[k] = q;
                qa += q * a[k] * a[k];
            }
            _Pragma("omp simd") for (Py_ssize_t k = 0; k < d->j; k++)
            {
                ca[k] += ti2 * q_row[k];
                cb[k] += q_row[k];
            }
        } else {
            const int64_t start = d->indptr[i], length = d->indptr[i + 1] - start;
            const int32_t *cols = d->indices + start;
            const int8_t *vals = d->values + start;
            _Pragma("omp simd reduction(+ : qa)") for (int64_t k = 0; k < length; k++)
            {
                double w, softplus;
                const int32_t c = cols[k];
                KERNEL(entry64)(vals[k], ti * a[c] + b[c], inv_sigma, &w, &softplus);
                const double p = vals[k] * w;
                const double q = p * (1.0 - p) * inv_sigma2;
                q_row[k] = q;
                qa += q * a[c] * a[c];
            }
            for (int64_t k = 0; k < length; k++) { /* scatter: columns are distinct */
                ca[cols[k]] += ti2 * q_row[k];
                cb[cols[k]] += q_row[k];
            }
        }
        g->grad_theta[i] = qa;
    }
}

/* Observed entries per column over rows [r0, r1) of a dense matrix, added
 * into counts; returns the number of entries outside {-1, 0, 1}.  Counts in
 * int32 (8 lanes) over blocks of rows, in double across blocks. */
static Py_ssize_t KERNEL(count_rows)(const Data *d, Py_ssize_t r0, Py_ssize_t r1, double *counts,
                                     int32_t *block)
{
    const Py_ssize_t j = d->j, block_rows = 1 << 20;
    Py_ssize_t bad = 0;
    for (Py_ssize_t b0 = r0; b0 < r1; b0 += block_rows) {
        const Py_ssize_t b1 = b0 + block_rows < r1 ? b0 + block_rows : r1;
        memset(block, 0, j * sizeof(int32_t));
        for (Py_ssize_t i = b0; i < b1; i++) {
            const int8_t *yi = d->y + i * j;
            int32_t row_bad = 0;
            _Pragma("omp simd reduction(+ : row_bad)") for (Py_ssize_t k = 0; k < j; k++)
            {
                block[k] += yi[k] != 0;
                row_bad += (uint8_t)(yi[k] + 1) > 2;
            }
            bad += row_bad;
        }
        for (Py_ssize_t k = 0; k < j; k++)
            counts[k] += block[k];
    }
    return bad;
}

/* The per-entry math over 1-D arrays (for the tests). */
static void KERNEL(elementwise64)(const int8_t *y, const double *x, double inv_sigma, double *w,
                                  double *softplus, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++)
        KERNEL(entry64)(y[k], x[k], inv_sigma, w + k, softplus + k);
}

static void KERNEL(elementwise32)(const int8_t *y, const float *x, float inv_sigma, float *w,
                                  float *softplus, Py_ssize_t n)
{
    for (Py_ssize_t k = 0; k < n; k++)
        KERNEL(entry32)(y[k], x[k], inv_sigma, w + k, softplus + k);
}

/* Leave-one-out scores of the candidate items [j0, j1) of a forward ridge
 * selection (cbmm/efficient/selection.py): item k's residual column r (n
 * doubles, contiguous) gives sum_i ((e_i - r_i g_k) / (keep_i - r_i^2 h_k))^2,
 * g = gain, h = 1 / pivot, keep = 1 - leverage.  With u (not NULL), each column
 * is first updated in place, r -= coef_k u (the last choice's rank-one update),
 * in the same pass. */
static void KERNEL(loo_scores)(double *residual, Py_ssize_t n, Py_ssize_t j0, Py_ssize_t j1,
                               const double *error, const double *keep, const double *gain,
                               const double *inv_pivot, const double *u, const double *coef,
                               double *out)
{
    for (Py_ssize_t k = j0; k < j1; k++) {
        double *r = residual + k * n;
        const double g = gain[k], h = inv_pivot[k], c = u ? coef[k] : 0.0;
        double score = 0.0;
        if (c != 0.0) {
            _Pragma("omp simd reduction(+ : score)") for (Py_ssize_t i = 0; i < n; i++)
            {
                const double ri = r[i] - c * u[i];
                const double loo = (error[i] - ri * g) / (keep[i] - ri * ri * h);
                r[i] = ri;
                score += loo * loo;
            }
        } else {
            _Pragma("omp simd reduction(+ : score)") for (Py_ssize_t i = 0; i < n; i++)
            {
                const double loo = (error[i] - r[i] * g) / (keep[i] - r[i] * r[i] * h);
                score += loo * loo;
            }
        }
        out[k] = score;
    }
}

static const Kernels KERNEL(kernels) = {
    KERNEL(mm_rows64),     KERNEL(mm_rows32),     KERNEL(loss_rows),
    KERNEL(gradient_rows), KERNEL(curvature_rows), KERNEL(count_rows),
    KERNEL(elementwise64), KERNEL(elementwise32), KERNEL(loo_scores)};
