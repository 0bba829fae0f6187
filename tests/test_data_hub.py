"""Leaderboard rebuild from the Hub: the real huggingface_hub client against a local stand-in."""

import datetime
import email.utils
import io
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest
from data_fixtures import FakeHub, self_signed_certificate

from cbmm.data import DataError, DownloadError, build_dataset, read_matrix
from cbmm.data.hub import (
    ROW_FORMAT,
    SUITES,
    HubAccessError,
    HubClient,
    HubRateLimitError,
    cohort_listings,
    cohort_tasks,
    latest_sample_files,
    list_details_datasets,
    paper_cohort,
    rebuild_suite,
    select_cohort,
)
from cbmm.data.matrix import summary_path

SIZES = {"musr_murder_mysteries": 5, "musr_object_placements": 4, "musr_team_allocation": 3}


def test_suites_have_the_paper_subtasks_and_metrics():
    # 24 BBH + 3 GPQA + IFEval + 7 MATH + 3 MuSR = 38 sub-tasks (Wu et al.), plus MMLU-Pro
    assert sum(len(v) for k, v in SUITES.items() if k != "MMLU_PRO") == 38
    assert {k: len(v) for k, v in SUITES.items()} == {
        "IFEval": 1,
        "MuSR": 3,
        "GPQA": 3,
        "MATH": 7,
        "BBH": 24,
        "MMLU_PRO": 1,
    }
    metrics = {suite: {m for _, m in tasks} for suite, tasks in SUITES.items()}
    assert metrics == {
        "IFEval": {"prompt_level_loose_acc"},
        "MuSR": {"acc_norm"},
        "GPQA": {"acc_norm"},
        "MATH": {"exact_match"},
        "BBH": {"acc_norm"},
        "MMLU_PRO": {"acc"},
    }


def test_latest_sample_file_per_task():
    files = [
        "m/samples_leaderboard_musr_team_allocation_2024-06-26T10-00-00.000000.jsonl",
        "m/samples_leaderboard_musr_team_allocation_2024-07-01T09-00-00.000000.jsonl",
        "m/samples_leaderboard_bbh_navigate_2024-08-01T09-00-00.000000.jsonl",
        "m/results_2024-07-01T09-00-00.000000.json",
        # runs of June 2024 name their samples files .json
        "m/samples_leaderboard_musr_murder_mysteries_2024-06-16T15-52-23.370085.json",
        "m/samples_leaderboard_musr_object_placements_2024-06-16T15-52-23.370085.json",
        "m/samples_leaderboard_musr_object_placements_2024-06-30T08-00-00.000000.jsonl",
        "m/samples_leaderboard_musr_object_placements_2024-06-16T15-52-23.370085.json.bak",
    ]
    tasks = ["musr_team_allocation", "musr_murder_mysteries", "musr_object_placements"]
    assert latest_sample_files(files, tasks) == {
        "musr_team_allocation": files[1],
        "musr_murder_mysteries": files[4],
        "musr_object_placements": files[6],
    }


def _jsonl(values, rng, metric="acc_norm"):
    order = rng.permutation(len(values))  # files are not sorted by doc_id
    return "".join(
        json.dumps({"doc_id": int(d), "doc": {"q": "..."}, metric: float(values[d])}) + "\n"
        for d in order
    ).encode()


def _populate(hub):
    """Three models; truth[model][task] = 0/1 vector of the latest run, None where absent."""
    rng = np.random.default_rng(3)
    truth = {}
    for model, absent in (("org-a/model-1", set()), ("org-b/model-2", {"musr_object_placements"})):
        repo = f"open-llm-leaderboard/{model.replace('/', '__')}-details"
        folder = model.replace("/", "__")
        truth[model] = {}
        for task, n in SIZES.items():
            if task in absent:
                truth[model][task] = None
                continue
            old, new = rng.integers(0, 2, n), rng.integers(0, 2, n)
            hub.add_file(
                repo,
                f"{folder}/samples_leaderboard_{task}_2024-06-20T10-00-00.000000.jsonl",
                _jsonl(old, rng),
            )
            hub.add_file(
                repo,
                f"{folder}/samples_leaderboard_{task}_2024-07-02T08-30-00.123456.jsonl",
                _jsonl(new, rng),
            )
            truth[model][task] = new
        hub.add_file(repo, "README.md", b"details")
    hub.datasets_created = {
        "open-llm-leaderboard/org-a__model-1-details": "2024-06-15T00:00:00.000Z",
        "open-llm-leaderboard/org-b__model-2-details": "2024-08-01T00:00:00.000Z",
        "open-llm-leaderboard/org-c__gone-details": "2024-09-01T00:00:00.000Z",
        "open-llm-leaderboard/org-d__late-details": "2025-01-05T00:00:00.000Z",
        "open-llm-leaderboard/contents": "2024-06-01T00:00:00.000Z",
    }
    contents = pd.DataFrame(
        {
            "fullname": ["org-a/model-1", "org-b/model-2", "other/x"],
            "#Params (B)": [7.2, 1.5, 3.0],
            "Submission Date": ["2024-06-14", "2024-07-30", "2024-05-01"],
        }
    )
    buffer = io.BytesIO()
    contents.to_parquet(buffer)
    hub.add_file(
        "open-llm-leaderboard/contents", "data/train-00000-of-00001.parquet", buffer.getvalue()
    )
    return truth


def _expected_row(truth, model):
    return np.concatenate(
        [
            truth[model][t] if truth[model][t] is not None else np.full(n, np.nan)
            for t, n in SIZES.items()
        ]
    )


