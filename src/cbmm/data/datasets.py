"""The dataset registry (``config/datasets.yaml``) and :func:`build_dataset`.

A registry is a YAML mapping::

    release: {base_url: ..., repo: JackQuu/cBMM, commit: b6cb036}
    datasets:        # the paper's seven suites (default: exact reproduction)
      IFEval: {source: release, options: {file: data/IFEval.csv, sha256: ...}}
    alternatives:    # other ways to build a suite, selected by name
      IFEval_hub: {source: hub, options: {suite: IFEval, date_from: 2024-06-01, ...}}

Each entry is ``{source: release|hub|math500_lart|local, options: {...}}``;
the options of each source are documented in :data:`SOURCE_OPTIONS` and
``docs/data.md``.
"""

from __future__ import annotations

from pathlib import Path

from . import hub, math500
from .local import load_local
from .matrix import DataError, atomic_path, matrix_summary, summary_path, write_json, write_matrix
from .release import DEFAULT_RELEASE, fetch_release_file, read_release

__all__ = ["SOURCE_OPTIONS", "build_dataset", "find_entry", "load_registry"]

#: source -> (required options, optional options)
SOURCE_OPTIONS = {
    "release": ({"file", "sha256"}, {"retries", "timeout", "backoff", "progress"}),
    "math500_lart": ({"url", "sha256"}, {"lart_sha256", "retries", "timeout", "backoff", "progress"}),
    "hub": (set(), {"suite", "models", "date_from", "date_to", "limit", "drop_incomplete", "max_workers",
                    "endpoint", "metadata", "retries", "backoff", "progress"}),
    "local": ({"path"}, {"label_column"}),
}


def _check_entry(name: str, entry, where: str) -> None:
    if not isinstance(entry, dict) or "source" not in entry:
        raise DataError(f"{where}: dataset {name!r} must be a mapping with a 'source' key")
    source = entry["source"]
    if source not in SOURCE_OPTIONS:
        raise DataError(f"{where}: dataset {name!r} has source {source!r}; expected one of {sorted(SOURCE_OPTIONS)}")
    options = entry.get("options") or {}
    if not isinstance(options, dict):
        raise DataError(f"{where}: dataset {name!r}: 'options' must be a mapping")
    required, optional = SOURCE_OPTIONS[source]
    absent = sorted(required - options.keys())
    unknown = sorted(options.keys() - required - optional)
    if absent or unknown:
        raise DataError(f"{where}: dataset {name!r} ({source}): missing option(s) {absent}, "
                        f"unknown option(s) {unknown}; allowed: {sorted(required | optional)}")
    extra = sorted(entry.keys() - {"source", "options", "description"})
    if extra:
        raise DataError(f"{where}: dataset {name!r}: unknown key(s) {extra}")


def load_registry(path="config/datasets.yaml") -> dict:
    """Read and validate a dataset registry.

    Returns
    -------
    dict
        ``{"release": {base_url, repo, commit}, "datasets": {name: entry},
        "alternatives": {name: entry}}``.
    """
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DataError(f"{path}: cannot read the dataset registry ({exc})") from exc
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected a mapping with 'release', 'datasets' (and 'alternatives')")
    unknown = sorted(raw.keys() - {"release", "datasets", "alternatives"})
    if unknown:
        raise DataError(f"{path}: unknown top-level key(s) {unknown}")
    registry = {"release": {**DEFAULT_RELEASE, **(raw.get("release") or {})},
                "datasets": raw.get("datasets") or {}, "alternatives": raw.get("alternatives") or {}}
    for group in ("datasets", "alternatives"):
        for name, entry in registry[group].items():
            _check_entry(name, entry, f"{path} ({group})")
    both = registry["datasets"].keys() & registry["alternatives"].keys()
    if both:
        raise DataError(f"{path}: name(s) {sorted(both)} defined in both datasets and alternatives")
    return registry


def find_entry(registry: dict, name: str) -> dict:
    """The entry called ``name`` among the registry's datasets and alternatives."""
    for group in ("datasets", "alternatives"):
        if name in registry.get(group, {}):
            return registry[group][name]
    known = sorted([*registry.get("datasets", {}), *registry.get("alternatives", {})])
    raise DataError(f"no dataset {name!r} in the registry; known: {known}")


def _download_options(options):
    return {k: options[k] for k in ("retries", "timeout", "backoff", "progress") if k in options}


def _build_release(name, options, cache_dir, release):
    path = fetch_release_file(options["file"], options["sha256"], cache_dir, release, **_download_options(options))
    provenance = {"file": options["file"], "sha256": options["sha256"], "release": release}
    cleaning = ["none: the release CSV is stored as is (labels, item ids and order kept)"]
    return read_release(path), provenance, cleaning, None


