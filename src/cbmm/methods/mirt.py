"""mirt baseline: EM for the unidimensional 2PL in R's mirt package, through rpy2.

The call follows the paper's appendix ("EM algorithm for mirt")::

    mirt(Y, 1, itemtype = "2PL", pars = <start>, optimizer = "L-BFGS-B",
         TOL = tol, technical = list(NCYCLES = max_iter), verbose = FALSE)
    fscores(fit, method = "EAP")

* Parametrisation.  mirt's logit is ``a1 * theta + d`` with the prior
  ``theta ~ N(0, 1)``; ours is ``x / sigma = (a theta + b) / sigma``, so
  ``a = sigma * a1`` and ``b = sigma * d``, and theta is the EAP score
  under the same N(0, 1) prior.
* Start and constraint.  The ``pars = "values"`` table is edited: slopes
  start at ``a1 = a0 / sigma``, intercepts at ``d = b0 / sigma`` (the shared
  initial values), and the slopes get the lower bound 0, which the M-step's
  L-BFGS-B enforces.  ``theta0`` is not used: EM integrates theta out.
* Stopping.  mirt's ``TOL`` bounds the largest absolute change of the item
  parameters between EM cycles (not the relative loss change); the paper sets
  it to 1e-4, and ``NCYCLES`` to 1000.  ``status`` is mirt's own convergence
  flag.
* Failures.  An R error (e.g. "items have only one response category",
  singular information) becomes ``status = "failed: mirt: <R message>"``:
  the paper's NA.  R's console output is captured (``info["r_output"]``),
  warnings collected in ``info["r_warnings"]``.
* Timing.  ``runtime_s`` is R's elapsed time of ``mirt()`` plus ``fscores()``;
  starting R and loading mirt happen in the availability check, converting
  the data and building the start table are ``info["setup_s"]``.

mirt has no per-cycle loss (3), so ``loss_history`` is empty;
``info["marginal_loglik"]`` is mirt's final marginal log-likelihood.
"""

from __future__ import annotations

import contextlib
import os
import re
import time

import numpy as np

from ..marginal import negative_marginal_loglik
from ..registry import MethodUnavailableError, register_method
from ..result import SolverOutput
from ._software import DROP_HINT, require_python_modules

__all__ = ["R_INSTALL", "R_SEED_MODULUS", "availability", "r_seed", "seed_r", "solve",
           "user_item_names"]

#: Command that installs the R package.
R_INSTALL = "R -e 'install.packages(\"mirt\")'"

#: R's ``set.seed`` takes a 32-bit signed integer; seeds are reduced modulo this.
R_SEED_MODULUS = 2**31 - 1

# Defined once per R session.  Returns either list(error = message) or the
# fitted parameters; warnings are collected, never printed.
_R_FIT = r"""
function(Y, a1_start, d_start, tol, ncycles) {
    warnings <- character(0)
    collect <- function(w) {
        warnings <<- c(warnings, conditionMessage(w))
        invokeRestart("muffleWarning")
    }
    run <- function() {
        colnames(Y) <- paste0("item", seq_len(ncol(Y)))
        values <- mirt::mirt(Y, 1, itemtype = "2PL", pars = "values", verbose = FALSE)
        slope <- values$name == "a1"
        values$value[slope] <- a1_start
        values$value[values$name == "d"] <- d_start
        values$lbound[slope] <- 0
        started <- proc.time()[["elapsed"]]
        fit <- mirt::mirt(Y, 1, itemtype = "2PL", pars = values, optimizer = "L-BFGS-B",
                          TOL = tol, technical = list(NCYCLES = ncycles), verbose = FALSE)
        theta <- mirt::fscores(fit, method = "EAP")[, 1]
        elapsed <- proc.time()[["elapsed"]] - started
        items <- mirt::coef(fit, simplify = TRUE)$items
        list(a1 = unname(items[, "a1"]), d = unname(items[, "d"]), theta = unname(theta),
             converged = isTRUE(mirt::extract.mirt(fit, "converged")),
             iterations = as.integer(mirt::extract.mirt(fit, "iterations")),
             loglik = as.numeric(mirt::extract.mirt(fit, "logLik")),
             elapsed = elapsed)
    }
    out <- tryCatch(withCallingHandlers(run(), warning = collect),
                    error = function(e) list(error = conditionMessage(e)))
    out$warnings <- warnings
    out
}
"""

