"""Simulation designs of the paper's appendix ("Simulated studies for sensitivity analysis").

Truth: ``theta_i ~ N(0, 1)``, ``a_j ~ U(0.5, 1)``, ``b_j ~ N(0, sd 0.5)``;
responses ``y_ij ~ Bernoulli(Phi(x_ij))`` with ``Phi(x) = expit(x / sigma)``.
Optional redundancy (an exact fraction ``s`` of ``a`` set to 0, chosen
uniformly) and missingness:

* ``"mcar"``: every entry missing independently with probability rho;
* ``"mar"``: entry (i, j) missing with probability ``expit(alpha + beta Sp_ij)``,
  ``Sp_ij = (r_i + c_j) / 2`` with ``r_i = (i-1)/(N-1)``, ``c_j = (j-1)/(J-1)``,
  ``beta = 2`` and ``alpha`` found by bisection so the expected overall rate
  is rho;
* ``"mnar"``: column gates ``G_j ~ Bernoulli(rho_c)``; in gated columns every
  incorrect (-1) entry is masked, so a gated item keeps only its correct
  answers (an all-correct item, which the paper's design intends).

Each ingredient draws from its own child of ``numpy.random.SeedSequence(seed)``
so, e.g., the MCAR mask for a seed does not change the responses for that seed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from ._checks import check_integer, check_positive
from .io import atomic_path
from .model import expit

__all__ = ["Simulation", "simulate", "mar_intercept", "MISSING_PATTERNS"]

MISSING_PATTERNS = ("none", "mcar", "mar", "mnar")
MAR_SLOPE = 2.0


@dataclass(eq=False)
class Simulation:
    """Simulated responses with the truth that generated them.

    Attributes
    ----------
    responses : ndarray (N, J)
        1 correct, 0 incorrect, NaN missing.
    theta, a, b : ndarray
        True parameters.
    sigma : float
        Temperature used to draw the responses.
    design : dict
        The arguments of :func:`simulate`.
    """

    responses: np.ndarray
    theta: np.ndarray
    a: np.ndarray
    b: np.ndarray
    sigma: float
    design: dict = field(default_factory=dict)

    @property
    def scores(self) -> np.ndarray:
        """True score matrix ``X = theta a^T + 1 b^T``."""
        return np.outer(self.theta, self.a) + self.b[None, :]

    @property
    def missing_rate(self) -> float:
        return float(np.isnan(self.responses).mean())

    def save(self, path) -> None:
        """Write a compressed ``.npz`` (responses as int8 with -1 = missing), atomically."""
        coded = np.where(np.isnan(self.responses), -1, self.responses).astype(np.int8)
        with atomic_path(path, suffix=".npz") as tmp:
            np.savez_compressed(tmp, responses=coded, theta=self.theta, a=self.a, b=self.b,
                                sigma=self.sigma, design=json.dumps(self.design))

    @classmethod
    def load(cls, path) -> "Simulation":
        with np.load(path) as data:
            coded = data["responses"]
            responses = np.where(coded < 0, np.nan, coded.astype(float))
            return cls(responses=responses, theta=data["theta"], a=data["a"], b=data["b"],
                       sigma=float(data["sigma"]), design=json.loads(str(data["design"])))


def mar_intercept(n_models: int, n_items: int, rate: float, slope: float = MAR_SLOPE,
                  tol: float = 1e-12) -> float:
    """Intercept alpha with mean_ij expit(alpha + slope * Sp_ij) = rate (bisection)."""
    if not 0 < rate < 1:
        raise ValueError(f"MAR rate must be in (0, 1), got {rate}")
    r = np.linspace(0.0, 1.0, n_models) if n_models > 1 else np.zeros(1)
    c = np.linspace(0.0, 1.0, n_items) if n_items > 1 else np.zeros(1)
    # Sp_ij = (r_i + c_j)/2; its distribution is the convolution of two grids.
    sp = ((r[:, None] + c[None, :]) / 2.0).ravel()
    lo, hi = -60.0, 60.0
    while hi - lo > tol:
        mid = (lo + hi) / 2.0
        if expit(mid + slope * sp).mean() < rate:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def simulate(n_models: int = 1000, n_items: int = 1000, *, sigma: float = 1.0,
             sparsity: float = 0.0, missing: str = "none", missing_rate: float = 0.0,
             seed: int = 0) -> Simulation:
    """Draw one replicate of the paper's simulation design.

    Parameters
    ----------
    n_models, n_items : int
        N and J.
    sigma : float
        Temperature.
    sparsity : float
        Fraction s of items whose discrimination is exactly 0 (``round(s J)``
        items, chosen uniformly).
    missing : {"none", "mcar", "mar", "mnar"}
        Missingness pattern.
    missing_rate : float
        rho for MCAR/MAR (overall rate), rho_c for MNAR (column gate rate).
    seed : int
        Seed; the same seed gives identical output.

    Returns
    -------
    Simulation
    """
    for name, value, low in (("n_models", n_models, 2), ("n_items", n_items, 1), ("seed", seed, 0)):
        check_integer(name, value, minimum=low)
    check_positive("sigma", sigma)
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity}")
    if missing not in MISSING_PATTERNS:
        raise ValueError(f"missing must be one of {MISSING_PATTERNS}, got {missing!r}")
    if not 0 <= missing_rate < 1:
        raise ValueError(f"missing_rate must be in [0, 1), got {missing_rate}")
    design = dict(n_models=n_models, n_items=n_items, sigma=sigma, sparsity=sparsity,
                  missing=missing, missing_rate=missing_rate, seed=seed)
    params_rng, sparsity_rng, response_rng, missing_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))

    theta = params_rng.standard_normal(n_models)
    a = params_rng.uniform(0.5, 1.0, n_items)
    b = params_rng.normal(0.0, 0.5, n_items)
    n_zero = int(round(sparsity * n_items))
    if n_zero:
        a[sparsity_rng.choice(n_items, size=n_zero, replace=False)] = 0.0

    prob = expit((np.outer(theta, a) + b) / sigma)
    responses = (response_rng.random(prob.shape) < prob).astype(float)

    if missing != "none" and missing_rate > 0:
        if missing == "mcar":
            mask = missing_rng.random(responses.shape) < missing_rate
        elif missing == "mar":
            alpha = mar_intercept(n_models, n_items, missing_rate)
            r = np.linspace(0.0, 1.0, n_models)
            c = np.linspace(0.0, 1.0, n_items) if n_items > 1 else np.zeros(1)
            p_missing = expit(alpha + MAR_SLOPE * (r[:, None] + c[None, :]) / 2.0)
            mask = missing_rng.random(responses.shape) < p_missing
            design["mar_alpha"] = alpha
        else:
            gates = missing_rng.random(n_items) < missing_rate
            mask = gates[None, :] & (responses == 0)
            design["mnar_gated_items"] = int(gates.sum())
        responses[mask] = np.nan
    return Simulation(responses=responses, theta=theta, a=a, b=b, sigma=sigma, design=design)
