"""Run one :func:`cbmm.fit` for a workflow job, optionally under a wall-clock limit.

A fit never fails the job for reasons that belong to the method: a library
error is already a ``failed: ...`` result inside :func:`cbmm.fit`; a fit that
exceeds the limit, or a worker that dies (e.g. a crash inside R), is recorded
here the same way, with NaN parameters (the paper's 'NA').
"""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pandas as pd

import cbmm

__all__ = ["run_fit", "failed_result"]


def failed_result(responses: cbmm.Responses, method: str, status: str, runtime_s: float,
                  settings: dict) -> cbmm.FitResult:
    """A failed fit: NaN parameters labelled like the data, ``status`` and ``runtime_s``."""
    n, j = responses.shape

    def nan(size, labels, name):
        values = np.full(size, np.nan)
        return values if labels is None else pd.Series(values, index=labels, name=name)

    return cbmm.FitResult(
        theta=nan(n, responses.row_labels, "theta"), a=nan(j, responses.col_labels, "a"),
        b=nan(j, responses.col_labels, "b"), loss=float("nan"), loss_history=[], n_iter=0,
        status=status, runtime_s=float(runtime_s), method=method, **settings)


def _child(conn, responses, method, settings, options):
    try:
        conn.send((True, cbmm.fit(responses, method, **settings, **options)))
    except Exception as exc:  # bad input or a bug: re-raised by the parent
        conn.send((False, exc))
    finally:
        conn.close()


def run_fit(responses, method: str, *, settings: dict, options: dict,
            timeout_s: float | None) -> cbmm.FitResult:
    """Fit ``responses`` with ``method``.

    Parameters
    ----------
    responses : cbmm.Responses
    method : str
    settings : dict
        ``sigma, tol, max_iter, seed, init_scale`` for :func:`cbmm.fit`.
    options : dict
        Method-specific keyword options.
    timeout_s : float or None
        Wall-clock limit.  ``None`` fits in this process; otherwise the fit
        runs in a forked child that is killed at the limit, and the result is
        ``failed: timeout after <timeout_s> s`` with ``runtime_s = timeout_s``
        (the paper truncates runtimes for display in the same way).
    """
    if timeout_s is None:
        return cbmm.fit(responses, method, **settings, **options)
    # fork: the child inherits the loaded data and imports; nothing else runs
    # in this process meanwhile, so no lock can be held across the fork.
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(target=_child, args=(sender, responses, method, settings, options))
    start = time.perf_counter()
    worker.start()
    sender.close()
    try:
        if receiver.poll(timeout_s):
            try:
                ok, value = receiver.recv()
            except EOFError:
                worker.join()
                return failed_result(responses, method,
                                     f"failed: worker process died (exit code {worker.exitcode})",
                                     time.perf_counter() - start, settings)
            if not ok:
                raise value
            return value
        return failed_result(responses, method, f"failed: timeout after {timeout_s:g} s",
                             timeout_s, settings)
    finally:
        if worker.is_alive():
            worker.kill()
        worker.join()
        receiver.close()
