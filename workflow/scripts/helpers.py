"""Small utilities shared by the workflow scripts: logging and atomic writes
(through :func:`cbmm.io.atomic_path`).

The scripts run under Snakemake's ``script:`` directive; each adds
``snakemake.scriptdir`` to ``sys.path`` to import this module.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
import warnings
from pathlib import Path

from cbmm.io import atomic_path

__all__ = ["start_log", "write_json", "write_csv", "json_safe"]


def start_log(log_path, *, job: str) -> logging.Logger:
    """Send this job's messages, warnings and uncaught errors to its log file.

    The first line records ``SLURM_JOB_ID`` (``none`` outside SLURM) so a log
    can be matched with the scheduler's accounting.
    """
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    stream = open(log_path, "w", buffering=1)  # noqa: SIM115 (lives as long as the job)
    sys.stdout = sys.stderr = stream
    logging.basicConfig(stream=stream, level=logging.INFO, force=True,
                        format="%(asctime)s %(levelname)s %(message)s")
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    logger = logging.getLogger(job)
    stream.write(f"SLURM_JOB_ID={os.environ.get('SLURM_JOB_ID', 'none')}\n")
    return logger


def json_safe(value):
    """NaN/inf become None so the JSON is strict; numpy scalars become Python ones."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def write_json(obj, path) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n")


def write_csv(frame, path) -> None:
    """Write a DataFrame without its index (NaN as empty cells), atomically."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
