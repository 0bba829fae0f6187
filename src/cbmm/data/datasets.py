"""The dataset registry (``config/datasets.yaml``) and :func:`build_dataset`.

A registry is a YAML mapping::

    release: {base_url: ..., repo: JackQuu/cBMM, commit: b6cb036d80b34f036822383e8514be4ee4ed648f}
    datasets:        # the paper's seven suites (default: exact reproduction)
      IFEval: {source: release, options: {file: data/IFEval.csv, sha256: ..., size: 2478278}}
    alternatives:    # other ways to build a suite, selected by name
      IFEval_hub: {source: hub, options: {suite: IFEval, cohort: paper}}

Each entry is ``{source: release|hub|math500_lart|local, options: {...},
description: ...}``; the options of each source and their checks are in
:data:`SOURCE_OPTIONS` and ``docs/data.md``.  :func:`validate_registry` checks
the whole structure (shapes, names, option names and values, paths, hashes)
before anything is fetched; every error names the file and the key.
"""

from __future__ import annotations

from pathlib import Path

from . import hub, math500
from .checks import (
    DATASET_NAME_PATTERN,
    NAME_PATTERN,
    SHA256_PATTERN,
    boolean,
    date,
    http_url,
    inside,
    integer,
    mapping,
    matches,
    number,
    relative_path,
    string,
)
from ..io import atomic_paths
from .download import DOWNLOAD_OPTIONS, ChecksumError, DownloadError, StaleCacheError
from .local import load_local
from .matrix import DataError, atomic_path, matrix_summary, summary_path, write_json, write_matrix
from .release import check_release, fetch_release_file, read_release, release_path

__all__ = [
    "SOURCE_OPTIONS",
    "build_dataset",
    "check_entry",
    "dataset_outputs",
    "find_entry",
    "hub_cohort",
    "load_registry",
    "validate_registry",
]

_sha256 = matches(SHA256_PATTERN, "a hex SHA-256 (64 characters)")


def _suite(value, key):
    if value not in hub.SUITES:
        raise DataError(
            f"{key}: unknown leaderboard suite {value!r}; expected one of {sorted(hub.SUITES)}"
        )
    return value


def _models(value, key):
    if not isinstance(value, list) or not value:
        raise DataError(
            f"{key}: expected a non-empty list of Hub model ids 'org/name', got {value!r}"
        )
    for k, model in enumerate(value):
        matches(
            r"^[A-Za-z0-9_][A-Za-z0-9_.-]*/[A-Za-z0-9_][A-Za-z0-9_.-]*$",
            "a Hub model id 'org/name'",
        )(model, f"{key}[{k}]")
    if len(set(value)) != len(value):
        raise DataError(f"{key}: the list has duplicates")
    return value


def _file_url(value, key):
    """An http(s) URL whose last segment is a plain file name (it names the cached file)."""
    http_url(value, key)
    matches(NAME_PATTERN, "a URL ending in a file name")(
        value.split("?")[0].rsplit("/", 1)[-1], key
    )
    return value


#: source -> (required options, optional options), each ``{name: check(value, key)}``.
SOURCE_OPTIONS = {
    "release": (
        {"file": relative_path, "sha256": _sha256},
        {"size": integer(0), **DOWNLOAD_OPTIONS},
    ),
    "math500_lart": (
        {"url": _file_url, "sha256": _sha256},
        {"lart_sha256": _sha256, **DOWNLOAD_OPTIONS},
    ),
    "hub": (
        {},
        {
            "suite": _suite,
            "cohort": matches(r"^(paper|dates)$", "'paper' or 'dates'"),
            "models": _models,
            "date_from": date,
            "date_to": date,
            "limit": integer(1),
            "drop_incomplete": boolean,
            "keep_raw": boolean,
            "max_workers": integer(1),
            "endpoint": http_url,
            "metadata": boolean,
            "retries": integer(0),
            "backoff": number(0),
            "rate_limit_wait": number(0),
            "progress": boolean,
        },
    ),
    "local": (
        {"path": string},
        {
            "coding": matches(r"^(binary|signed)$", "'binary' or 'signed'"),
            "layout": matches(r"^(auto|wide|long)$", "'auto', 'wide' or 'long'"),
            "label_column": string,
            "model_column": string,
            "item_column": string,
            "correct_column": string,
        },
    ),
}


def hub_cohort(options: dict) -> str:
    """The cohort a ``hub`` entry asks for: ``"models"``, ``"paper"`` or ``"dates"``.

    ``cohort`` defaults to ``"dates"`` when a date window is given and to
    ``"paper"`` otherwise.
    """
    if "models" in options:
        return "models"
    return options.get("cohort", "dates" if {"date_from", "date_to"} & set(options) else "paper")


