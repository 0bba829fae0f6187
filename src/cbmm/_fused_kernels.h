/*
 * Kernels of cbmm._fused, included twice by _fused.c: once compiled for
 * AVX2 + FMA and once for the baseline target, with KERNEL(name) giving each
 * copy its own names.  See _fused.c for what they compute.
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

/* w = y expit(z) and softplus(z) for z = -y x inv_sigma (double). */
static inline void KERNEL(entry64)(int8_t y, double x, double inv_sigma, double *w, double *softplus)
{
    double yk = (double)y;
    double z = -yk * x * inv_sigma;
    double t = fabs(z);
    t = t < T_MAX ? t : T_MAX;
    double kf = floor(t * 1.4426950408889634 + 0.5);
    double r = -(t - kf * 6.93147180369123816490e-01 - kf * 1.90821492927058770002e-10);
    /* via int32: AVX2 has no double -> int64 vector conversion */
    int64_t bits = (int64_t)(1023 - (int32_t)kf) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    double e = KERNEL(estrin16)(r, EXP64) * scale;
    double d = 1.0 / ((1.0 + e) * (2.0 + e)); /* one division: 1/(1+e) and e/(2+e) */
    double inv = (2.0 + e) * d;
    double s = e * (1.0 + e) * d;
    *w = yk * (z >= 0.0 ? inv : e * inv);
    *softplus = (z > 0.0 ? z : 0.0) + 2.0 * s * KERNEL(estrin16)(s * s, LOG64);
}

/* The same in single precision. */
static inline void KERNEL(entry32)(int8_t y, float x, float inv_sigma, float *w, float *softplus)
{
    float yk = (float)y;
    float z = -yk * x * inv_sigma;
    float t = fabsf(z);
    t = t < (float)T_MAX ? t : (float)T_MAX;
    float kf = floorf(t * 1.44269504f + 0.5f);
    float r = -(t - kf * 0.693145751953125f - kf * 1.428606765330187045e-06f);
    int32_t bits = (int32_t)(127 - (int32_t)kf) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    float e = KERNEL(estrin8)(r, EXP32) * scale;
    float d = 1.0f / ((1.0f + e) * (2.0f + e));
    float inv = (2.0f + e) * d;
    float s = e * (1.0f + e) * d;
    *w = yk * (z >= 0.0f ? inv : e * inv);
    *softplus = (z > 0.0f ? z : 0.0f) + 2.0f * s * KERNEL(estrin8)(s * s, LOG32);
}

/* Column pass over rows [r0, r1): returns the loss over those rows, writes W
 * and adds W^T theta and W^T 1 into wt, ws.  Two simple loops per row so
 * each vectorises on its own. */
#undef DEFINE_COLUMN_ROWS
#define DEFINE_COLUMN_ROWS(NAME, T, ENTRY)                                                    \
    static double NAME(const int8_t *y, Py_ssize_t j, Py_ssize_t r0,             \
                                    Py_ssize_t r1, const T *theta, const T *a, const T *b,    \
                                    T inv_sigma, float *w_store, double *wt, double *ws)      \
    {                                                                                         \
        double total = 0.0;                                                                   \
        for (Py_ssize_t i = r0; i < r1; i++) {                                                \
            const int8_t *row = y + i * j;                                                    \
            float *out = w_store + i * j;                                                     \
            const T ti = theta[i];                                                            \
            double part = 0.0;                                                                \
            _Pragma("omp simd reduction(+ : part)") for (Py_ssize_t k = 0; k < j; k++)        \
            {                                                                                 \
                T w, softplus;                                                                \
                ENTRY(row[k], ti * a[k] + b[k], inv_sigma, &w, &softplus);                    \
                out[k] = (float)w;                                                            \
                part += row[k] != 0 ? (double)softplus : 0.0;                                 \
            }                                                                                 \
            total += part;                                                                    \
            const double t64 = (double)ti;                                                    \
            _Pragma("omp simd") for (Py_ssize_t k = 0; k < j; k++)                            \
            {                                                                                 \
                double wk = (double)out[k];                                                   \
                wt[k] += t64 * wk;                                                            \
                ws[k] += wk;                                                                  \
            }                                                                                 \
        }                                                                                     \
        return total;                                                                         \
    }

