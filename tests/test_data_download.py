"""Verified, bounded, resumable downloads against real HTTP servers on 127.0.0.1.

Each failure test checks the message (one line, naming the URL and the reason),
that nothing appears at the destination, and what is left in the cache.  Small
deadlines and caps keep every test short.
"""

import fcntl
import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest
from data_fixtures import FileServer, tree_snapshot

from cbmm.data.download import ChecksumError, DownloadError, StaleCacheError, download, sha256_file
from cbmm.data.matrix import DataError

BODY = os.urandom(3 * (1 << 20) + 12345)  # spans several 1 MiB read chunks
SHA = hashlib.sha256(BODY).hexdigest()


@pytest.fixture
def server():
    with FileServer() as srv:
        srv.files["/f.bin"] = BODY
        yield srv


def _fast(**kw):
    return {"backoff": 0.01, "timeout": 10, "progress": False, **kw}


def _one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message
    return message


# ------------------------------------------------------------------ what already held


def test_happy_path_verifies_and_leaves_only_the_file(server, tmp_path):
    dest = download(
        server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, size=len(BODY), **_fast()
    )
    assert dest.read_bytes() == BODY
    assert sha256_file(dest) == SHA
    assert sorted(os.listdir(tmp_path)) == ["f.bin"]  # no .part, .lock or temporary file left


def test_existing_verified_file_is_not_downloaded_again(server, tmp_path):
    download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    n = len(server.requests)
    download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    assert len(server.requests) == n


def test_checksum_mismatch_leaves_nothing(server, tmp_path):
    server.files["/bad.bin"] = BODY[:-1] + bytes([BODY[-1] ^ 1])  # one flipped bit
    with pytest.raises(ChecksumError, match="SHA-256 mismatch") as info:
        download(server.url + "/bad.bin", tmp_path / "f.bin", sha256=SHA, **_fast())
    found = hashlib.sha256(server.files["/bad.bin"]).hexdigest()
    assert f"SHA-256 mismatch (expected {SHA}, found {found}); the downloaded data was " \
        "deleted" in _one_line(info)
    assert list(tmp_path.iterdir()) == []


def test_server_errors_are_retried(server, tmp_path):
    server.fail["/f.bin"] = [503, 500]
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=2))
    assert dest.read_bytes() == BODY
    assert len(server.requests_for("/f.bin")) == 3


def test_retries_exhausted_raises_and_leaves_no_output(server, tmp_path):
    server.fail["/f.bin"] = [503, 503, 503]
    with pytest.raises(DownloadError, match="failed after 2 attempt") as info:
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=1))
    assert "HTTP 503" in _one_line(info)
    assert list(tmp_path.iterdir()) == []


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
    with pytest.raises(
        DownloadError, match=f"transfer ended at byte {cut} of {len(BODY)}.*partial data kept"
    ):
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=0))
    assert not (tmp_path / "f.bin").exists()
    assert (tmp_path / "f.bin.part").read_bytes() == BODY[:cut]
    download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=0))
    assert (tmp_path / "f.bin").read_bytes() == BODY
    assert server.requests_for("/f.bin")[-1][2] == f"bytes={cut}-"


def test_keep_partial_false_removes_part(server, tmp_path):
    server.truncate["/f.bin"] = [1000]
    with pytest.raises(DownloadError):
        download(
            server.url + "/f.bin",
            tmp_path / "f.bin",
            sha256=SHA,
            **_fast(retries=0, keep_partial=False),
        )
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


def _run_download(url, dest, sha):
    code = (
        "import sys; from cbmm.data.download import download; "
        "download(sys.argv[1], sys.argv[2], sha256=sys.argv[3], retries=0, timeout=10, "
        "progress=False)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, url, str(dest), sha], stderr=subprocess.PIPE, text=True
    )


