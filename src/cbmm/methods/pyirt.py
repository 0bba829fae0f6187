"""py-irt baseline: py-irt's 2PL fitted by stochastic variational inference.

py-irt (Lalor & Rodriguez) is driven through its Python API,
``IrtModelTrainer`` with ``IrtConfig(model_type="2pl", epochs=max_iter)`` and
otherwise its defaults (vague priors, Adam with lr 0.1 and decay 0.9999,
full-batch ELBO steps), as in the paper ("default configurations except the
epoch limit").  Only observed entries are passed as observations.

* Parametrisation.  py-irt's logit is ``disc * (ability - diff)``; ours is
  ``x / sigma = (a theta + b) / sigma``.  Hence ``theta = ability``,
  ``a = sigma * disc`` and ``b = -sigma * disc * diff`` (the variational
  means ``loc_ability``, ``loc_diff``, ``exp(loc_slope)`` after the last
  epoch, i.e. what py-irt itself saves).
* Start.  The shared initial values enter through py-irt's initializer hook
  (``IrtConfig.initializers``, registered as ``"cbmm_shared_start"``):
  ``loc_ability = theta0``, ``loc_slope = log(a0 / sigma)``,
  ``loc_diff = -b0 / a0``, with ``a0 / sigma`` at least :data:`MIN_START_DISC`
  (py-irt's discrimination is positive).  The variational scales keep py-irt's
  defaults.
* Seed.  Pyro samples from torch's generator, seeded with ``seed`` inside
  ``torch.random.fork_rng`` so the caller's global torch state is untouched.
* Stopping.  py-irt has no convergence test: it always runs all ``epochs``
  (``n_iter = max_iter``), so ``runtime_s`` covers the full budget.  Because
  the ELBO is a noisy one-sample estimate, convergence is judged on loss (3)
  at the variational means after every epoch (recorded cheaply during
  training, evaluated afterwards and not timed, ``info["history_s"]``):
  ``status = "converged"`` when the last epoch changed it by less than
  ``tol`` relatively, else ``"max_iter"``; ``info["tol_reached_epoch"]`` is
  the first epoch whose change was below ``tol`` (where a tolerance rule
  would have stopped).
* Quiet.  py-irt's rich console is silenced (``verbose=False``) and any
  remaining stdout/stderr is captured; it writes no files unless asked to
  save.
"""

from __future__ import annotations

import contextlib
import io
import time

import numpy as np

from ..registry import Option, register_method
from ..result import SolverOutput
from ..engine import Objective
from ..stopping import relative_change
from ._software import require_python_modules

__all__ = ["MIN_START_DISC", "availability", "solve", "to_cbmm_parameters"]

_INITIALIZER = "cbmm_shared_start"

#: The smallest start of py-irt's discrimination, a0 / sigma (a flat item's start, a0 = 0,
#: has no log).
MIN_START_DISC = 1e-2


def availability() -> None:
    """Raise :class:`~cbmm.MethodUnavailableError` unless py-irt, pyro and torch import."""
    require_python_modules("pyirt", ["torch", "pyro", "py_irt.training"])


def to_cbmm_parameters(ability, diff, disc, sigma):
    """Map py-irt's ``disc * (ability - diff)`` logit to ``(theta, a, b)`` at temperature sigma.

    Returns
    -------
    theta, a, b : ndarray
        ``theta = ability``, ``a = sigma * disc``, ``b = -sigma * disc * diff``.
    """
    disc = np.asarray(disc, dtype=float)
    return (np.asarray(ability, dtype=float), sigma * disc,
            -sigma * disc * np.asarray(diff, dtype=float))


def _register_start_initializer():
    """Register (once) a py-irt initializer that sets the variational means to a given start."""
    import torch
    from py_irt.initializers import INITIALIZERS, IrtInitializer, register

    if _INITIALIZER in INITIALIZERS:
        return

    @register(_INITIALIZER)
    class SharedStart(IrtInitializer):
        def __init__(self, dataset, *, ability, diff, log_disc):
            super().__init__(dataset)
            self._values = {"loc_ability": ability, "loc_diff": diff, "loc_slope": log_disc}

        def initialize(self) -> None:
            import pyro
            for name, values in self._values.items():
                param = pyro.param(name)
                param.data.copy_(torch.as_tensor(values, dtype=param.dtype))


