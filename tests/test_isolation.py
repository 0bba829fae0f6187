"""Fit isolation: a method that crashes, hangs, raises or returns garbage becomes a recorded
failed result in a caller that carries on; warnings and progress logs of the worker reach the
caller; an isolated fit equals an in-process fit exactly.

The toy methods are registered with the public ``register_method``.  The matrices are small, so
the engine runs single-threaded (a forked child is safe whatever the parent did).
"""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import sys
import time
import warnings

import numpy as np
import pandas as pd
import pytest

import cbmm
from cbmm import registry
from cbmm.registry import _METHODS
from cbmm.simulate import simulate

pytestmark = pytest.mark.skipif(not cbmm.api.FORK_AVAILABLE, reason="needs os.fork")


@pytest.fixture(scope="module")
def data():
    sim = simulate(60, 25, missing="mcar", missing_rate=0.1, seed=11)
    return pd.DataFrame(sim.responses, index=[f"m{i}" for i in range(60)],
                        columns=[f"q{j}" for j in range(25)])


class ToyWarning(UserWarning):
    """Raised by a toy method inside the worker."""


def _segfault(responses, theta0, a0, b0, **kw):
    os.kill(os.getpid(), signal.SIGSEGV)


def _hang(responses, theta0, a0, b0, **kw):
    time.sleep(120)


def _raise(responses, theta0, a0, b0, **kw):
    raise np.linalg.LinAlgError("singular\n information matrix")


def _nan(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0 * np.nan, a0, b0, [1.0], 1, "converged", 0.01)


def _none(responses, theta0, a0, b0, **kw):
    return None


def _short(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0[:3], a0, b0, [1.0], 1, "converged", 0.01)


def _negative_a(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, -a0, b0, [1.0], 1, "converged", 0.01)


def _complex_theta(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0 + 1j, a0, b0, [1.0], 1, "converged", 0.01)


def _strings(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0.astype(str), a0, b0, [1.0], 1, "converged", 0.01)


def _no_n_iter(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0, b0, [1.0], None, "converged", 0.01)


def _text_history(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0, b0, ["1.0"], 1, "converged", 0.01)


def _exit(responses, theta0, a0, b0, **kw):
    sys.exit(3)


def _hard_exit(responses, theta0, a0, b0, **kw):
    os._exit(4)


def _unpicklable(responses, theta0, a0, b0, **kw):
    return cbmm.SolverOutput(theta0, a0, b0, [1.0], 0, "converged", 0.0,
                             info={"handle": lambda: None})


def _chatty(responses, theta0, a0, b0, *, progress, **kw):
    """Two warnings, a log line and three progress calls, then the start as its answer."""
    warnings.warn("toy warning from the worker", ToyWarning)
    warnings.warn("toy convergence trouble", cbmm.ConvergenceWarning)
    logging.getLogger("cbmm.toy").warning("toy log line from pid %d", os.getpid())
    for k, loss in enumerate((30.0, 20.0, 15.0), start=1):
        if progress is not None:
            progress(k, loss)
    return cbmm.SolverOutput(theta0 * 3 + 2, a0, b0, [40.0, 30.0, 20.0, 15.0], 3,
                             "converged", 0.0)


@pytest.fixture
def toy():
    """Register toy methods by name; unregister them afterwards."""
    added = []

    def register(name, solve, **kw):
        cbmm.register_method(name, solve, **kw)
        added.append(name)
        return name

    yield register
    for name in added:
        _METHODS.pop(name, None)


@pytest.mark.parametrize("solve,status", [
    (_segfault, "failed: worker process killed by signal SIGSEGV"),
    (_raise, "failed: singular information matrix"),
    (_nan, "failed: non-finite parameters"),
    (_none, "failed: the solver returned NoneType, not a SolverOutput"),
    (_short, "failed: the solver returned theta of shape (3,), expected (60,)"),
    (_exit, "failed: the method called sys.exit(3)"),
    (_hard_exit, "failed: worker process exited with status 4"),
    (_unpicklable, "failed: the solver's output could not be sent back"),
    (_negative_a, "failed: the solver returned a = -"),
    (_complex_theta, "failed: the solver returned theta of dtype complex128 (expected real"),
    (_strings, "failed: the solver returned theta of dtype <U"),
    (_no_n_iter, "failed: the solver returned n_iter=None, not a count of iterations"),
    (_text_history, "failed: the solver returned a loss_history that is not a list of numbers"),
])
def test_a_broken_method_is_a_recorded_failure(data, toy, solve, status):
    name = toy("toy_" + solve.__name__.strip("_"), solve)
    with pytest.warns(cbmm.ConvergenceWarning, match="no estimate") as caught:
        result = cbmm.fit(data, name)
    assert result.status.startswith(status)
    assert str(caught[0].message).startswith(f"{name}: {result.status}: no estimate (NaN)")
    assert result.failed and math.isnan(result.loss)
    assert np.isnan(result.theta.to_numpy()).all() and np.isnan(result.b.to_numpy()).all()
    assert list(result.theta.index) == list(data.index)
    assert list(result.a.index) == list(data.columns)
    # the caller carries on: the next fit in this process works
    assert cbmm.fit(data).status == "converged"


