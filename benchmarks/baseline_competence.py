"""Do the gradient baselines stop at a stationary point on the paper's own designs?

Fits cBMM, L-BFGS-B and Manopt on every level of the seven simulation studies
of ``config/config.yaml`` (the paper's sizes and levels), for the first
``--replicates`` replicates of each level, with the workflow's own seeds, and
counts per method and study:

* **stall**: Spearman(theta^, theta) below cBMM's on the same data by more
  than the replicate noise: ``max(--margin, 2 sd)``, sd being the standard
  deviation of cBMM's Spearman(theta^, theta) over the level's replicates;
* **flip**: Spearman(theta^, theta) < 0, or a^ identically 0;
* **failed**: a ``failed: ...`` status (the paper's NA).

The stationarity measure (``info["stationarity"]``, the projected-gradient
norm relative to the start's, :func:`cbmm.model.stationarity`) is printed
beside the counts but does not define a stall: the baselines' typical early
stop was the saddle ``theta a^T = 0``, which is nearly stationary
(docs/baselines.md).  Per method and study the script also prints the
median iterations and seconds, how many fits the stopping rule's gradient
safeguard held back (``held``) and how many Manopt solutions were mirrored
before the proximal step (``flipped``), so that runs before and after a
change can be compared.

Seeds: the designs and seeds of (study, level, replicate) are the workflow's own
(its plan, ``workflow/scripts/cbmm_workflow/plan.py``), and every method is fitted
with that same seed (rule ``fit_simulation``), so the start is the workflow's too.

Usage::

    OMP_NUM_THREADS=1 nice python benchmarks/baseline_competence.py --replicates 5 \
        --records /tmp/competence.jsonl
    python benchmarks/baseline_competence.py --summarise /tmp/competence.jsonl

``--records`` appends one JSON line per fit and skips fits already recorded,
so an interrupted sweep resumes.  Fits run single-threaded, as the workflow's
fit jobs do.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per fit, as the workflow's jobs

import numpy as np
import yaml
from scipy.stats import spearmanr

REPO = Path(__file__).resolve().parents[1]
METHODS = ("cbmm", "lbfgsb", "manopt")


sys.path.insert(0, str(REPO / "workflow" / "scripts"))  # the workflow package
from cbmm_workflow.config import load_config  # noqa: E402
from cbmm_workflow.plan import Plan  # noqa: E402


def designs(plan, studies, replicates):
    """(study, level text, replicate, design, seed) of every replicate to fit."""
    for study in studies:
        for level in plan.levels(study):
            for replicate in range(replicates):
                yield (study, level, replicate, plan.design(study, level),
                       plan.seed(study, level, replicate))


# ---------------------------------------------------------------------------
# fitting
# ---------------------------------------------------------------------------

def fit_record(simulation, method, seed, fit_settings):
    """Fit one method; the figures this script needs, as a JSON-ready dict."""
    import cbmm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)
        result = cbmm.fit(simulation.responses, method, sigma=simulation.sigma, seed=seed,
                          **{**cbmm.paper_settings(method), **fit_settings})
    record = {"method": method, "status": result.status, "n_iter": result.n_iter,
              "runtime_s": result.runtime_s, "loss": result.loss}
    if result.failed:
        return record
    theta, a = np.asarray(result.theta), np.asarray(result.a)
    record.update(
        stationarity=result.info["stationarity"],
        rho_theta=float(spearmanr(theta, simulation.theta)[0]),
        rho_a=float(spearmanr(a, simulation.a)[0]) if np.ptp(a) > 0 else float("nan"),
        a_min=float(a.min()), a_max=float(a.max()),
        n_evaluations=result.info.get("n_evaluations"),
        held_back=result.info.get("held_back"), flipped=result.info.get("flipped"),
        gradient_ratio=result.info.get("gradient_ratio"),
        stopping=str(result.info.get("stopping_criterion", result.info.get("message", ""))),
        prox_steps=result.info.get("prox_steps"),
        negative_a_before_prox=result.info.get("negative_a_before_prox"))
    return record


def sweep(plan, args):
    """Fit every (design, method) not yet in ``args.records``; return all records."""
    import cbmm  # noqa: F401  (fail early if the package is not importable)
    from cbmm.simulate import simulate

    done, records = set(), []
    if args.records and Path(args.records).exists():
        for line in Path(args.records).read_text().splitlines():
            record = json.loads(line)
            records.append(record)
            done.add((record["study"], record["level"], record["replicate"], record["method"]))
    out = open(args.records, "a") if args.records else None  # noqa: SIM115
    fit = plan.config["fit"]
    fit_settings = {"tol": fit["tol"], "max_iter": fit["max_iter"],
                    "init_scale": fit["init_scale"]}
    try:
        for study, level, replicate, design, seed in designs(plan, args.studies,
                                                             args.replicates):
            todo = [m for m in args.methods if (study, level, replicate, m) not in done]
            if not todo:
                continue
            simulation = simulate(**design, seed=seed)
            for method in todo:
                record = {"study": study, "level": level, "replicate": replicate, "seed": seed,
                          **fit_record(simulation, method, seed, fit_settings)}
                records.append(record)
                if out is not None:
                    out.write(json.dumps(record) + "\n")
                    out.flush()
                if args.verbose:
                    print(f"{study:>11} {level:>6} r{replicate} {method:>7} "
                          f"{record['status'][:30]:>30} it {record['n_iter']:4d} "
                          f"{record['runtime_s']:7.3f} s"
                          f"  rho {record.get('rho_theta', np.nan):+.3f}"
                          f"  stat {record.get('stationarity', np.nan):.1e}", flush=True)
    finally:
        if out is not None:
            out.close()
    return records


# ---------------------------------------------------------------------------
# summary
# ---------------------------------------------------------------------------

def classify(records, margin):
    """Attach ``stall``/``flip``/``failed`` flags to every record (cBMM is the reference)."""
    reference = {(r["study"], r["level"], r["replicate"]): r for r in records
                 if r["method"] == "cbmm" and not r["status"].startswith("failed")}
    by_level = defaultdict(list)
    for r in reference.values():
        by_level[(r["study"], r["level"])].append(r["rho_theta"])
    noise = {key: max(margin, 2 * float(np.std(v, ddof=1)) if len(v) > 1 else margin)
             for key, v in by_level.items()}
    for r in records:
        r["failed"] = r["status"].startswith("failed")
        r["stall"] = r["flip"] = False
        r["shortfall"] = float("nan")
        if r["failed"]:
            continue
        r["flip"] = r["rho_theta"] < 0 or r["a_max"] <= 0
        ref = reference.get((r["study"], r["level"], r["replicate"]))
        if ref is not None:
            r["shortfall"] = ref["rho_theta"] - r["rho_theta"]
            r["stall"] = not r["flip"] and r["shortfall"] > noise[(r["study"], r["level"])]
    return records


def summarise(records, margin, out=sys.stdout):
    """Print counts per method and study, then the flagged fits."""
    classify(records, margin)
    groups = defaultdict(list)
    for r in records:
        groups[(r["method"], r["study"])].append(r)
    studies = list(dict.fromkeys(r["study"] for r in records))
    methods = [m for m in METHODS if any(r["method"] == m for r in records)]
    print(f"stall: Spearman(theta) below cBMM's by more than max({margin:g}, 2 sd of cBMM's "
          "over the level's replicates); flip: Spearman(theta) < 0 or a == 0", file=out)
    print(f"{'method':>7} {'study':>12} {'fits':>5} {'stall':>6} {'flip':>5} {'failed':>7}"
          f" {'max_iter':>8} {'held':>5} {'flipped':>7} {'med it':>7} {'med s':>7}"
          f" {'med stat':>9} {'max stat':>9} {'max short':>10}", file=out)
    keys = ("fits", "stall", "flip", "failed", "max_iter", "held", "flipped")
    for method in methods:
        totals = dict.fromkeys(keys, 0)
        for study in studies:
            rows = groups[(method, study)]
            if not rows:
                continue
            ok = [r for r in rows if not r["failed"]]
            counts = {"fits": len(rows), "stall": sum(r["stall"] for r in rows),
                      "flip": sum(r["flip"] for r in rows),
                      "failed": sum(r["failed"] for r in rows),
                      "max_iter": sum(r["status"] == "max_iter" for r in rows),
                      "held": sum(bool(r.get("held_back")) for r in rows),
                      "flipped": sum(bool(r.get("flipped")) for r in rows)}
            for key, value in counts.items():
                totals[key] += value
            stat = [r["stationarity"] for r in ok]
            short = [r["shortfall"] for r in ok if np.isfinite(r["shortfall"])]
            print(f"{method:>7} {study:>12} "
                  + " ".join(f"{counts[k]:{w}d}" for k, w in zip(keys, (5, 6, 5, 7, 8, 5, 7)))
                  + f" {np.median([r['n_iter'] for r in rows]):7.0f}"
                  f" {np.median([r['runtime_s'] for r in rows]):7.3f}"
                  f" {np.median(stat) if stat else np.nan:9.1e}"
                  f" {max(stat) if stat else np.nan:9.1e}"
                  f" {max(short) if short else np.nan:+10.4f}", file=out)
        print(f"{method:>7} {'all':>12} "
              + " ".join(f"{totals[k]:{w}d}" for k, w in zip(keys, (5, 6, 5, 7, 8, 5, 7))),
              file=out)
    flagged = [r for r in records if r["stall"] or r["flip"] or r["failed"]]
    if flagged:
        print("\nflagged fits:", file=out)
    reference = {(r["study"], r["level"], r["replicate"]): r for r in records
                 if r["method"] == "cbmm"}
    for r in flagged:
        ref = reference.get((r["study"], r["level"], r["replicate"]), {})
        kind = "flip" if r["flip"] else "stall" if r["stall"] else "failed"
        print(f"  {kind:>6} {r['method']:>7} {r['study']:>11} level {r['level']:>6} "
              f"rep {r['replicate']} seed {r['seed']}: it {r['n_iter']}, "
              f"rho {r.get('rho_theta', np.nan):+.3f} (cBMM {ref.get('rho_theta', np.nan):+.3f}),"
              f" stationarity {r.get('stationarity', np.nan):.2e}, {r['status']}; "
              f"{r.get('stopping', '')}", file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default=str(REPO / "config" / "config.yaml"))
    parser.add_argument("--studies", default=None,
                        help="comma-separated studies (default: simulation.run of the config)")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--replicates", type=int, default=5, help="replicates per level (5)")
    parser.add_argument("--records", default=None,
                        help="JSON Lines file: one record per fit, appended; resumes")
    parser.add_argument("--summarise", metavar="RECORDS", default=None,
                        help="only print the summary of an existing records file")
    parser.add_argument("--margin", type=float, default=0.01,
                        help="smallest Spearman(theta) shortfall against cBMM that counts as a "
                             "stall (0.01; larger where cBMM's replicate spread is larger)")
    parser.add_argument("--verbose", action="store_true", help="one line per fit")
    args = parser.parse_args(argv)

    if args.summarise:
        records = [json.loads(line) for line in Path(args.summarise).read_text().splitlines()]
        summarise(records, args.margin)
        return
    plan = Plan(load_config(yaml.safe_load(Path(args.config).read_text())))
    args.studies = args.studies.split(",") if args.studies else plan.studies
    args.methods = [m for m in args.methods.split(",") if m]
    wall = time.perf_counter()
    records = sweep(plan, args)
    summarise(records, args.margin)
    print(f"\n{len(records)} fits, sweep took {time.perf_counter() - wall:.0f} s")


if __name__ == "__main__":
    main()
