"""Rebuilding the Open LLM Leaderboard (v2) matrices from the Hugging Face Hub.

Each evaluated model ``<org>/<name>`` has a dataset
``open-llm-leaderboard/<org>__<name>-details`` holding, per sub-task and per
evaluation run, a samples file
``<org>__<name>/samples_leaderboard_<task>_<timestamp>.jsonl`` with one JSON
record per item (``doc_id`` plus the metrics); runs of June 2024 name the same
JSON Lines content ``....json``, and both are read.  The ``datasets``
configuration ``<org>__<name>__leaderboard_<task>``, split ``latest``, is the
file with the latest timestamp; we read that file directly.

Per sub-task, items are ordered by ``doc_id`` and named ``<task>_<doc_id>``
(e.g. ``bbh_navigate_17``); the correctness column is ``acc_norm`` (BBH, GPQA,
MuSR), ``prompt_level_loose_acc`` (IFEval), ``exact_match`` (MATH hard) or
``acc`` (MMLU-Pro).  A model without a sub-task's file (or whose repository
the Hub does not have) gets missing entries for that sub-task; every such gap
is listed in the build report, never dropped silently.

What a rebuild keeps in ``cache_dir`` (a rerun resumes from it):

* ``hub-listings/<org>__<name>.json``: the latest samples file per sub-task of
  one details dataset and the commit it was listed at;
* ``hub-rows/<suite>/<org>__<name>.json``: one model's parsed answers, a few
  bytes per item, rebuilt when its files or :data:`ROW_FORMAT` change;
* ``hub-raw/<suite>/<org>__<name>/``: samples files only while they are
  parsed, unless ``keep_raw`` (an MMLU-Pro file is ~350 MB per model).

The details datasets are gated: their files need a token (``HF_TOKEN`` or
``hf auth login``) of an account that accepted their terms.  Access is checked
once before any bulk work; HTTP 429 answers are waited out as the Hub asks
(:class:`HubClient`).
"""

from __future__ import annotations

import datetime
import email.utils
import importlib
import json
import logging
import math
import re
import shutil
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from urllib.parse import urlsplit
from urllib.request import getproxies

import numpy as np
import pandas as pd

from .checks import inside, one_line, relative_path
from .download import DownloadError, _locked
from .matrix import DataError, atomic_path, iter_jsonl

