"""A user's own method for the workflow tests: registered through the config key
``method_modules`` (``.test/methods/toy.py``) and run like the built-in ones.

``toy`` is a one-step estimator: theta from each model's log-odds of success,
b from each item's log-odds, a = 1 (no iterations), shrunk towards 1/2 by
``prior`` pseudo-answers.  ``delay_s`` makes each fit take that long (the tests
interrupt a batch half-way).
"""

import time

import numpy as np

import cbmm
from cbmm.registry import Option
from cbmm.result import SolverOutput


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed, progress, prior,
          delay_s):
    start = time.perf_counter()
    time.sleep(delay_s)
    y = np.asarray(responses.y)
    correct, answered = (y > 0).astype(float), (y != 0).astype(float)

    def log_odds(axis):
        right = correct.sum(axis=axis) + prior
        return np.log(right / (answered.sum(axis=axis) + 2 * prior - right))

    return SolverOutput(theta=log_odds(1), a=np.ones(y.shape[1]), b=sigma * log_odds(0),
                        loss_history=[], n_iter=1, status="converged",
                        runtime_s=time.perf_counter() - start)


cbmm.register_method(
    "toy", solve, label="Toy IRT", color="#ff9900", order=50, seconds_per_million_cells=0.5,
    description="log-odds of success (tests)",
    options={"prior": Option("float", 0.5, minimum=0, doc="pseudo-answers per model/item"),
             "delay_s": Option("float", 0.0, minimum=0, doc="seconds each fit waits")},
)
