"""Leaderboard rebuild from the Hub: the real huggingface_hub client against a local stand-in."""

import io
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from data_fixtures import FakeHub, self_signed_certificate

from cbmm.data import DataError, DownloadError, build_dataset, read_matrix
from cbmm.data.hub import (
    SUITES,
    latest_sample_files,
    list_details_datasets,
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
    ]
    assert latest_sample_files(files, ["musr_team_allocation", "musr_murder_mysteries"]) == {
        "musr_team_allocation": files[1]
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
            endpoint=hub.url,
            retries=2,
            backoff=0.01,
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
            "MuSR", models, cache_dir=tmp_path, endpoint=hub.url, retries=0, progress=False
        )
        url = hub.url
    # the server is gone: everything must come from the cache
    second, report = rebuild_suite(
        "MuSR",
        models,
        cache_dir=tmp_path,
        endpoint=url,
        retries=0,
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
                "IFEval", ["o/m"], cache_dir=tmp_path, endpoint=hub.url, retries=0, progress=False
            )


def test_cohort_by_creation_date(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        candidates = list_details_datasets(endpoint=hub.url, retries=0)
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
    assert summary["provenance"]["cohort"] == {"date_from": "2024-06-01", "date_to": "2024-12-31"}
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
            endpoint=hub.url,
            retries=0,
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
            rebuild_suite(
                "MuSR",
                ["org-a/model-1"],
                cache_dir=tmp_path,
                endpoint=hub.url,
                token=TOKEN,
                retries=0,
                progress=False,
            )
        assert hub.requests == []


_TOKEN_PROBE = """
import sys
from cbmm.data.hub import rebuild_suite
endpoint = sys.argv[2] or None
rebuild_suite("MuSR", ["org-a/model-1"], cache_dir=sys.argv[1], endpoint=endpoint, retries=0,
              progress=False)
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
        hub.fail["/api/datasets"] = [403]
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
    assert "403" in message and "HF_HUB_OFFLINE=1" in message and "source 'local'" in message
    assert not (tmp_path / "out.parquet").exists()


def test_malformed_hub_answer_is_one_line(tmp_path):
    with FakeHub() as hub:
        hub.raw["/api/datasets"] = [
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nnope!"
        ]
        with pytest.raises(
            DownloadError, match="list open-llm-leaderboard datasets: JSONDecodeError"
        ) as info:
            list_details_datasets(endpoint=hub.url, retries=0)
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
                endpoint=hub.url,
                retries=0,
                progress=False,
            )
        hub.fail[tree] = [501]
        frame, report = rebuild_suite(
            "MuSR",
            ["org-a/model-1", "org-b/model-2"],
            cache_dir=tmp_path,
            endpoint=hub.url,
            retries=1,
            backoff=0.01,
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
            endpoint=hub.url,
            retries=1,
            backoff=0.01,
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
