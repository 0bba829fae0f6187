"""Rebuilding the Open LLM Leaderboard (v2) matrices from the Hugging Face Hub.

Each evaluated model ``<org>/<name>`` has a dataset
``open-llm-leaderboard/<org>__<name>-details`` holding, per sub-task and per
evaluation run, a file ``<org>__<name>/samples_leaderboard_<task>_<timestamp>.jsonl``
with one JSON record per item (``doc_id`` plus the metrics).  The
``datasets`` configuration ``<org>__<name>__leaderboard_<task>``, split
``latest``, is the file with the latest timestamp; we read that file directly
with :func:`huggingface_hub.hf_hub_download`, which caches it (so an
interrupted build resumes without downloading again).

Per sub-task, items are ordered by ``doc_id`` and named ``<task>_<doc_id>``
(e.g. ``bbh_navigate_17``); the correctness column is ``acc_norm`` (BBH, GPQA,
MuSR), ``prompt_level_loose_acc`` (IFEval), ``exact_match`` (MATH hard) or
``acc`` (MMLU-Pro).  A model without a sub-task's file (or whose repository
cannot be read) gets missing entries for that sub-task; every such gap is
listed in the build report, never dropped silently.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from .checks import inside, one_line, relative_path
from .download import DownloadError
from .matrix import DataError, atomic_path, iter_jsonl

__all__ = [
    "CONTENTS_REPO",
    "SUITES",
    "HubNotFoundError",
    "details_repo",
    "fetch_model",
    "hub_download",
    "latest_sample_files",
    "leaderboard_contents",
    "list_details_datasets",
    "read_samples",
    "rebuild_suite",
    "select_cohort",
]

log = logging.getLogger(__name__)

CONTENTS_REPO = "open-llm-leaderboard/contents"
_ORG = "open-llm-leaderboard"

_BBH = [
    "boolean_expressions",
    "causal_judgement",
    "date_understanding",
    "disambiguation_qa",
    "formal_fallacies",
    "geometric_shapes",
    "hyperbaton",
    "logical_deduction_five_objects",
    "logical_deduction_seven_objects",
    "logical_deduction_three_objects",
    "movie_recommendation",
    "navigate",
    "object_counting",
    "penguins_in_a_table",
    "reasoning_about_colored_objects",
    "ruin_names",
    "salient_translation_error_detection",
    "snarks",
    "sports_understanding",
    "temporal_sequences",
    "tracking_shuffled_objects_five_objects",
    "tracking_shuffled_objects_seven_objects",
    "tracking_shuffled_objects_three_objects",
    "web_of_lies",
]
_MATH = [
    "algebra",
    "counting_and_prob",
    "geometry",
    "intermediate_algebra",
    "num_theory",
    "prealgebra",
    "precalculus",
]

#: suite -> ordered (sub-task, correctness column) pairs: 38 sub-tasks besides MMLU-Pro, 39 in all.
SUITES: dict[str, list[tuple[str, str]]] = {
    "IFEval": [("ifeval", "prompt_level_loose_acc")],
    "MuSR": [
        (f"musr_{t}", "acc_norm")
        for t in ("murder_mysteries", "object_placements", "team_allocation")
    ],
    "GPQA": [(f"gpqa_{t}", "acc_norm") for t in ("diamond", "extended", "main")],
    "MATH": [(f"math_{t}_hard", "exact_match") for t in _MATH],
    "BBH": [(f"bbh_{t}", "acc_norm") for t in _BBH],
    "MMLU_PRO": [("mmlu_pro", "acc")],
}

_SAMPLES = re.compile(
    r"(?:^|/)samples_leaderboard_(?P<task>.+)_(?P<ts>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl$"
)


# ---------------------------------------------------------------- Hub access


class HubNotFoundError(DownloadError):
    """The Hub says a repository, revision or file does not exist (or is gated or disabled)."""


def _transport_errors() -> tuple:
    """Connection errors of huggingface_hub's HTTP library (httpx in 1.x, httpx2 from 2.0)."""
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            pass
    return tuple(found)


