"""cBMM iteration: MM property, KKT conditions, agreement of the engines, and
the paper's full-matrix formulas."""

import warnings

import numpy as np
import pytest
from scipy.special import expit

from cbmm import Responses, _fused, initial_values, loss, loss_and_gradient, model
from cbmm.mm import MMOperator, mm_step_numpy
from cbmm.solver import solve_cbmm


def draw(n, j, seed=0, missing=0.0, sigma=1.0):
    rng = np.random.default_rng(seed)
    theta, a, b = rng.standard_normal(n), rng.uniform(0.5, 1, j), rng.normal(0, 0.5, j)
    y = np.where(rng.random((n, j)) < expit((np.outer(theta, a) + b) / sigma), 1, -1)
    y[rng.random((n, j)) < missing] = 0
    y[:, (y == 0).all(axis=0)] = 1  # keep every column observed
    return y.astype(np.int8)


def paper_full_matrix_step(y, theta, a, b, sigma):
    """Algorithm 1, lines 4-9, written with dense matrices (no missing entries)."""
    x = np.outer(theta, a) + b
    y_tilde = x + 4 * sigma * y * expit(-y * x / sigma)
    r = y_tilde - b[None, :]
    a_new = np.maximum(0.0, r.T @ theta / (theta @ theta))
    b_new = (y_tilde - np.outer(theta, a_new)).T @ np.ones(len(theta)) / len(theta)
    theta_new = (y_tilde - b_new[None, :]) @ a_new / (a_new @ a_new)
    return theta_new, a_new, b_new


@pytest.mark.parametrize("sigma", [1.0, 0.3, 1e-50, 1e38])
def test_masked_updates_equal_paper_formulas_when_fully_observed(sigma):
    y = draw(40, 25, seed=1, sigma=sigma)
    theta, a, b = initial_values(40, 25, seed=3, sigma=sigma)
    expected = paper_full_matrix_step(y, theta, a, b, sigma)
    value, *got = mm_step_numpy(y, theta, a, b, sigma)
    assert value == pytest.approx(loss(theta, a, b, y, sigma), rel=1e-12)
    scales = (1.0, sigma, sigma)  # a and b carry sigma's scale
    for g, e, scale in zip(got, expected, scales):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12 * scale)
    for precision in ("float64", "float32"):  # the fused engine's first iterate
        fused = solve_cbmm(y, theta, a, b, sigma=sigma, tol=1e-300, max_iter=1,
                           precision=precision)
        for g, e, scale in zip((fused.theta, fused.a, fused.b), expected, scales):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5 * scale)


def test_masked_a_step_is_the_nnls_minimiser_over_observed_rows():
    y = draw(30, 12, seed=2, missing=0.4)
    theta, a, b = initial_values(30, 12, seed=5)
    sigma = 1.0
    x = np.outer(theta, a) + b
    y_tilde = x + 4 * sigma * y * expit(-y * x / sigma)
    _, _, a_new, _ = mm_step_numpy(y, theta, a, b, sigma)
    for j in range(12):
        obs = y[:, j] != 0
        residual = y_tilde[obs, j] - b[j]
        grid = np.linspace(0, 3, 30001)
        objective = ((theta[obs, None] * grid[None, :] - residual[:, None]) ** 2).sum(axis=0)
        assert abs(a_new[j] - grid[np.argmin(objective)]) <= 1e-4


@pytest.mark.parametrize("missing", [0.0, 0.6])
@pytest.mark.parametrize("engine,precision", [("numpy", "float64"), ("fused", "float64")])
def test_loss_never_increases(missing, engine, precision):
    y = draw(120, 80, seed=4, missing=missing)
    theta, a, b = initial_values(120, 80, seed=0, init_scale=3.0)
    out = solve_cbmm(y, theta, a, b, tol=1e-12, max_iter=300, engine=engine,
                     precision=precision)
    history = np.array(out.loss_history)
    assert len(history) > 50
    assert np.all(np.diff(history) <= 1e-9 * history[:-1])


def test_loss_decreases_on_random_unstructured_data():
    rng = np.random.default_rng(9)
    y = np.where(rng.random((60, 50)) < 0.5, 1, -1).astype(np.int8)
    y[rng.random(y.shape) < 0.3] = 0
    theta, a, b = initial_values(60, 50, seed=1)
    out = solve_cbmm(y, theta, a, b, tol=1e-12, max_iter=200, precision="float64")
    assert np.all(np.diff(out.loss_history) <= 1e-9 * np.array(out.loss_history[:-1]))