def test_rebuild_latest_runs_ordered_by_doc_id_with_gaps_reported(tmp_path):
    with FakeHub() as hub:
        truth = _populate(hub)
        hub.fail["/api/datasets/open-llm-leaderboard/org-a__model-1-details/tree/main"] = [500]
        frame, report = rebuild_suite(
            "MuSR",
            ["org-a/model-1", "org-b/model-2", "org-c/gone"],
            cache_dir=tmp_path,
            max_workers=2,
            client=HubClient(hub.url, retries=2, backoff=0.01),
            progress=False,
        )
    assert frame.index.tolist() == ["org-a/model-1", "org-b/model-2"]
    assert frame.columns.tolist() == [f"{t}_{d}" for t, n in SIZES.items() for d in range(n)]
    for model in frame.index:
        np.testing.assert_array_equal(frame.loc[model].to_numpy(), _expected_row(truth, model))
    assert report["missing_subtasks"]["org-b/model-2"] == ["musr_object_placements"]
    assert report["missing_subtasks"]["org-c/gone"] == list(SIZES)
    assert report["n_missing_pairs"] == 4
    assert "RepositoryNotFoundError" in report["failed_models"]["org-c/gone"]
    assert report["dropped_models"] == {"org-c/gone": "no data for any sub-task"}
    assert report["n_missing_entries"] == SIZES["musr_object_placements"]


def test_rebuild_resumes_from_cache_without_network(tmp_path):
    models = ["org-a/model-1", "org-b/model-2"]
    with FakeHub() as hub:
        _populate(hub)
        first, _ = rebuild_suite(
            "MuSR", models, cache_dir=tmp_path, client=HubClient(hub.url, retries=0), progress=False
        )
        url = hub.url
    # the server is gone: everything must come from the cache
    second, report = rebuild_suite(
        "MuSR",
        models,
        cache_dir=tmp_path,
        client=HubClient(url, retries=0),
        progress=False,
        drop_incomplete=True,
    )
    assert second.index.tolist() == ["org-a/model-1"]
    pd.testing.assert_series_equal(second.loc["org-a/model-1"], first.loc["org-a/model-1"])
    assert "org-b/model-2" in report["dropped_models"]


def test_malformed_sample_is_an_error_not_a_gap(tmp_path):
    with FakeHub() as hub:
        hub.add_file(
            "open-llm-leaderboard/o__m-details",
            "o__m/samples_leaderboard_ifeval_2024-07-01T00-00-00.000000.jsonl",
            b'{"doc_id": 0, "prompt_level_loose_acc": 0.5}\n',
        )
        with pytest.raises(DataError, match="line 1: prompt_level_loose_acc = 0.5"):
            rebuild_suite(
                "IFEval", ["o/m"], cache_dir=tmp_path, client=HubClient(hub.url, retries=0), progress=False
            )