def check_entry(name, entry, where: str) -> dict:
    """Check one registry entry; return its options.

    ``where`` starts every message (e.g. ``"config/datasets.yaml: datasets"``);
    the entry's key follows (``datasets.IFEval.options.file``).

    Raises
    ------
    DataError
        For a bad name, a non-mapping entry or options, an unknown source,
        unknown or missing options, or an option value of the wrong type,
        range or form (paths, hashes, URLs, dates, suites, model ids).
    """
    key = f"{where}.{name}"
    matches(
        DATASET_NAME_PATTERN,
        "a dataset name (letters, digits, '_', '.', '-'; first a letter or digit)",
    )(name, f"{where}: dataset name")
    entry = mapping(entry, f"{key}")
    if "source" not in entry:
        raise DataError(f"{key}: no 'source'; expected one of {sorted(SOURCE_OPTIONS)}")
    extra = sorted(set(entry) - {"source", "options", "description"})
    if extra:
        raise DataError(
            f"{key}: unknown key(s) {extra}; allowed: ['description', 'options', 'source']"
        )
    source = entry["source"]
    if source not in SOURCE_OPTIONS:
        raise DataError(f"{key}.source: {source!r}; expected one of {sorted(SOURCE_OPTIONS)}")
    if "description" in entry:
        string(entry["description"], f"{key}.description")
    options = mapping(entry.get("options"), f"{key}.options")
    required, optional = SOURCE_OPTIONS[source]
    absent = sorted(set(required) - set(options))
    unknown = sorted(set(options) - set(required) - set(optional))
    if absent:  # with the unknown ones, which may be the required ones misspelled
        also = f"; unknown option(s) {unknown}" if unknown else ""
        raise DataError(f"{key}.options: missing required option(s) {absent} for source "
                        f"{source!r}{also}")
    if unknown:
        raise DataError(
            f"{key}.options: unknown option(s) {unknown} for source {source!r}; "
            f"allowed: {sorted({*required, *optional})}"
        )
    for option, value in options.items():
        {**required, **optional}[option](value, f"{key}.options.{option}")
    if source == "hub":
        _suite(options.get("suite", name), f"{key}.options.suite (default: the dataset name)")
        window = sorted({"date_from", "date_to"} & set(options))
        if "models" in options:
            cohort = sorted({"cohort", "date_from", "date_to", "limit"} & set(options))
            if cohort:
                raise DataError(
                    f"{key}.options: give either 'models' or a cohort, not both (also {cohort})"
                )
        elif hub_cohort(options) == "paper":
            if window:
                raise DataError(
                    f"{key}.options: cohort 'paper' (Wu et al.'s rule) takes no date window "
                    f"({window}); use cohort 'dates' for one"
                )
            if "drop_incomplete" in options:
                raise DataError(
                    f"{key}.options: drop_incomplete does not apply to cohort 'paper', whose models "
                    "are complete by its rule (and must stay the same for the five suites)"
                )
        if (
            "date_from" in options
            and "date_to" in options
            and date(options["date_from"], "") > date(options["date_to"], "")
        ):
            raise DataError(
                f"{key}.options: date_from {options['date_from']} is after "
                f"date_to {options['date_to']}"
            )
    return options


def validate_registry(raw, where: str) -> dict:
    """Check a registry (already parsed) and fill in the release defaults.

    Also usable at configuration time on a merged ``{"release": ...,
    "datasets": ...}`` mapping; ``where`` (a file name) starts every message.

    Returns
    -------
    dict
        ``{"release": {base_url, repo, commit}, "datasets": {name: entry},
        "alternatives": {name: entry}}``.
    """
    raw = mapping(raw, f"{where}: the registry (expected 'release', 'datasets' and 'alternatives')")
    unknown = sorted(set(raw) - {"release", "datasets", "alternatives"})
    if unknown:
        raise DataError(
            f"{where}: unknown top-level key(s) {unknown}; allowed: ['alternatives', 'datasets', "
            "'release']"
        )
    registry = {"release": check_release(raw.get("release"), f"{where}: release")}
    for group in ("datasets", "alternatives"):
        registry[group] = mapping(raw.get(group), f"{where}: {group}")
        for name, entry in registry[group].items():
            check_entry(name, entry, f"{where}: {group}")
    both = registry["datasets"].keys() & registry["alternatives"].keys()
    if both:
        raise DataError(
            f"{where}: name(s) {sorted(both)} defined in both datasets and alternatives"
        )
    return registry


def load_registry(path="config/datasets.yaml") -> dict:
    """Read and validate a dataset registry file (see :func:`validate_registry`)."""
    import yaml

    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DataError(
            " ".join(f"{path}: cannot read the dataset registry ({exc})".split())
        ) from None
    return validate_registry(raw, str(path))