DEFINE_COLUMN_ROWS(KERNEL(column_rows64), double, KERNEL(entry64))
DEFINE_COLUMN_ROWS(KERNEL(column_rows32), float, KERNEL(entry32))

/* Observed-set column statistics n_j, sum theta_i, sum theta_i^2 over rows [r0, r1). */
static void KERNEL(mask_rows)(const int8_t *y, Py_ssize_t j, Py_ssize_t r0, Py_ssize_t r1,
                                   const double *theta, double *cn, double *ct, double *ctt)
{
    for (Py_ssize_t i = r0; i < r1; i++) {
        const int8_t *row = y + i * j;
        const double ti = theta[i];
        _Pragma("omp simd") for (Py_ssize_t k = 0; k < j; k++)
        {
            double m = row[k] != 0 ? 1.0 : 0.0;
            cn[k] += m;
            ct[k] += m * ti;
            ctt[k] += m * ti * ti;
        }
    }
}

/* theta-step for rows [r0, r1). */
static void KERNEL(theta_rows)(const int8_t *y, const float *w_store, Py_ssize_t j,
                                    Py_ssize_t r0, Py_ssize_t r1, const double *theta,
                                    const double *a, const double *b, const double *a_new,
                                    const double *b_new, double four_sigma, int masked,
                                    double aa_full, double ba_full, double a2_full,
                                    double *theta_out)
{
    for (Py_ssize_t i = r0; i < r1; i++) {
        const float *w = w_store + i * j;
        double wa = 0.0, aa = aa_full, ba = ba_full, a2 = a2_full;
        _Pragma("omp simd reduction(+ : wa)") for (Py_ssize_t k = 0; k < j; k++)
            wa += (double)w[k] * a_new[k];
        if (masked) {
            const int8_t *row = y + i * j;
            aa = ba = a2 = 0.0;
            _Pragma("omp simd reduction(+ : aa, ba, a2)") for (Py_ssize_t k = 0; k < j; k++)
            {
                double m = row[k] != 0 ? a_new[k] : 0.0;
                aa += m * a[k];
                ba += m * (b[k] - b_new[k]);
                a2 += m * a_new[k];
            }
        }
        theta_out[i] = a2 > 0.0 ? (theta[i] * aa + ba + four_sigma * wa) / a2 : theta[i];
    }
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

/* Loss (3) and its gradient over rows [r0, r1) (double precision; the
 * gradient baselines need accurate line searches).  With
 * G_ij = -(y_ij / sigma) expit(z_ij): grad_theta_i = sum_j G_ij a_j is written,
 * G^T theta and G^T 1 are added into ga, gb; g_row is a J-vector of scratch. */
static double KERNEL(gradient_rows)(const int8_t *y, Py_ssize_t j, Py_ssize_t r0, Py_ssize_t r1,
                                    const double *theta, const double *a, const double *b,
                                    double inv_sigma, double *g_row, double *grad_theta,
                                    double *ga, double *gb)
{
    double total = 0.0;
    for (Py_ssize_t i = r0; i < r1; i++) {
        const int8_t *row = y + i * j;
        const double ti = theta[i];
        double part = 0.0, gt = 0.0;
        _Pragma("omp simd reduction(+ : part, gt)") for (Py_ssize_t k = 0; k < j; k++)
        {
            double w, softplus;
            KERNEL(entry64)(row[k], ti * a[k] + b[k], inv_sigma, &w, &softplus);
            double g = -w * inv_sigma;
            g_row[k] = g;
            gt += g * a[k];
            part += row[k] != 0 ? softplus : 0.0;
        }
        grad_theta[i] = gt;
        total += part;
        _Pragma("omp simd") for (Py_ssize_t k = 0; k < j; k++)
        {
            ga[k] += ti * g_row[k];
            gb[k] += g_row[k];
        }
    }
    return total;
}
