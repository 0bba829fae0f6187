"""Release source end to end: real download code against a local LFS stand-in."""

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from data_fixtures import SHARED_DATA, FileServer, needs_shared

from cbmm.data import (
    ChecksumError,
    DownloadError,
    build_dataset,
    find_entry,
    load_registry,
    read_matrix,
)
from cbmm.data.cli import main as cli_main
from cbmm.data.matrix import summary_path

ROOT = Path(__file__).resolve().parents[1]
MATH500_CSV = SHARED_DATA / "math500" / "MATH_500.csv"
REGISTRY = ROOT / "config" / "datasets.yaml"
COMMIT = "b6cb036d80b34f036822383e8514be4ee4ed648f"


def _standin_ifeval(n_models=30, seed=0) -> bytes:
    """A small file in the release's format: LF, header ',ifeval_0,...', model names, 0/1."""
    rng = np.random.default_rng(seed)
    values = (rng.random((n_models, 41)) < 0.6).astype(int)
    frame = pd.DataFrame(
        values,
        index=[f"org{i}__model-{i}" for i in range(n_models)],
        columns=[f"ifeval_{j}" for j in range(41)],
    )
    buffer = io.StringIO()
    frame.to_csv(buffer, lineterminator="\n")
    return buffer.getvalue().encode()


@pytest.fixture
def lfs():
    with FileServer() as server:
        yield server


def _release(server, registry):
    return {**registry["release"], "base_url": server.url + "/media"}


def _serve(server, registry, name, data):
    entry = find_entry(registry, name)
    rel = _release(server, registry)
    server.files[f"/media/{rel['repo']}/{rel['commit']}/{entry['options']['file']}"] = data
    return entry, rel


def _cli_build_ifeval(tmp_path, out):
    """`cbmm data build` of IFEval from tmp_path/reg.yaml into ``out``; the exit status."""
    return cli_main(["data", "build", "--name", "IFEval", "--registry", str(tmp_path / "reg.yaml"),
                     "--out", str(out), "--cache-dir", str(tmp_path / "cache")])


@needs_shared
def test_math500_release_file_verified_end_to_end(lfs, tmp_path):
    registry = load_registry(REGISTRY)
    entry, rel = _serve(lfs, registry, "MATH_500", MATH500_CSV.read_bytes())
    out = build_dataset(
        "MATH_500",
        entry,
        tmp_path / "out" / "MATH_500.parquet",
        cache_dir=tmp_path / "cache",
        release=rel,
    )
    expected = pd.read_csv(MATH500_CSV, index_col=0)
    got = read_matrix(out)
    assert got.shape == (140, 500)
    assert got.index.tolist() == expected.index.tolist()
    assert got.columns.tolist() == [str(j) for j in range(500)]
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy(dtype=float))
    summary = json.loads(summary_path(out).read_text())
    assert (summary["n_models"], summary["n_items"], summary["missing_rate"]) == (140, 500, 0.0)
    assert summary["provenance"]["sha256"] == hashlib.sha256(MATH500_CSV.read_bytes()).hexdigest()
    assert summary["mean_accuracy"] == pytest.approx(expected.to_numpy().mean(), abs=1e-6)


def test_standin_leaderboard_file_and_cli(lfs, tmp_path):
    data = _standin_ifeval()
    registry = {
        "release": {"base_url": lfs.url + "/media", "repo": "JackQuu/cBMM", "commit": COMMIT},
        "datasets": {
            "IFEval": {
                "source": "release",
                "options": {
                    "file": "data/IFEval.csv",
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "retries": 1,
                    "backoff": 0.01,
                    "progress": False,
                },
            }
        },
    }
    (tmp_path / "reg.yaml").write_text(json.dumps(registry))  # JSON is YAML
    lfs.files[f"/media/JackQuu/cBMM/{COMMIT}/data/IFEval.csv"] = data
    lfs.fail[f"/media/JackQuu/cBMM/{COMMIT}/data/IFEval.csv"] = [502]
    out = tmp_path / "IFEval.parquet"
    status = _cli_build_ifeval(tmp_path, out)
    assert status == 0
    got = read_matrix(out)
    expected = pd.read_csv(io.BytesIO(data), index_col=0)
    assert got.columns.tolist() == [f"ifeval_{j}" for j in range(41)]
    np.testing.assert_array_equal(got.to_numpy(), expected.to_numpy(dtype=float))