def find_entry(registry: dict, name: str) -> dict:
    """The entry called ``name`` among the registry's datasets and alternatives."""
    for group in ("datasets", "alternatives"):
        if name in registry.get(group, {}):
            return registry[group][name]
    known = sorted([*registry.get("datasets", {}), *registry.get("alternatives", {})])
    raise DataError(f"no dataset {name!r} in the registry; known: {known}")


def _download_options(options):
    return {k: options[k] for k in DOWNLOAD_OPTIONS if k in options}


def _build_release(name, options, cache_dir, release):
    path = fetch_release_file(
        options["file"],
        options["sha256"],
        cache_dir,
        release,
        size=options.get("size"),
        **_download_options(options),
    )
    provenance = {"file": options["file"], "sha256": options["sha256"], "release": release}
    cleaning = ["none: the release CSV is stored as is (labels, item ids and order kept)"]
    return read_release(path), provenance, cleaning, None


def _build_lart(name, options, cache_dir, release):
    lart = math500.fetch_lart(
        options["url"], cache_dir, sha256=options.get("lart_sha256"), **_download_options(options)
    )
    derived = inside(cache_dir, f"lart/{name}.release.csv", f"dataset {name!r}")
    math500.lart_to_release(lart, derived, sha256=options["sha256"])
    provenance = {
        "url": options["url"],
        "lart_sha256": options.get("lart_sha256"),
        "sha256": options["sha256"],
        "excluded_rows": list(math500.LART_EXCLUDED_ROWS),
    }
    cleaning = [
        f"dropped {len(math500.LART_EXCLUDED_ROWS)} LaRT rows (9 models not in the paper): "
        + ", ".join(math500.LART_EXCLUDED_ROWS),
        "line ends rewritten to CRLF; result checked against the pinned SHA-256 of the paper's CSV",
    ]
    return read_release(derived), provenance, cleaning, None


def _build_hub(name, options, cache_dir, release, out_path):
    suite = options.get("suite", name)
    client = hub.HubClient(
        options.get("endpoint"),
        **{k: options[k] for k in ("retries", "backoff", "rate_limit_wait") if k in options},
    )
    workers, progress = options.get("max_workers", 8), options.get("progress", True)
    cohort = {"cohort": hub_cohort(options)}
    commits = None
    if cohort["cohort"] == "models":
        models = list(options["models"])
        cohort["models"] = models
    else:
        candidates = hub.list_details_datasets(client, cache_dir=cache_dir)
        commits = hub.details_commits(candidates)
        if cohort["cohort"] == "paper":
            listings = hub.cohort_listings(
                candidates, cache_dir=cache_dir, client=client, max_workers=workers, progress=progress
            )
            models, counts = hub.paper_cohort(candidates, listings, suite)
            cohort.update(counts, tasks=len(hub.cohort_tasks(suite)))
        else:
            models = hub.select_cohort(
                candidates, date_from=options.get("date_from"), date_to=options.get("date_to")
            )
            cohort.update(
                {k: str(options[k]) for k in ("date_from", "date_to") if k in options},
                n_details_datasets=len(candidates),
            )
        if "limit" in options:
            models, cohort["limit"] = models[: options["limit"]], options["limit"]
    if not models:
        raise DataError(f"dataset {name!r}: the hub cohort is empty")
    frame, report = hub.rebuild_suite(
        suite,
        models,
        cache_dir=cache_dir,
        client=client,
        max_workers=workers,
        drop_incomplete=options.get("drop_incomplete", False),
        keep_raw=options.get("keep_raw", False),
        progress=progress,
        commits=commits,
    )
    provenance = {"suite": suite, "cohort": cohort, "models": list(frame.index)}
    cleaning = [
        "latest run per model and sub-task (greatest timestamp in the samples file name; "
        "files named .json, from June 2024, and .jsonl both read)",
        "items ordered by doc_id within each sub-task; item id <task>_<doc_id>",
        "correctness booleans mapped to 1/0",
        f"{report['n_missing_pairs']} missing model/sub-task pairs stored as missing entries",
        f"{len(report['dropped_models'])} model(s) dropped (listed in report.dropped_models)",
    ]
    if cohort["cohort"] == "paper":
        cleaning.insert(
            0,
            f"cohort (Wu et al.'s M1): of {cohort['n_details_datasets']} details datasets in order "
            f"of creation, the {cohort['n_complete']} with all {cohort['tasks']} sub-tasks "
            f"{'of MMLU-Pro' if suite == 'MMLU_PRO' else 'of the five suites besides MMLU-Pro'}; "
            f"the first half: {cohort['n_cohort']}",
        )
    if options.get("metadata", True):
        contents = hub.leaderboard_contents(cache_dir=Path(cache_dir) / "hub", client=client)
        if "fullname" not in contents.columns:
            raise DataError(
                f"{hub.CONTENTS_REPO}: no 'fullname' column; cannot attach model metadata"
            )
        meta = contents[contents["fullname"].isin(frame.index)]
        meta_path = _metadata_path(out_path)
        with atomic_path(meta_path) as tmp:
            meta.to_csv(tmp, index=False)
        provenance["metadata_file"] = meta_path.name
        report["models_without_metadata"] = sorted(set(frame.index) - set(meta["fullname"]))
    return frame, provenance, cleaning, report