def test_a_hang_stops_at_the_time_limit(data, toy):
    name = toy("toy_hang", _hang)
    began = time.perf_counter()
    with pytest.warns(cbmm.ConvergenceWarning, match="timeout after 1.5 s: .*raise timeout_s"):
        result = cbmm.fit(data, name, timeout_s=1.5)
    wall = time.perf_counter() - began
    assert result.status == "failed: timeout after 1.5 s"
    assert result.info["status_reason"] == "timeout after 1.5 s"  # as every status's
    assert 1.5 <= result.runtime_s < 1.5 + 5
    assert wall < 1.5 + 10


def test_auto_time_limit_scales_with_the_declared_cost(data, toy, monkeypatch):
    spec = cbmm.registry.get_method("cbmm")
    assert spec.default_timeout_s(1000, 1000) == pytest.approx(60 + 10 * 2.0 * 1.0)
    assert spec.default_timeout_s(10_000, 10_000) == pytest.approx(60 + 10 * 2.0 * 100)
    assert spec.default_timeout_s(1000, 1000, max_iter=5000) == pytest.approx(60 + 10 * 2 * 5)
    # fit uses that limit: without the base minute, a method declaring 20 s per
    # million cells gets 10 x 20 x (60 x 25) / 1e6 = 0.3 s here
    monkeypatch.setattr(registry, "AUTO_TIMEOUT_BASE_S", 0.0)
    name = toy("toy_hang_auto", _hang, seconds_per_million_cells=20.0)
    result = cbmm.fit(data, name, n_starts=1)
    assert result.status == "failed: timeout after 0.3 s"
    assert 0.3 <= result.runtime_s < 5


def test_isolated_fit_equals_in_process_fit_exactly(data):
    for options in ({}, {"accelerate": "squarem", "precision": "float64"}):
        isolated = cbmm.fit(data, seed=4, **options)
        local = cbmm.fit(data, seed=4, isolate=False, **options)
        assert isolated.status == local.status == "converged"
        for name in ("theta", "a", "b"):
            pd.testing.assert_series_equal(getattr(isolated, name), getattr(local, name),
                                           check_exact=True)
        assert isolated.loss == local.loss
        assert isolated.loss_history == local.loss_history
        assert isolated.n_iter == local.n_iter
        timing = {"time_history", "setup_s", "runtime_s"}

        def untimed(info):
            return {k: [untimed(start) for start in v] if k == "starts" else v
                    for k, v in info.items() if k not in timing}

        assert untimed(isolated.info) == untimed(local.info)
        assert 0 < isolated.info["stationarity"] < 1


@pytest.mark.parametrize("isolate", [True, False])
def test_worker_warnings_and_logs_reach_the_caller(data, toy, caplog, isolate):
    name = toy("toy_chatty", _chatty)
    caplog.set_level(logging.INFO, logger="cbmm")
    with pytest.warns(ToyWarning, match="toy warning from the worker"), \
            pytest.warns(cbmm.ConvergenceWarning, match="toy convergence trouble"):
        result = cbmm.fit(data, name, verbose=1, isolate=isolate,
                          timeout_s="auto" if isolate else None, **cbmm.paper_settings(name))
    assert not result.failed
    toy_lines = [r for r in caplog.records if r.name == "cbmm.toy"]
    assert len(toy_lines) == 1 and toy_lines[0].levelno == logging.WARNING
    pid = int(toy_lines[0].getMessage().rsplit(" ", 1)[1])
    assert (pid != os.getpid()) is isolate
    progress = [r.getMessage() for r in caplog.records
                if re.search(r"iteration \d+, objective", r.getMessage())]
    assert all(r.name == "cbmm" for r in caplog.records if "iteration" in r.getMessage())
    assert [int(re.search(r"iteration (\d+)", m).group(1)) for m in progress] == [1, 2, 3]
    changes = [float(re.search(r"relative change (\S+),", m).group(1)) for m in progress]
    assert math.isnan(changes[0])
    assert changes[1:] == pytest.approx([10 / 30, 5 / 20], rel=1e-2)


