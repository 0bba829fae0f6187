"""MATH-500: LaRT -> release reproduction, item metadata, model table."""

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from data_fixtures import SHARED_DATA, FakeHub, FileServer, needs_shared

from cbmm.data import DataError, DownloadError, build_dataset, find_entry, load_registry, read_matrix
from cbmm.data.math500 import (
    LART_EXCLUDED_ROWS,
    fetch_items,
    lart_to_release,
    model_table,
    refresh_model_table,
    tier_of,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED = SHARED_DATA / "math500"
RELEASE = SHARED / "MATH_500.csv"
PIN = "7d067aacfed54f14eaefe37e2ddf9d2997348792caf32c9e62f2a1023415e88a"
ITEMS_SHA = "5f825781e98ae98d39711ce3f9d02ec06743e04b6f3b3cb256f4049079dfa491"


def _lart_standin(eol=b"\n", seed=1) -> bytes:
    """158-row stand-in: the release rows plus 18 synthetic rows, in sorted label order (LaRT's)."""
    lines = RELEASE.read_bytes().split(b"\r\n")[:-1]
    header, rows = lines[0], lines[1:]
    rng = np.random.default_rng(seed)
    extra = [
        label.encode() + b"," + b",".join(str(v).encode() for v in rng.integers(0, 2, 500))
        for label in LART_EXCLUDED_ROWS
    ]
    merged = sorted(rows + extra, key=lambda r: r.split(b",", 1)[0])
    assert [r.split(b",", 1)[0] for r in merged if r in rows] == [r.split(b",", 1)[0] for r in rows]
    return eol.join([header] + merged) + eol


@needs_shared
@pytest.mark.parametrize("eol", [b"\n", b"\r\n"])
def test_lart_filter_reproduces_release_bytes(tmp_path, eol):
    lart = tmp_path / "accuracy_math500.csv"
    lart.write_bytes(_lart_standin(eol))
    assert lart.read_bytes().count(eol) == 159
    out = lart_to_release(lart, tmp_path / "MATH_500.csv", sha256=PIN)
    assert out.read_bytes() == RELEASE.read_bytes()
    assert hashlib.sha256(out.read_bytes()).hexdigest() == PIN


@needs_shared
def test_lart_with_a_changed_cell_is_refused(tmp_path):
    data = bytearray(_lart_standin())
    at = data.index(b"\nQwen_QwQ_32B_one_shot,") + len(b"\nQwen_QwQ_32B_one_shot,")
    data[at] = ord("0") if data[at] == ord("1") else ord("1")
    lart = tmp_path / "lart.csv"
    lart.write_bytes(bytes(data))
    with pytest.raises(DataError, match=f"expected {PIN}"):
        lart_to_release(lart, tmp_path / "out.csv", sha256=PIN)
    assert not (tmp_path / "out.csv").exists()


@needs_shared
def test_lart_without_an_excluded_row_is_refused(tmp_path):
    lines = _lart_standin().split(b"\n")
    lart = tmp_path / "lart.csv"
    lart.write_bytes(
        b"\n".join(line for line in lines if not line.startswith(b"microsoft_phi_4_zero_shot"))
    )
    with pytest.raises(DataError, match=r"absent \['microsoft_phi_4_zero_shot'\]"):
        lart_to_release(lart, tmp_path / "out.csv", sha256=PIN)


@needs_shared
def test_lart_source_builds_the_release_matrix(tmp_path):
    registry = load_registry(ROOT / "config" / "datasets.yaml")
    entry = find_entry(registry, "MATH_500_lart")
    assert entry["options"]["sha256"] == PIN
    with FileServer() as server:
        server.files["/lart/accuracy_math500.csv"] = _lart_standin()
        options = {
            **entry["options"],
            "url": server.url + "/lart/accuracy_math500.csv",
            "progress": False,
        }
        out = build_dataset(
            "MATH_500",
            {"source": "math500_lart", "options": options},
            tmp_path / "MATH_500.parquet",
            cache_dir=tmp_path / "cache",
        )
    expected = pd.read_csv(RELEASE, index_col=0)
    got = read_matrix(out)
    assert got.index.tolist() == expected.index.tolist()
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy(dtype=float))


