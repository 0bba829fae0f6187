/*
 * One cBMM pass over rows [r0, r1), per-entry math in REAL (double or float),
 * sums in double; included by _fused_kernels.h once per precision with
 * REAL, MM_ROWS, ENTRY and EXPIT defined.  Runs at sigma = 1 (the solver
 * rescales a and b by 1/sigma; cBMM is equivariant under that).
 *
 * Per row i (m->update set):
 *   1. w_ij = y_ij expit(-y_ij x_ij) at the current point x_ij = theta_i a_j + b_j
 *      gives sum_j w_ij a'_j; with the observed-set sums of a'_j a_j,
 *      a'_j (b_j - b'_j) and a'_j^2 the theta-step is
 *      theta'_i = (theta_i sum a'a + sum a'(b - b') + 4 sum w a') / sum a'^2
 *      (theta_i kept when sum a'^2 = 0); m->ridge, 4 x the precision of a normal
 *      prior on theta, is added to the denominator (the MAP theta-step);
 *   2. at the new point x'_ij = theta'_i a'_j + b'_j: the loss terms and
 *      w'_ij, added into the column statistics of the next iteration:
 *      acc[0] += theta'_i w'_ij, acc[1] += w'_ij and, on a matrix with missing
 *      entries, acc[2] += theta'_i, acc[3] += theta'_i^2 over observed cells.
 * Without m->update, step 1 is skipped (theta'_i = theta_i, and the point is
 * (a_eval, b_eval)).  totals[0], totals[1] receive sum theta'_i and
 * sum theta'_i^2 over the rows; m->row_sums, when set, sum_j w'_ij a_eval_j.
 * Returns the loss over the rows.
 */
static double MM_ROWS(const MMArgs *m, Py_ssize_t r0, Py_ssize_t r1, double *acc, REAL *row,
                      double *totals)
{
    const Data *d = m->d;
    const Py_ssize_t j = d->j;
    const REAL *a_old = m->a_old, *b_old = m->b_old;
    const REAL *a_eval = m->a_eval, *b_eval = m->b_eval;
    const double *a_new = m->a_new, *pa = m->pa, *pb = m->pb, *p2 = m->p2;
    /* acc holds 4 J-vectors on a matrix that may miss cells, else 2 */
    double *wt = acc, *ws = acc + j;
    double *ct = m->masked ? acc + 2 * j : NULL, *ctt = m->masked ? acc + 3 * j : NULL;
    double total = 0.0, sum_t = 0.0, sum_tt = 0.0;
    for (Py_ssize_t i = r0; i < r1; i++) {
        const double ti = m->theta[i];
        double tn = ti, part = 0.0;
        if (d->y) {
            const int8_t *yi = d->y + i * j;
            if (m->update) {
                const REAL tr = (REAL)ti;
                double wa = 0.0, aa = m->aa_full, ba = m->ba_full, a2 = m->a2_full;
                _Pragma("omp simd reduction(+ : wa)") for (Py_ssize_t k = 0; k < j; k++)
                    wa += (double)EXPIT(yi[k], tr * a_old[k] + b_old[k]) * a_new[k];
                if (m->masked) {
                    aa = ba = a2 = 0.0;
                    _Pragma("omp simd reduction(+ : aa, ba, a2)") for (Py_ssize_t k = 0; k < j; k++)
                    {
                        const double o = yi[k] != 0 ? 1.0 : 0.0;
                        aa += o * pa[k];
                        ba += o * pb[k];
                        a2 += o * p2[k];
                    }
                }
                tn = a2 + m->ridge > 0.0 ? (ti * aa + ba + 4.0 * wa) / (a2 + m->ridge) : ti;
                m->theta_out[i] = tn;
            }
            const REAL tr = (REAL)tn;
            _Pragma("omp simd reduction(+ : part)") for (Py_ssize_t k = 0; k < j; k++)
            {
                REAL w, softplus;
                ENTRY(yi[k], tr * a_eval[k] + b_eval[k], (REAL)1, &w, &softplus);
                row[k] = w;
                part += yi[k] != 0 ? (double)softplus : 0.0;
            }
            _Pragma("omp simd") for (Py_ssize_t k = 0; k < j; k++)
            {
                const double wk = (double)row[k];
                wt[k] += tn * wk;
                ws[k] += wk;
            }
            if (m->row_sums) {
                double rs = 0.0;
                _Pragma("omp simd reduction(+ : rs)") for (Py_ssize_t k = 0; k < j; k++)
                    rs += (double)row[k] * (double)a_eval[k];
                m->row_sums[i] = rs;
            }
            if (m->masked) {
                const double tn2 = tn * tn;
                _Pragma("omp simd") for (Py_ssize_t k = 0; k < j; k++)
                {
                    const double o = yi[k] != 0 ? 1.0 : 0.0;
                    ct[k] += o * tn;
                    ctt[k] += o * tn2;
                }
            }
        } else {
            const int64_t start = d->indptr[i], length = d->indptr[i + 1] - start;
            const int32_t *cols = d->indices + start;
            const int8_t *vals = d->values + start;
            if (m->update) {
                const REAL tr = (REAL)ti;
                double wa = 0.0, aa = 0.0, ba = 0.0, a2 = 0.0;
                _Pragma("omp simd reduction(+ : wa, aa, ba, a2)") for (int64_t k = 0; k < length; k++)
                {
                    const int32_t c = cols[k];
                    wa += (double)EXPIT(vals[k], tr * a_old[c] + b_old[c]) * a_new[c];
                    aa += pa[c];
                    ba += pb[c];
                    a2 += p2[c];
                }
                tn = a2 + m->ridge > 0.0 ? (ti * aa + ba + 4.0 * wa) / (a2 + m->ridge) : ti;
                m->theta_out[i] = tn;
            }
            const REAL tr = (REAL)tn;
            _Pragma("omp simd reduction(+ : part)") for (int64_t k = 0; k < length; k++)
            {
                REAL w, softplus;
                const int32_t c = cols[k];
                ENTRY(vals[k], tr * a_eval[c] + b_eval[c], (REAL)1, &w, &softplus);
                row[k] = w;
                part += (double)softplus;
            }
            if (m->row_sums) {
                double rs = 0.0;
                _Pragma("omp simd reduction(+ : rs)") for (int64_t k = 0; k < length; k++)
                    rs += (double)row[k] * (double)a_eval[cols[k]];
                m->row_sums[i] = rs;
            }
            const double tn2 = tn * tn;
            for (int64_t k = 0; k < length; k++) { /* scatter: columns are distinct */
                const int32_t c = cols[k];
                const double wk = (double)row[k];
                wt[c] += tn * wk;
                ws[c] += wk;
                ct[c] += tn;
                ctt[c] += tn2;
            }
        }
        total += part;
        sum_t += tn;
        sum_tt += tn * tn;
    }
    totals[0] = sum_t;
    totals[1] = sum_tt;
    return total;
}