def finite_difference_gradient(f, x, h=1e-6):
    grad = np.empty_like(x)
    for k in range(x.size):
        step = np.zeros_like(x)
        step[k] = h
        grad[k] = (f(x + step) - f(x - step)) / (2 * h)
    return grad


def test_gradient_matches_finite_differences():
    y = draw(15, 10, seed=6, missing=0.3)
    theta, a, b = initial_values(15, 10, seed=2)
    sigma = 0.7
    _, g_theta, g_a, g_b = loss_and_gradient(theta, a, b, y, sigma)
    np.testing.assert_allclose(
        g_theta, finite_difference_gradient(lambda t: loss(t, a, b, y, sigma), theta),
        rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        g_a, finite_difference_gradient(lambda v: loss(theta, v, b, y, sigma), a),
        rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        g_b, finite_difference_gradient(lambda v: loss(theta, a, v, y, sigma), b),
        rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("engine", ["numpy", "fused"])
def test_kkt_conditions_at_convergence(engine):
    y = draw(150, 60, seed=7, missing=0.2)
    # two items carry no signal, so their a should sit on the bound a = 0
    rng = np.random.default_rng(0)
    y[:, :2] = np.where(rng.random((150, 2)) < 0.5, 1, -1) * (y[:, :2] != 0)
    theta, a, b = initial_values(150, 60, seed=1)
    out = solve_cbmm(y, theta, a, b, tol=1e-10, max_iter=200000, engine=engine,
                     precision="float64", accelerate="squarem")
    assert out.status == "converged"
    _, g_theta, g_a, g_b = loss_and_gradient(out.theta, out.a, out.b, y)
    scale = np.abs(y).sum()  # gradient entries are sums of O(1) terms
    assert np.all(out.a >= 0)
    assert np.max(np.abs(g_theta)) < 1e-4 * np.sqrt(scale)
    assert np.max(np.abs(g_b)) < 1e-4 * np.sqrt(scale)
    assert np.all(g_a > -1e-4 * np.sqrt(scale))
    assert np.max(np.abs(out.a * g_a)) < 1e-4 * np.sqrt(scale)
    assert np.any(out.a == 0)  # the constraint is active somewhere


def csr(y):
    """The CSR storage of a dense +-1/0 matrix, built with plain NumPy."""
    rows, cols = np.nonzero(y)
    indptr = np.zeros(y.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=y.shape[0]), out=indptr[1:])
    return Responses(None, indptr=indptr, indices=cols.astype(np.int32),
                     values=y[rows, cols].astype(np.int8), n_items=y.shape[1])


@pytest.mark.parametrize("precision,rtol", [("float64", 1e-12), ("float32", 1e-6)])
@pytest.mark.parametrize("missing", [0.0, 0.5])
@pytest.mark.parametrize("storage", ["dense", "sparse"])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_fused_engine_agrees_with_numpy_reference(precision, rtol, missing, storage, threads):
    y = draw(90, 70, seed=8, missing=missing)
    theta, a, b = initial_values(90, 70, seed=4, init_scale=2.0)
    reference = MMOperator(y, engine="numpy")
    fused = MMOperator(y if storage == "dense" else csr(y), engine="fused", precision=precision,
                       threads=threads)
    assert fused.n_threads == threads
    assert fused.evaluate(theta, a, b) == pytest.approx(reference.evaluate(theta, a, b), rel=rtol)
    for _ in range(6):
        assert fused.update() == pytest.approx(reference.update(), rel=rtol)
        for got, expected in zip(fused.point, reference.point):
            np.testing.assert_allclose(got, expected, rtol=1e3 * rtol, atol=1e3 * rtol)
        fused.evaluate(*reference.point)  # compare single steps from the same point
    assert fused.precision == precision


@pytest.mark.parametrize("missing", [0.0, 0.4])
def test_loss_and_gradient_of_sparse_storage_equal_the_dense_ones(missing):
    y = draw(70, 45, seed=14, missing=missing)
    theta, a, b = initial_values(70, 45, seed=2)
    dense = loss_and_gradient(theta, a, b, y, 0.8)
    sparse = loss_and_gradient(theta, a, b, csr(y), 0.8)
    assert sparse[0] == pytest.approx(dense[0], rel=1e-13)
    for got, expected in zip(sparse[1:], dense[1:]):
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-13)
    # and both equal the plain formula
    x = np.outer(theta, a) + b
    z = -y * x / 0.8
    assert dense[0] == pytest.approx(np.sum(np.logaddexp(0.0, z) * (y != 0)), rel=1e-13)


