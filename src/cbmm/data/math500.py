"""MATH-500: responses (LaRT data), item metadata and model metadata.

Responses.  The paper's 140 x 500 matrix is the LaRT accuracy matrix
(GitHub ``Toby-X/Latency-Response-Theory-Model``, ``data/accuracy_math500.csv``,
158 rows) without the 18 rows of :data:`LART_EXCLUDED_MODELS`.
:func:`lart_to_release` reproduces the authors' file byte for byte: it keeps
the header and the remaining lines unchanged and in order, and ends every line
with CRLF, as the authors' file does (LaRT's own file uses LF; the release was
evidently re-saved on Windows).  The result is accepted only if its SHA-256
equals the pin.

Items.  Column ``j`` is line ``j`` of the ``test`` split of the Hub dataset
``HuggingFaceH4/MATH-500`` (file ``test.jsonl``); :func:`fetch_items` writes
``item, subject, level, unique_id``.

Models.  ``config/math500_models.csv`` maps each row label to its Hub repo,
prompt style, parameter count (billions, nominal) and release date, plus the
size tier of the paper's Figure (0-7B, 7-20B, >20B);
:func:`refresh_model_table` adds the Hub's own figures when online.
"""

from __future__ import annotations

import csv
import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from .checks import inside
from .download import DownloadError, download, sha256_file
from .hub import HubAccessError, HubClient, HubNotFoundError, hub_download
from .matrix import DataError, atomic_path, iter_jsonl

__all__ = [
    "ITEMS_REPO",
    "LART_EXCLUDED_MODELS",
    "LART_EXCLUDED_ROWS",
    "MODEL_COLUMNS",
    "TIERS",
    "fetch_items",
    "fetch_lart",
    "lart_to_release",
    "model_table",
    "read_items_jsonl",
    "refresh_model_table",
    "tier_of",
]

ITEMS_REPO = "HuggingFaceH4/MATH-500"

#: LaRT models absent from the paper's MATH-500 suite (each with both prompts).
LART_EXCLUDED_MODELS = (
    "TinyLlama_TinyLlama_1.1B_Chat_v1.0",
    "google_gemma_3_1b_pt",
    "google_gemma_7b_it",
    "google_vaultgemma_1b",
    "meta_llama_Llama_3.2_1B",
    "meta_llama_Llama_3.2_3B",
    "meta_llama_Meta_Llama_3_8B",
    "microsoft_phi_4",
    "openai_community_gpt2",
)
LART_EXCLUDED_ROWS = tuple(
    f"{m}_{p}" for m in LART_EXCLUDED_MODELS for p in ("one_shot", "zero_shot")
)

#: (upper bound in billions of parameters, inclusive; tier label), smallest first.
TIERS = ((7.0, "0-7B"), (20.0, "7-20B"), (np.inf, ">20B"))
MODEL_COLUMNS = ["row_label", "model", "prompt", "params_b", "release_date", "tier"]


# ------------------------------------------------------------------ responses


def _row_label(line: bytes) -> str:
    text = line.decode("utf-8")
    if text.startswith('"'):
        return next(csv.reader([text]))[0]
    return text.split(",", 1)[0]


def lart_to_release(lart_csv, out_csv, *, sha256: str | None, excluded=LART_EXCLUDED_ROWS) -> Path:
    """Derive the paper's MATH-500 CSV from the LaRT file.

    Parameters
    ----------
    lart_csv : path-like
        LaRT ``accuracy_math500.csv`` (header ``,0,...,499``; one line per
        ``<model>_<prompt>`` row; LF or CRLF line ends).
    out_csv : path-like
        Output; written atomically and only if the checksum matches.
    sha256 : str or None
        Expected SHA-256 of the output (the pin in ``config/datasets.yaml``).
        ``None`` skips the check (for LaRT-like files of your own).
    excluded : sequence of str
        Row labels to drop; every one must be present exactly once.

    Raises
    ------
    DataError
        If a label to drop is absent or repeated, or the output does not have
        the expected SHA-256 (nothing is written then).
    """
    lart_csv = Path(lart_csv)
    lines = lart_csv.read_bytes().splitlines()
    while lines and not lines[-1]:
        lines.pop()
    if len(lines) < 2:
        raise DataError(f"{lart_csv}: expected a header and rows, found {len(lines)} line(s)")
    header, rows = lines[0], lines[1:]
    labels = [_row_label(row) for row in rows]
    counts = {label: labels.count(label) for label in excluded}
    absent = [label for label, n in counts.items() if n == 0]
    repeated = [label for label, n in counts.items() if n > 1]
    if absent or repeated:
        raise DataError(
            f"{lart_csv}: rows to drop that are absent {absent} or repeated {repeated}; "
            "is this the LaRT accuracy_math500.csv?"
        )
    drop = set(excluded)
    kept = [header] + [row for row, label in zip(rows, labels) if label not in drop]
    content = b"".join(line + b"\r\n" for line in kept)
    actual = hashlib.sha256(content).hexdigest()
    if sha256 is not None and actual != sha256.lower():
        raise DataError(
            f"{lart_csv}: dropping {len(drop)} rows gives {len(kept) - 1} rows with SHA-256 "
            f"{actual}, "
            f"expected {sha256.lower()}; the LaRT file differs from the one the paper used"
        )
    out_csv = Path(out_csv)
    with atomic_path(out_csv) as tmp:
        tmp.write_bytes(content)
    return out_csv