_FIT_FUNCTION = None

#: How the R function names the columns it gives mirt (``item1`` .. ``itemJ``).
_R_ITEM = re.compile(r"\bitem(\d+)\b")


def user_item_names(text: str, labels) -> str:
    """``text`` from R with its item names (``item97``, the 97th column) replaced by the
    user's labels (``item '96' (column 97)``), or for an unlabelled array by its column
    as NumPy counts it (``column 96 (from 0)``: R's ``item97`` sent a user to the wrong
    column)."""
    def name(match):
        k = int(match.group(1))
        if labels is None:
            return f"column {k - 1} (from 0)" if k >= 1 else match.group(0)
        return f"item {str(labels[k - 1])!r} (column {k})" if 1 <= k <= len(labels) \
            else match.group(0)
    return _R_ITEM.sub(name, text)


def _start_r():
    """Import ``rpy2.robjects`` (starting R) without leaking R's library path.

    Starting R makes rpy2 put R's ``LD_LIBRARY_PATH`` into ``os.environ``;
    every Python started from this process afterwards (a Snakemake job, a
    test's subprocess) would then load R's libraries instead of its own and
    fail to import ``_ssl``.  The dynamic loader of this process read the
    variable at start-up, so restoring it changes nothing for the embedded R.
    (``R_HOME``, which rpy2 also sets, stays: R reads it while running.)
    """
    before = os.environ.get("LD_LIBRARY_PATH")
    import rpy2.robjects as ro

    if before is None:
        os.environ.pop("LD_LIBRARY_PATH", None)
    else:
        os.environ["LD_LIBRARY_PATH"] = before
    return ro


def availability() -> None:
    """Raise :class:`~cbmm.MethodUnavailableError` unless rpy2, R and the R package mirt work.

    Also starts R and loads mirt, so that neither counts in ``runtime_s``.
    """
    require_python_modules("mirt", ["rpy2"], install="pip install 'rpy2>=3.5,<3.6'")
    try:
        ro = _start_r()
    except Exception as exc:  # rpy2 raises various errors when R itself is missing
        raise MethodUnavailableError(
            f"method 'mirt' could not start R through rpy2 ({exc}). Install R "
            "(e.g. apt-get install r-base) and then: pip install 'rpy2>=3.5,<3.6' ; "
            + DROP_HINT.format(method="mirt")) from exc
    if not ro.r('isTRUE(suppressWarnings(requireNamespace("mirt", quietly = TRUE)))')[0]:
        paths = ", ".join(ro.r(".libPaths()"))
        raise MethodUnavailableError(
            f"method 'mirt' needs the R package mirt, which is not installed in R's "
            f"library path ({paths}). Install it with: {R_INSTALL} ; "
            + DROP_HINT.format(method="mirt"))


@contextlib.contextmanager
def _captured_r_console(lines):
    """Route R's console output (stdout and stderr) into ``lines`` instead of the terminal."""
    from rpy2.rinterface_lib import callbacks

    saved = callbacks.consolewrite_print, callbacks.consolewrite_warnerror
    callbacks.consolewrite_print = callbacks.consolewrite_warnerror = lines.append
    try:
        yield
    finally:
        callbacks.consolewrite_print, callbacks.consolewrite_warnerror = saved


def r_seed(seed):
    """The value passed to R's ``set.seed`` for a fit seed, or None (R left unseeded).

    Parameters
    ----------
    seed : int, numpy integer, or anything else
        The fit's seed.  The workflow's seeds are uint32 (half of them
        >= 2**31), and callers may pass any non-negative Python or NumPy
        integer.

    Returns
    -------
    int or None
        ``int(seed) % (2**31 - 1)``: deterministic, in ``[0, 2**31 - 2]``
        (R's integers are 32-bit signed, ``-2**31`` being NA), and equal to
        the seed itself below ``2**31 - 1``.  None for ``None``, booleans,
        ``numpy.random.Generator`` objects and other non-integers.
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        return None
    return int(seed) % R_SEED_MODULUS


def seed_r(seed):
    """Seed R's generator with :func:`r_seed` of ``seed`` (if any); return the value used."""
    value = r_seed(seed)
    if value is not None:
        _start_r().r["set.seed"](value)
    return value


