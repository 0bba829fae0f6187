"""Joint (cbmm) against marginal (mml) intervals where many models answer few items.

For each response file, the default ``cbmm`` fit is the truth: ``--draws`` answer
matrices are drawn from it at the file's observed cells, and each is refitted by every
method with ``se=True``.  Printed per file and method: the share of the truth inside the
95 % intervals of theta, a and b, a's mean bias in standard errors, the fit's status, EM
cycles or iterations, and seconds (fit and standard errors).  The joint fit's items carry
its abilities' noise (docs/trust.md); the marginal fit's do not.

With ``--new-models K[,K...]`` it measures instead what an ``mml`` calibration's population
does for new models, on the files' real answers: five random 80/20 splits of the models,
the calibration fitted on the 80 %, and each held-out model answering the same K random
items.  Printed per file and K, for the fitted population as the prior and for N(0, 1):
the MAE of ``predict_accuracy``'s accuracy against the model's accuracy on all its items,
its 95 % intervals' coverage, and the mean log loss of the answers not asked (their
posterior-mean probabilities); and the same from the default joint (``cbmm``) fit of the
calibration models.

Usage::

    python benchmarks/bench_marginal.py FILE.csv [FILE.csv ...] [--draws 2]
        [--methods mml,cbmm] [--coding binary] [--new-models 10,25]

The files are wide CSVs (a model per row, an item per column, a label column first), e.g.
the Open LLM Leaderboard matrices metabench keeps in its mirt fits (docs/efficiency.md
says how to read them out; they are not in this repository).
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _common import machine

import cbmm
from cbmm.model import expit


def coverage(result, truth, level=0.95):
    bounds = result.confint(level)
    shares = {}
    for name, true in truth.items():
        lower, upper = (bounds[name][side].to_numpy(dtype=float) for side in ("lower", "upper"))
        judged = np.isfinite(lower) & np.isfinite(upper)
        shares[name] = float(np.mean((lower[judged] <= true[judged])
                                     & (true[judged] <= upper[judged])))
    z = (np.asarray(result.a, dtype=float) - truth["a"]) / np.asarray(result.a_se, dtype=float)
    shares["a_bias_se"] = float(np.nanmean(z))
    return shares


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--draws", type=int, default=2)
    parser.add_argument("--methods", default="mml,cbmm")
    parser.add_argument("--coding", default="binary")
    parser.add_argument("--new-models", default="",
                        help="item counts K: the new-model measurement instead of coverage")
    args = parser.parse_args()
    print(machine())
    if args.new_models:
        new_models(args.files, [int(k) for k in args.new_models.split(",")], args.coding)
        return
    print("| data | models × items | method | θ | a | b | a's bias (SEs) | status | "
          "cycles | s per fit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for path in args.files:
        answers = pd.read_csv(path, index_col=0)
        observed = answers.notna().to_numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted = cbmm.fit(answers, coding=args.coding)
        truth = {name: np.asarray(getattr(fitted, name), dtype=float)
                 for name in ("theta", "a", "b")}
        probability = expit(np.outer(truth["theta"], truth["a"]) + truth["b"])
        rng = np.random.default_rng(0)
        rows = {method: [] for method in args.methods.split(",")}
        for draw in range(args.draws):   # every method fits the same draws
            drawn = (rng.random(probability.shape) < probability).astype(float)
            drawn[~observed] = np.nan
            for method, done in rows.items():
                began = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = cbmm.fit(drawn, method, coding="binary", se=True, seed=draw + 1)
                done.append({**coverage(result, truth), "status": result.status,
                             "cycles": result.n_iter, "seconds": time.perf_counter() - began})
        for method, done in rows.items():
            table = pd.DataFrame(done)
            print(f"| {path.stem} | {answers.shape[0]} × {answers.shape[1]} | {method} | "
                  f"{table['theta'].mean():.3f} | {table['a'].mean():.3f} | "
                  f"{table['b'].mean():.3f} | {table['a_bias_se'].mean():+.2f} | "
                  f"{', '.join(sorted(set(table['status'])))} | {table['cycles'].mean():.0f} | "
                  f"{table['seconds'].mean():.1f} |", flush=True)


def new_models(files, counts, coding, splits=5):
    from cbmm.efficient.bank import ItemBank, Posterior, aligned_answers
    from cbmm.efficient.study import model_splits

    print("| data | K | prior | accuracy MAE | coverage | log loss, items not asked | "
          "s per calibration |")
    print("|---|---|---|---|---|---|---|")
    for path in files:
        answers = pd.read_csv(path, index_col=0)
        rows = []
        for split, (calibration, held) in enumerate(model_splits(len(answers), splits, 0.2, 0)):
            began = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                fit = cbmm.fit(answers.iloc[calibration], "mml", coding=coding)
            seconds = time.perf_counter() - began
            normal = fit.items_frame()
            del normal.attrs["population"]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                joint = cbmm.fit(answers.iloc[calibration], coding=coding)
            test = answers.iloc[held].astype(float)
            truth = test.mean(axis=1).to_numpy()
            rng = np.random.default_rng([split, 1])
            for k in counts:
                asked = rng.choice(answers.shape[1], k, replace=False)
                shown = test.copy()
                shown.iloc[:, np.setdiff1d(np.arange(answers.shape[1]), asked)] = np.nan
                for prior, items in (("population", fit), ("N(0, 1)", normal),
                                     ("cbmm's fit, N(0, 1)", joint)):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        predicted = cbmm.predict_accuracy(shown, items)
                        bank = ItemBank.of(items)
                        coded, _ = aligned_answers(shown, bank)
                    p = Posterior(coded, bank).weights @ bank.grid["p"].T
                    unasked = test.notna().to_numpy() & shown.isna().to_numpy()
                    y = test.to_numpy()[unasked]
                    q = np.clip(p[unasked], 1e-12, 1 - 1e-12)
                    rows.append({"k": k, "prior": prior, "seconds": seconds,
                                 "mae": np.mean(np.abs(predicted["accuracy"] - truth)),
                                 "coverage": np.mean((predicted["lower"] <= truth)
                                                     & (truth <= predicted["upper"])),
                                 "log_loss": -np.mean(y * np.log(q) + (1 - y) * np.log(1 - q))})
        table = pd.DataFrame(rows)
        for (k, prior), group in table.groupby(["k", "prior"], sort=False):
            print(f"| {path.stem} | {k} | {prior} | {group['mae'].mean():.4f} | "
                  f"{group['coverage'].mean():.3f} | {group['log_loss'].mean():.4f} | "
                  f"{group['seconds'].mean():.1f} |", flush=True)


if __name__ == "__main__":
    main()
