"""The dataset registry and every path built from it: shapes, values, confinement.

Each bad registry is refused at load with one line that names the file and the
key; each path built from registry values (release file, repository, commit,
LaRT file name, dataset name, Hub model ids and listed files) stays inside its
cache folder, links resolved, and nothing outside is read, written or deleted.
"""

import hashlib
import json
import os
from pathlib import Path

import pandas as pd
import pytest
import yaml
from data_fixtures import SHARED_DATA, FakeHub, FileServer, needs_shared, tree_snapshot

from cbmm.data import DataError, build_dataset, load_registry, validate_registry
from cbmm.data.datasets import hub_cohort
from cbmm.data.hub import HubClient, rebuild_suite
from cbmm.data.math500 import fetch_lart
from cbmm.data.release import fetch_release_file

ROOT = Path(__file__).resolve().parents[1]
REGISTRY = ROOT / "config" / "datasets.yaml"
COMMIT = "b6cb036d80b34f036822383e8514be4ee4ed648f"
SHA = "5" * 64


def _release_entry(**options):
    return {"source": "release", "options": {"file": "data/X.csv", "sha256": SHA, **options}}


def _hub_entry(**options):
    return {"source": "hub", "options": {"suite": "IFEval", **options}}


def test_repository_registry_pins_full_commit_hashes_and_sizes():
    registry = load_registry(REGISTRY)
    assert registry["release"] == {
        "base_url": "https://media.githubusercontent.com/media",
        "repo": "JackQuu/cBMM",
        "commit": COMMIT,
    }
    assert len(registry["datasets"]) == 7
    assert all(
        entry["source"] == "release" and {"file", "sha256", "size"} <= set(entry["options"])
        for entry in registry["datasets"].values()
    )
    rebuilds = {n: e for n, e in registry["alternatives"].items() if e["source"] == "hub"}
    assert sorted(rebuilds) == [f"{name}_hub" for name in sorted(registry["datasets"]) if name != "MATH_500"]
    assert {hub_cohort(e["options"]) for e in rebuilds.values()} == {"paper"}


@needs_shared
def test_registry_pins_match_the_release_manifest():
    manifest = pd.read_csv(SHARED_DATA / "leaderboard" / "release_manifest.csv")
    pins = {
        row["path_in_JackQuu/cBMM@b6cb036"]: (row["lfs_sha256"], row["size_bytes"])
        for _, row in manifest.iterrows()
    }
    for name, entry in load_registry(REGISTRY)["datasets"].items():
        options = entry["options"]
        assert (options["sha256"], options["size"]) == pins[options["file"]], name


# ------------------------------------------------------------------ shapes and values