def test_sigterm_then_the_next_call_resumes(server, tmp_path):
    server.trickle["/f.bin"] = (1 << 18, 0.2)  # 256 KiB every 0.2 s
    dest = tmp_path / "f.bin"
    process = _run_download(server.url + "/f.bin", dest, SHA)
    part = tmp_path / "f.bin.part"
    started = time.monotonic()
    while (
        not (part.exists() and part.stat().st_size >= 1 << 19) and time.monotonic() - started < 60
    ):
        time.sleep(0.05)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == -signal.SIGTERM
    kept = part.stat().st_size
    assert 0 < kept < len(BODY) and not dest.exists()
    server.trickle.clear()
    download(server.url + "/f.bin", dest, sha256=SHA, **_fast(retries=0))
    assert dest.read_bytes() == BODY
    assert server.requests_for("/f.bin")[-1][2] == f"bytes={kept}-"


# ------------------------------------------------------------------ downloads end


def test_trickling_server_stops_at_the_deadline(server, tmp_path):
    server.trickle["/f.bin"] = (1, 0.05)  # one byte every 50 ms: every read beats the 5 s time-out
    started = time.monotonic()
    with pytest.raises(DownloadError, match="not complete at the deadline of 1 s") as info:
        download(
            server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(timeout=5, deadline=1)
        )
    assert (
        time.monotonic() - started < 15
    )  # deadline + time-out + slack on a loaded machine (the body: 44 h)
    assert "partial data kept" in _one_line(info) and server.url in str(info.value)
    assert not (tmp_path / "f.bin").exists()
    assert 0 < (tmp_path / "f.bin.part").stat().st_size < 100


def test_no_time_left_for_a_retry(server, tmp_path):
    server.fail["/f.bin"] = [503] * 5
    started = time.monotonic()
    with pytest.raises(
        DownloadError,
        match="HTTP 503 Service Unavailable; no time left for retry 2 within the deadline of 1 s",
    ):
        download(
            server.url + "/f.bin",
            tmp_path / "f.bin",
            sha256=SHA,
            **_fast(retries=4, backoff=0.6, deadline=1),
        )
    assert (
        time.monotonic() - started < 10
    )  # without the deadline: 0.6 + 1.2 + 2.4 + 4.8 s of back-off
    assert list(tmp_path.iterdir()) == []


def test_announced_oversize_is_refused_before_the_body(server, tmp_path):
    with pytest.raises(
        DownloadError, match=f"announces {len(BODY)} bytes, more than the pinned size of 1000 bytes"
    ):
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, size=1000, **_fast())
    assert len(server.requests_for("/f.bin")) == 1
    assert list(tmp_path.iterdir()) == []


def test_body_without_length_stops_at_the_cap(server, tmp_path):
    server.no_length.add("/f.bin")
    with pytest.raises(
        DownloadError,
        match=r"longer than the cap of 1048576 bytes \(max_bytes\); stopped at "
        r"byte \d+; nothing kept",
    ) as info:
        download(
            server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, max_bytes=1 << 20, **_fast()
        )
    stopped = int(str(info.value).split("stopped at byte ")[1].split(";")[0])
    assert (1 << 20) < stopped <= 2 << 20  # at most one read (1 MiB) past the cap
    assert list(tmp_path.iterdir()) == []


def test_wrong_announced_size_is_refused(server, tmp_path):
    with pytest.raises(
        DownloadError, match=f"announces {len(BODY)} bytes, not the pinned size of {len(BODY) + 1}"
    ):
        download(server.url + "/f.bin", tmp_path / "f.bin", size=len(BODY) + 1, **_fast())
    assert list(tmp_path.iterdir()) == []


def test_unverifiable_body_is_refused(server, tmp_path):
    server.no_length.add("/f.bin")
    with pytest.raises(
        DownloadError, match="neither Content-Length nor chunked encoding.*pin its sha256 or size"
    ):
        download(server.url + "/f.bin", tmp_path / "f.bin", **_fast())
    assert list(tmp_path.iterdir()) == []