__all__ = [
    "CONTENTS_REPO",
    "LISTING_FORMAT",
    "ROW_FORMAT",
    "SUITES",
    "HubAccessError",
    "HubClient",
    "HubNotFoundError",
    "HubRateLimitError",
    "cohort_listings",
    "cohort_tasks",
    "details_commits",
    "details_repo",
    "hub_download",
    "latest_sample_files",
    "leaderboard_contents",
    "list_details_datasets",
    "paper_cohort",
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

_ALL_TASKS = [task for tasks in SUITES.values() for task, _ in tasks]

#: Format of a cached parsed row.  Rows without it (cbmm 0.1) are rebuilt: they
#: may record June 2024 runs (``.json`` files) as missing.
ROW_FORMAT = "cbmm-hub-row/2"
#: Format of a cached details-dataset listing.
LISTING_FORMAT = "cbmm-hub-listing/1"
_DATASETS_FORMAT = "cbmm-hub-datasets/1"  # the cached table of all details datasets

_SAMPLES = re.compile(
    r"(?:^|/)samples_leaderboard_(?P<task>.+)_(?P<ts>\d{4}-\d{2}-\d{2}T[0-9.\-]+)\.jsonl?$"
)

#: The Hub counts requests over 5-minute windows: the longest a 429 without a hint is waited.
_WINDOW_S = 300.0
#: Datasets tried (in cohort order) to find a samples file for the access check.
_ACCESS_PROBES = 5


def cohort_tasks(suite: str) -> list[str]:
    """Sub-tasks a model needs to be in the paper's cohort for ``suite``.

    Wu et al.'s ``M1``: the 38 sub-tasks of the five suites besides MMLU-Pro
    (one cohort shared by the five), and MMLU-Pro on its own.
    """
    if suite == "MMLU_PRO":
        return [task for task, _ in SUITES["MMLU_PRO"]]
    return [task for name, tasks in SUITES.items() if name != "MMLU_PRO" for task, _ in tasks]


# ---------------------------------------------------------------- Hub access


class HubNotFoundError(DownloadError):
    """The Hub says a repository, revision or file does not exist (or is disabled)."""


class HubAccessError(DownloadError):
    """The Hub refuses access (HTTP 401/403): no token, a bad one, or a gated dataset's terms."""


class HubRateLimitError(DownloadError):
    """The Hub answered HTTP 429 for longer than the client's ``rate_limit_wait``."""


def _transport_errors() -> tuple:
    """Connection errors of huggingface_hub's HTTP library (httpx in 1.x, httpx2 from 2.0)."""
    found = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(importlib.import_module(name).TransportError)
        except ImportError:
            pass
    return tuple(found)


def _status(exc) -> int | None:
    response = getattr(exc, "response", None)
    return response.status_code if response is not None else None


def _classify(exc: BaseException) -> str:
    """What an error of a Hub call means.

    ``"missing"``, ``"denied"`` (401/403, gated), ``"offline"``,
    ``"rate_limited"`` (429), ``"transient"`` or ``"fatal"``.
    """
    from huggingface_hub import constants
    from huggingface_hub.errors import (
        DisabledRepoError,
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RemoteEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    if isinstance(exc, DisabledRepoError):
        return "missing"
    # Before "missing": a gated repo is a RepositoryNotFoundError too, and an anonymous
    # request is answered 401 whether the repository is gated, private or absent.
    if isinstance(exc, GatedRepoError) or (
        isinstance(exc, HfHubHTTPError) and _status(exc) in (401, 403)
    ):
        return "denied"
    if isinstance(exc, (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError)):
        return "missing"
    if isinstance(exc, OfflineModeIsEnabled) or (
        isinstance(exc, LocalEntryNotFoundError) and constants.HF_HUB_OFFLINE
    ):
        return "offline"
    if isinstance(exc, HfHubHTTPError):
        status = _status(exc)
        if status == 429:
            return "rate_limited"
        retryable = status is None or status in (408, 425) or status >= 500
        return "transient" if retryable else "fatal"
    # A LocalEntryNotFoundError here: the Hub could not be reached and the file is not cached.
    transient = (LocalEntryNotFoundError, ConnectionError, TimeoutError, *_transport_errors())
    return "transient" if isinstance(exc, transient) else "fatal"


def _unresolvable_host(endpoint: str | None) -> str | None:
    """The endpoint's host name where it does not resolve and no proxy resolves it instead.

    A failed name lookup is what a machine without a network or a DNS server
    sees; no retry of ours changes it, so :meth:`HubClient.call` stops at once
    (huggingface_hub 2.x has already retried the request for about 23 s).
    """
    from huggingface_hub import constants

    parts = urlsplit((endpoint or constants.ENDPOINT).rstrip("/"))
    proxies = getproxies()
    if not parts.hostname or proxies.get(parts.scheme) or proxies.get("all"):
        return None
    try:
        socket.getaddrinfo(parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
    except socket.gaierror:
        return parts.hostname
    except OSError:  # not a lookup's answer: the retries decide
        return None
    return None


def _rate_limit_delay(response) -> float | None:
    """Seconds a 429 answer asks to wait, or ``None`` when it gives no hint.

    The Hub's ``RateLimit: "api";r=0;t=<seconds to the window's reset>``
    (IETF draft) comes first, then ``Retry-After`` (seconds or an HTTP date).
    """
    if response is None:
        return None
    limit = re.search(r"\br\s*=\s*(\d+)\s*;\s*t\s*=\s*(\d+)", response.headers.get("RateLimit", ""))
    if limit and int(limit[1]) == 0:
        return float(limit[2])
    after = response.headers.get("Retry-After", "").strip()
    if after.isdigit():
        return float(after)
    try:
        when = email.utils.parsedate_to_datetime(after)
    except (TypeError, ValueError):
        return None
    return max(0.0, (when - datetime.datetime.now(datetime.timezone.utc)).total_seconds())


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


class HubClient:
    """How one build talks to the Hub: endpoint, token, retries, 429 pacing, bytes fetched.

    Parameters
    ----------
    endpoint : str, optional
        Hub URL; by default the configured one (``HF_ENDPOINT``, else
        ``https://huggingface.co``).
    token : str, optional
        By default the stored token (``HF_TOKEN``, ``hf auth login``).  A
        token is sent only over https to the configured endpoint; an explicit
        token for any other endpoint is refused with a :class:`DataError`.
    retries : int
        Attempts after a server error or a dropped connection, on top of
        huggingface_hub's own, ``backoff * 2**k`` seconds apart.  No retry
        where the endpoint's host name does not resolve (and no proxy is set):
        that fails at once, with what to do offline.
    backoff : float
        First of those waits, in seconds.
    rate_limit_wait : float
        Seconds one request may spend in all waiting out HTTP 429 answers.
        Each wait is what the Hub asks (``RateLimit`` or ``Retry-After``
        header; without either, ``backoff * 2**k`` up to one 5-minute window)
        and pauses every worker of the client.  Past it:
        :class:`HubRateLimitError`.

    Attributes
    ----------
    bytes_downloaded : int
        Bytes of samples files fetched through :meth:`count_download`.
    """

    def __init__(self, endpoint=None, token=None, *, retries=4, backoff=1.0, rate_limit_wait=1800.0):
        self.endpoint = endpoint
        self.token = _token(endpoint, token)
        self.retries, self.backoff, self.rate_limit_wait = retries, backoff, rate_limit_wait
        self.bytes_downloaded = 0
        self.access_checked = False
        self._lock = threading.Lock()
        self._resume_at = 0.0  # time.monotonic() before which no request starts

    @property
    def api(self):
        from huggingface_hub import HfApi

        return HfApi(endpoint=self.endpoint, token=self.token)

    def sends_token(self) -> bool:
        """Whether requests carry a token (explicit or stored)."""
        from huggingface_hub import get_token

        return self.token is not False and (isinstance(self.token, str) or get_token() is not None)

    def count_download(self, n_bytes: int) -> None:
        with self._lock:
            self.bytes_downloaded += n_bytes

    def call(self, fn, what: str, *, repo: str | None = None):
        """``fn()``, retried and paced; every failure becomes one line.

        Parameters
        ----------
        fn : callable
            A huggingface_hub call.
        what : str
            Starts every message (e.g. ``"list <repo>"``).
        repo : str, optional
            The dataset ``fn`` reads, named in an access error.

        Raises
        ------
        HubNotFoundError, HubAccessError, HubRateLimitError, DownloadError
        """
        failures, rate_waited, unhinted = 0, 0.0, 0
        while True:
            self._await_resume()
            try:
                return fn()
            except DataError:  # ours, already one line (e.g. a refused token)
                raise
            except Exception as exc:  # noqa: BLE001 - classified just below
                kind = _classify(exc)
                if kind == "rate_limited":
                    asked = _rate_limit_delay(exc.response)
                    hint = min(_WINDOW_S, self.backoff * 2**unhinted) if asked is None else asked
                    unhinted += asked is None
                    wait = max(hint, 1.0)  # a 429 costs at least a second, so the bound ends it
                    if rate_waited + wait > self.rate_limit_wait:
                        raise HubRateLimitError(
                            f"{what}: rate-limited by the Hub (HTTP 429) after {rate_waited:.0f} s "
                            f"of waiting; the next wait, {wait:.0f} s, would pass rate_limit_wait "
                            f"({self.rate_limit_wait:g} s). Finished work stays in the cache: "
                            "run the build again later and it resumes there"
                        ) from None
                    log.warning(
                        "%s: rate-limited by the Hub (HTTP 429); all requests wait %.0f s%s",
                        what,
                        wait,
                        "" if asked is None else " as it asks",
                    )
                    self._pause(wait)
                    rate_waited += wait
                    continue
                if kind == "transient" and _status(exc) is None:
                    host = _unresolvable_host(self.endpoint)
                    if host is not None:
                        raise DownloadError(
                            f"{what}: cannot reach the Hub: its host {host} does not resolve (no "
                            "network, or no DNS) and the file is not in the local Hub cache; "
                            "connect, set HF_ENDPOINT to a mirror this machine reaches, or fill "
                            "the cache online and run with HF_HUB_OFFLINE=1"
                        ) from None
                if kind == "transient" and failures < self.retries:
                    wait = self.backoff * 2**failures
                    failures += 1
                    log.warning(
                        "%s: %s; retry %d/%d in %.1fs",
                        what,
                        one_line(exc)[:200],
                        failures,
                        self.retries,
                        wait,
                    )
                    time.sleep(wait)
                    continue
                raise self._error(kind, what, exc, failures + 1, repo) from None

    def _pause(self, seconds: float) -> None:
        with self._lock:
            self._resume_at = max(self._resume_at, time.monotonic() + seconds)

    def _await_resume(self) -> None:
        while True:
            with self._lock:
                delay = self._resume_at - time.monotonic()
            if delay <= 0:
                return
            time.sleep(delay)

    def _error(self, kind, what, exc, attempts, repo) -> DownloadError:
        detail = one_line(f"{type(exc).__name__}: {exc}")[:300]
        if kind == "missing":
            return HubNotFoundError(f"{what}: not found on the Hub ({detail})")
        if kind == "denied":
            return HubAccessError(self._access_message(what, _status(exc), repo))
        if kind == "offline":
            return DownloadError(
                f"{what}: not in the local Hub cache, and HF_HUB_OFFLINE=1 forbids the network"
            )
        if kind == "transient":
            return DownloadError(f"{what}: failed after {attempts} attempt(s): {detail}")
        return DownloadError(f"{what}: {detail}")

    def _access_message(self, what, status, repo) -> str:
        from huggingface_hub import constants

        if not self.sends_token():
            cause = (
                "no Hub token was sent: log in with `hf auth login` or set HF_TOKEN (a token goes "
                "only over https to the configured Hub endpoint)"
            )
        elif status == 401:
            cause = (
                "the Hub did not accept the token: set HF_TOKEN to a valid token or log in again "
                "with `hf auth login`"
            )
        else:
            cause = "the token's account has not been granted access"
        endpoint = (self.endpoint or constants.ENDPOINT).rstrip("/")
        terms = f"the terms of {endpoint}/datasets/{repo}" if repo else "the repository's terms"
        return (
            f"{what}: access denied (HTTP {status}): {cause}, and accept {terms} with that "
            "account (the Open LLM Leaderboard details datasets are gated and need both)"
        )

    def download(
        self, repo_id, filename, *, repo_type="dataset", revision=None, cache_dir=None, local_dir=None
    ) -> Path:
        """:func:`huggingface_hub.hf_hub_download` through :meth:`call`.

        Files already in ``cache_dir`` (the Hub cache) or ``local_dir`` are not
        downloaded again, and an interrupted download resumes; with
        ``HF_HUB_OFFLINE=1`` only those are used.
        """
        from huggingface_hub import hf_hub_download

        def fetch():
            return hf_hub_download(
                repo_id,
                filename,
                repo_type=repo_type,
                revision=revision,
                cache_dir=cache_dir,
                local_dir=local_dir,
                endpoint=self.endpoint,
                token=self.token,
            )

        return Path(self.call(fetch, f"{repo_id}/{filename}", repo=repo_id))

    def check_file_access(self, repo_id: str, filename: str) -> None:
        """One HEAD request for a dataset file: raises :class:`HubAccessError` if it is refused.

        A plain request through huggingface_hub's session, so that no retry of
        the library's own (huggingface_hub 1.x retries 429 for 23 s, ignoring
        ``Retry-After``) comes before :meth:`call`'s.  A redirect (to the file
        store) means access.
        """
        from huggingface_hub import hf_hub_url
        from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

        url = hf_hub_url(repo_id, filename, repo_type="dataset", endpoint=self.endpoint)

        def head():
            response = get_session().head(
                url, headers=build_hf_headers(token=self.token), follow_redirects=False, timeout=30
            )
            if not response.is_redirect:
                hf_raise_for_status(response)

        self.call(head, f"{repo_id}/{filename}", repo=repo_id)
        self.access_checked = True


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
    client = HubClient(endpoint, token, retries=retries, backoff=backoff)
    return client.download(
        repo_id, filename, repo_type=repo_type, revision=revision, cache_dir=cache_dir
    )


# ------------------------------------------------------------ pure helpers


def details_repo(model: str) -> str:
    """Details dataset of a model ``org/name`` (or ``org__name``): ``<org>__<name>-details``."""
    return f"{_ORG}/{model.replace('/', '__')}-details"


def latest_sample_files(files, tasks) -> dict[str, str]:
    """Pick, per sub-task, the samples file of the latest run.

    Parameters
    ----------
    files : iterable of str
        Paths in a details repository.  Samples files end in ``.jsonl`` or,
        for runs of June 2024, ``.json`` (JSON Lines too).
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
            candidate = (match["ts"], path)  # the path breaks a tie of timestamps, reproducibly
            best[match["task"]] = max(best.get(match["task"], candidate), candidate)
    return {task: path for task, (_, path) in best.items()}


def read_samples(path, metric: str, *, source: str | None = None) -> pd.Series:
    """Correctness per ``doc_id`` from a samples file (JSON Lines, whatever its suffix).

    Returns
    -------
    pandas.Series
        float 0.0/1.0 indexed by ``doc_id`` (int), sorted by ``doc_id``.
        Booleans map to 1/0; any other value than 0/1/true/false is an error.
    """
    source = source or str(path)
    doc_ids, values = [], []
    for lineno, record in iter_jsonl(path, source=source):
        if not isinstance(record, dict) or "doc_id" not in record or metric not in record:
            missing = "doc_id" if not isinstance(record, dict) or "doc_id" not in record else metric
            raise DataError(f"{source}, line {lineno}: missing field {missing!r}")
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


def _encode_answers(series: pd.Series) -> dict:
    """A sub-task's answers as runs of consecutive ``doc_id`` plus a string of 0/1."""
    ids = series.index.to_numpy(dtype=np.int64)
    if len(ids) == 0:
        return {"doc_ids": [], "correct": ""}
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    starts = ids[np.r_[0, breaks]]
    stops = ids[np.r_[breaks - 1, len(ids) - 1]] + 1
    return {
        "doc_ids": [[int(a), int(b)] for a, b in zip(starts, stops, strict=True)],
        "correct": "".join("1" if v else "0" for v in series.to_numpy()),
    }


def _decode_answers(answers: dict) -> tuple[np.ndarray, np.ndarray]:
    """``(doc_ids, 0/1 values)`` from :func:`_encode_answers`."""
    ids = [np.arange(a, b, dtype=np.int64) for a, b in answers["doc_ids"]]
    values = np.frombuffer(answers["correct"].encode("ascii"), dtype=np.uint8) - ord("0")
    return (np.concatenate(ids) if ids else np.empty(0, np.int64)), values.astype(float)


# ------------------------------------------------------------ cached steps


def _cache_file(cache_dir, folder: str, model: str) -> Path:
    return inside(cache_dir, f"{folder}/{model.replace('/', '__')}.json", f"model {model!r}")


def _read_cached(path: Path, form: str) -> dict | None:
    """A cache file written in format ``form``, else ``None`` (absent, older, unreadable)."""
    try:
        cached = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return cached if isinstance(cached, dict) and cached.get("format") == form else None


def _write_cached(path: Path, obj: dict) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj), encoding="utf-8")


def _cached_listing(cache_dir, model, commit) -> dict | None:
    cached = _read_cached(_cache_file(cache_dir, "hub-listings", model), LISTING_FORMAT)
    if cached is None or commit not in (None, cached["commit"]):
        return None
    return cached


def _listing(client: HubClient, cache_dir, model: str, commit: str | None = None) -> dict:
    """``{"commit", "latest": {task: samples file}}`` of a model's details dataset.

    The cached listing is used unless the dataset's current ``commit`` (from
    :func:`list_details_datasets`) is known and differs.  A dataset the Hub
    does not have raises :class:`HubNotFoundError`; with a known commit that
    answer is cached too.
    """
    cached = _cached_listing(cache_dir, model, commit)
    if cached is not None and "missing" in cached:
        raise HubNotFoundError(cached["missing"])
    if cached is not None:
        return cached
    repo = details_repo(model)
    path = _cache_file(cache_dir, "hub-listings", model)
    listing = {"format": LISTING_FORMAT, "repo": repo, "commit": commit}
    try:
        files = client.call(
            lambda: client.api.list_repo_files(repo, repo_type="dataset"), f"list {repo}", repo=repo
        )
    except HubNotFoundError as exc:
        if commit is not None:  # listed by the Hub yet absent: the same answer until it changes
            _write_cached(path, {**listing, "missing": str(exc)})
        raise
    listing["latest"] = latest_sample_files(files, _ALL_TASKS)
    for file in listing["latest"].values():
        relative_path(file, f"{repo}: file listed by the Hub")
    _write_cached(path, listing)
    return listing


def _raw_folder(cache_dir, suite, model) -> Path:
    return inside(cache_dir, f"hub-raw/{suite}/{model.replace('/', '__')}", f"model {model!r}")


def _fetch_row(client, cache_dir, suite, model, commit, keep_raw) -> dict:
    """One model's answers on ``suite``, parsed from its latest samples files (cached)."""
    listing = _listing(client, cache_dir, model, commit)
    files = {task: listing["latest"][task] for task, _ in SUITES[suite] if task in listing["latest"]}
    path = _cache_file(cache_dir, f"hub-rows/{suite}", model)
    cached = _read_cached(path, ROW_FORMAT)
    if cached is not None and cached["files"] == files:
        return cached
    repo, raw = details_repo(model), _raw_folder(cache_dir, suite, model)
    answers = {}
    for task, metric in SUITES[suite]:
        if task not in files:
            continue
        fresh = not (raw / files[task]).is_file()
        local = client.download(repo, files[task], local_dir=raw)
        if fresh:
            client.count_download(local.stat().st_size)
        answers[task] = _encode_answers(read_samples(local, metric, source=f"{repo}/{files[task]}"))
        if not keep_raw:
            local.unlink()  # disk in use: one samples file per worker
    if not keep_raw:
        shutil.rmtree(raw, ignore_errors=True)  # huggingface_hub's download metadata
    row = {"format": ROW_FORMAT, "commit": listing["commit"], "files": files, "answers": answers}
    _write_cached(path, row)
    return row


def _check_access(client: HubClient, cache_dir, models, commits) -> None:
    """Fail early, with one clear error, when the details datasets' files are refused.

    One HEAD request for a samples file of the first of ``models`` (in order)
    that lists one.  Skipped offline and once it succeeded.
    """
    from huggingface_hub import constants

    if client.access_checked or constants.HF_HUB_OFFLINE:
        return
    for model in models[:_ACCESS_PROBES]:
        try:
            latest = _listing(client, cache_dir, model, commits.get(model))["latest"]
            if latest:
                client.check_file_access(details_repo(model), min(latest.values()))
                return
        except HubNotFoundError:  # a model gone from the Hub says nothing about access
            continue


def _progress(iterable, total, desc, enabled):
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return iterable
    return tqdm(iterable, total=total, desc=desc, disable=not enabled)


def _map_models(fn, models, *, max_workers, desc, progress, client=None) -> tuple[dict, dict]:
    """``{model: fn(model)}`` computed in parallel, and ``{model: error}`` for models not found.

    Any other failure cancels what has not started and is raised; finished
    work stays cached.
    """
    results, missing = {}, {}
    with ThreadPoolExecutor(max_workers=max_workers) as pool:
        futures = {pool.submit(fn, model): model for model in models}
        done = _progress(as_completed(futures), len(futures), desc, progress)
        try:
            for future in done:
                model = futures[future]
                try:
                    results[model] = future.result()
                except HubNotFoundError as exc:  # a gap, reported
                    missing[model] = str(exc)
                if client is not None and hasattr(done, "set_postfix_str"):
                    done.set_postfix_str(f"{client.bytes_downloaded / 1e6:.1f} MB downloaded")
        except BaseException:
            pool.shutdown(cancel_futures=True)
            raise
    return results, missing


def _bytes_under(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


# -------------------------------------------------------------- the matrix


def rebuild_suite(
    suite: str,
    models,
    *,
    cache_dir,
    client: HubClient | None = None,
    max_workers: int = 8,
    drop_incomplete: bool = False,
    keep_raw: bool = False,
    progress: bool = True,
    commits: dict | None = None,
) -> tuple[pd.DataFrame, dict]:
    """Response matrix of ``models`` on ``suite``, fetched in parallel.

    Parameters
    ----------
    suite : str
        A key of :data:`SUITES`.
    models : sequence of str
        ``org/name`` (or ``org__name``) ids; row order of the result.
    cache_dir : path-like
        Holds the listings, parsed rows and samples files in flight (see the
        module docstring): a rerun fetches only unfinished models.
    client : HubClient, optional
        Endpoint, token, retries and rate-limit pacing (default: ``HubClient()``).
    max_workers : int
        Models fetched at once; each has at most one samples file on disk.
    drop_incomplete : bool
        Also drop models lacking any sub-task (as in Wu et al.'s cohort);
        models with no data at all are always dropped.  Both are reported.
    keep_raw : bool
        Keep the samples files under ``hub-raw/`` instead of deleting each
        once it is parsed.
    progress : bool
        Show a progress bar.
    commits : dict, optional
        model -> commit of its details dataset (from
        :func:`list_details_datasets`): cached listings of other commits are
        refreshed.

    Returns
    -------
    (DataFrame, dict)
        0/1/NaN matrix (rows = kept models as given, columns
        ``<task>_<doc_id>``) and a report: ``n_models_requested``,
        ``missing_subtasks`` (model -> tasks), ``n_missing_pairs``,
        ``failed_models`` (model -> error), ``dropped_models`` (model ->
        reason), ``n_missing_entries``, ``latest_files``, ``commits``,
        ``bytes_downloaded`` (samples files fetched by this call) and
        ``bytes_kept`` (what the requested models occupy in the cache).

    Raises
    ------
    HubAccessError
        Before any bulk download, when the files are refused (gated datasets).
    DownloadError
        For any failure other than a missing repository or file.
    """
    if suite not in SUITES:
        raise DataError(f"unknown leaderboard suite {suite!r}; expected one of {sorted(SUITES)}")
    client = client or HubClient()
    models = [m.replace("__", "/", 1) if "/" not in m else m for m in models]
    if not models or len(set(models)) != len(models):
        raise DataError(f"{suite}: the model list is empty or has duplicates")
    commits = commits or {}
    downloaded_before = client.bytes_downloaded
    rows_path = {m: _cache_file(cache_dir, f"hub-rows/{suite}", m) for m in models}
    if any(_read_cached(path, ROW_FORMAT) is None for path in rows_path.values()):
        _check_access(client, cache_dir, models, commits)
    results, failed = _map_models(
        lambda m: _fetch_row(client, cache_dir, suite, m, commits.get(m), keep_raw),
        models,
        max_workers=max_workers,
        desc=f"{suite} models",
        progress=progress,
        client=client,
    )

    tasks = [task for task, _ in SUITES[suite]]
    missing = {m: [t for t in tasks if t not in r["answers"]] for m, r in results.items()}
    missing = {m: gaps for m, gaps in missing.items() if gaps}
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

    decoded = {m: {t: _decode_answers(a) for t, a in results[m]["answers"].items()} for m in kept}
    columns, blocks = [], []
    for task in tasks:
        present = [decoded[m][task][0] for m in kept if task in decoded[m]]
        doc_ids = np.unique(np.concatenate(present)) if present else np.empty(0, np.int64)
        columns += [f"{task}_{d}" for d in doc_ids]
        block = np.full((len(kept), len(doc_ids)), np.nan)
        for i, m in enumerate(kept):
            if task in decoded[m]:
                ids, values = decoded[m][task]
                block[i, np.searchsorted(doc_ids, ids)] = values
        blocks.append(block)
    values = np.hstack(blocks) if blocks else np.empty((len(kept), 0))
    frame = pd.DataFrame(
        values,
        index=pd.Index(kept, name="model", dtype=object),
        columns=pd.Index(columns, dtype=object),
    )
    kept_bytes = sum(
        _bytes_under(rows_path[m])
        + _bytes_under(_cache_file(cache_dir, "hub-listings", m))
        + (_bytes_under(_raw_folder(cache_dir, suite, m)) if keep_raw else 0)
        for m in models
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
        "commits": {m: r["commit"] for m, r in results.items() if r["commit"] is not None},
        "keep_raw": keep_raw,
        "bytes_downloaded": client.bytes_downloaded - downloaded_before,
        "bytes_kept": kept_bytes,
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


def list_details_datasets(client: HubClient | None = None, *, cache_dir=None) -> pd.DataFrame:
    """All ``open-llm-leaderboard/*-details`` datasets with their creation time and commit.

    Parameters
    ----------
    client : HubClient, optional
    cache_dir : path-like, optional
        Where the table is kept (``hub-listings/details-datasets.json``) after
        each listing; with ``HF_HUB_OFFLINE=1`` the kept table is used.

    Returns
    -------
    pandas.DataFrame
        Columns ``model`` (``org/name``), ``repo_id``, ``created_at`` (UTC
        timestamps), ``sha`` (current commit), sorted by ``created_at``.
    """
    from huggingface_hub import constants

    client = client or HubClient()
    kept = cache_dir and inside(cache_dir, "hub-listings/details-datasets.json", "the datasets table")
    table = _read_cached(kept, _DATASETS_FORMAT) if kept else None
    if table is None or not constants.HF_HUB_OFFLINE:

        def call():
            return list(client.api.list_datasets(author=_ORG, expand=["createdAt", "sha"]))

        rows = [
            {
                "repo_id": info.id,
                "created_at": info.created_at.isoformat() if info.created_at else None,
                "sha": info.sha,
            }
            for info in client.call(call, f"list {_ORG} datasets")
            if info.id.endswith("-details")
        ]
        table = {"format": _DATASETS_FORMAT, "datasets": rows}
        if kept:
            _write_cached(kept, table)
    frame = pd.DataFrame(table["datasets"], columns=["repo_id", "created_at", "sha"])
    frame.insert(
        0, "model", [r.split("/", 1)[1][: -len("-details")].replace("__", "/", 1) for r in frame["repo_id"]]
    )
    frame["created_at"] = pd.to_datetime(frame["created_at"], utc=True)
    return frame.sort_values("created_at", kind="stable").reset_index(drop=True)


def details_commits(candidates: pd.DataFrame) -> dict:
    """model -> current commit of its details dataset, from :func:`list_details_datasets`."""
    if "sha" not in candidates:
        return {}
    return {m: c for m, c in zip(candidates["model"], candidates["sha"], strict=True) if c}


def cohort_listings(
    candidates: pd.DataFrame,
    *,
    cache_dir,
    client: HubClient | None = None,
    max_workers: int = 8,
    progress: bool = True,
) -> dict[str, dict[str, str]]:
    """The latest samples file per sub-task of every candidate details dataset.

    One listing request per dataset, cached in ``hub-listings/`` under the
    commit that ``candidates`` gives, so a rerun (or another suite's build)
    lists only datasets that changed.  Access to the files is checked before
    the first request; builds in other processes wait for this one.

    Returns
    -------
    dict
        model -> ``{task: path}``; datasets the Hub no longer has are absent.
    """
    client = client or HubClient()
    commits, models = details_commits(candidates), candidates["model"].tolist()
    lock = inside(cache_dir, "hub-listings/walk.lock", "the listings' lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    # Concurrent builds of the five suites would each list every dataset otherwise.
    with _locked(lock, math.inf, "the details datasets' listings"):
        todo = [m for m in models if _cached_listing(cache_dir, m, commits.get(m)) is None]
        if todo:
            _check_access(client, cache_dir, todo, commits)
        listings, _ = _map_models(
            lambda m: _listing(client, cache_dir, m, commits.get(m))["latest"],
            models,
            max_workers=max_workers,
            desc="listing details datasets",
            progress=progress and bool(todo),
        )
    return listings


def paper_cohort(
    candidates: pd.DataFrame, listings: dict[str, dict[str, str]], suite: str
) -> tuple[list[str], dict]:
    """The paper's cohort for ``suite``: Wu et al.'s ``M1`` rule.

    The details datasets in order of creation, kept when their listing has a
    samples file for every sub-task of :func:`cohort_tasks` (the 38 of the five
    suites besides MMLU-Pro, shared by the five; MMLU-Pro alone for itself);
    the first half (rounded down) of those is the cohort.

    Parameters
    ----------
    candidates : pandas.DataFrame
        From :func:`list_details_datasets` (columns ``model``, ``created_at``).
    listings : dict
        model -> ``{task: samples file}`` (:func:`cohort_listings`); a model
        absent here has no data.
    suite : str
        A key of :data:`SUITES`.

    Returns
    -------
    (list of str, dict)
        The models in order of creation, and counts ``n_details_datasets``,
        ``n_complete``, ``n_cohort``.
    """
    tasks = cohort_tasks(suite)
    ordered = candidates.sort_values("created_at", kind="stable")["model"]
    complete = [m for m in ordered if all(t in listings.get(m, {}) for t in tasks)]
    cohort = complete[: len(complete) // 2]
    counts = {"n_details_datasets": len(ordered), "n_complete": len(complete)}
    return cohort, {**counts, "n_cohort": len(cohort)}


def select_cohort(
    candidates: pd.DataFrame | None = None,
    *,
    models=None,
    date_from=None,
    date_to=None,
    limit: int | None = None,
) -> list[str]:
    """Models of a date-window cohort, in order of creation of their details dataset.

    Either an explicit ``models`` list (returned as given) or the rows of
    ``candidates`` (from :func:`list_details_datasets`) created within
    ``[date_from, date_to]`` (inclusive dates, UTC), optionally the first
    ``limit`` of them.  The paper's cohort is :func:`paper_cohort`.
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
    *, cache_dir=None, client: HubClient | None = None, revision=None
) -> pd.DataFrame:
    """The leaderboard's model table (dataset ``open-llm-leaderboard/contents``).

    Reads every ``data/train-*.parquet`` file (through the Hub cache) and
    returns them concatenated, columns as published (``fullname``,
    ``#Params (B)``, ``Submission Date``, ...).
    """
    client = client or HubClient()
    files = client.call(
        lambda: client.api.list_repo_files(CONTENTS_REPO, repo_type="dataset", revision=revision),
        f"list {CONTENTS_REPO}",
        repo=CONTENTS_REPO,
    )
    parts = sorted(f for f in files if re.fullmatch(r"data/train-.*\.parquet", f))
    if not parts:
        raise DataError(f"{CONTENTS_REPO}: no data/train-*.parquet file")
    frames = []
    for part in parts:
        local = client.download(CONTENTS_REPO, part, revision=revision, cache_dir=cache_dir)
        try:
            frames.append(pd.read_parquet(local))
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            raise DataError(
                one_line(f"{CONTENTS_REPO}/{part}: not a readable Parquet file ({exc})")
            ) from None
    return pd.concat(frames, ignore_index=True)