def _build_lart(name, options, cache_dir, release):
    lart = math500.fetch_lart(options["url"], cache_dir, sha256=options.get("lart_sha256"),
                              **_download_options(options))
    derived = Path(cache_dir) / "lart" / f"{name}.release.csv"
    math500.lart_to_release(lart, derived, sha256=options["sha256"])
    provenance = {"url": options["url"], "lart_sha256": options.get("lart_sha256"), "sha256": options["sha256"],
                  "excluded_rows": list(math500.LART_EXCLUDED_ROWS)}
    cleaning = [f"dropped {len(math500.LART_EXCLUDED_ROWS)} LaRT rows (9 models not in the paper): "
                + ", ".join(math500.LART_EXCLUDED_ROWS),
                "line ends rewritten to CRLF; result verified against the pinned SHA-256 of the paper's file"]
    return read_release(derived), provenance, cleaning, None


def _build_hub(name, options, cache_dir, release, out_path):
    suite = options.get("suite", name)
    net = {k: options[k] for k in ("endpoint", "retries", "backoff") if k in options}
    if "models" in options:
        models = hub.select_cohort(models=options["models"])
    else:
        candidates = hub.list_details_datasets(**net)
        models = hub.select_cohort(candidates, date_from=options.get("date_from"), date_to=options.get("date_to"),
                                   limit=options.get("limit"))
    if not models:
        raise DataError(f"dataset {name!r}: the hub cohort is empty")
    frame, report = hub.rebuild_suite(suite, models, cache_dir=cache_dir, max_workers=options.get("max_workers", 8),
                                      drop_incomplete=options.get("drop_incomplete", False),
                                      progress=options.get("progress", True), **net)
    cohort = {k: options[k] for k in ("models", "date_from", "date_to", "limit") if k in options}
    provenance = {"suite": suite, "cohort": {k: v if isinstance(v, (list, int)) else str(v) for k, v in cohort.items()},
                  "models": list(frame.index)}
    cleaning = ["latest run per model and sub-task (greatest timestamp in the samples file name)",
                "items ordered by doc_id within each sub-task; item id <task>_<doc_id>",
                "correctness booleans mapped to 1/0",
                f"{report['n_missing_pairs']} missing model/sub-task pairs stored as missing entries",
                f"{len(report['dropped_models'])} model(s) dropped (listed in report.dropped_models)"]
    if options.get("metadata", True):
        contents = hub.leaderboard_contents(cache_dir=Path(cache_dir) / "hub", **net)
        if "fullname" not in contents.columns:
            raise DataError(f"{hub.CONTENTS_REPO}: no 'fullname' column; cannot attach model metadata")
        meta = contents[contents["fullname"].isin(frame.index)]
        meta_path = out_path.with_name(out_path.stem + ".models.csv")
        with atomic_path(meta_path) as tmp:
            meta.to_csv(tmp, index=False)
        provenance["metadata_file"] = meta_path.name
        report["models_without_metadata"] = sorted(set(frame.index) - set(meta["fullname"]))
    return frame, provenance, cleaning, report


def _build_local(name, options, cache_dir, release):
    frame = load_local(options["path"], label_column=options.get("label_column"))
    provenance = {"path": str(options["path"])}
    cleaning = ["values validated by cbmm.as_responses; a -1/+1 (0 = missing) table is converted to 1/0/NaN"]
    return frame, provenance, cleaning, None


def build_dataset(name: str, entry: dict, out_path, *, cache_dir, release: dict | None = None) -> Path:
    """Fetch (as needed) and store one dataset in canonical form.

    Parameters
    ----------
    name : str
        Dataset name (also the default hub suite).
    entry : dict
        Registry entry ``{source, options}``.
    out_path : path-like
        Parquet matrix to write; the summary goes to ``<stem>.summary.json``
        (and hub metadata to ``<stem>.models.csv``).  All are written
        atomically.
    cache_dir : path-like
        Downloads (release files, LaRT file, Hub cache, parsed hub rows).
    release : dict, optional
        The registry's ``release`` block (base URL, repo, commit).

    Returns
    -------
    pathlib.Path
        ``out_path``.
    """
    _check_entry(name, entry, "build_dataset")
    out_path, options = Path(out_path), entry.get("options") or {}
    release = {**DEFAULT_RELEASE, **(release or {})}
    source = entry["source"]
    if source == "hub":
        frame, provenance, cleaning, report = _build_hub(name, options, cache_dir, release, out_path)
    else:
        builder = {"release": _build_release, "math500_lart": _build_lart, "local": _build_local}[source]
        frame, provenance, cleaning, report = builder(name, options, cache_dir, release)
    summary = {"dataset": name, "source": source, "provenance": provenance, "cleaning": cleaning,
               **matrix_summary(frame)}
    if report is not None:
        summary["report"] = report
    write_matrix(frame, out_path, source=f"dataset {name!r}")
    try:
        write_json(summary, summary_path(out_path))
    except BaseException:
        out_path.unlink(missing_ok=True)
        raise
    return out_path