def test_raw_parameters_are_the_methods_own_estimates(data, toy, tmp_path):
    name = toy("toy_chatty_raw", _chatty)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = cbmm.fit(data, name, seed=2, **cbmm.paper_settings(name))
    theta0, a0, b0 = cbmm.initial_values(*data.shape, seed=2)
    theta, a, b = result.raw_parameters()
    np.testing.assert_allclose(theta, theta0 * 3 + 2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a, a0, rtol=1e-12)
    np.testing.assert_allclose(b, b0, rtol=1e-12, atol=1e-12)
    assert list(theta.index) == list(data.index)
    result.save(tmp_path / "fit")
    loaded = cbmm.FitResult.load(tmp_path / "fit")
    for mine, theirs in zip(loaded.raw_parameters(), (theta, a, b)):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)


def _alive(pid) -> bool:
    """Whether ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _pid_file_method(tmp_path, name, then):
    """A method that writes its pid to a file, then does ``then()``."""
    def solve(responses, theta0, a0, b0, **kw):
        (tmp_path / name).write_text(str(os.getpid()))
        return then(responses, theta0, a0, b0)
    return solve


def test_the_worker_is_gone_after_a_timeout(data, toy, tmp_path):
    name = toy("toy_hang_gone", _pid_file_method(tmp_path, "worker", _hang))
    assert cbmm.fit(data, name, timeout_s=0.5).status == "failed: timeout after 0.5 s"
    assert not _alive(int((tmp_path / "worker").read_text()))


def _with_grandchild(then, pid_file):
    """Fork a grandchild that inherits the worker's pipe and sleeps (its pid to ``pid_file``),
    then do ``then``."""
    def solve(responses, theta0, a0, b0, **kw):
        grandchild = os.fork()
        if grandchild == 0:
            time.sleep(120)
            os._exit(0)
        pid_file.write_text(str(grandchild))
        return then(responses, theta0, a0, b0)
    return solve


@pytest.mark.parametrize("then,status", [
    (_segfault, "failed: worker process killed by signal SIGSEGV"),
    (lambda responses, theta0, a0, b0: cbmm.SolverOutput(theta0, a0, b0, [1.0], 1, "converged",
                                                         0.0), None),
])
def test_a_grandchild_holding_the_pipe_neither_delays_the_caller_nor_outlives_it(
        data, toy, tmp_path, then, status):
    """The worker forks a grandchild that sleeps with the pipe's write end, then crashes or
    answers: the caller returns at once, and the grandchild is killed."""
    name = toy("toy_grandchild", _with_grandchild(then, tmp_path / "grandchild"))
    began = time.perf_counter()
    result = cbmm.fit(data, name, timeout_s=60)
    assert time.perf_counter() - began < 10
    if status:
        assert result.status == status
    else:
        assert not result.failed
    deadline = time.monotonic() + 5
    while _alive(int((tmp_path / "grandchild").read_text())):
        assert time.monotonic() < deadline, "the grandchild outlived the fit"
        time.sleep(0.05)


def _fit_status(args):
    frame, method = args
    return cbmm.fit(frame, method).status


def test_fit_runs_inside_the_workers_of_a_multiprocessing_pool(data):
    """Pool workers are daemonic, and multiprocessing refuses their children; fit's worker
    is a plain fork."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(2) as pool:
        statuses = pool.map(_fit_status, [(data, "cbmm"), (data.iloc[::-1], "cbmm")])
    assert statuses == ["converged", "converged"]


@pytest.mark.parametrize("timeout_s", [1e300, 3e9])
def test_a_time_limit_beyond_what_poll_can_wait_is_honoured_as_a_long_one(data, timeout_s):
    """poll() refuses waits beyond about 24 days: the caller waits in steps."""
    assert cbmm.fit(data, timeout_s=timeout_s).status == "converged"
    assert cbmm.fit(data, max_iter=10 ** 30).status == "converged"  # its auto limit: ~1e28 s


@pytest.mark.parametrize("timeout_s", [math.inf, -1.0, math.nan, "none", True])
def test_a_time_limit_that_is_no_number_of_seconds_is_refused_naming_none(data, timeout_s):
    with pytest.raises(ValueError, match=r"timeout_s must be 'auto', None \(no limit\) or a "
                                         r"finite number of seconds > 0"):
        cbmm.fit(data, timeout_s=timeout_s)


def test_fork_after_the_caller_used_openmp_threads():
    """A forked child of a process whose OpenMP pool has threads hangs in libgomp unless the
    pool is stopped before the fork (torch's OpenMP included); here the caller runs the
    multi-threaded engine in-process first."""
    sim = simulate(1000, 600, seed=12)  # above the engine's single-thread threshold
    local = cbmm.fit(sim.responses, isolate=False)
    isolated = cbmm.fit(sim.responses, timeout_s=60)
    assert isolated.status == local.status == "converged"
    np.testing.assert_array_equal(isolated.theta, local.theta)
    assert isolated.info["threads"] == local.info["threads"]