def test_cut_off_body_without_length_is_resumed_to_the_pinned_size(server, tmp_path):
    server.no_length.add("/f.bin")
    server.truncate["/f.bin"] = [len(BODY) // 2]
    dest = download(server.url + "/f.bin", tmp_path / "f.bin", size=len(BODY), **_fast(retries=1))
    assert dest.read_bytes() == BODY
    assert server.requests_for("/f.bin")[-1][2] == f"bytes={len(BODY) // 2}-"


def test_cut_off_body_is_never_accepted_without_a_hash(server, tmp_path):
    server.truncate["/f.bin"] = [len(BODY) // 2]
    with pytest.raises(
        DownloadError, match=f"transfer ended at byte {len(BODY) // 2} of {len(BODY)}"
    ):
        download(server.url + "/f.bin", tmp_path / "f.bin", **_fast(retries=0))
    assert not (tmp_path / "f.bin").exists()


@pytest.mark.parametrize(
    "raw, reason",
    [
        (b"HELLO THERE\r\n\r\n", "BadStatusLine"),
        (b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", "LineTooLong"),
        (
            b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(120)) + b"\r\n",
            "more than 100 headers",
        ),
        (b"HTTP/1.1 302 Found\r\nLocation: /f.bin\r\nContent-Length: 0\r\n\r\n", "HTTP 302"),
    ],
)
def test_malformed_responses_are_one_line_errors(server, tmp_path, raw, reason):
    server.raw["/f.bin"] = [raw] * 20  # every attempt, and every redirect
    with pytest.raises(DownloadError) as info:
        download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(retries=1))
    message = _one_line(info)
    assert server.url + "/f.bin" in message and reason in message
    assert list(tmp_path.iterdir()) == []


def test_stale_cached_file_is_kept_until_its_replacement_is_verified(server, tmp_path):
    dest = tmp_path / "f.bin"
    dest.write_bytes(b"an older version")
    with pytest.raises(StaleCacheError, match="connection failed") as info:
        download("http://127.0.0.1:9/f.bin", dest, sha256=SHA, **_fast(retries=0))
    older = hashlib.sha256(b"an older version").hexdigest()
    # The file there is named with both digests: putting "the verified file" there is not
    # the remedy, replacing this one is.
    assert (f"the cached file {dest} failed the SHA-256 check (expected {SHA}, found {older})"
            in _one_line(info))
    assert dest.read_bytes() == b"an older version"
    server.files["/f.bin"] = b"corrupted"
    with pytest.raises(ChecksumError):
        download(server.url + "/f.bin", dest, sha256=SHA, **_fast(retries=0))
    assert dest.read_bytes() == b"an older version"
    server.files["/f.bin"] = BODY
    download(server.url + "/f.bin", dest, sha256=SHA, **_fast(retries=0))
    assert dest.read_bytes() == BODY


# ------------------------------------------------------------------ concurrency


def test_two_processes_fetching_one_file(server, tmp_path):
    server.trickle["/f.bin"] = (1 << 18, 0.15)  # about 2 s in all
    dest = tmp_path / "cache" / "f.bin"
    first = _run_download(server.url + "/f.bin", dest, SHA)
    started = time.monotonic()
    while not dest.with_name("f.bin.part").exists() and time.monotonic() - started < 60:
        time.sleep(0.01)
    processes = [
        first,
        _run_download(server.url + "/f.bin", dest, SHA),
    ]  # starts while the first downloads
    errors = [p.communicate(timeout=120)[1] for p in processes]
    assert [p.returncode for p in processes] == [0, 0], errors
    assert dest.read_bytes() == BODY
    assert len(server.requests_for("/f.bin")) == 1  # the second waited and found the verified file
    assert sorted(os.listdir(dest.parent)) == ["f.bin"]


def test_waiting_for_a_lock_counts_against_the_deadline(server, tmp_path):
    lock = tmp_path / "f.bin.lock"
    with open(lock, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(
            DownloadError, match="another process still held .*f.bin.lock at the deadline"
        ):
            download(server.url + "/f.bin", tmp_path / "f.bin", sha256=SHA, **_fast(deadline=0.3))
    assert server.requests == []
    assert not (tmp_path / "f.bin").exists()


# ------------------------------------------------------------------ arguments and paths


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"retries": -1}, "retries"),
        ({"timeout": 0}, "timeout"),
        ({"deadline": "soon"}, "deadline"),
        ({"sha256": "abc"}, "sha256"),
        ({"size": -5}, "size"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"progress": "no"}, "progress"),
    ],
)
def test_bad_arguments_are_named_before_any_request(server, tmp_path, kwargs, named):
    with pytest.raises(DataError, match=f"^{named}: "):
        download(server.url + "/f.bin", tmp_path / "f.bin", **{"progress": False, **kwargs})
    assert server.requests == [] and list(tmp_path.iterdir()) == []


