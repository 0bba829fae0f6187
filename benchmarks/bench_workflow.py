"""Job count, CPU time and process start-up of a workflow run.

Runs Snakemake on the given config files (each merged over config/config.yaml) in a
fresh working directory and prints, from the run itself:

* jobs: the job logs with a start-up line (every script job writes one);
* CPU: user + system seconds of the Snakemake process and of all its children
  (the jobs, their fit workers), and of the Snakemake process alone;
* start-up: the sum over jobs of the last ``start-up: <s> CPU-s`` line of each log
  (``cbmm_workflow.jobs.log_start_up``: interpreter, Snakemake's script preamble,
  imports and, in a fit job, the software of its methods), its share of the CPU and
  the jobs that cost most of it, by rule.

It also prints whether Python may write bytecode caches.  With
``PYTHONDONTWRITEBYTECODE`` set (as on some CI machines and sandboxes), every job
compiles the uncached modules it imports (an editable install's ``cbmm``, the
workflow package ``cbmm_workflow``): about 0.1 CPU-s more per job on the quick config.
Python's default caches them on the first import.

Usage (from the repository root; the quick config needs the leaderboard downloads,
or an overlay pointing its datasets at local files)::

    python benchmarks/bench_workflow.py config/quick.yaml [overlay.yaml ...] [--cores 2]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import machine

ROOT = Path(__file__).resolve().parents[1]
START_UP = re.compile(r"start-up: ([0-9.]+) CPU-s")

#: Runs Snakemake in this process and writes its own and its children's CPU at exit.
RUNNER = r"""
import atexit, json, resource, sys
usage_path = sys.argv[1]
def report():
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(usage_path, "w") as out:
        json.dump({"self": own.ru_utime + own.ru_stime,
                   "children": children.ru_utime + children.ru_stime}, out)
atexit.register(report)
from snakemake.cli import main
sys.argv = ["snakemake"] + sys.argv[2:]
main()
"""


def start_ups(log_dir: Path) -> dict[str, list[float]]:
    """Start-up CPU seconds of each job, by rule (a log's folder under logs/)."""
    by_rule = collections.defaultdict(list)
    for log in sorted(log_dir.rglob("*.log")):
        found = START_UP.findall(log.read_text(errors="replace"))
        if found:
            by_rule[log.relative_to(log_dir).parts[0]].append(float(found[-1]))
    return by_rule


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("configfiles", nargs="+", type=Path)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the working directory")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench_workflow_"))
    usage = workdir / "usage.json"
    command = [sys.executable, "-c", RUNNER, str(usage), "--snakefile", str(ROOT / "Snakefile"),
               "--directory", str(workdir), "--cores", str(args.cores), "--quiet", "rules",
               "--configfile", *(str(path.resolve()) for path in args.configfiles)]
    began = time.perf_counter()
    run = subprocess.run(command, cwd=workdir, capture_output=True, text=True)
    wall = time.perf_counter() - began
    if run.returncode:
        sys.exit(f"snakemake failed (exit {run.returncode}); working directory {workdir}\n"
                 + run.stderr[-4000:])
    cpu = json.loads(usage.read_text())
    total = cpu["self"] + cpu["children"]
    by_rule = start_ups(workdir / "logs")
    start_up = sum(sum(times) for times in by_rule.values())
    jobs = sum(len(times) for times in by_rule.values())
    print(machine())
    print(f"configs: {' '.join(str(path) for path in args.configfiles)}; --cores {args.cores}")
    print("bytecode caches: " + ("off (PYTHONDONTWRITEBYTECODE is set)"
                                 if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"))
    print(f"jobs {jobs}, wall {wall:.0f} s, CPU {total:.0f} s "
          f"(Snakemake process {cpu['self']:.0f} s, jobs and their workers {cpu['children']:.0f} s)")
    print(f"start-up {start_up:.1f} CPU-s = {100 * start_up / total:.1f} % of the CPU")
    print(f"{'rule folder':32s} {'jobs':>5s} {'start-up s':>10s} {'per job':>8s}")
    for rule, times in sorted(by_rule.items(), key=lambda item: -sum(item[1])):
        print(f"{rule:32s} {len(times):5d} {sum(times):10.1f} {sum(times) / len(times):8.2f}")
    if not args.keep:
        shutil.rmtree(workdir)
    else:
        print(f"working directory kept: {workdir}")


if __name__ == "__main__":
    main()