def _classify(exc: BaseException) -> str:
    """``"missing"``, ``"offline"``, ``"transient"`` or ``"fatal"`` for an error of a Hub call."""
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        DisabledRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    missing = (
        RepositoryNotFoundError,
        RevisionNotFoundError,
        RemoteEntryNotFoundError,
        DisabledRepoError,
    )
    if isinstance(exc, missing):
        return "missing"
    if isinstance(exc, OfflineModeIsEnabled) or (
        isinstance(exc, LocalEntryNotFoundError) and constants.HF_HUB_OFFLINE
    ):
        return "offline"
    if isinstance(exc, HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        retryable = status is None or status in (408, 425, 429) or status >= 500
        return "transient" if retryable else "fatal"
    # A LocalEntryNotFoundError here: the Hub could not be reached and the file is not cached.
    transient = (LocalEntryNotFoundError, ConnectionError, TimeoutError, *_transport_errors())
    return "transient" if isinstance(exc, transient) else "fatal"


def _hub_error(kind: str, what: str, exc: BaseException, attempts: int) -> DownloadError:
    detail = one_line(f"{type(exc).__name__}: {exc}")[:300]
    if kind == "missing":
        return HubNotFoundError(f"{what}: not found on the Hub ({detail})")
    if kind == "offline":
        return DownloadError(
            f"{what}: not in the local Hub cache, and HF_HUB_OFFLINE=1 forbids the network"
        )
    if kind == "transient":
        return DownloadError(f"{what}: failed after {attempts} attempt(s): {detail}")
    return DownloadError(f"{what}: {detail}")


def _with_retries(call, what: str, retries: int, backoff: float):
    """``call()``, retried on transient failures; failures become one-line :class:`DownloadError`.

    huggingface_hub (2.x) itself retries 5xx answers and dropped connections
    five times (1-8 s apart) inside most calls; these retries come on top.
    """
    for attempt in range(retries + 1):
        try:
            return call()
        except DataError:  # ours, already one line (e.g. a refused token)
            raise
        except Exception as exc:  # noqa: BLE001 - classified just below
            kind = _classify(exc)
            if kind != "transient" or attempt == retries:
                raise _hub_error(kind, what, exc, attempt + 1) from None
            wait = backoff * 2**attempt
            log.warning(
                "%s: %s; retry %d/%d in %.1fs",
                what,
                one_line(exc)[:200],
                attempt + 1,
                retries,
                wait,
            )
            time.sleep(wait)


def _token(endpoint: str | None, token):
    """The token for huggingface_hub: only over https to the configured endpoint, else ``False``.

    ``None`` lets huggingface_hub use the stored token (``HF_TOKEN``, ``hf auth
    login``); that is allowed only where an explicit token would be.
    """
    from huggingface_hub import constants

    configured = constants.ENDPOINT.rstrip("/")
    target = (endpoint or configured).rstrip("/")
    if target == configured and urlsplit(target).scheme == "https":
        return token
    if isinstance(token, str):
        raise DataError(
            f"refusing to send a Hub token to {target}: a token goes only over https to the "
            f"configured Hub endpoint ({configured}; set HF_ENDPOINT to change it)"
        )
    return False


def hub_download(
    repo_id: str,
    filename: str,
    *,
    repo_type: str = "dataset",
    revision: str | None = None,
    cache_dir=None,
    endpoint: str | None = None,
    token=None,
    retries: int = 4,
    backoff: float = 1.0,
) -> Path:
    """:func:`huggingface_hub.hf_hub_download` with retries and one-line errors.

    Files already in the Hub cache (``cache_dir``) are not downloaded again;
    with ``HF_HUB_OFFLINE=1`` only the cache is used.  The token is sent only
    over https to the configured Hub endpoint.
    """
    from huggingface_hub import hf_hub_download

    token = _token(endpoint, token)

    def call():
        return hf_hub_download(
            repo_id,
            filename,
            repo_type=repo_type,
            revision=revision,
            cache_dir=cache_dir,
            endpoint=endpoint,
            token=token,
        )

    return Path(_with_retries(call, f"{repo_id}/{filename}", retries, backoff))


def _api(endpoint, token):
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=_token(endpoint, token))