class _Recorder:
    """Guide calls of one training run: the variational means and elapsed seconds at each
    (when ``enabled``), and ``progress`` once per finished epoch."""

    def __init__(self, enabled=True, progress=None):
        self.enabled = enabled
        self.progress = progress
        self.calls = 0
        self.iterates, self.times, self.clock = [], [], None

    def guide_called(self):
        """Record the current means; report the epoch that ended before this call.

        Call 1 precedes py-irt's initializers, call ``k + 1`` starts epoch
        ``k`` (parameters after epoch ``k - 1``).  The last epoch ends after
        the last call: :meth:`training_ended` reports it.
        """
        import pyro

        self.calls += 1
        if self.enabled:
            self.iterates.append(tuple(
                pyro.param(name).detach().clone()
                for name in ("loc_ability", "loc_diff", "loc_slope")))
            self.times.append(time.perf_counter() - self.clock)
        if self.progress is not None and self.calls > 2:
            self.progress(self.calls - 2, float("nan"))

    def training_ended(self, epochs):
        if self.progress is not None and epochs > 0:
            self.progress(epochs, float("nan"))


def _recording_2pl(recorder):
    """py-irt's 2PL, unchanged except that its guide reports to ``recorder`` when called.

    ``svi.step`` calls the guide once per epoch with the current parameters,
    so the records are the iterates (copying N + 2J floats is negligible).
    py-irt also calls the guide once before its initializers run; that
    record precedes the start and is dropped by the caller.
    """
    from py_irt.models.two_param_logistic import TwoParamLog

    class RecordingTwoParamLog(TwoParamLog):
        def get_guide(self):
            guide = super().get_guide()

            def recording_guide(subjects, items, obs):
                out = guide(subjects, items, obs)  # creates the parameters on the first call
                recorder.guide_called()
                return out

            return recording_guide

    return RecordingTwoParamLog


def _dataset(y):
    """py-irt Dataset of the observed entries (built directly: no per-cell validation)."""
    from ordered_set import OrderedSet
    from py_irt.dataset import Dataset

    n, j = y.shape
    rows, cols = np.nonzero(y)
    subjects = [str(i) for i in range(n)]
    items = [str(k) for k in range(j)]
    return Dataset.model_construct(
        item_ids=OrderedSet(items), subject_ids=OrderedSet(subjects),
        item_id_to_ix={s: k for k, s in enumerate(items)}, ix_to_item_id=dict(enumerate(items)),
        subject_id_to_ix={s: i for i, s in enumerate(subjects)},
        ix_to_subject_id=dict(enumerate(subjects)),
        observation_subjects=rows.tolist(), observation_items=cols.tolist(),
        observations=(y[rows, cols] > 0).astype(float).tolist(),
        training_example=[True] * rows.size, anchor_items=None)


OPTIONS = {
    "record_history": Option("bool", True, doc="evaluate loss (3) at every epoch (after the "
                                               "timed fit) to judge convergence"),
}