def test_sparse_fit_equals_dense_fit_with_missing_cells():
    y = draw(300, 120, seed=15, missing=0.9)
    theta, a, b = initial_values(300, 120, seed=0)
    dense = solve_cbmm(y, theta, a, b, tol=1e-10, max_iter=300, precision="float64")
    sparse = solve_cbmm(csr(y), theta, a, b, tol=1e-10, max_iter=300, precision="float64")
    assert sparse.n_iter == dense.n_iter
    np.testing.assert_allclose(sparse.loss_history, dense.loss_history, rtol=1e-12)
    for got, expected in zip((sparse.theta, sparse.a, sparse.b), (dense.theta, dense.a, dense.b)):
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 2e-15), (np.float32, 5e-7)])
def test_elementwise_exp_log1p_accuracy(dtype, rtol):
    x = np.concatenate([np.linspace(-45, 45, 20001), [0.0, 1e-9, -1e-9]]).astype(dtype)
    for sign in (1, -1):
        y = np.full(x.shape, sign, dtype=np.int8)
        w, softplus = np.empty_like(x), np.empty_like(x)
        _fused.elementwise(y, x, 1.0, w, softplus)
        z = -sign * x.astype(np.float64)
        np.testing.assert_allclose(w, sign * expit(z), rtol=rtol, atol=5e-18)
        np.testing.assert_allclose(softplus, np.logaddexp(0.0, z), rtol=rtol, atol=5e-18)