def _check_items(path):
    items = pd.read_csv(path, dtype={"item": str})
    assert items.columns.tolist() == ["item", "subject", "level", "unique_id"]
    assert items["item"].tolist() == [str(j) for j in range(500)]
    records = [
        json.loads(line) for line in (SHARED / "MATH-500_test.jsonl").read_text().splitlines()
    ]
    assert items["level"].tolist() == [r["level"] for r in records]
    assert items["subject"].tolist() == [r["subject"] for r in records]
    assert items["level"].value_counts().sort_index().index.tolist() == [1, 2, 3, 4, 5]


@needs_shared
def test_items_from_local_jsonl(tmp_path):
    _check_items(
        fetch_items(
            tmp_path / "items.csv", source=str(SHARED / "MATH-500_test.jsonl"), sha256=ITEMS_SHA
        )
    )
    with pytest.raises(DataError, match="SHA-256"):
        fetch_items(
            tmp_path / "bad.csv", source=str(SHARED / "MATH-500_test.jsonl"), sha256="0" * 64
        )
    assert not (tmp_path / "bad.csv").exists()


@needs_shared
def test_items_through_the_real_hub_client(tmp_path):
    with FakeHub() as hub:
        hub.add_file(
            "HuggingFaceH4/MATH-500", "test.jsonl", (SHARED / "MATH-500_test.jsonl").read_bytes()
        )
        hub.fail["/datasets/HuggingFaceH4/MATH-500/resolve/main/test.jsonl"] = [503]
        out = fetch_items(
            tmp_path / "items.csv",
            sha256=ITEMS_SHA,
            cache_dir=tmp_path / "hub",
            endpoint=hub.url,
            retries=2,
        )
    _check_items(out)


@pytest.mark.slow
def test_items_offline_fail_in_one_attempt_and_name_the_local_source(tmp_path, monkeypatch):
    """huggingface_hub 2.x retries the lookup itself for about 23 s; ours adds no attempt."""
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(DownloadError) as info:
        fetch_items(
            tmp_path / "items.csv", cache_dir=tmp_path / "hub", endpoint="https://cbmm-test.invalid"
        )
    message = str(info.value)
    assert "cbmm-test.invalid does not resolve" in message and "attempt" not in message
    assert message.endswith("or give a local copy of test.jsonl as the source")
    assert not (tmp_path / "items.csv").exists()


@needs_shared
def test_model_table_tiers():
    table = model_table(ROOT / "config" / "math500_models.csv")
    assert (
        len(table) == 140
        and table["row_label"].tolist() == pd.read_csv(RELEASE, index_col=0).index.tolist()
    )
    assert [tier_of(x) for x in (0.5, 7.0, 7.6, 20.0, 20.9)] == [
        "0-7B",
        "0-7B",
        "7-20B",
        "7-20B",
        ">20B",
    ]
    assert set(table["tier"]) == {"0-7B", "7-20B", ">20B"}
    assert table.loc[table["model"] == "nvidia/AceReason-Nemotron-1.1-7B", "tier"].iloc[0] == "0-7B"


def test_model_table_rejects_inconsistent_tier(tmp_path):
    bad = pd.read_csv(ROOT / "config" / "math500_models.csv")
    bad.loc[0, "tier"] = "0-7B"
    bad.to_csv(tmp_path / "m.csv", index=False)
    with pytest.raises(DataError, match="line 2: tier '0-7B' but params_b 34.0 gives '>20B'"):
        model_table(tmp_path / "m.csv")


def test_refresh_model_table_from_hub(tmp_path):
    table = pd.read_csv(ROOT / "config" / "math500_models.csv").head(4)
    table.to_csv(tmp_path / "m.csv", index=False)
    with FakeHub() as hub:
        hub.models["01-ai/Yi-34B"] = {
            "createdAt": "2023-11-01T10:00:00.000Z",
            "safetensors": {"parameters": {"BF16": 34388917248}, "total": 34388917248},
        }
        out = refresh_model_table(
            tmp_path / "m.csv", tmp_path / "fresh.csv", endpoint=hub.url, retries=0
        )
    fresh = pd.read_csv(tmp_path / "fresh.csv")
    assert fresh["hub_params_b"].tolist()[:2] == [34.389, 34.389]
    assert fresh["hub_created_at"].tolist()[:2] == ["2023-11-01", "2023-11-01"]
    assert fresh["hub_params_b"].isna().tolist()[2:] == [True, True]
    assert fresh["params_b"].tolist() == table["params_b"].tolist()  # curated values kept
    assert list(out.attrs["unresolved"]) == ["HuggingFaceTB/SmolLM3-3B"]