def solve(responses, theta0, a0, b0, *, sigma, tol, max_iter, seed=0, progress=None,
          record_history=True):
    """Fit py-irt's 2PL by SVI for ``max_iter`` epochs from the shared start.

    Parameters
    ----------
    responses : cbmm.Responses
        Validated responses (``responses.y``: +-1/0 coding; missing entries are left out).
    theta0, a0, b0 : ndarray
        Shared starting point (``a0 > 0``).
    sigma, tol, max_iter
        Temperature, tolerance of the convergence diagnosis, epochs.
    seed : int or None
        Seed of torch's generator for Pyro's sampling, modulo 2**64 (other values: unseeded).
    record_history : bool
        Evaluate loss (3) at every epoch's iterate (after the timed fit); when
        False only the final loss is known and ``status`` is ``"max_iter"``.
    progress : callable, optional
        ``progress(epoch, nan)`` once per epoch, ``epoch = 1 .. max_iter``, also
        with ``record_history=False`` (loss (3) is only evaluated after training).

    Returns
    -------
    SolverOutput
    """
    import torch
    from py_irt.config import IrtConfig
    from py_irt.training import IrtModelTrainer

    setup = time.perf_counter()
    y = responses.y
    _register_start_initializer()
    # py-irt's discrimination is exp(log_disc) > 0: a start of a0 = 0 (the spectral
    # start's for an all-wrong item) gave log_disc = -inf and NaN logits, a failed fit
    a0 = np.maximum(np.asarray(a0, dtype=float), MIN_START_DISC * sigma)
    start = {"name": _INITIALIZER, "ability": np.asarray(theta0, dtype=float),
             "diff": -np.asarray(b0, dtype=float) / a0, "log_disc": np.log(a0 / sigma)}
    recorder = _Recorder(enabled=record_history, progress=progress)
    model_class = _recording_2pl(recorder)
    config = IrtConfig(model_type=model_class, epochs=max_iter, initializers=[start])
    chatter = io.StringIO()
    with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        trainer = IrtModelTrainer(data_path=None, config=config, dataset=_dataset(y),
                                  verbose=False)
        setup_s = time.perf_counter() - setup
        with torch.random.fork_rng(devices=[]):
            if isinstance(seed, (int, np.integer)):
                # fit takes any non-negative seed; torch's generator at most 2**64 - 1
                # (2**64 + 5 failed with "Overflow when unpacking long long")
                torch.manual_seed(int(seed) % 2**64)
            recorder.clock = time.perf_counter()
            trainer.train(epochs=max_iter, device="cpu")
            runtime = time.perf_counter() - recorder.clock
            recorder.training_ended(max_iter)

    final = trainer.last_params
    theta, a, b = to_cbmm_parameters(final["ability"], final["diff"], final["disc"], sigma)
    info = {"setup_s": setup_s, "output": chatter.getvalue()[-2000:],
            "stopping": "py-irt runs all epochs; status judged on loss (3) per epoch"}
    if not (np.isfinite(theta).all() and np.isfinite(a).all() and np.isfinite(b).all()):
        return SolverOutput(theta=theta, a=a, b=b, loss_history=[], n_iter=max_iter,
                            status="failed: py-irt: non-finite parameters", runtime_s=runtime,
                            info=info)
    history, status = [], "max_iter"
    if record_history:
        evaluation = time.perf_counter()
        objective = Objective(y, sigma)
        # records: [before py-irt's initializers, start, after 1 epoch, ...]
        for ability, diff, log_disc in recorder.iterates[1:]:
            point = to_cbmm_parameters(ability.numpy(), diff.numpy(), np.exp(log_disc.numpy()),
                                       sigma)
            history.append(objective.loss_and_gradient(*point)[0])
        history.append(objective.loss_and_gradient(theta, a, b)[0])
        changes = np.array([relative_change(before, after)
                            for before, after in zip(history[:-1], history[1:])])
        below = np.flatnonzero(changes < tol)
        info["tol_reached_epoch"] = int(below[0]) + 1 if below.size else None
        status = "converged" if changes.size and changes[-1] < tol else "max_iter"
        info["time_history"] = recorder.times[1:] + [runtime]
        info["history_s"] = time.perf_counter() - evaluation
    return SolverOutput(theta=theta, a=a, b=b, loss_history=history, n_iter=max_iter,
                        status=status, runtime_s=runtime, info=info)


# preload: torch imports torch._dynamo at the first optimizer it builds (1 s); cbmm.fit
# imports it in the caller, not in every forked worker
register_method("pyirt", solve, label="py-irt", availability=availability, options=OPTIONS,
                color="#8ccbef", order=4, env="pyirt", seconds_per_million_cells=600.0,
                preload=lambda options: ("torch._dynamo",),
                description="py-irt 2PL by SVI (default configuration, epochs = max_iter)")