def test_numpy_expit_equals_scipys_to_rounding_without_overflow_warnings():
    x = np.concatenate([np.random.default_rng(0).standard_normal(100_000) * 30,
                        [0.0, -0.0, 36.0, -36.0, 709.0, -709.0, -710.0, -745.0, -800.0,
                         800.0, np.inf, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = model.expit(x)
    np.testing.assert_allclose(got, expit(x), rtol=4 * np.finfo(float).eps, atol=0)
    assert np.isnan(model.expit(np.nan))
    assert model.expit(np.float32([1.0, -2.0])).dtype == np.float32


def test_items_with_zero_discrimination_or_no_signal_give_finite_values():
    y = draw(50, 20, seed=10)
    y[:, 0] = 1  # all-correct item: b_0 drifts upward, a_0 -> 0
    theta, a, b = initial_values(50, 20, seed=0)
    a[3] = 0.0
    for engine in ("numpy", "fused"):
        out = solve_cbmm(y, theta, a, b, tol=1e-8, max_iter=500, engine=engine)
        assert np.isfinite(out.theta).all() and np.isfinite(out.a).all()
        assert np.isfinite(out.b).all()


def test_squarem_reaches_a_lower_loss_with_fewer_sweeps():
    y = draw(300, 200, seed=11)
    theta, a, b = initial_values(300, 200, seed=0)
    plain = solve_cbmm(y, theta, a, b, tol=1e-9, max_iter=20000, precision="float64")
    fast = solve_cbmm(y, theta, a, b, tol=1e-9, max_iter=20000, precision="float64",
                      accelerate="squarem")
    assert fast.status == "converged"
    assert fast.loss_history[-1] <= plain.loss_history[-1] * (1 + 1e-9)
    assert fast.n_iter < plain.n_iter
    assert np.all(np.diff(fast.loss_history) <= 1e-9 * np.array(fast.loss_history[:-1]))


def test_max_iter_and_history_bookkeeping():
    y = draw(40, 30, seed=12)
    theta, a, b = initial_values(40, 30, seed=0)
    out = solve_cbmm(y, theta, a, b, tol=1e-15, max_iter=7, precision="float64")
    assert out.status == "max_iter"
    assert out.n_iter == 7
    assert len(out.loss_history) == 8  # the start and after each iteration
    assert out.loss_history[-1] == pytest.approx(loss(out.theta, out.a, out.b, y), rel=1e-12)
    # accelerated: SQUAREM's cycles of two MM maps end with one where one is left
    for accelerate in ("squarem", "auto"):
        for max_iter in (1, 2, 7):
            out = solve_cbmm(y, theta, a, b, tol=1e-15, max_iter=max_iter,
                             precision="float64", accelerate=accelerate)
            assert (out.status, out.n_iter) == ("max_iter", max_iter), accelerate
            assert out.loss_history[-1] == pytest.approx(loss(out.theta, out.a, out.b, y),
                                                         rel=1e-6)


def numpy_gradient(theta, a, b, y, sigma):
    """Loss (3) and its gradient from the plain dense formulas."""
    x = np.outer(theta, a) + b
    z = -y * x / sigma
    g = -(y / sigma) * expit(z)
    return np.sum(np.logaddexp(0.0, z) * (y != 0)), g @ a, g.T @ theta, g.sum(axis=0)


@pytest.mark.parametrize("storage", ["dense", "sparse"])
@pytest.mark.parametrize("sigma", [1.0, 0.25, 1e-30])
def test_loss_and_stationarity_match_the_dense_formulas(storage, sigma):
    from cbmm.model import loss_and_stationarity, stationarity

    y = draw(50, 30, seed=16, missing=0.3)
    start = initial_values(50, 30, seed=1, sigma=sigma)
    out = solve_cbmm(y, *start, sigma=sigma, tol=1e-6, max_iter=50, precision="float64")
    a_end = out.a.copy()
    a_end[:3] = 0.0  # some components on the bound a = 0
    point = (out.theta, a_end, out.b)

    def norm(theta, a, b):
        _, g_theta, g_a, g_b = numpy_gradient(theta, a, b, y, sigma)
        g_a, g_b = g_a * sigma, g_b * sigma  # gradient in (theta, a / sigma, b / sigma)
        g_a = np.where((a <= 0) & (g_a > 0), 0.0, g_a)
        return np.sqrt(g_theta @ g_theta + g_a @ g_a + g_b @ g_b)

    responses = y if storage == "dense" else csr(y)
    value, reached = loss_and_stationarity(*point, start, responses, sigma)
    assert value == pytest.approx(numpy_gradient(*point, y, sigma)[0], rel=1e-12)
    assert reached == pytest.approx(norm(*point) / norm(*start), rel=1e-5)
    assert stationarity(*point, start, responses, sigma) == reached


@pytest.mark.parametrize("accelerate", ["none", "squarem", "auto"])
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_solver_reports_the_start_reference_of_the_stationarity_measure(accelerate, precision):
    from cbmm.model import projected_gradient_norm
    from cbmm.result import canonicalize

    y = draw(60, 40, seed=17, missing=0.2)
    sigma = 0.6
    start = initial_values(60, 40, seed=3, sigma=sigma)
    out = solve_cbmm(y, *start, sigma=sigma, tol=1e-3, precision=precision,
                     accelerate=accelerate)
    expected = projected_gradient_norm(*canonicalize(*start), y, sigma)  # float64
    assert out.info["stationarity_reference"] == pytest.approx(expected, rel=1e-6)


def _loss_data():
    rng = np.random.default_rng(0)
    y = np.where(rng.random((12, 7)) < 0.5, 1, -1).astype(np.int8)
    return y, rng.normal(size=12), rng.uniform(0.5, 2, 7), rng.normal(size=7)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_nan_parameter_gives_nan(which):
    y, *point = _loss_data()
    point[which] = point[which].copy()
    point[which][0] = np.nan
    assert np.isnan(loss(*point, y))
    value, *grads = loss_and_gradient(*point, y)
    assert np.isnan(value) and all(np.isnan(g).all() for g in grads)


def test_finite_parameters_unchanged():
    y, theta, a, b = _loss_data()
    x = np.outer(theta, a) + b
    expected = np.logaddexp(0, -y * x).sum()
    assert loss(theta, a, b, y) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("sigma", [0, -1.0, True, float("nan")])
def test_bad_sigma_is_a_value_error(sigma):
    y, theta, a, b = _loss_data()
    with pytest.raises(ValueError, match="sigma"):
        loss(theta, a, b, y, sigma=sigma)
    with pytest.raises(ValueError, match="sigma"):
        loss_and_gradient(theta, a, b, y, sigma=sigma)


def test_an_int8_array_outside_the_pm1_coding_is_refused():
    y, theta, a, b = _loss_data()
    y[3, 2] = 5   # a count, or 0/1 answers read as +-1/0 would be silently wrong elsewhere
    with pytest.raises(ValueError, match=r"value 5 at row 3, column 2; .*cbmm.as_responses"):
        loss(theta, a, b, y)