# ------------------------------------------------------------ pure helpers


def details_repo(model: str) -> str:
    """Details dataset of a model ``org/name`` (or ``org__name``): ``<org>__<name>-details``."""
    return f"{_ORG}/{model.replace('/', '__')}-details"


def latest_sample_files(files, tasks) -> dict[str, str]:
    """Pick, per sub-task, the samples file of the latest run.

    Parameters
    ----------
    files : iterable of str
        Paths in a details repository.
    tasks : iterable of str
        Sub-task names such as ``bbh_navigate``.

    Returns
    -------
    dict
        task -> path of the file with the greatest timestamp (ISO-like
        timestamps sort chronologically as strings); tasks without a file
        are absent.
    """
    wanted, best = set(tasks), {}
    for path in files:
        match = _SAMPLES.search(path)
        if match and match["task"] in wanted:
            task, stamp = match["task"], match["ts"]
            if task not in best or stamp > best[task][0]:
                best[task] = (stamp, path)
    return {task: path for task, (_, path) in best.items()}


def read_samples(path, metric: str, *, source: str | None = None) -> pd.Series:
    """Correctness per ``doc_id`` from a samples JSONL file.

    Returns
    -------
    pandas.Series
        float 0.0/1.0 indexed by ``doc_id`` (int), sorted by ``doc_id``.
        Booleans map to 1/0; any other value than 0/1/true/false is an error.
    """
    source = source or str(path)
    doc_ids, values = [], []
    for lineno, record in iter_jsonl(path, source=source):
        if "doc_id" not in record or metric not in record:
            raise DataError(
                f"{source}, line {lineno}: missing field "
                f"{'doc_id' if 'doc_id' not in record else metric!r}"
            )
        value = record[metric]
        if isinstance(value, bool) or value in (0, 1):
            values.append(float(value))
        else:
            raise DataError(
                f"{source}, line {lineno}: {metric} = {value!r}; expected 0/1 or true/false"
            )
        doc_ids.append(int(record["doc_id"]))
    series = pd.Series(values, index=pd.Index(doc_ids, name="doc_id"), dtype=float)
    if series.index.duplicated().any():
        raise DataError(f"{source}: duplicate doc_id {series.index[series.index.duplicated()][0]}")
    return series.sort_index()


# -------------------------------------------------------------- per model


def fetch_model(
    model: str, suite: str, *, cache_dir=None, endpoint=None, token=None, retries=4, backoff=1.0
) -> dict:
    """Latest-run correctness of one model on every sub-task of a suite.

    Returns
    -------
    dict
        ``{"tasks": {task: {doc_id: 0/1}}, "missing": [tasks without a file],
        "files": {task: path in repo}}``.
    """
    tasks = [task for task, _ in SUITES[suite]]
    repo = details_repo(model)
    files = _with_retries(
        lambda: _api(endpoint, token).list_repo_files(repo, repo_type="dataset"),
        f"list {repo}",
        retries,
        backoff,
    )
    latest = latest_sample_files(files, tasks)
    for path in latest.values():
        relative_path(path, f"{repo}: file listed by the Hub")
    out = {"tasks": {}, "missing": [t for t in tasks if t not in latest], "files": latest}
    for task, metric in SUITES[suite]:
        if task in latest:
            local = hub_download(
                repo,
                latest[task],
                cache_dir=cache_dir,
                endpoint=endpoint,
                token=token,
                retries=retries,
                backoff=backoff,
            )
            series = read_samples(local, metric, source=f"{repo}/{latest[task]}")
            out["tasks"][task] = {int(k): v for k, v in series.items()}
    return out


def _row_cache(cache_dir, suite, model) -> Path:
    return inside(
        cache_dir, f"hub-rows/{suite}/{model.replace('/', '__')}.json", f"model {model!r}"
    )


def _fetch_cached(model, suite, cache_dir, **options) -> dict:
    """:func:`fetch_model` memoised on disk, so a rerun resumes where it stopped."""
    path = _row_cache(cache_dir, suite, model)
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    result = fetch_model(model, suite, cache_dir=Path(cache_dir) / "hub", **options)
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(result), encoding="utf-8")
    return result


