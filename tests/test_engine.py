"""The fused engine's process model: threads, forking, thread-count limits."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from cbmm.solver import available_cores

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