BAD_REGISTRIES = [
    ("- a\n- b\n", "reg.yaml: the registry", "expected a mapping, got list"),
    ("just text\n", "reg.yaml: the registry", "expected a mapping, got str"),
    ("datasets: [a, b]\n", "reg.yaml: datasets:", "expected a mapping, got list"),
    ("mirrors: {}\n", "reg.yaml: unknown top-level key(s) ['mirrors']", ""),
    ({"datasets": {"X": "release"}}, "datasets.X:", "expected a mapping, got str"),
    ({"datasets": {"X": {"options": {}}}}, "datasets.X:", "no 'source'"),
    ({"datasets": {"X": {"source": "ftp"}}}, "datasets.X.source:", "'ftp'; expected one of"),
    (
        {"datasets": {"X": {**_release_entry(), "extra": 1}}},
        "datasets.X:",
        "unknown key(s) ['extra']",
    ),
    (
        {"datasets": {"X": {**_release_entry(), "description": ["a"]}}},
        "datasets.X.description:",
        "string",
    ),
    (
        {"datasets": {"X": {"source": "release", "options": ["file"]}}},
        "datasets.X.options:",
        "got list",
    ),
    ({"release": ["a"]}, "release:", "expected a mapping, got list"),
    ({"release": {"mirror": "x"}}, "release:", "unknown key(s) ['mirror']"),
    (
        "release: {commit: 1234567}\n",
        "release.commit:",
        "full 40-character lower-case commit id (quote it in YAML)",
    ),
    ({"release": {"commit": "b6cb036"}}, "release.commit:", "full 40-character"),
    ({"release": {"commit": "../../.."}}, "release.commit:", "full 40-character"),
    ({"release": {"repo": ".."}}, "release.repo:", "'owner/name'"),
    ({"release": {"repo": "a/b/c"}}, "release.repo:", "'owner/name'"),
    ({"release": {"base_url": "ftp://host/x"}}, "release.base_url:", "http(s) URL"),
    (
        {"datasets": {"../evil": _release_entry()}},
        "datasets: dataset name:",
        "'../evil' is not a dataset name",
    ),
    (
        {"datasets": {"X": _release_entry(file="../../x.csv")}},
        "datasets.X.options.file:",
        "not a relative path",
    ),
    (
        {"datasets": {"X": _release_entry(file="/etc/passwd")}},
        "datasets.X.options.file:",
        "not a relative path",
    ),
    (
        {"datasets": {"X": _release_entry(file="data//X.csv")}},
        "datasets.X.options.file:",
        "not a relative path",
    ),
    (
        {"datasets": {"X": _release_entry(file="data\\X.csv")}},
        "datasets.X.options.file:",
        "not a relative path",
    ),
    (
        {"datasets": {"X": _release_entry(file=".hidden/X.csv")}},
        "datasets.X.options.file:",
        "not a relative path",
    ),
    (
        {"datasets": {"X": _release_entry(sha256="abc")}},
        "datasets.X.options.sha256:",
        "not a hex SHA-256",
    ),
    (
        {"datasets": {"X": {"source": "release", "options": {"file": "a.csv"}}}},
        "datasets.X.options:",
        "missing required option(s) ['sha256']",
    ),
    (
        {"datasets": {"X": _release_entry(bogus=1)}},
        "datasets.X.options:",
        "unknown option(s) ['bogus']",
    ),
    ({"datasets": {"X": _release_entry(size=-1)}}, "datasets.X.options.size:", "integer >= 0"),
    (
        {"datasets": {"X": _release_entry(retries="3")}},
        "datasets.X.options.retries:",
        "integer >= 0",
    ),
    (
        {"datasets": {"X": _release_entry(retries=True)}},
        "datasets.X.options.retries:",
        "integer >= 0",
    ),
    ({"datasets": {"X": _release_entry(timeout=0)}}, "datasets.X.options.timeout:", "number > 0"),
    (
        {"datasets": {"X": _release_entry(deadline=-1)}},
        "datasets.X.options.deadline:",
        "number > 0",
    ),
    (
        {"datasets": {"X": _release_entry(progress="no")}},
        "datasets.X.options.progress:",
        "true or false",
    ),
    (
        {
            "datasets": {
                "X": {
                    "source": "math500_lart",
                    "options": {"url": "file:///etc/passwd", "sha256": SHA},
                }
            }
        },
        "datasets.X.options.url:",
        "http(s) URL",
    ),
    (
        {
            "datasets": {
                "X": {"source": "math500_lart", "options": {"url": "https://h/dir/", "sha256": SHA}}
            }
        },
        "datasets.X.options.url:",
        "URL ending in a file name",
    ),
    (
        {
            "datasets": {
                "X": {"source": "math500_lart", "options": {"url": "https://h/..", "sha256": SHA}}
            }
        },
        "datasets.X.options.url:",
        "URL ending in a file name",
    ),
    (
        {"datasets": {"X": {"source": "math500_lart", "options": {"url": "https://h/a.csv"}}}},
        "datasets.X.options:",
        "missing required option(s) ['sha256']",
    ),
    (
        {"datasets": {"X": _hub_entry(suite="NOPE")}},
        "datasets.X.options.suite:",
        "unknown leaderboard suite",
    ),
    (
        {"datasets": {"Y": {"source": "hub", "options": {}}}},
        "datasets.Y.options.suite (default: the dataset name)",
        "unknown leaderboard suite 'Y'",
    ),
    (
        {"datasets": {"X": _hub_entry(models="org/m")}},
        "datasets.X.options.models:",
        "non-empty list",
    ),
    (
        {"datasets": {"X": _hub_entry(models=["a/b", "a/b"])}},
        "datasets.X.options.models:",
        "duplicates",
    ),
    (
        {"datasets": {"X": _hub_entry(models=["../../x"])}},
        "datasets.X.options.models[0]:",
        "Hub model id",
    ),
    (
        {"datasets": {"X": _hub_entry(models=["a/b"], date_from="2024-01-01")}},
        "datasets.X.options:",
        "give either 'models' or a cohort, not both (also ['date_from'])",
    ),
    (
        {"datasets": {"X": _hub_entry(date_from="June")}},
        "datasets.X.options.date_from:",
        "date YYYY-MM-DD",
    ),
    (
        {"datasets": {"X": _hub_entry(date_from="2024-12-01", date_to="2024-06-01")}},
        "datasets.X.options:",
        "is after date_to",
    ),
    (
        {"datasets": {"X": _hub_entry(max_workers=0)}},
        "datasets.X.options.max_workers:",
        "integer >= 1",
    ),
    ({"datasets": {"X": _hub_entry(limit=-5)}}, "datasets.X.options.limit:", "integer >= 1"),
    (
        {"datasets": {"X": _hub_entry(models=["a/b"], cohort="paper")}},
        "datasets.X.options:",
        "give either 'models' or a cohort, not both (also ['cohort'])",
    ),
    ({"datasets": {"X": _hub_entry(cohort="M1")}}, "datasets.X.options.cohort:", "'paper' or 'dates'"),
    (
        {"datasets": {"X": _hub_entry(cohort="paper", date_from="2024-06-01")}},
        "datasets.X.options:",
        "cohort 'paper' (Wu et al.'s rule) takes no date window (['date_from']); use cohort 'dates'",
    ),
    (
        {"datasets": {"X": _hub_entry(drop_incomplete=True)}},
        "datasets.X.options:",
        "drop_incomplete does not apply to cohort 'paper'",
    ),
    ({"datasets": {"X": _hub_entry(keep_raw="yes")}}, "datasets.X.options.keep_raw:", "true or false"),
    (
        {"datasets": {"X": _hub_entry(rate_limit_wait=-1)}},
        "datasets.X.options.rate_limit_wait:",
        "number >= 0",
    ),
    (
        {"datasets": {"X": _hub_entry(endpoint="ftp://h")}},
        "datasets.X.options.endpoint:",
        "http(s) URL",
    ),
    (
        {"datasets": {"X": {"source": "local", "options": {}}}},
        "datasets.X.options:",
        "missing required option(s) ['path']",
    ),
    (
        {"datasets": {"X": {"source": "local", "options": {"path": 3}}}},
        "datasets.X.options.path:",
        "string",
    ),
    (
        {"datasets": {"X": _release_entry()}, "alternatives": {"X": _release_entry()}},
        "reg.yaml: name(s) ['X']",
        "both datasets and alternatives",
    ),
]