def _r_fit_function():
    global _FIT_FUNCTION
    if _FIT_FUNCTION is None:
        _FIT_FUNCTION = _start_r().r(_R_FIT)
    return _FIT_FUNCTION


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=None, progress=None):
    """Fit the 2PL by mirt's EM (L-BFGS-B M-step, slopes >= 0), abilities by EAP.

    Parameters
    ----------
    responses : cbmm.Responses
        Validated responses (``responses.y``: +-1/0 coding; 0 = missing, passed to R as NA).
    theta0, a0, b0 : ndarray
        Shared starting point (``theta0`` unused: EM integrates theta out).
    sigma, tol, max_iter
        Temperature, mirt ``TOL``, mirt ``NCYCLES``.
    seed : int, optional
        Seeds R's generator (``set.seed(r_seed(seed))``, any integer size; see
        :func:`r_seed`); mirt's EM with fixed quadrature is deterministic, so
        this only matters for reproducibility of any internal random draws.
    progress : callable, optional
        Not called: mirt reports no per-cycle progress through rpy2.

    Returns
    -------
    SolverOutput
        ``status`` is ``"converged"``/``"max_iter"`` from mirt's flag, or
        ``"failed: mirt: <message>"`` when R raised an error.
    """
    ro = _start_r()
    from rpy2.robjects import default_converter, numpy2ri
    from rpy2.robjects.conversion import localconverter

    setup = time.perf_counter()
    y = responses.y
    n, j = y.shape
    with localconverter(default_converter + numpy2ri.converter) as cv:
        r_responses = cv.py2rpy(np.where(y == 0, np.nan, (y > 0).astype(np.float64)))
        r_a1 = cv.py2rpy(np.asarray(a0, dtype=float) / sigma)
        r_d = cv.py2rpy(np.asarray(b0, dtype=float) / sigma)
    r_responses = ro.r("function(Y) { Y[is.nan(Y)] <- NA; Y }")(r_responses)
    fit_function = _r_fit_function()
    seeded = seed_r(seed)
    setup_s = time.perf_counter() - setup

    console = []
    wall = time.perf_counter()
    with _captured_r_console(console):
        out = fit_function(r_responses, r_a1, r_d, float(tol), int(max_iter))
    wall = time.perf_counter() - wall
    result = dict(zip(out.names, out, strict=True))
    info = {"setup_s": setup_s, "r_seed": seeded, "r_warnings": list(result["warnings"]),
            "r_output": "".join(console), "TOL": tol, "NCYCLES": max_iter}
    info["r_warnings"] = [user_item_names(w, responses.col_labels) for w in info["r_warnings"]]
    if "error" in result:
        message = user_item_names(" ".join(str(result["error"][0]).split()), responses.col_labels)
        return SolverOutput.failed(f"mirt: {message}", n, j, runtime_s=wall, info=info)
    info["marginal_loglik"] = float(result["loglik"][0])
    return SolverOutput(
        # a copy: np.asarray views R's memory, which R reuses once the vector is collected
        # (a second fit in the same process, as n_starts runs, scrambled the first's theta)
        theta=np.array(result["theta"], dtype=float),
        a=sigma * np.asarray(result["a1"], dtype=float),
        b=sigma * np.asarray(result["d"], dtype=float),
        loss_history=[], n_iter=int(result["iterations"][0]),
        status="converged" if bool(result["converged"][0]) else "max_iter",
        runtime_s=float(result["elapsed"][0]), info=info)


register_method("mirt", solve, label="mirt", availability=availability, color="#1f6fb4",
                order=0, env="mirt", seconds_per_million_cells=600.0,
                objective=negative_marginal_loglik,
                description="R mirt: EM for the 2PL (L-BFGS-B M-step, a >= 0), EAP abilities")