def rebuild_suite(
    suite: str,
    models,
    *,
    cache_dir,
    max_workers: int = 8,
    drop_incomplete: bool = False,
    progress: bool = True,
    endpoint=None,
    token=None,
    retries: int = 4,
    backoff: float = 1.0,
) -> tuple[pd.DataFrame, dict]:
    """Response matrix of ``models`` on ``suite``, fetched in parallel.

    Parameters
    ----------
    suite : str
        A key of :data:`SUITES`.
    models : sequence of str
        ``org/name`` (or ``org__name``) ids; row order of the result.
    cache_dir : path-like
        Holds the Hub cache (``hub/``) and one parsed row per model
        (``hub-rows/<suite>/``): a rerun fetches only unfinished models.
    drop_incomplete : bool
        Also drop models lacking any sub-task (as in Wu et al.'s cohort);
        models with no data at all are always dropped.  Both are reported.

    Returns
    -------
    (DataFrame, dict)
        0/1/NaN matrix (rows = kept models as given, columns
        ``<task>_<doc_id>``) and a report: ``n_models_requested``,
        ``missing_subtasks`` (model -> tasks), ``n_missing_pairs``,
        ``failed_models`` (model -> error), ``dropped_models`` (model ->
        reason), ``n_missing_entries``.
    """
    if suite not in SUITES:
        raise DataError(f"unknown leaderboard suite {suite!r}; expected one of {sorted(SUITES)}")
    models = [m.replace("__", "/", 1) if "/" not in m else m for m in models]
    if not models or len(set(models)) != len(models):
        raise DataError(f"{suite}: the model list is empty or has duplicates")
    options = {"endpoint": endpoint, "token": token, "retries": retries, "backoff": backoff}
    results, failed = {}, {}
    try:
        from tqdm.auto import tqdm
    except ImportError:
        tqdm = None

    def collect(model, fetch):
        try:
            results[model] = fetch()
        except HubNotFoundError as exc:  # a gap, reported; any other failure stops the build
            failed[model] = str(exc)

    # The first model alone: an unreachable Hub then fails once, not in every worker at once.
    collect(models[0], lambda: _fetch_cached(models[0], suite, cache_dir, **options))
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = {
            pool.submit(_fetch_cached, m, suite, cache_dir, **options): m for m in models[1:]
        }
        done = as_completed(futures)
        if tqdm is not None:
            done = tqdm(done, total=len(futures), desc=f"{suite} models", disable=not progress)
        try:
            for future in done:
                collect(futures[future], future.result)
        except BaseException:  # a failed download or malformed data; finished rows stay cached
            pool.shutdown(cancel_futures=True)
            raise

    tasks = [task for task, _ in SUITES[suite]]
    missing = {m: r["missing"] for m, r in results.items() if r["missing"]}
    missing.update({m: list(tasks) for m in failed})
    dropped = {
        m: "no data for any sub-task" for m in models if len(missing.get(m, ())) == len(tasks)
    }
    if drop_incomplete:
        dropped.update({m: f"missing sub-tasks {missing[m]}" for m in missing if m not in dropped})
    kept = [m for m in models if m not in dropped]
    if not kept:
        raise DataError(
            f"{suite}: none of the {len(models)} requested model(s) has data on the Hub "
            f"(e.g. {next(iter(failed.values()), 'no samples files')})"
        )

    columns, blocks = [], []
    for task in tasks:
        doc_ids = sorted({d for m in kept for d in map(int, results[m]["tasks"].get(task, {}))})
        columns += [f"{task}_{d}" for d in doc_ids]
        block = np.full((len(kept), len(doc_ids)), np.nan)
        position = {d: k for k, d in enumerate(doc_ids)}
        for i, m in enumerate(kept):
            for d, v in results[m]["tasks"].get(task, {}).items():
                block[i, position[int(d)]] = v
        blocks.append(block)
    values = np.hstack(blocks) if blocks else np.empty((len(kept), 0))
    frame = pd.DataFrame(
        values,
        index=pd.Index(kept, name="model", dtype=object),
        columns=pd.Index(columns, dtype=object),
    )
    report = {
        "suite": suite,
        "n_models_requested": len(models),
        "n_models_kept": len(kept),
        "missing_subtasks": missing,
        "n_missing_pairs": int(sum(len(v) for v in missing.values())),
        "failed_models": failed,
        "dropped_models": dropped,
        "n_missing_entries": int(np.isnan(values).sum()),
        "latest_files": {m: r["files"] for m, r in results.items()},
    }
    if missing:
        log.warning(
            "%s: %d model/sub-task pairs missing across %d models (see the summary)",
            suite,
            report["n_missing_pairs"],
            len(missing),
        )
    return frame, report