def fetch_lart(url: str, cache_dir, *, sha256: str | None = None, **download_options) -> Path:
    """Download the LaRT accuracy file into ``<cache_dir>/lart/`` (verified if ``sha256`` is given).

    The cached file is named after the URL's last segment, which must be a
    plain file name.
    """
    name = urlsplit(url).path.rsplit("/", 1)[-1]
    dest = inside(
        cache_dir, f"lart/{name}", f"url {url!r} (its last segment names the cached file)"
    )
    return download(url, dest, root=cache_dir, sha256=sha256, **download_options)


# ---------------------------------------------------------------------- items


def read_items_jsonl(path, *, sha256: str | None = None, n_items: int | None = 500) -> pd.DataFrame:
    """Item metadata from the MATH-500 ``test.jsonl`` (line j = item j).

    Returns
    -------
    pandas.DataFrame
        Columns ``item`` ("0", "1", ...), ``subject``, ``level`` (int 1-5),
        ``unique_id``.
    """
    path = Path(path)
    if sha256 is not None and sha256_file(path) != sha256.lower():
        raise DataError(
            f"{path}: SHA-256 {sha256_file(path)} differs from the pinned {sha256.lower()}"
        )
    rows = []
    for lineno, record in iter_jsonl(path):
        try:
            level = int(record["level"])
            rows.append(
                {
                    "item": str(len(rows)),
                    "subject": str(record["subject"]),
                    "level": level,
                    "unique_id": str(record["unique_id"]),
                }
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(
                f"{path}, line {lineno}: expected JSON with subject, level (integer) "
                f"and unique_id ({exc!r})"
            ) from exc
        if not 1 <= level <= 5:
            raise DataError(f"{path}, line {lineno}: level {level} outside 1-5")
    if n_items is not None and len(rows) != n_items:
        raise DataError(f"{path}: {len(rows)} items, expected {n_items}")
    return pd.DataFrame(rows, columns=["item", "subject", "level", "unique_id"])


def fetch_items(
    out_csv,
    *,
    source: str = "hub",
    repo_id: str = ITEMS_REPO,
    filename: str = "test.jsonl",
    revision: str | None = None,
    sha256: str | None = None,
    cache_dir=None,
    endpoint: str | None = None,
    token=None,
    retries: int = 4,
) -> Path:
    """Write the MATH-500 item table (``item, subject, level, unique_id``) to ``out_csv``.

    Parameters
    ----------
    source : str
        ``"hub"`` to download ``filename`` from the dataset ``repo_id`` with
        :func:`huggingface_hub.hf_hub_download` (cached in ``cache_dir``), or
        a path to a local copy of the JSONL file.
    sha256 : str, optional
        Expected SHA-256 of the JSONL file.
    """
    if source == "hub":
        try:
            jsonl = hub_download(
                repo_id,
                filename,
                revision=revision,
                cache_dir=cache_dir,
                endpoint=endpoint,
                token=token,
                retries=retries,
            )
        except (HubNotFoundError, HubAccessError):
            raise
        except DownloadError as exc:  # the network failed: a local copy is the way round it
            raise DownloadError(f"{exc}; or give a local copy of {filename} as the source") from None
    else:
        jsonl = Path(source)
        if not jsonl.is_file():
            raise DataError(
                f"{jsonl}: {'a folder' if jsonl.is_dir() else 'no such file'} (source must be "
                "'hub' or a path to MATH-500 test.jsonl)"
            )
    items = read_items_jsonl(jsonl, sha256=sha256)
    out_csv = Path(out_csv)
    with atomic_path(out_csv) as tmp:
        items.to_csv(tmp, index=False)
    return out_csv


# --------------------------------------------------------------------- models


def tier_of(params_b) -> str:
    """Size tier of a model with ``params_b`` billion parameters (7B is small, 20B medium)."""
    value = float(params_b)
    if not value > 0:
        raise DataError(f"parameter count {params_b!r} must be positive")
    return next(label for bound, label in TIERS if value <= bound)


def model_table(path="config/math500_models.csv") -> pd.DataFrame:
    """The MATH-500 model table, validated.

    Returns
    -------
    pandas.DataFrame
        Columns ``row_label, model, prompt, params_b, release_date, tier``
        (``release_date`` as datetime64), plus any extra columns present
        (e.g. ``hub_params_b``, ``hub_created_at`` after a refresh).
    """
    path = Path(path)
    try:
        table = pd.read_csv(
            path, dtype={"row_label": str, "model": str, "prompt": str, "tier": str}
        )
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: cannot read the model table ({exc})") from exc
    absent = [c for c in MODEL_COLUMNS if c not in table.columns]
    if absent:
        raise DataError(f"{path}: missing column(s) {absent}; expected {MODEL_COLUMNS}")
    if table["row_label"].duplicated().any():
        raise DataError(
            f"{path}: duplicate row_label "
            f"{table['row_label'][table['row_label'].duplicated()].iloc[0]!r}"
        )
    for i, row in table.iterrows():
        if row["prompt"] not in ("zero_shot", "one_shot"):
            raise DataError(
                f"{path}, line {i + 2}: prompt {row['prompt']!r}; expected zero_shot or one_shot"
            )
        expected = tier_of(row["params_b"])
        if row["tier"] != expected:
            raise DataError(
                f"{path}, line {i + 2}: tier {row['tier']!r} but params_b {row['params_b']} "
                f"gives {expected!r}"
            )
    try:
        table["release_date"] = pd.to_datetime(table["release_date"], format="%Y-%m-%d")
    except ValueError as exc:
        raise DataError(f"{path}: release_date must be YYYY-MM-DD ({exc})") from exc
    return table


def refresh_model_table(
    path,
    out_path,
    *,
    endpoint: str | None = None,
    token=None,
    retries: int = 4,
    backoff: float = 1.0,
) -> pd.DataFrame:
    """Add the Hub's own figures to the model table (needs network).

    For each distinct repo, :meth:`huggingface_hub.HfApi.model_info` gives
    ``created_at`` and ``safetensors.total``; they are written to the new
    columns ``hub_created_at`` (YYYY-MM-DD) and ``hub_params_b`` (billions).
    The curated ``params_b``/``release_date`` (and hence ``tier``) are kept:
    exact counts would move nominal "7B" models (7.2-7.6B) out of the paper's
    small tier.  Repos the Hub cannot describe get empty cells and are listed
    in the returned frame's ``attrs["unresolved"]``.
    """
    table = model_table(path)
    client = HubClient(endpoint, token, retries=retries, backoff=backoff)
    created, params, unresolved = {}, {}, {}
    for repo in table["model"].unique():
        try:
            info = client.call(lambda repo=repo: client.api.model_info(repo), f"model_info {repo}")
        except (HubNotFoundError, HubAccessError) as exc:  # gated/deleted repos: reported, not fatal
            unresolved[repo] = str(exc)
            continue
        created[repo] = info.created_at.strftime("%Y-%m-%d") if info.created_at else None
        total = getattr(info.safetensors, "total", None) if info.safetensors else None
        params[repo] = round(total / 1e9, 3) if total else None
    out = table.copy()
    out["release_date"] = out["release_date"].dt.strftime("%Y-%m-%d")
    out["hub_created_at"] = out["model"].map(created)
    out["hub_params_b"] = out["model"].map(params)
    out_path = Path(out_path)
    with atomic_path(out_path) as tmp:
        out.to_csv(tmp, index=False)
    out.attrs["unresolved"] = unresolved
    return out
