"""Resumable verified downloads against a real HTTP server on 127.0.0.1."""

import hashlib
import os

import pytest

from cbmm.data.download import ChecksumError, DownloadError, download, sha256_file
from data_fixtures import FileServer

BODY = os.urandom(3 * (1 << 20) + 12345)  # spans several 1 MiB read chunks
SHA = hashlib.sha256(BODY).hexdigest()


@pytest.fixture
def server():
    with FileServer() as srv:
        srv.files["/f.bin"] = BODY
        yield srv


def _fast(**kw):
    return dict(backoff=0.01, timeout=10, progress=False, **kw)


def test_happy_path_verifies_and_leaves_no_part(server, tmp_path):
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    assert dest.read_bytes() == BODY
    assert sha256_file(dest) == SHA
    assert not (tmp_path / "f.bin.part").exists()


def test_existing_verified_file_is_not_downloaded_again(server, tmp_path):
    download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    n = len(server.requests)
    download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    assert len(server.requests) == n


def test_checksum_mismatch_leaves_nothing(server, tmp_path):
    server.files["/bad.bin"] = BODY[:-1] + bytes([BODY[-1] ^ 1])  # one flipped bit
    with pytest.raises(ChecksumError, match="SHA-256 mismatch") as info:
        download(server.url + "/bad.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    assert SHA in str(info.value)
    assert list(tmp_path.iterdir()) == []


def test_server_errors_are_retried(server, tmp_path):
    server.fail["/f.bin"] = [503, 500]
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=2))
    assert dest.read_bytes() == BODY
    assert len(server.requests_for("/f.bin")) == 3


def test_retries_exhausted_raises_and_leaves_no_output(server, tmp_path):
    server.fail["/f.bin"] = [503, 503, 503]
    with pytest.raises(DownloadError, match="failed after 2 attempt"):
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=1))
    assert not (tmp_path / "f.bin").exists()


def test_not_found_is_not_retried(server, tmp_path):
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(server.url + "/missing.bin", tmp_path / "m.bin", sha256=SHA, **_fast(retries=3))
    assert len(server.requests_for("/missing.bin")) == 1
    assert list(tmp_path.iterdir()) == []


def test_interrupted_transfer_resumes_with_range(server, tmp_path):
    cut = 1_500_000
    server.truncate["/f.bin"] = [cut]
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=2))
    assert dest.read_bytes() == BODY
    ranges = [r for _, _, r in server.requests_for("/f.bin")]
    assert ranges == [None, f"bytes={cut}-"]


def test_partial_file_survives_a_failed_call_and_is_resumed(server, tmp_path):
    cut = 1_000_000
    server.truncate["/f.bin"] = [cut]
    with pytest.raises(DownloadError, match="partial data kept"):
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=0))
    assert not (tmp_path / "f.bin").exists()
    assert (tmp_path / "f.bin.part").read_bytes() == BODY[:cut]
    download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=0))
    assert (tmp_path / "f.bin").read_bytes() == BODY
    assert server.requests_for("/f.bin")[-1][2] == f"bytes={cut}-"


def test_keep_partial_false_removes_part(server, tmp_path):
    server.truncate["/f.bin"] = [1000]
    with pytest.raises(DownloadError):
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=0, keep_partial=False))
    assert list(tmp_path.iterdir()) == []


def test_server_ignoring_range_restarts_from_zero(server, tmp_path):
    (tmp_path / "f.bin.part").write_bytes(b"stale bytes from another attempt")
    server.ignore_range = True
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    assert dest.read_bytes() == BODY


def test_stale_part_longer_than_file_restarts(server, tmp_path):
    (tmp_path / "f.bin.part").write_bytes(BODY + b"extra")
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=1))
    assert dest.read_bytes() == BODY