def _build_local(name, options, cache_dir, release):
    frame = load_local(options["path"], **{k: v for k, v in options.items() if k != "path"})
    provenance = {"path": str(options["path"])}
    cleaning = [
        "values validated by cbmm.as_responses (coding inferred only where unambiguous, or as "
        "stated by the 'coding' option); stored as 1/0/missing"
    ]
    return frame, provenance, cleaning, None


def _offline_advice(name, source, options, cache_dir, release, stale: bool) -> str:
    """What to do when a dataset cannot be downloaded (one sentence); ``stale``: the cached
    file is there but failed its SHA-256 check (the error names it)."""
    if stale:
        where = "replace that file with the verified one"
    elif source == "release":
        where = f"put the verified file at {release_path(options['file'], cache_dir, release)}"
    elif source == "math500_lart":
        where = f"put the LaRT file in {Path(cache_dir) / 'lart'}"
    else:
        where = (
            f"build from the finished models in {Path(cache_dir) / 'hub-rows'} and the listings in "
            f"{Path(cache_dir) / 'hub-listings'} with HF_HUB_OFFLINE=1"
        )
    return (
        f"Offline or behind a firewall? {where[0].upper()}{where[1:]} (a pre-filled cache_dir, "
        "filled once "
        f"online), or build {name!r} from your own copy with source 'local'."
    )


def _metadata_path(out_path: Path) -> Path:
    return out_path.with_name(out_path.stem + ".models.csv")


def dataset_outputs(entry: dict, out_path) -> list[Path]:
    """The files :func:`build_dataset` writes for ``entry`` into ``out_path``.

    Returns
    -------
    list of pathlib.Path
        ``out_path``, its summary (:func:`~cbmm.data.matrix.summary_path`) and, for a
        ``hub`` entry with metadata (the default), ``<stem>.models.csv``.
    """
    out_path = Path(out_path)
    paths = [out_path, summary_path(out_path)]
    if entry.get("source") == "hub" and (entry.get("options") or {}).get("metadata", True):
        paths.append(_metadata_path(out_path))
    return paths


def build_dataset(
    name: str, entry: dict, out_path, *, cache_dir, release: dict | None = None
) -> Path:
    """Fetch (as needed) and store one dataset in canonical form.

    Parameters
    ----------
    name : str
        Dataset name (also the default hub suite).
    entry : dict
        Registry entry ``{source, options}``; checked like a registry entry.
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

    Raises
    ------
    DataError
        Always one line.  A failed download is a :class:`DownloadError` whose
        message names the dataset, the reason and what to do offline (a
        pre-filled cache, source ``local``, ``HF_HUB_OFFLINE=1``).
    """
    options = check_entry(name, entry, "datasets")
    release = check_release(release)
    out_path, source = Path(out_path), entry["source"]
    try:
        if source == "hub":
            frame, provenance, cleaning, report = _build_hub(
                name, options, cache_dir, release, out_path
            )
        else:
            builder = {
                "release": _build_release,
                "math500_lart": _build_lart,
                "local": _build_local,
            }[source]
            frame, provenance, cleaning, report = builder(name, options, cache_dir, release)
    except DownloadError as exc:
        # One line: the dataset, the reason and, for a network failure, what to do.
        advice = (
            ""
            if isinstance(
                exc,
                (ChecksumError, hub.HubNotFoundError, hub.HubAccessError, hub.HubRateLimitError),
            )
            else " " + _offline_advice(name, source, options, cache_dir, release,
                                       isinstance(exc, StaleCacheError))
        )
        raise type(exc)(f"dataset {name!r}: {str(exc).rstrip('.')}.{advice}") from None
    summary = {
        "dataset": name,
        "source": source,
        "provenance": provenance,
        "cleaning": cleaning,
        **matrix_summary(frame),
    }
    if report is not None:
        summary["report"] = report
    # Both or neither: a replaced matrix never stands beside the summary of an older one.
    with atomic_paths([out_path, summary_path(out_path)]) as (matrix_tmp, summary_tmp):
        write_matrix(frame, matrix_tmp, source=f"dataset {name!r}")
        write_json(summary, summary_tmp)
    return out_path
