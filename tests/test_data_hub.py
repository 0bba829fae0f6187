"""Leaderboard rebuild from the Hub, run with the real huggingface_hub client against a local stand-in."""

import io
import json

import numpy as np
import pandas as pd
import pytest

from cbmm.data import DataError, build_dataset, read_matrix
from cbmm.data.hub import SUITES, latest_sample_files, rebuild_suite, select_cohort, list_details_datasets
from cbmm.data.matrix import summary_path
from data_fixtures import FakeHub

SIZES = {"musr_murder_mysteries": 5, "musr_object_placements": 4, "musr_team_allocation": 3}


def test_suites_have_the_paper_subtasks_and_metrics():
    # 24 BBH + 3 GPQA + IFEval + 7 MATH + 3 MuSR = 38 sub-tasks (Wu et al.), plus MMLU-Pro
    assert sum(len(v) for k, v in SUITES.items() if k != "MMLU_PRO") == 38
    assert {k: len(v) for k, v in SUITES.items()} == {"IFEval": 1, "MuSR": 3, "GPQA": 3, "MATH": 7, "BBH": 24,
                                                      "MMLU_PRO": 1}
    metrics = {suite: {m for _, m in tasks} for suite, tasks in SUITES.items()}
    assert metrics == {"IFEval": {"prompt_level_loose_acc"}, "MuSR": {"acc_norm"}, "GPQA": {"acc_norm"},
                       "MATH": {"exact_match"}, "BBH": {"acc_norm"}, "MMLU_PRO": {"acc"}}


def test_latest_sample_file_per_task():
    files = ["m/samples_leaderboard_musr_team_allocation_2024-06-26T10-00-00.000000.jsonl",
             "m/samples_leaderboard_musr_team_allocation_2024-07-01T09-00-00.000000.jsonl",
             "m/samples_leaderboard_bbh_navigate_2024-08-01T09-00-00.000000.jsonl",
             "m/results_2024-07-01T09-00-00.000000.json"]
    assert latest_sample_files(files, ["musr_team_allocation", "musr_murder_mysteries"]) == {
        "musr_team_allocation": files[1]}


def _jsonl(values, rng, metric="acc_norm"):
    order = rng.permutation(len(values))  # files are not sorted by doc_id
    return "".join(json.dumps({"doc_id": int(d), "doc": {"q": "..."}, metric: float(values[d])}) + "\n"
                   for d in order).encode()


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
            hub.add_file(repo, f"{folder}/samples_leaderboard_{task}_2024-06-20T10-00-00.000000.jsonl", _jsonl(old, rng))
            hub.add_file(repo, f"{folder}/samples_leaderboard_{task}_2024-07-02T08-30-00.123456.jsonl", _jsonl(new, rng))
            truth[model][task] = new
        hub.add_file(repo, "README.md", b"details")
    hub.datasets_created = {
        "open-llm-leaderboard/org-a__model-1-details": "2024-06-15T00:00:00.000Z",
        "open-llm-leaderboard/org-b__model-2-details": "2024-08-01T00:00:00.000Z",
        "open-llm-leaderboard/org-c__gone-details": "2024-09-01T00:00:00.000Z",
        "open-llm-leaderboard/org-d__late-details": "2025-01-05T00:00:00.000Z",
        "open-llm-leaderboard/contents": "2024-06-01T00:00:00.000Z",
    }
    contents = pd.DataFrame({"fullname": ["org-a/model-1", "org-b/model-2", "other/x"],
                             "#Params (B)": [7.2, 1.5, 3.0], "Submission Date": ["2024-06-14", "2024-07-30", "2024-05-01"]})
    buffer = io.BytesIO()
    contents.to_parquet(buffer)
    hub.add_file("open-llm-leaderboard/contents", "data/train-00000-of-00001.parquet", buffer.getvalue())
    return truth


def _expected_row(truth, model):
    return np.concatenate([truth[model][t] if truth[model][t] is not None else np.full(n, np.nan)
                           for t, n in SIZES.items()])


def test_rebuild_latest_runs_ordered_by_doc_id_with_gaps_reported(tmp_path):
    with FakeHub() as hub:
        truth = _populate(hub)
        hub.fail["/api/datasets/open-llm-leaderboard/org-a__model-1-details/tree/main"] = [500]
        frame, report = rebuild_suite("MuSR", ["org-a/model-1", "org-b/model-2", "org-c/gone"],
                                      cache_dir=tmp_path, max_workers=2, endpoint=hub.url, retries=2,
                                      backoff=0.01, progress=False)
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
        first, _ = rebuild_suite("MuSR", models, cache_dir=tmp_path, endpoint=hub.url, retries=0, progress=False)
        url = hub.url
    # the server is gone: everything must come from the cache
    second, report = rebuild_suite("MuSR", models, cache_dir=tmp_path, endpoint=url, retries=0, progress=False,
                                   drop_incomplete=True)
    assert second.index.tolist() == ["org-a/model-1"]
    pd.testing.assert_series_equal(second.loc["org-a/model-1"], first.loc["org-a/model-1"])
    assert "org-b/model-2" in report["dropped_models"]


def test_malformed_sample_is_an_error_not_a_gap(tmp_path):
    with FakeHub() as hub:
        hub.add_file("open-llm-leaderboard/o__m-details",
                     "o__m/samples_leaderboard_ifeval_2024-07-01T00-00-00.000000.jsonl",
                     b'{"doc_id": 0, "prompt_level_loose_acc": 0.5}\n')
        with pytest.raises(DataError, match="line 1: prompt_level_loose_acc = 0.5"):
            rebuild_suite("IFEval", ["o/m"], cache_dir=tmp_path, endpoint=hub.url, retries=0, progress=False)


def test_cohort_by_creation_date(tmp_path):
    with FakeHub() as hub:
        _populate(hub)
        candidates = list_details_datasets(endpoint=hub.url, retries=0)
    assert candidates["model"].tolist() == ["org-a/model-1", "org-b/model-2", "org-c/gone", "org-d/late"]
    assert select_cohort(candidates, date_from="2024-06-01", date_to="2024-12-31") == [
        "org-a/model-1", "org-b/model-2", "org-c/gone"]
    assert select_cohort(candidates, date_from="2024-06-01", limit=1) == ["org-a/model-1"]
    assert select_cohort(models=["x/y"]) == ["x/y"]


def test_build_hub_dataset_with_metadata(tmp_path):
    with FakeHub() as hub:
        truth = _populate(hub)
        entry = {"source": "hub", "options": {"suite": "MuSR", "date_from": "2024-06-01", "date_to": "2024-12-31",
                                              "endpoint": hub.url, "retries": 0, "progress": False}}
        out = build_dataset("MuSR_hub", entry, tmp_path / "MuSR_hub.parquet", cache_dir=tmp_path / "cache")
    matrix = read_matrix(out)
    np.testing.assert_array_equal(matrix.loc["org-b/model-2"].to_numpy(), _expected_row(truth, "org-b/model-2"))
    summary = json.loads(summary_path(out).read_text())
    assert summary["report"]["n_missing_pairs"] == 4 and summary["n_models"] == 2
    assert summary["provenance"]["cohort"] == {"date_from": "2024-06-01", "date_to": "2024-12-31"}
    meta = pd.read_csv(tmp_path / "MuSR_hub.models.csv")
    assert meta["fullname"].tolist() == ["org-a/model-1", "org-b/model-2"]
    assert meta["#Params (B)"].tolist() == [7.2, 1.5]
