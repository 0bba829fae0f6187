"""The fused engine: threads and forking, temperature and precision handling."""

import math
import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cbmm
from cbmm import initial_values
from cbmm.simulate import simulate
from cbmm.solver import available_cores, solve_cbmm

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
    fused = cbmm.fit(small_simulation.responses, sigma=sigma)
    reference = cbmm.fit(small_simulation.responses, sigma=sigma, engine="numpy")
    assert fused.info["precision"] == "float32"
    assert fused.status == reference.status == "converged"
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