def test_cohort_by_creation_date(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        candidates = list_details_datasets(HubClient(hub.url, retries=0))
    assert candidates["model"].tolist() == [
        "org-a/model-1",
        "org-b/model-2",
        "org-c/gone",
        "org-d/late",
    ]
    assert select_cohort(candidates, date_from="2024-06-01", date_to="2024-12-31") == [
        "org-a/model-1",
        "org-b/model-2",
        "org-c/gone",
    ]
    assert select_cohort(candidates, date_from="2024-06-01", limit=1) == ["org-a/model-1"]
    assert select_cohort(models=["x/y"]) == ["x/y"]


def test_build_hub_dataset_with_metadata(tmp_path):
    with FakeHub() as hub:
        truth = _populate(hub)
        entry = {
            "source": "hub",
            "options": {
                "suite": "MuSR",
                "date_from": "2024-06-01",
                "date_to": "2024-12-31",
                "endpoint": hub.url,
                "retries": 0,
                "progress": False,
            },
        }
        out = build_dataset(
            "MuSR_hub", entry, tmp_path / "MuSR_hub.parquet", cache_dir=tmp_path / "cache"
        )
    matrix = read_matrix(out)
    np.testing.assert_array_equal(
        matrix.loc["org-b/model-2"].to_numpy(), _expected_row(truth, "org-b/model-2")
    )
    summary = json.loads(summary_path(out).read_text())
    assert summary["report"]["n_missing_pairs"] == 4 and summary["n_models"] == 2
    assert summary["provenance"]["cohort"] == {
        "cohort": "dates",
        "date_from": "2024-06-01",
        "date_to": "2024-12-31",
        "n_details_datasets": 4,
    }
    meta = pd.read_csv(tmp_path / "MuSR_hub.models.csv")
    assert meta["fullname"].tolist() == ["org-a/model-1", "org-b/model-2"]
    assert meta["#Params (B)"].tolist() == [7.2, 1.5]


# ------------------------------------------------------------------ the Hub token

TOKEN = "hf_test_token_that_must_not_leak"


def test_stored_token_is_not_sent_over_http(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    with FakeHub() as hub:
        truth = _populate(hub)
        frame, _ = rebuild_suite(
            "MuSR",
            ["org-a/model-1"],
            cache_dir=tmp_path,
            client=HubClient(hub.url, retries=0),
            progress=False,
        )
        assert hub.authorizations() == [] and len(hub.requests) > 0
    np.testing.assert_array_equal(
        frame.loc["org-a/model-1"].to_numpy(), _expected_row(truth, "org-a/model-1")
    )


def test_explicit_token_for_another_endpoint_is_refused(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        with pytest.raises(
            DataError,
            match=f"refusing to send a Hub token to {hub.url}: a token goes only over "
            "https to the configured Hub endpoint",
        ):
            HubClient(hub.url, TOKEN)
        assert hub.requests == []


_TOKEN_PROBE = """
import sys
from cbmm.data.hub import HubClient, rebuild_suite
client = HubClient(sys.argv[2] or None, retries=0)
rebuild_suite("MuSR", ["org-a/model-1"], cache_dir=sys.argv[1], client=client, progress=False)
"""


@pytest.mark.parametrize(
    "configured", [True, False], ids=["configured endpoint", "another https host"]
)
def test_token_goes_only_over_https_to_the_configured_endpoint(tmp_path, configured):
    pem = self_signed_certificate(tmp_path)
    if pem is None:
        pytest.skip("openssl is needed to make a certificate for the local https Hub")
    with FakeHub(pem) as hub:
        _populate(hub)
        env = {
            **os.environ,
            "HF_TOKEN": TOKEN,
            "SSL_CERT_FILE": str(pem.with_suffix(".crt")),
            "HF_HOME": str(tmp_path / "hf_home"),
        }
        env.pop("HF_ENDPOINT", None)
        if configured:
            env["HF_ENDPOINT"] = hub.url
        run = subprocess.run(
            [
                sys.executable,
                "-c",
                _TOKEN_PROBE,
                str(tmp_path / "cache"),
                "" if configured else hub.url,
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        received = hub.authorizations()
    assert len(hub.requests) > 0
    assert received == ([f"Bearer {TOKEN}"] * len(received) if configured else [])
    assert bool(received) == configured


# ------------------------------------------------- errors are one line; failures are not gaps


def _entry(hub_url, **options):
    return {
        "source": "hub",
        "options": {
            "suite": "MuSR",
            "endpoint": hub_url,
            "retries": 0,
            "progress": False,
            "metadata": False,
            **options,
        },
    }


def test_hub_http_error_is_one_line_naming_the_dataset(tmp_path):
    with FakeHub() as hub:
        hub.fail["/api/datasets"] = [410]  # neither retried nor an access problem
        with pytest.raises(DownloadError) as info:
            build_dataset(
                "MuSR_hub",
                _entry(hub.url, date_from="2024-06-01"),
                tmp_path / "out.parquet",
                cache_dir=tmp_path / "cache",
            )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "dataset 'MuSR_hub': list open-llm-leaderboard datasets: HfHubHTTPError:"
    )
    assert "410" in message and "HF_HUB_OFFLINE=1" in message and "source 'local'" in message
    assert not (tmp_path / "out.parquet").exists()


def test_malformed_hub_answer_is_one_line(tmp_path):
    with FakeHub() as hub:
        hub.raw["/api/datasets"] = [
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nnope!"
        ]
        with pytest.raises(
            DownloadError, match="list open-llm-leaderboard datasets: JSONDecodeError"
        ) as info:
            list_details_datasets(HubClient(hub.url, retries=0))
    assert "\n" not in str(info.value)


def test_a_failed_download_is_an_error_not_a_gap(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        tree = "/api/datasets/open-llm-leaderboard/org-b__model-2-details/tree/main"
        hub.fail[tree] = [501]  # a server error that huggingface_hub does not retry itself
        with pytest.raises(
            DownloadError,
            match="list open-llm-leaderboard/org-b__model-2-details: failed after 1 "
            r"attempt\(s\): HfHubHTTPError: .*501",
        ):
            rebuild_suite(
                "MuSR",
                ["org-a/model-1", "org-b/model-2"],
                cache_dir=tmp_path,
                client=HubClient(hub.url, retries=0),
                progress=False,
            )
        hub.fail[tree] = [501]
        frame, report = rebuild_suite(
            "MuSR",
            ["org-a/model-1", "org-b/model-2"],
            cache_dir=tmp_path,
            client=HubClient(hub.url, retries=1, backoff=0.01),
            progress=False,
        )
    assert (
        frame.index.tolist() == ["org-a/model-1", "org-b/model-2"] and report["failed_models"] == {}
    )


def test_dropped_connection_is_retried(tmp_path):
    with FakeHub() as hub:
        truth = _populate(hub)
        hub.raw["/api/datasets/open-llm-leaderboard/org-a__model-1-details/tree/main"] = [
            b""
        ]  # closed, no answer
        frame, _ = rebuild_suite(
            "MuSR",
            ["org-a/model-1"],
            cache_dir=tmp_path,
            client=HubClient(hub.url, retries=1, backoff=0.01),
            progress=False,
        )
    np.testing.assert_array_equal(
        frame.loc["org-a/model-1"].to_numpy(), _expected_row(truth, "org-a/model-1")
    )


def test_offline_without_cache_names_the_dataset_and_the_remedy(tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # as HF_HUB_OFFLINE=1 at import would
    with pytest.raises(DownloadError) as info:
        build_dataset(
            "MuSR_hub",
            _entry("http://127.0.0.1:9", models=["org-a/model-1"]),
            tmp_path / "out.parquet",
            cache_dir=tmp_path / "cache",
        )
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(
        "dataset 'MuSR_hub': list open-llm-leaderboard/org-a__model-1-details: not in the "
        "local Hub cache, and HF_HUB_OFFLINE=1 forbids the network."
    )
    assert str(tmp_path / "cache" / "hub") in message and "source 'local'" in message


def test_offline_with_filled_caches_builds(tmp_path, monkeypatch):
    with FakeHub() as hub:
        truth = _populate(hub)
        first = build_dataset(
            "MuSR_hub",
            _entry(hub.url, models=["org-a/model-1"]),
            tmp_path / "a.parquet",
            cache_dir=tmp_path / "cache",
        )
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    again = build_dataset(
        "MuSR_hub",
        _entry(hub.url, models=["org-a/model-1"]),
        tmp_path / "b.parquet",
        cache_dir=tmp_path / "cache",
    )
    np.testing.assert_array_equal(read_matrix(again).to_numpy(), read_matrix(first).to_numpy())
    np.testing.assert_array_equal(
        read_matrix(again).loc["org-a/model-1"].to_numpy(), _expected_row(truth, "org-a/model-1")
    )


def test_no_model_with_data_is_an_error_not_an_empty_matrix(tmp_path):
    with (
        FakeHub() as hub,
        pytest.raises(
            DataError,
            match=r"MuSR: none of the 2 requested model\(s\) has data on the Hub "
            r"\(e.g. .*not found on the Hub \(RepositoryNotFoundError",
        ),
    ):
        build_dataset(
            "MuSR_hub",
            _entry(hub.url, models=["gone/a", "gone/b"]),
            tmp_path / "out.parquet",
            cache_dir=tmp_path / "cache",
        )
    assert not (tmp_path / "out.parquet").exists()


def test_corrupt_leaderboard_contents_is_one_line(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        hub.add_file(
            "open-llm-leaderboard/contents", "data/train-00000-of-00001.parquet", b"not parquet"
        )
        with pytest.raises(
            DataError,
            match="open-llm-leaderboard/contents/data/train-00000-of-00001.parquet: not a "
            "readable Parquet file",
        ) as info:
            build_dataset(
                "MuSR_hub",
                _entry(hub.url, models=["org-a/model-1"], metadata=True),
                tmp_path / "out.parquet",
                cache_dir=tmp_path / "cache",
            )
    assert "\n" not in str(info.value) and not (tmp_path / "out.parquet").exists()


@pytest.mark.slow
def test_unreachable_hub_is_one_line_with_offline_advice(tmp_path):
    """huggingface_hub 2.x retries a refused connection itself for about 23 s."""
    with pytest.raises(DownloadError) as info:
        build_dataset(
            "MuSR_hub",
            _entry("http://127.0.0.1:9", models=["org-a/model-1"]),
            tmp_path / "out.parquet",
            cache_dir=tmp_path / "cache",
        )
    message = str(info.value)
    assert "\n" not in message and message.startswith("dataset 'MuSR_hub': list ")
    assert "failed after 1 attempt(s)" in message and "HF_HUB_OFFLINE=1" in message


# ------------------------------------------- June 2024 runs: samples files named .json


def _add_run(hub, model, task, stamp, values, rng, suffix, metric="acc_norm"):
    folder = model.replace("/", "__")
    hub.add_file(
        f"open-llm-leaderboard/{folder}-details",
        f"{folder}/samples_leaderboard_{task}_{stamp}.{suffix}",
        _jsonl(values, rng, metric),
    )


def test_json_and_jsonl_runs_are_read_in_one_repo_and_across_models(tmp_path):
    rng = np.random.default_rng(7)
    truth = {}
    with FakeHub() as hub:
        # A June 2024 model: every run is a .json file (pythia, Llama-3-8B, Mistral-7B ...).
        truth["june/all-json"] = {}
        for task, n in SIZES.items():
            values = rng.integers(0, 2, n)
            _add_run(hub, "june/all-json", task, "2024-06-16T15-52-23.370085", values, rng, "json")
            truth["june/all-json"][task] = values
        # Both kinds in one repo; the latest run wins whatever its suffix.
        mixed, stamps = "mix/both", ("2024-06-17T01-00-00.000000", "2024-07-03T09-00-00.000000")
        truth[mixed] = {}
        for task, n, (old, new) in zip(
            SIZES, SIZES.values(), [("json", "jsonl"), ("jsonl", "json"), ("jsonl", "jsonl")], strict=True
        ):
            _add_run(hub, mixed, task, stamps[0], rng.integers(0, 2, n), rng, old)
            truth[mixed][task] = rng.integers(0, 2, n)
            _add_run(hub, mixed, task, stamps[1], truth[mixed][task], rng, new)
        frame, report = rebuild_suite(
            "MuSR",
            list(truth),
            cache_dir=tmp_path,
            client=HubClient(hub.url, retries=0),
            progress=False,
        )
    assert frame.index.tolist() == list(truth) and report["missing_subtasks"] == {}
    for model, tasks in truth.items():
        np.testing.assert_array_equal(frame.loc[model].to_numpy(), np.concatenate(list(tasks.values())))
    assert report["latest_files"][mixed]["musr_murder_mysteries"].endswith(f"{stamps[1]}.jsonl")
    assert report["latest_files"][mixed]["musr_object_placements"].endswith(f"{stamps[1]}.json")


def test_rows_cached_by_an_older_version_are_rebuilt_not_trusted(tmp_path):
    """cbmm 0.1 read only .jsonl and cached a June 2024 model as having no data."""
    rng = np.random.default_rng(8)
    old_row = tmp_path / "hub-rows" / "MuSR" / "june__m.json"
    old_row.parent.mkdir(parents=True)
    old_row.write_text(json.dumps({"tasks": {}, "missing": list(SIZES), "files": {}}))
    with FakeHub() as hub:
        values = {task: rng.integers(0, 2, n) for task, n in SIZES.items()}
        for task, v in values.items():
            _add_run(hub, "june/m", task, "2024-06-16T15-52-23.370085", v, rng, "json")
        frame, report = rebuild_suite(
            "MuSR", ["june/m"], cache_dir=tmp_path, client=HubClient(hub.url, retries=0), progress=False
        )
    np.testing.assert_array_equal(frame.loc["june/m"].to_numpy(), np.concatenate(list(values.values())))
    assert report["dropped_models"] == {} and report["missing_subtasks"] == {}
    assert json.loads(old_row.read_text())["format"] == ROW_FORMAT


# ------------------------------------------------ the cache keeps parsed rows, not samples


def _bulky_samples(n, rng, metric="acc_norm"):
    """Records the size of real ones: the prompt and the model's output, several KB per item."""
    return "".join(
        json.dumps(
            {"doc_id": d, "doc": {"q": "x" * 1500}, "arguments": ["y" * 3000], metric: int(rng.integers(2))}
        )
        + "\n"
        for d in range(n)
    ).encode()


def _files_under(folder):
    return {p: p.stat().st_size for p in folder.rglob("*") if p.is_file()} if folder.is_dir() else {}


def _disk_use(folder) -> int:
    """Bytes of the files under ``folder`` now; files deleted while it looks count 0."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                pass
    return total


@pytest.mark.parametrize("keep_raw", [False, True], ids=["default", "keep_raw"])
def test_cache_after_a_rebuild_holds_rows_and_listings_only(tmp_path, keep_raw):
    rng = np.random.default_rng(9)
    models = [f"org/m{k}" for k in range(4)]
    with FakeHub() as hub:
        samples = {}
        for model in models:
            folder = model.replace("/", "__")
            for task, n in SIZES.items():
                path = f"{folder}/samples_leaderboard_{task}_2024-07-01T00-00-00.000000.jsonl"
                samples[path] = _bulky_samples(10 * n, rng)
                hub.add_file(f"open-llm-leaderboard/{folder}-details", path, samples[path])
        frame, report = rebuild_suite(
            "MuSR",
            models,
            cache_dir=tmp_path,
            client=HubClient(hub.url, retries=0),
            keep_raw=keep_raw,
            progress=False,
        )
        served = hub.bytes_served
    sample_bytes = sum(map(len, samples.values()))
    assert served == sample_bytes == report["bytes_downloaded"]
    cache = _files_under(tmp_path)
    raw = _files_under(tmp_path / "hub-raw")
    assert report["bytes_kept"] == sum(cache.values())  # everything the rebuild left behind
    assert frame.shape == (4, 10 * sum(SIZES.values()))
    if keep_raw:
        assert sorted(p.name for p in raw if p.suffix == ".jsonl") == sorted(
            p.rsplit("/", 1)[1] for p in samples
        )
        assert sum(s for p, s in raw.items() if p.suffix == ".jsonl") == sample_bytes
    else:
        assert raw == {}
        # the parsed rows: a few bytes per item and model, not the samples' kilobytes
        assert sum(cache.values()) < 0.01 * served
        assert sum(cache.values()) < 4 * frame.size + 2000 * len(models)


def test_disk_in_use_is_bounded_by_the_file_in_flight(tmp_path):
    """One worker: at any moment at most one samples file (plus download metadata) is on disk."""
    rng = np.random.default_rng(10)
    largest = {}
    with FakeHub() as hub:
        for task, n in SIZES.items():
            body = _bulky_samples(20 * n, rng)
            path = f"o__m/samples_leaderboard_{task}_2024-07-01T00-00-00.000000.jsonl"
            hub.add_file("open-llm-leaderboard/o__m-details", path, body)
            hub.trickle[f"/datasets/open-llm-leaderboard/o__m-details/resolve/main/{path}"] = (
                len(body) // 4,
                0.02,
            )
            largest[task] = len(body)
        peaks = {}
        for keep_raw in (False, True):
            seen, stop = [], threading.Event()

            def watch(folder=tmp_path / str(keep_raw) / "hub-raw", seen=seen, stop=stop):
                while not stop.is_set():
                    seen.append(_disk_use(folder))
                    time.sleep(0.002)
                # and once the build has returned: a last file finished between two looks
                # and the stop would otherwise go unseen (a fresh clone's run, 2026-11-29)
                seen.append(_disk_use(folder))

            watcher = threading.Thread(target=watch)
            watcher.start()
            try:
                rebuild_suite(
                    "MuSR",
                    ["o/m"],
                    cache_dir=tmp_path / str(keep_raw),
                    client=HubClient(hub.url, retries=0),
                    max_workers=1,
                    keep_raw=keep_raw,
                    progress=False,
                )
            finally:
                stop.set()
                watcher.join()
            peaks[keep_raw] = max(seen)
    assert peaks[False] <= max(largest.values()) + 4096
    assert peaks[True] >= sum(largest.values())  # the watcher would see files pile up


# ----------------------------------------------- gated datasets: one error before the bulk


def _gated_hub(hub, granted=()):
    """Three gated details datasets, created in order, each with MuSR runs."""
    truth = _populate(hub)
    for repo in list(hub.repos):
        if repo.endswith("-details"):
            hub.gated[repo] = set(granted)
    return truth


def _sample_requests(hub):
    return [(m, p) for m, p, _ in hub.requests if "/resolve/" in p and "samples_" in p]


def _probe_path(hub, model):
    """The file the access check asks for: the first (in order) of a model's latest runs.

    For the repos of :func:`_populate`, whose latest runs are of 2024-07-02.
    """
    folder = model.replace("/", "__")
    files = sorted(p for p in hub.repos[f"open-llm-leaderboard/{folder}-details"] if "07-02T" in p)
    return f"/datasets/open-llm-leaderboard/{folder}-details/resolve/main/{files[0]}"


def test_gated_details_without_a_token_fail_once_before_any_bulk_work(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "no-login"))  # no stored `hf auth login` token
    with FakeHub() as hub:
        _gated_hub(hub)
        with pytest.raises(HubAccessError) as info:
            build_dataset(
                "MuSR_hub",
                _entry(hub.url, cohort="paper"),
                tmp_path / "out.parquet",
                cache_dir=tmp_path / "cache",
            )
        listed = [p for _, p, _ in hub.requests if "/tree/" in p]
        samples = _sample_requests(hub)
    message = str(info.value)
    repo = "open-llm-leaderboard/org-a__model-1-details"
    assert "\n" not in message and message.startswith(f"dataset 'MuSR_hub': {repo}/org-a__model-1/")
    assert "access denied (HTTP 401): no Hub token was sent" in message
    assert "`hf auth login`" in message and "HF_TOKEN" in message
    assert f"accept the terms of {hub.url}/datasets/{repo}" in message
    assert "Offline" not in message  # not a network problem
    # one listing and one HEAD: the cohort's 38-sub-task walk never started
    assert listed == [f"/api/datasets/{repo}/tree/main"]
    assert samples == [("HEAD", _probe_path(hub, "org-a/model-1"))]
    assert not (tmp_path / "out.parquet").exists()


_GATED_PROBE = """
import sys
from cbmm.data import DataError
from cbmm.data.hub import rebuild_suite
try:
    frame, _ = rebuild_suite("MuSR", ["org-a/model-1", "org-b/model-2"], cache_dir=sys.argv[1],
                             progress=False)
except DataError as exc:
    print(f"{type(exc).__name__}: {exc}")
else:
    print("rows", frame.shape[0], frame.iloc[0].tolist())
"""


@pytest.mark.parametrize("granted", [True, False], ids=["terms accepted", "terms not accepted"])
def test_gated_details_with_a_token(tmp_path, granted):
    pem = self_signed_certificate(tmp_path)
    if pem is None:
        pytest.skip("openssl is needed to make a certificate for the local https Hub")
    with FakeHub(pem) as hub:
        truth = _gated_hub(hub, granted=[TOKEN] if granted else ["hf_someone_else"])
        env = {
            **os.environ,
            "HF_TOKEN": TOKEN,
            "HF_ENDPOINT": hub.url,
            "SSL_CERT_FILE": str(pem.with_suffix(".crt")),
            "HF_HOME": str(tmp_path / "hf_home"),
        }
        run = subprocess.run(
            [sys.executable, "-c", _GATED_PROBE, str(tmp_path / "cache")],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=300,
        )
        samples = _sample_requests(hub)
    assert run.returncode == 0, run.stderr[-2000:]
    if granted:
        row = _expected_row(truth, "org-a/model-1").astype(float).tolist()
        assert run.stdout.strip() == f"rows 2 {row}"
    else:
        repo = "open-llm-leaderboard/org-a__model-1-details"
        assert run.stdout.startswith(f"HubAccessError: {repo}/")
        assert "access denied (HTTP 403): the token's account has not been granted access" in run.stdout
        assert f"accept the terms of {hub.url}/datasets/{repo}" in run.stdout
        assert samples == [("HEAD", _probe_path(hub, "org-a/model-1"))]


# --------------------------------------------------------------- HTTP 429: rate limits


def _http_date(seconds_from_now):
    return email.utils.format_datetime(
        datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=seconds_from_now),
        usegmt=True,
    )


@pytest.mark.parametrize(
    "headers, asked",
    [
        ({"Retry-After": "2"}, 2),
        (
            {"RateLimit": '"resolvers";r=0;t=2', "RateLimit-Policy": '"fixed window";"resolvers";w=300'},
            2,
        ),
        ({"Retry-After": "http-date"}, 2),
    ],
    ids=["Retry-After seconds", "RateLimit header", "Retry-After date"],
)
def test_a_429_is_waited_out_as_the_hub_asks_and_said(tmp_path, caplog, headers, asked):
    with FakeHub() as hub:
        truth = _populate(hub)
        if headers.get("Retry-After") == "http-date":
            headers = {"Retry-After": _http_date(asked + 1)}  # whole seconds: 2 to 3 s from now
        hub.fail[_probe_path(hub, "org-a/model-1")] = [(429, headers)]
        start = time.monotonic()
        frame, _ = rebuild_suite(
            "MuSR",
            ["org-a/model-1"],
            cache_dir=tmp_path,
            client=HubClient(hub.url, retries=0),
            progress=False,
        )
        elapsed = time.monotonic() - start
    expected = _expected_row(truth, "org-a/model-1")
    np.testing.assert_array_equal(frame.loc["org-a/model-1"].to_numpy(), expected)
    waits = [r.getMessage() for r in caplog.records if "HTTP 429" in r.getMessage()]
    assert len(waits) == 1 and "rate-limited by the Hub (HTTP 429); all requests wait" in waits[0]
    assert "as it asks" in waits[0]
    assert asked - 0.1 <= elapsed < asked + 10  # without the hint the client would wait 1 s


def test_a_429_beyond_rate_limit_wait_is_one_line_without_waiting(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        hub.fail[_probe_path(hub, "org-a/model-1")] = [(429, {"Retry-After": "3600"})]
        start = time.monotonic()
        with pytest.raises(HubRateLimitError) as info:
            build_dataset(
                "MuSR_hub",
                _entry(hub.url, models=["org-a/model-1"], rate_limit_wait=600),
                tmp_path / "out.parquet",
                cache_dir=tmp_path / "cache",
            )
        assert time.monotonic() - start < 30
    message = str(info.value)
    assert "\n" not in message and message.startswith("dataset 'MuSR_hub': open-llm-leaderboard/")
    assert "rate-limited by the Hub (HTTP 429) after 0 s of waiting; the next wait, 3600 s," in message
    assert "would pass rate_limit_wait (600 s)" in message and "resumes" in message
    assert "Offline" not in message and not (tmp_path / "out.parquet").exists()


def test_a_429_pauses_every_request_of_the_client(tmp_path):
    """Other workers do not hammer the Hub while one waits out a rate limit."""
    with FakeHub() as hub:
        _populate(hub)
        limited, other = _probe_path(hub, "org-a/model-1"), _probe_path(hub, "org-b/model-2")
        hub.fail[limited] = [(429, {"Retry-After": "2"})]
        client = HubClient(hub.url, retries=0)

        def check(path):
            repo, file = path.split("/datasets/", 1)[1].split("/resolve/main/")
            client.check_file_access(repo, file)

        worker = threading.Thread(target=check, args=(limited,))
        worker.start()
        while not hub.requests_for(limited):
            time.sleep(0.01)
        answered = time.monotonic()
        time.sleep(0.2)  # the 429 is being handled: the pause is on
        check(other)
        other_at = time.monotonic()
        worker.join()
        order = [p for _, p, _ in hub.requests if p in (limited, other)]
    assert other_at - answered >= 1.8
    assert order in ([limited, limited, other], [limited, other, limited])


PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


def test_a_hub_whose_name_does_not_resolve_fails_at_once_with_the_remedy(monkeypatch):
    """No network: a failed name lookup is not retried (RFC 2606's .invalid never resolves)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    client = HubClient("https://cbmm-test.invalid", retries=3, backoff=0.01)
    with pytest.raises(DownloadError) as info:
        client.check_file_access("org/data", "f.jsonl")
    message = str(info.value)
    assert message.startswith(
        "org/data/f.jsonl: cannot reach the Hub: its host cbmm-test.invalid does not resolve"
    )
    assert "attempt" not in message and "HF_HUB_OFFLINE=1" in message and "\n" not in message


def test_behind_a_proxy_the_name_is_the_proxys_to_resolve(monkeypatch):
    from cbmm.data.hub import _unresolvable_host

    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert _unresolvable_host("https://cbmm-test.invalid") == "cbmm-test.invalid"
    assert _unresolvable_host("http://127.0.0.1:9") is None  # refused, not unresolved: retried
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert _unresolvable_host("https://cbmm-test.invalid") is None


# ------------------------------------------------ the paper's cohort (Wu et al.'s M1)

FIVE_SUITES_TASKS = [t for suite in ("IFEval", "MuSR", "GPQA", "MATH", "BBH") for t, _ in SUITES[suite]]


def _listing(tasks):
    return {t: f"m/samples_leaderboard_{t}_2024-07-01T00-00-00.000000.jsonl" for t in tasks}


def test_paper_cohort_rule_on_a_synthetic_listing():
    assert len(FIVE_SUITES_TASKS) == 38
    assert all(cohort_tasks(s) == FIVE_SUITES_TASKS for s in ("IFEval", "MuSR", "GPQA", "MATH", "BBH"))
    assert cohort_tasks("MMLU_PRO") == ["mmlu_pro"]
    created = {  # listed out of order, as a Hub answer may be
        "a/complete-3": "2024-06-20T00:00:00Z",
        "a/complete-1": "2024-06-10T00:00:00Z",
        "a/no-navigate": "2024-06-12T00:00:00Z",
        "a/complete-2": "2024-06-15T00:00:00Z",
        "a/gone": "2024-06-11T00:00:00Z",
        "a/complete-4": "2024-07-01T00:00:00Z",
        "a/mmlu-only": "2024-06-13T00:00:00Z",
        "a/complete-5": "2024-08-01T00:00:00Z",
    }
    candidates = pd.DataFrame(
        {"model": list(created), "created_at": pd.to_datetime(list(created.values()), utc=True)}
    )
    with_mmlu = {"a/complete-1", "a/complete-3", "a/no-navigate", "a/mmlu-only", "a/complete-5"}
    listings = {
        m: _listing(
            (FIVE_SUITES_TASKS if m.startswith("a/complete") else [])
            + ([t for t in FIVE_SUITES_TASKS if t != "bbh_navigate"] if m == "a/no-navigate" else [])
            + (["mmlu_pro"] if m in with_mmlu else [])
        )
        for m in created
        if m != "a/gone"
    }
    # five complete models in order of creation -> the first 2 (half, rounded down)
    assert paper_cohort(candidates, listings, "BBH") == (
        ["a/complete-1", "a/complete-2"],
        {"n_details_datasets": 8, "n_complete": 5, "n_cohort": 2},
    )
    # MMLU-Pro on its own list: 1 (06-10), no-navigate (06-12), mmlu-only (06-13), 3, 5
    assert paper_cohort(candidates, listings, "MMLU_PRO") == (
        ["a/complete-1", "a/no-navigate"],
        {"n_details_datasets": 8, "n_complete": 5, "n_cohort": 2},
    )


def _paper_hub(hub, rng):
    """Six models with every sub-task but some gaps (two items each); truth[model][task]."""
    plan = {  # model: (created, tasks absent, suffix of the samples files, has MMLU-Pro)
        "p/m4": ("2024-07-01", set(), "jsonl", True),
        "p/m1": ("2024-06-16", set(), "json", True),  # a June 2024 run: .json files
        "p/m3": ("2024-06-17", {"gpqa_main"}, "jsonl", True),
        "p/m5": ("2024-07-05", set(), "jsonl", True),
        "p/m2": ("2024-06-18", set(), "jsonl", False),
        "p/m6": ("2024-06-20", set(), "jsonl", False),
    }
    truth = {}
    for model, (created, absent, suffix, mmlu) in plan.items():
        truth[model] = {}
        folder = model.replace("/", "__")
        for suite, tasks in SUITES.items():
            for task, metric in tasks:
                if task in absent or (suite == "MMLU_PRO" and not mmlu):
                    continue
                truth[model][task] = rng.integers(0, 2, 2)
                stamp = f"{created}T10-00-00.000000"
                _add_run(hub, model, task, stamp, truth[model][task], rng, suffix, metric)
        hub.datasets_created[f"open-llm-leaderboard/{folder}-details"] = f"{created}T12:00:00.000Z"
    hub.datasets_created["open-llm-leaderboard/p__gone-details"] = "2024-06-01T00:00:00.000Z"
    return truth


def test_paper_cohort_builds_share_one_model_list_and_one_listing_walk(tmp_path):
    rng = np.random.default_rng(11)
    built = {}
    with FakeHub() as hub:
        truth = _paper_hub(hub, rng)
        listings_made = []
        for name, suite in (("IFEval_hub", "IFEval"), ("MuSR_hub", "MuSR"), ("MMLU_PRO_hub", "MMLU_PRO")):
            before = len(hub.requests)
            out = build_dataset(
                name,
                _entry(hub.url, suite=suite, cohort="paper"),
                tmp_path / f"{name}.parquet",
                cache_dir=tmp_path / "cache",
            )
            listings_made.append(sum("/tree/" in p for _, p, _ in hub.requests[before:]))
            built[suite] = (read_matrix(out), json.loads(summary_path(out).read_text()))
    # complete on all 38: m1 (06-16), m2 (06-18), m6 (06-20), m4 (07-01), m5 (07-05) -> first 2
    assert built["IFEval"][0].index.tolist() == built["MuSR"][0].index.tolist() == ["p/m1", "p/m2"]
    # with MMLU-Pro: m1 (06-16), m3 (06-17), m4, m5 -> first 2
    assert built["MMLU_PRO"][0].index.tolist() == ["p/m1", "p/m3"]
    for suite, (matrix, summary) in built.items():
        for model in matrix.index:
            expected = np.concatenate([truth[model][t] for t, _ in SUITES[suite]])
            np.testing.assert_array_equal(matrix.loc[model].to_numpy(), expected)
        assert summary["provenance"]["cohort"] == {
            "cohort": "paper",
            "n_details_datasets": 7,
            "n_complete": 5 if suite != "MMLU_PRO" else 4,
            "n_cohort": 2,
            "tasks": 38 if suite != "MMLU_PRO" else 1,
        }
        assert summary["cleaning"][0].startswith("cohort (Wu et al.'s M1): of 7 details datasets")
    # every dataset listed once (p/gone answers 404), then the cohort comes from the cache
    assert listings_made == [7, 0, 0]


def test_concurrent_cohort_walks_list_each_dataset_once(tmp_path):
    """Builds of the five suites started together share one walk (the later ones wait)."""
    with FakeHub() as hub:
        _paper_hub(hub, np.random.default_rng(14))
        candidates = list_details_datasets(HubClient(hub.url))
        results = [None, None]

        def walk(k):
            results[k] = cohort_listings(
                candidates, cache_dir=tmp_path, client=HubClient(hub.url), max_workers=2, progress=False
            )

        walkers = [threading.Thread(target=walk, args=(k,)) for k in range(2)]
        for walker in walkers:
            walker.start()
        for walker in walkers:
            walker.join()
        listed = sorted(p for _, p, _ in hub.requests if "/tree/" in p)
    assert listed == sorted(f"/api/datasets/{repo}/tree/main" for repo in hub.datasets_created)
    assert results[0] == results[1] and sorted(results[0]) == [f"p/m{k}" for k in range(1, 7)]


def test_offline_paper_cohort_builds_from_the_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    with FakeHub() as hub:
        _paper_hub(hub, np.random.default_rng(13))
        entry = _entry(hub.url, cohort="paper")
        first = build_dataset("MuSR_hub", entry, tmp_path / "a.parquet", cache_dir=tmp_path / "cache")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # and the server is gone
    again = build_dataset("MuSR_hub", entry, tmp_path / "b.parquet", cache_dir=tmp_path / "cache")
    pd.testing.assert_frame_equal(read_matrix(again), read_matrix(first))
    assert read_matrix(again).index.tolist() == ["p/m1", "p/m2"]


def test_paper_cohort_limit_takes_its_first_models(tmp_path):
    with FakeHub() as hub:
        _paper_hub(hub, np.random.default_rng(12))
        out = build_dataset(
            "GPQA_hub",
            _entry(hub.url, suite="GPQA", cohort="paper", limit=1),
            tmp_path / "GPQA_hub.parquet",
            cache_dir=tmp_path / "cache",
        )
    assert read_matrix(out).index.tolist() == ["p/m1"]