def test_only_http_urls(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("local secret")
    with pytest.raises(DataError, match=r"^url: expected an http\(s\) URL"):
        download(f"file://{victim}", tmp_path / "cache" / "v.txt", progress=False)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("link", ["f.bin", "f.bin.part", "f.bin.lock", "sub"])
def test_links_out_of_the_cache_are_refused(server, tmp_path, link):
    cache, outside = tmp_path / "cache", tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    for name in ("f.bin", "f.bin.part", "f.bin.lock"):
        (outside / name).write_bytes(b"precious")
        (outside / "sub" / name).write_bytes(b"precious")
    before = tree_snapshot(outside)
    cache.mkdir()
    os.symlink(outside / link, cache / link)
    dest = cache / "sub" / "f.bin" if link == "sub" else cache / "f.bin"
    with pytest.raises(DataError, match="outside .*cache.*refusing to read, write or delete it"):
        download(server.url + "/f.bin", dest, root=cache, sha256=SHA, **_fast())
    assert tree_snapshot(outside) == before
    assert server.requests == []


def test_destination_outside_its_root_is_refused(server, tmp_path):
    with pytest.raises(DataError, match="is not inside"):
        download(
            server.url + "/f.bin",
            tmp_path / "elsewhere" / "f.bin",
            root=tmp_path / "cache",
            **_fast(),
        )
    with pytest.raises(
        DataError, match="download destination: 'x/../../f.bin' is not a relative path"
    ):
        download(
            server.url + "/f.bin",
            tmp_path / "cache" / "x" / ".." / ".." / "f.bin",
            root=tmp_path / "cache",
            **_fast(),
        )
    assert server.requests == [] and list(tmp_path.iterdir()) == []


def test_a_verified_file_is_used_where_no_lock_can_be_made(server, tmp_path):
    """A pre-filled cache copied read-only: the verified file serves without the lock file
    (it failed with a raw 'Read-only file system' on '<file>.lock'); a file missing there
    is a one-line DownloadError naming the folder.  A folder in the lock's place stands in
    for the read-only file system, for root as for any user."""
    dest = tmp_path / "f.bin"
    dest.write_bytes(BODY)
    (tmp_path / "f.bin.lock").mkdir()
    assert download(server.url + "/f.bin", dest, sha256=SHA, **_fast()) == dest
    assert server.requests == [] and dest.read_bytes() == BODY
    (tmp_path / "g.bin.lock").mkdir()
    with pytest.raises(DownloadError) as info:
        download(server.url + "/f.bin", tmp_path / "g.bin", sha256=SHA, **_fast())
    assert f"cannot write into the cache folder {tmp_path}" in _one_line(info)
    assert not (tmp_path / "g.bin").exists()


def test_a_folder_at_the_destination_is_refused(server, tmp_path):
    """Without a sha256 a folder there was returned as the downloaded file."""
    (tmp_path / "sub").mkdir()
    for pin in ({}, {"sha256": SHA}):
        with pytest.raises(DataError, match=r"sub: is a folder; expected a file name"):
            download(server.url + "/f.bin", tmp_path / "sub", **_fast(**pin))
    assert server.requests == [] and list((tmp_path / "sub").iterdir()) == []