# ---------------------------------------------------------- cohort + metadata


def list_details_datasets(*, endpoint=None, token=None, retries=4, backoff=1.0) -> pd.DataFrame:
    """All ``open-llm-leaderboard/*-details`` datasets with their creation time.

    Returns
    -------
    pandas.DataFrame
        Columns ``model`` (``org/name``), ``repo_id``, ``created_at`` (UTC
        timestamps), sorted by ``created_at``.
    """

    def call():
        return list(_api(endpoint, token).list_datasets(author=_ORG, expand=["createdAt"]))

    rows = [
        {
            "model": info.id.split("/", 1)[1][: -len("-details")].replace("__", "/", 1),
            "repo_id": info.id,
            "created_at": pd.Timestamp(info.created_at),
        }
        for info in _with_retries(call, f"list {_ORG} datasets", retries, backoff)
        if info.id.endswith("-details")
    ]
    frame = pd.DataFrame(rows, columns=["model", "repo_id", "created_at"])
    return frame.sort_values("created_at", kind="stable").reset_index(drop=True)


def select_cohort(
    candidates: pd.DataFrame | None = None,
    *,
    models=None,
    date_from=None,
    date_to=None,
    limit: int | None = None,
) -> list[str]:
    """Models of a cohort, in order of creation of their details dataset.

    Either an explicit ``models`` list (returned as given) or the rows of
    ``candidates`` (from :func:`list_details_datasets`) created within
    ``[date_from, date_to]`` (inclusive dates, UTC), optionally the first
    ``limit`` of them.
    """
    if models is not None:
        return list(models)
    if candidates is None:
        raise DataError("hub cohort: give either a model list or a date range")
    created = pd.to_datetime(candidates["created_at"], utc=True)
    keep = pd.Series(True, index=candidates.index)
    if date_from is not None:
        keep &= created >= pd.Timestamp(date_from, tz="UTC")
    if date_to is not None:
        keep &= created < pd.Timestamp(date_to, tz="UTC") + pd.Timedelta(days=1)
    chosen = candidates.loc[keep, "model"].tolist()
    return chosen[:limit] if limit is not None else chosen


def leaderboard_contents(
    *, cache_dir=None, endpoint=None, token=None, revision=None, retries=4, backoff=1.0
) -> pd.DataFrame:
    """The leaderboard's model table (dataset ``open-llm-leaderboard/contents``).

    Reads every ``data/train-*.parquet`` file (through the Hub cache) and
    returns them concatenated, columns as published (``fullname``,
    ``#Params (B)``, ``Submission Date``, ...).
    """
    files = _with_retries(
        lambda: _api(endpoint, token).list_repo_files(
            CONTENTS_REPO, repo_type="dataset", revision=revision
        ),
        f"list {CONTENTS_REPO}",
        retries,
        backoff,
    )
    parts = sorted(f for f in files if re.fullmatch(r"data/train-.*\.parquet", f))
    if not parts:
        raise DataError(f"{CONTENTS_REPO}: no data/train-*.parquet file")
    frames = []
    for part in parts:
        local = hub_download(
            CONTENTS_REPO,
            part,
            revision=revision,
            cache_dir=cache_dir,
            endpoint=endpoint,
            token=token,
            retries=retries,
            backoff=backoff,
        )
        try:
            frames.append(pd.read_parquet(local))
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise DataError(
                one_line(f"{CONTENTS_REPO}/{part}: not a readable Parquet file ({exc})")
            ) from None
    return pd.concat(frames, ignore_index=True)