@pytest.mark.parametrize(
    "content, key, problem", BAD_REGISTRIES, ids=[f"{k} {p}" for _, k, p in BAD_REGISTRIES]
)
def test_bad_registry_is_one_line_naming_file_and_key(tmp_path, content, key, problem):
    path = tmp_path / "reg.yaml"
    path.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    with pytest.raises(DataError) as info:
        load_registry(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert key in message and problem in message


def test_unreadable_registry_is_one_line(tmp_path):
    path = tmp_path / "reg.yaml"
    path.write_text("datasets: {X: [unclosed\n")
    with pytest.raises(DataError, match="cannot read the dataset registry") as info:
        load_registry(path)
    assert "\n" not in str(info.value)
    with pytest.raises(DataError, match="cannot read the dataset registry"):
        load_registry(tmp_path / "absent.yaml")


def test_validate_registry_serves_a_merged_configuration():
    merged = {
        "release": {"commit": COMMIT},
        "datasets": {"mine": {"source": "local", "options": {"path": "m.csv"}}},
    }
    registry = validate_registry(merged, "config/config.yaml")
    assert registry["release"]["repo"] == "JackQuu/cBMM" and registry["alternatives"] == {}
    merged["datasets"]["mine"]["options"]["bogus"] = 1
    with pytest.raises(
        DataError,
        match=r"^config/config.yaml: datasets.mine.options: unknown option\(s\) "
        r"\['bogus'\] for source 'local'",
    ):
        validate_registry(merged, "config/config.yaml")


def test_build_dataset_checks_its_entry_before_any_work(tmp_path):
    with pytest.raises(
        DataError, match=r"datasets.X.options.file: '../x.csv' is not a relative path"
    ):
        build_dataset(
            "X", _release_entry(file="../x.csv"), tmp_path / "out" / "X.parquet", cache_dir=tmp_path
        )
    with pytest.raises(DataError, match=r"release.commit: 'b6cb036' is not a full 40-character"):
        build_dataset(
            "X",
            _release_entry(),
            tmp_path / "out" / "X.parquet",
            cache_dir=tmp_path,
            release={"commit": "b6cb036"},
        )
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ paths stay in their folder


@pytest.fixture
def area(tmp_path):
    """``cache/`` to work in, ``outside/`` with files nothing may touch (each with a wrong hash)."""
    outside = tmp_path / "outside"
    (outside / "data").mkdir(parents=True)
    for path in (
        outside / "victim.csv",
        outside / "data" / "X.csv",
        outside / "data" / "X.csv.part",
    ):
        path.write_bytes(b"precious")
    cache = tmp_path / "cache"
    cache.mkdir()
    return cache, outside, tree_snapshot(outside)


@pytest.mark.parametrize(
    "file, release",
    [
        ("../../../../outside/victim.csv", None),
        ("{outside}/victim.csv", None),
        ("data/X.csv", {"commit": "../../../outside"}),
        ("data/X.csv", {"repo": "../outside"}),
    ],
)
def test_release_paths_cannot_leave_the_cache(area, file, release):
    cache, outside, before = area
    with FileServer() as server:
        with pytest.raises(DataError, match="(file|commit|repo): .* is not"):
            fetch_release_file(
                file.format(outside=outside),
                SHA,
                cache,
                {"base_url": server.url, **(release or {})},
                progress=False,
            )
        assert server.requests == []
    assert tree_snapshot(outside) == before
    assert list(cache.iterdir()) == []


@pytest.mark.parametrize(
    "link", ["release", "release/JackQuu__cBMM", f"release/JackQuu__cBMM/{COMMIT}/data"]
)
def test_links_in_the_cache_cannot_lead_out(area, link):
    cache, outside, before = area
    (cache / link).parent.mkdir(parents=True, exist_ok=True)
    target = outside / "data" if link.endswith("data") else outside
    os.symlink(target, cache / link)
    with FileServer() as server:
        with pytest.raises(
            DataError, match=r"leads to .*outside.*refusing to read, write or delete it"
        ) as info:
            fetch_release_file("data/X.csv", SHA, cache, {"base_url": server.url}, progress=False)
        assert server.requests == []
    assert "\n" not in str(info.value)
    assert tree_snapshot(outside) == before


@pytest.mark.parametrize("url", ["https://h/x/..", "https://h/x/", "https://h/.hidden"])
def test_lart_file_name_comes_from_a_plain_url_segment(area, url):
    cache, outside, before = area
    with pytest.raises(DataError, match="its last segment names the cached file"):
        fetch_lart(url, cache, progress=False)
    assert tree_snapshot(outside) == before and list(cache.iterdir()) == []


def test_lart_cache_link_cannot_lead_out(area):
    cache, outside, before = area
    os.symlink(outside, cache / "lart")
    with FileServer() as server:
        server.files["/victim.csv"] = b"replacement"
        with pytest.raises(DataError, match="outside"):
            fetch_lart(server.url + "/victim.csv", cache, progress=False)
        assert server.requests == []
    assert tree_snapshot(outside) == before


def test_dataset_names_cannot_leave_the_cache(area):
    cache, outside, before = area
    entry = {"source": "math500_lart", "options": {"url": "https://h/a.csv", "sha256": SHA}}
    with pytest.raises(DataError, match="'../../outside/evil' is not a dataset name"):
        build_dataset("../../outside/evil", entry, cache / "out.parquet", cache_dir=cache)
    assert tree_snapshot(outside) == before and list(cache.iterdir()) == []


def _samples(model):
    folder = model.replace("/", "__")
    return f"{folder}/samples_leaderboard_ifeval_2024-07-01T00-00-00.000000.jsonl"


def test_hub_model_ids_cannot_leave_the_row_cache(area):
    cache, outside, before = area
    with (
        FakeHub() as hub,
        pytest.raises(DataError, match=r"model '\.\./\.\./outside': .* is not a relative path"),
    ):
        rebuild_suite(
            "IFEval",
            ["../../outside"],
            cache_dir=cache,
            client=HubClient(hub.url, retries=0),
            progress=False,
        )
    assert tree_snapshot(outside) == before


def test_hub_row_cache_link_cannot_lead_out(area):
    cache, outside, before = area
    (cache / "hub-rows").mkdir()
    os.symlink(outside, cache / "hub-rows" / "IFEval")
    with FakeHub() as hub:
        hub.add_file(
            "open-llm-leaderboard/o__m-details",
            _samples("o/m"),
            b'{"doc_id": 0, "prompt_level_loose_acc": 1}\n',
        )
        with pytest.raises(DataError, match="model 'o/m': .* leads to .*outside"):
            rebuild_suite(
                "IFEval", ["o/m"], cache_dir=cache, client=HubClient(hub.url, retries=0), progress=False
            )
    assert tree_snapshot(outside) == before


def test_hub_listed_file_paths_are_checked(area):
    cache, outside, before = area
    with FakeHub() as hub:
        hub.add_file(
            "open-llm-leaderboard/o__m-details",
            "../../../../outside/" + _samples("o/m").split("/")[1],
            b'{"doc_id": 0, "prompt_level_loose_acc": 1}\n',
        )
        with pytest.raises(
            DataError,
            match=r"open-llm-leaderboard/o__m-details: file listed by the Hub: "
            r"'\.\./\.\./\.\./\.\./outside/samples",
        ):
            rebuild_suite(
                "IFEval", ["o/m"], cache_dir=cache, client=HubClient(hub.url, retries=0), progress=False
            )
    assert tree_snapshot(outside) == before


def test_a_valid_registry_entry_builds(tmp_path):
    """The checks do not get in the way: a stand-in release file, verified and stored."""
    data = b",i0,i1\nm0,1,0\nm1,0,1\n"
    entry = _release_entry(sha256=hashlib.sha256(data).hexdigest(), size=len(data), progress=False)
    with FileServer() as server:
        server.files[f"/JackQuu/cBMM/{COMMIT}/data/X.csv"] = data
        out = build_dataset(
            "X",
            entry,
            tmp_path / "X.parquet",
            cache_dir=tmp_path / "cache",
            release={"base_url": server.url},
        )
    summary = json.loads(out.with_name("X.summary.json").read_text())
    assert (summary["n_models"], summary["n_items"]) == (2, 2)
    assert sorted(
        os.listdir(tmp_path / "cache" / "release" / "JackQuu__cBMM" / COMMIT / "data")
    ) == ["X.csv"]
