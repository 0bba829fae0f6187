"""The fused engine: threads and forking, temperature and precision handling."""

import math
import os
import signal
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import cbmm
from cbmm import initial_values
from cbmm.simulate import simulate
from cbmm.engine import available_cores
from cbmm.solver import solve_cbmm

FORK_AFTER_THREADED_FIT = textwrap.dedent("""
    import os, sys
    import numpy as np
    from cbmm import initial_values
    from cbmm.solver import solve_cbmm

    rng = np.random.default_rng(0)
    y = np.where(rng.random((2000, 1000)) < 0.5, 1, -1).astype(np.int8)
    start = initial_values(2000, 1000)
    parent = solve_cbmm(y, *start, max_iter=3, threads=2)
    assert parent.info["threads"] == 2, parent.info
    pid = os.fork()
    if pid == 0:
        child = solve_cbmm(y, *start, max_iter=3, threads=2)
        same = child.loss_history == parent.loss_history
        os._exit(0 if same else 3)
    _, status = os.waitpid(pid, 0)
    sys.exit(os.waitstatus_to_exitcode(status))
""")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_fits_after_a_multithreaded_fit_in_the_parent():
    # An OpenMP runtime's idle thread pool made the child hang here; the
    # engine's per-pass threads leave nothing behind.  A hang fails the test
    # (the process group is killed) instead of blocking the suite.
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen([sys.executable, "-c", FORK_AFTER_THREADED_FIT], env=env,
                               start_new_session=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("the forked child hung after a multi-threaded fit in the parent")
    assert process.returncode == 0, output


def test_available_cores_honours_the_environment(monkeypatch):
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    monkeypatch.delenv("CBMM_NUM_THREADS", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert available_cores() == 1
    monkeypatch.setenv("CBMM_NUM_THREADS", "3")  # the specific setting wins over OMP's
    assert available_cores() == min(3, affinity or 3)
    monkeypatch.setenv("CBMM_NUM_THREADS", "junk")
    assert available_cores() == 1
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.delenv("CBMM_NUM_THREADS")
    if affinity is not None:
        assert available_cores() == affinity


# ---------------------------------------------------------------------------
# Temperature: every engine runs at sigma = 1 on (theta, a / sigma, b / sigma)
# ---------------------------------------------------------------------------

EXTREME_SIGMAS = [1e-50, 1e-40, 1e-6, 1.0, 1e6, 1e38]


@pytest.fixture(scope="module")
def small_simulation():
    return simulate(200, 100, seed=3)


@pytest.mark.parametrize("sigma", EXTREME_SIGMAS)
def test_fit_at_extreme_sigma_agrees_with_the_float64_numpy_engine(small_simulation, sigma):
    # Before the rescaling the float32 passes saw 1/sigma itself: at 1e-50 they
    # reported "converged" with a loss 23 % too high, at 1e-40 a failure.
    paper = cbmm.paper_settings("cbmm")
    fused = cbmm.fit(small_simulation.responses, sigma=sigma, **paper)
    reference = cbmm.fit(small_simulation.responses, sigma=sigma, engine="numpy", **paper)
    assert fused.info["precision"] == "float32"
    assert fused.status == reference.status
    assert fused.n_iter == reference.n_iter
    assert fused.loss == pytest.approx(reference.loss, rel=1e-7)
    # the C float64 loss at sigma's own scale equals NumPy's at sigma = 1
    assert reference.loss == pytest.approx(reference.loss_history[-1], rel=1e-12)
    assert np.isfinite(fused.info["stationarity"])


@pytest.mark.parametrize("sigma", [1e-310, 1e301, math.inf, math.nan, 0.0, -1.0])
def test_fit_refuses_a_sigma_outside_the_documented_range(sigma):
    with pytest.raises(ValueError, match=r"sigma must be a number in \[1e-300, 1e\+300\]"):
        cbmm.fit(np.eye(3), sigma=sigma)


def test_unsafe_float32_magnitudes_switch_the_fit_to_float64():
    y = np.where(np.random.default_rng(1).random((60, 40)) < 0.5, 1, -1).astype(np.int8)
    theta, a, b = initial_values(60, 40, seed=0)
    # a start whose scores overflow float32 (|x| ~ 1e40)
    wild = solve_cbmm(y, theta, a * 1e40, b, tol=1e-4, max_iter=5, precision="float32")
    exact = solve_cbmm(y, theta, a * 1e40, b, tol=1e-4, max_iter=5, precision="float64")
    assert wild.info["precision"] == "float32->float64"
    assert wild.info["float64_from_iteration"] == 0
    np.testing.assert_allclose(wild.loss_history, exact.loss_history, rtol=1e-12)


# ---------------------------------------------------------------------------
# The private C entry points check every argument: errors, never a crash
# ---------------------------------------------------------------------------

def _csr_parts(y):
    rows, cols = np.nonzero(y)
    indptr = np.zeros(y.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=y.shape[0]), out=indptr[1:])
    return indptr, cols.astype(np.int32), y[rows, cols].astype(np.int8)


BAD_STORAGE = [
    ((), TypeError),
    ((np.zeros((0, 3), np.int8),), ValueError),
    ((np.zeros(5, np.int8),), ValueError),
    ((np.zeros((2, 2), np.int16),), TypeError),
    ((np.ones((4, 6), np.int8)[:, ::2],), (ValueError, BufferError)),
    (([[1, -1]],), TypeError),
    ((np.array([0, 1], np.int32), np.array([0], np.int32), np.array([1], np.int8), 3), TypeError),
    ((np.array([1, 1], np.int64), np.array([0], np.int32), np.array([1], np.int8), 3), ValueError),
    ((np.array([0, 2, 1], np.int64), np.array([0], np.int32), np.array([1], np.int8), 3),
     ValueError),
    ((np.array([0, 100, 1], np.int64), np.array([0], np.int32), np.array([1], np.int8), 3),
     ValueError),
    ((np.array([0, 1], np.int64), np.array([3], np.int32), np.array([1], np.int8), 3), ValueError),
    ((np.array([0, 1], np.int64), np.array([-1], np.int32), np.array([1], np.int8), 3), ValueError),
    ((np.array([0, 2], np.int64), np.array([1, 1], np.int32), np.array([1, 1], np.int8), 3),
     ValueError),
    ((np.array([0, 1], np.int64), np.array([0], np.int32), np.array([0], np.int8), 3), ValueError),
    ((np.array([0, 1], np.int64), np.array([0], np.int32), np.array([1, 1], np.int8), 3),
     ValueError),
    ((np.array([0, 1], np.int64), np.array([0], np.int32), np.array([1], np.int8), -5),
     (ValueError, TypeError)),
    ((np.array([0, 1], np.int64), np.array([0], np.int32), np.array([1], np.int8), 2**40),
     ValueError),
    ((np.array([0], np.int64), np.array([], np.int32), np.array([], np.int8), 3), ValueError),
]


@pytest.mark.parametrize("args,error", BAD_STORAGE)
def test_matrix_rejects_bad_storage(args, error):
    from cbmm import _fused

    with pytest.raises(error):
        _fused.Matrix(*args)


@pytest.fixture(params=["dense", "sparse"])
def matrix(request):
    from cbmm import _fused

    y = np.array([[1, -1, 0], [0, 1, 1], [-1, -1, 1], [1, 0, -1]], np.int8)
    return _fused.Matrix(y) if request.param == "dense" else _fused.Matrix(*_csr_parts(y), 3)


def _calls(n, j):
    """Each pass with well-formed arguments (n = 4 rows, j = 3 columns)."""
    theta, a, b = np.zeros(n), np.ones(j), np.zeros(j)
    return {
        "loss": (theta, a, b, 1.0, 1),
        "loss_gradient": (theta, a, b, 1.0, 1, np.empty(n), np.empty(j), np.empty(j)),
        "curvature": (theta, a, b, 1.0, 1, np.empty(n), np.empty(j), np.empty(j)),
        "evaluate": (theta, a, b, np.empty((4, j)), True, 1),
        "mm_step": (theta, a, b, a, b, np.empty(n), np.empty((4, j)), False, 1),
        "counts": (np.empty(j), 1),
    }


@pytest.mark.parametrize("method", ["loss", "loss_gradient", "curvature", "evaluate", "mm_step",
                                    "counts"])
def test_passes_reject_wrong_lengths_types_and_thread_counts(matrix, method):
    good = _calls(4, 3)[method]
    getattr(matrix, method)(*good)  # the well-formed call works
    for position, value in enumerate(good):
        if isinstance(value, np.ndarray):
            for bad in (value[:-1].copy(), np.concatenate([value.ravel(), [0.0]]),
                        value.astype(np.float32), [0.0] * value.size):
                with pytest.raises((ValueError, TypeError)):
                    getattr(matrix, method)(*good[:position], bad, *good[position + 1:])
    threads_at = len(good) - 1 if method in ("evaluate", "mm_step", "counts", "loss") else 4
    for threads in (0, -3, 10**6):
        bad = list(good)
        bad[threads_at] = threads
        with pytest.raises(ValueError, match="threads"):
            getattr(matrix, method)(*bad)
    with pytest.raises(TypeError):
        getattr(matrix, method)(*good[:-1])


def test_outputs_must_be_writable_and_an_uninitialised_matrix_is_refused(matrix):
    from cbmm import _fused

    frozen = np.empty(4)
    frozen.flags.writeable = False
    with pytest.raises((ValueError, TypeError, BufferError)):
        matrix.loss_gradient(np.zeros(4), np.ones(3), np.zeros(3), 1.0, 1, frozen, np.empty(3),
                             np.empty(3))
    blank = _fused.Matrix.__new__(_fused.Matrix)
    assert blank.stored == 0
    with pytest.raises(ValueError, match="not initialised"):
        blank.loss(np.zeros(4), np.ones(3), np.zeros(3), 1.0, 1)


def test_dense_values_outside_the_coding_are_refused_and_elementwise_checks_lengths():
    from cbmm import _fused

    with pytest.raises(ValueError, match="outside"):
        _fused.Matrix(np.array([[1, 5], [0, -1]], np.int8)).counts(np.empty(2), 1)
    with pytest.raises(ValueError):
        _fused.elementwise(np.ones(3, np.int8), np.zeros(4), 1.0, np.empty(4), np.empty(4))
    with pytest.raises(TypeError):
        _fused.elementwise(np.ones(3, np.int8), np.zeros(3), 1.0, np.empty(3, np.float32),
                           np.empty(3))


def test_loo_scores_are_the_closed_form_at_any_thread_count_and_refuse_bad_arguments():
    """The predictive strategy's pass (cbmm.efficient.selection.forward_selection): per
    item k, sum_i ((e_i - r_ki g_k) / (keep_i - r_ki^2 h_k))^2, after r_k -= c_k u where u
    and c are given."""
    from cbmm import _fused

    rng = np.random.default_rng(3)
    n, j = 37, 11
    residual = rng.normal(size=(j, n))
    error, gain = rng.normal(size=n), rng.normal(size=j)
    keep, inv_pivot = 1 - 0.3 * rng.random(n), 1 / (50 + rng.random(j))
    expected = (((error - residual * gain[:, None])
                 / (keep - residual ** 2 * inv_pivot[:, None])) ** 2).sum(axis=1)
    good = [residual, error, keep, gain, inv_pivot, np.zeros(j), 1]
    for threads in (1, 3, j, 64):  # more threads than items: one item each
        out = np.full(j, np.nan)
        _fused.loo_scores(*good[:5], out, threads)
        np.testing.assert_allclose(out, expected, rtol=1e-13)
    for position, value in enumerate(good[:6]):
        for bad in (value[:-1].copy(), value.astype(np.float32), [0.0] * value.size):
            with pytest.raises((ValueError, TypeError)):
                _fused.loo_scores(*good[:position], bad, *good[position + 1:])
    for bad in (residual.ravel(), residual.T.copy(), np.asfortranarray(residual)):
        with pytest.raises((ValueError, BufferError)):  # items x models, C order
            _fused.loo_scores(bad, *good[1:])
    for threads in (0, 10**6):
        with pytest.raises(ValueError, match="threads"):
            _fused.loo_scores(*good[:6], threads)
    # with u and coef: each item's column updated first, in place, in the same pass
    u, coef = rng.normal(size=n), rng.normal(size=j)
    coef[2] = 0.0  # an item the last choice left alone
    updated = residual - coef[:, None] * u
    expected = (((error - updated * gain[:, None])
                 / (keep - updated ** 2 * inv_pivot[:, None])) ** 2).sum(axis=1)
    for threads in (1, 4):
        column, out = residual.copy(), np.empty(j)
        _fused.loo_scores(column, *good[1:5], out, threads, u, coef)
        np.testing.assert_allclose(column, updated, rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(out, expected, rtol=1e-12)
    with pytest.raises(TypeError, match="both or neither"):
        _fused.loo_scores(residual.copy(), *good[1:], u)
    for bad in ((u[:-1].copy(), coef), (u, coef[:-1].copy()), (u.astype(np.float32), coef)):
        with pytest.raises((ValueError, TypeError)):
            _fused.loo_scores(residual.copy(), *good[1:], *bad)
    frozen = residual.copy()
    frozen.flags.writeable = False  # updated in place: must be writable
    with pytest.raises((ValueError, TypeError, BufferError)):
        _fused.loo_scores(frozen, *good[1:], u, coef)


def test_a_numpy_float32_sigma_is_the_same_temperature_without_a_warning():
    """Compared with the range's ends in float32, it warned of an overflow in a cast."""
    data = np.asarray(simulate(40, 12, seed=2).responses, dtype=float)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        single = cbmm.fit(data, sigma=np.float32(2.0))
    assert single.sigma == 2.0 and type(single.sigma) is float
    assert np.array_equal(single.theta, cbmm.fit(data, sigma=2.0).theta)
