"""accelerate="auto": MM, then projected quasi-Newton on the same objective.

Not timed (speed lives in benchmarks/bench_methods.py): these check that auto
ends at least as low as plain cBMM and L-BFGS-B at the same tolerance, keeps
a >= 0, never lets the loss rise, and reports what it did.
"""

import math
import warnings

import numpy as np
import pytest

import cbmm
from cbmm.simulate import simulate

CASES = {
    "full": {"n_models": 150, "n_items": 80, "seed": 1},
    "mcar": {"n_models": 150, "n_items": 80, "missing": "mcar", "missing_rate": 0.5, "seed": 2},
    "sparse-low-sigma": {"n_models": 120, "n_items": 60, "sigma": 10 ** -0.75, "sparsity": 0.3,
                         "missing": "mcar", "missing_rate": 0.5, "seed": 7},
    "mnar": {"n_models": 120, "n_items": 60, "sigma": 10 ** 0.5, "missing": "mnar",
             "missing_rate": 0.3, "seed": 8},
}


def _fit(name, method="cbmm", **options):
    """The paper's procedure (random start, no prior) with ``options``."""
    sim = simulate(**CASES[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
        return cbmm.fit(sim.responses, method, sigma=sim.sigma,
                        **{**cbmm.paper_settings(method), **options})


@pytest.mark.parametrize("name,tol", [("full", 1e-4), ("full", 1e-7), ("mcar", 1e-4),
                                      ("mcar", 1e-7), ("sparse-low-sigma", 1e-4),
                                      ("mnar", 1e-4)])
def test_auto_ends_at_least_as_low_as_plain_and_lbfgsb(name, tol):
    common = {"tol": tol, "max_iter": 5000}
    auto = _fit(name, accelerate="auto", **common)
    plain = _fit(name, **common)
    lbfgsb = _fit(name, method="lbfgsb", **common)
    # ended by its own rule (these designs with drifting parameters are judged unbounded)
    assert auto.status in ("converged", "not_stationary", "unbounded")
    assert auto.loss <= min(plain.loss, lbfgsb.loss) * (1 + 1e-9)
    assert np.all(np.asarray(auto.a) >= 0)
    assert auto.info["accelerate"] == "auto"
    assert auto.n_iter == auto.info["mm_iterations"] + auto.info["qn_iterations"]
    assert math.isfinite(auto.info["stationarity"])  # it need not fall where parameters drift


@pytest.mark.parametrize("name", sorted(CASES))
def test_auto_history_never_rises_and_matches_its_time_history(name):
    # float64 throughout, so the history is exact to rounding
    out = _fit(name, accelerate="auto", tol=1e-9, precision="float64", max_iter=1500)
    history = np.asarray(out.loss_history)
    assert np.all(np.diff(history) <= 1e-12 * history[:-1])
    assert len(out.info["time_history"]) == len(history)
    assert history[-1] == pytest.approx(out.loss, rel=1e-9)


def test_auto_stops_on_stationarity_where_the_optimum_is_attained():
    out = _fit("full", accelerate="auto", tol=1e-5)
    assert out.status == "converged"
    assert out.info["qn_message"].startswith("stationarity <= tol")
    assert out.info["stationarity"] <= 1e-5 * 1.001  # the measure fit() reports


def test_auto_on_sparse_storage_reaches_the_dense_optimum():
    from test_solver import csr, draw

    from cbmm import canonicalize, initial_values
    from cbmm.solver import solve_cbmm

    y = draw(300, 120, seed=21, missing=0.5)
    start = initial_values(300, 120, seed=0)
    dense = solve_cbmm(y, *start, tol=1e-8, accelerate="auto", max_iter=5000)
    sparse = solve_cbmm(csr(y), *start, tol=1e-8, accelerate="auto", max_iter=5000)
    assert sparse.status == dense.status == "converged"
    # the same optimum: the iteration counts may differ by one, since float32 sums
    # over CSR rows and dense rows round in another order
    assert sparse.loss_history[-1] == pytest.approx(dense.loss_history[-1], rel=1e-10)
    for got, expected in zip(canonicalize(sparse.theta, sparse.a, sparse.b),
                             canonicalize(dense.theta, dense.a, dense.b)):
        np.testing.assert_allclose(got, expected, atol=1e-5)


def test_auto_respects_max_iter_and_reports_progress():
    from cbmm import initial_values
    from cbmm.solver import solve_cbmm

    y = cbmm.as_responses(simulate(60, 40, seed=5).responses).y
    seen = []
    out = solve_cbmm(y, *initial_values(60, 40), tol=1e-14, max_iter=6, accelerate="auto",
                     progress=lambda k, value: seen.append((k, value)))
    assert out.status == "max_iter"
    assert out.n_iter == 6
    assert [k for k, _ in seen] == list(range(1, len(out.loss_history)))
    assert [value for _, value in seen] == out.loss_history[1:]