@needs_shared
def test_corrupted_release_file_fails_without_outputs(lfs, tmp_path, capsys):
    registry = load_registry(REGISTRY)
    corrupted = MATH500_CSV.read_bytes().replace(
        b"\r\n01_ai_Yi_34B_one_shot,0", b"\r\n01_ai_Yi_34B_one_shot,1", 1
    )
    entry, rel = _serve(lfs, registry, "MATH_500", corrupted)
    out = tmp_path / "out" / "MATH_500.parquet"
    with pytest.raises(ChecksumError, match="7d067aacfed54f14"):
        build_dataset("MATH_500", entry, out, cache_dir=tmp_path / "cache", release=rel)
    assert not out.exists() and not summary_path(out).exists()
    leftovers = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
    assert leftovers == []


def test_offline_names_the_dataset_and_a_pre_filled_cache_works(lfs, tmp_path, capsys):
    """The one-line error says where to put the file; putting it there builds without network."""
    data = _standin_ifeval()
    entry = {
        "source": "release",
        "options": {
            "file": "data/IFEval.csv",
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "retries": 0,
            "progress": False,
        },
    }
    offline = {"base_url": "http://127.0.0.1:9/media", "repo": "JackQuu/cBMM", "commit": COMMIT}
    out = tmp_path / "out" / "IFEval.parquet"
    with pytest.raises(DownloadError) as info:
        build_dataset("IFEval", entry, out, cache_dir=tmp_path / "cache", release=offline)
    message = str(info.value)
    target = tmp_path / "cache" / "release" / "JackQuu__cBMM" / COMMIT / "data" / "IFEval.csv"
    assert "\n" not in message
    assert message.startswith("dataset 'IFEval': http://127.0.0.1:9/media/JackQuu/cBMM/")
    assert (
        "connection failed" in message
        and f"Put the verified file at {target} (a pre-filled cache_dir" in message
    )
    assert "source 'local'" in message and not out.exists()

    (tmp_path / "reg.yaml").write_text(
        json.dumps({"release": offline, "datasets": {"IFEval": entry}})
    )
    status = _cli_build_ifeval(tmp_path, out)
    assert status == 2
    assert capsys.readouterr().err.count("\n") == 1  # one line on stderr, no traceback

    # A file that is there but is not the pinned one: the message names it and both digests.
    target.write_bytes(data[:-1])
    status = _cli_build_ifeval(tmp_path, out)
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1
    assert (f"the cached file {target} failed the SHA-256 check (expected "
            f"{hashlib.sha256(data).hexdigest()}, found {hashlib.sha256(data[:-1]).hexdigest()})"
            in err)
    assert "Replace that file with the verified one" in err and "Put the verified" not in err
    assert target.read_bytes() == data[:-1] and not out.exists()

    target.write_bytes(data)
    build_dataset("IFEval", entry, out, cache_dir=tmp_path / "cache", release=offline)
    np.testing.assert_array_equal(
        read_matrix(out).to_numpy(),
        pd.read_csv(io.BytesIO(data), index_col=0).to_numpy(dtype=float),
    )


def test_a_release_file_with_a_word_for_an_answer_names_the_cell(lfs, tmp_path, capsys):
    """A user's trial: 'yes' in a pinned release file was pandas' bare "could not convert
    string to float" (a 2 or 0.5 was named); now both name the file, row and column."""
    lines = _standin_ifeval().split(b"\n")
    assert lines[4].startswith(b"org3__model-3,")
    for answer, shown in ((b"yes", "non-numeric value 'yes'"), (b"2", "value 2.0")):
        fields = lines[4].split(b",")
        data = b"\n".join(lines[:4] + [b",".join([fields[0], answer, *fields[2:]])] + lines[5:])
        entry = {"source": "release",
                 "options": {"file": "data/IFEval.csv", "sha256": hashlib.sha256(data).hexdigest(),
                             "retries": 0, "progress": False}}
        (tmp_path / "reg.yaml").write_text(json.dumps(
            {"release": _release(lfs, {"release": {"repo": "JackQuu/cBMM", "commit": COMMIT}}),
             "datasets": {"IFEval": entry}}))
        lfs.files[f"/media/JackQuu/cBMM/{COMMIT}/data/IFEval.csv"] = data
        out = tmp_path / f"out-{answer.decode()}" / "IFEval.parquet"
        assert _cli_build_ifeval(tmp_path, out) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err, err
        assert f"IFEval.csv: {shown} at row 'org3__model-3', column 'ifeval_0'" in err, err
        assert not out.parent.exists() or list(out.parent.iterdir()) == []
