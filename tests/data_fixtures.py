"""Local stand-ins for GitHub's LFS endpoint and the Hugging Face Hub (tests only).

:class:`FileServer` is a real HTTP(S) server on 127.0.0.1 that serves byte
strings, honours ``Range`` requests and can be told to misbehave the way real
servers and proxies do: answer a status code for the first ``n`` requests to a
path, cut a body off after ``k`` bytes, trickle a body byte by byte, send a
body without ``Content-Length`` (ended by closing the connection), or send raw
bytes instead of a well-formed response.  It records every request with its
headers.  :class:`FakeHub` adds the few Hub endpoints that the real
``huggingface_hub`` client uses for ``hf_hub_download``, ``list_repo_files``,
``list_datasets`` and ``model_info``.

``SHARED_DATA`` is the optional shared data folder beside the repository (or
``$CBMM_SHARED_DATA``); tests that read it are marked ``needs_shared`` and
skip on a clone without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import ssl
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("CBMM_SHARED_DATA", ROOT.parent / "shared" / "data"))
needs_shared = pytest.mark.skipif(
    not (SHARED_DATA / "math500" / "MATH_500.csv").is_file(),
    reason=f"shared data not present at {SHARED_DATA} (set CBMM_SHARED_DATA)",
)


def tree_snapshot(folder) -> dict:
    """``{relative path: (size, mtime_ns)}`` of every file under ``folder`` (links not followed)."""
    folder = Path(folder)
    return {
        str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file() or p.is_symlink()
    }


def self_signed_certificate(folder) -> Path | None:
    """A PEM file holding a key and a certificate for 127.0.0.1 (``None`` without ``openssl``)."""
    pem = Path(folder) / "127.0.0.1.pem"
    try:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(pem.with_suffix(".key")),
                "-out",
                str(pem.with_suffix(".crt")),
            ],
            check=True,
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    pem.write_bytes(pem.with_suffix(".key").read_bytes() + pem.with_suffix(".crt").read_bytes())
    return pem


class FileServer:
    """HTTP server for ``{path: bytes}`` with fault injection; use as a context manager.

    Faults, each keyed by URL path:

    * ``fail[path]``: statuses to answer first, in order (one per request); an entry may be
  ``(status, headers)`` to send headers with it (e.g. ``Retry-After``);
    * ``truncate[path]``: byte counts after which to cut the body, one per request;
    * ``trickle[path] = (n, seconds)``: send the body ``n`` bytes at a time, waiting
      ``seconds`` before each piece;
    * ``no_length``: paths whose body is sent without ``Content-Length`` (the
      end of the body is the end of the connection);
    * ``raw[path]``: byte strings, one per request, written instead of a response
      (then the connection closes);
    * ``ignore_range``: answer 200 with the whole body to every ``Range`` request.

    ``certificate`` (a PEM file with key and certificate) serves HTTPS.
    """

    def __init__(self, certificate=None):
        self.files: dict[str, bytes] = {}
        self.fail: dict[str, list[int | tuple[int, dict]]] = {}
        self.truncate: dict[str, list[int]] = {}
        self.trickle: dict[str, tuple[int, float]] = {}
        self.no_length: set[str] = set()
        self.raw: dict[str, list[bytes]] = {}
        self.ignore_range = False
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self.headers: list[tuple[str, dict]] = []  # (path, request headers)
        self.bytes_served = 0  # body bytes of files sent (GET), for the cache-size checks
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self.scheme = "http"
        if certificate is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certificate)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), daemon=True
        )

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._server.shutdown()
        self._server.server_close()

    def requests_for(self, path):
        return [r for r in self.requests if r[1] == path]

    # -- overridable by FakeHub
    def route(self, handler, method: str, path: str, query: str) -> bool:
        """Answer a request that is not a plain file; return True if handled."""
        return False

    def extra_headers(self, path: str) -> dict:
        return {}

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self, method):
                parts = urlsplit(self.path)
                path = unquote(parts.path)
                server.requests.append((method, path, self.headers.get("Range")))
                server.headers.append((path, dict(self.headers.items())))
                if server.raw.get(path):
                    self.wfile.write(server.raw[path].pop(0))
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if server.fail.get(path):
                    status = server.fail[path].pop(0)
                    status, headers = status if isinstance(status, tuple) else (status, {})
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if server.route(self, method, path, parts.query):
                    return
                if path not in server.files:
                    self.send_response(404)
                    self.send_header("X-Error-Code", "EntryNotFound")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = server.files[path]
                start, status = 0, 200
                match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if match and not server.ignore_range:
                    start, status = int(match.group(1)), 206
                    if start >= len(body):
                        self.send_response(416)
                        self.send_header("Content-Range", f"bytes */{len(body)}")
                        self.send_header("Content-Length", "0")
                        self.end_headers()
                        return
                self.send_response(status)
                for key, value in server.extra_headers(path).items():
                    self.send_header(key, value)
                if path in server.no_length:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                else:
                    self.send_header("Content-Length", str(len(body) - start))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.end_headers()
                if method == "HEAD":
                    return
                payload = body[start:]
                if server.truncate.get(path):
                    payload = payload[: server.truncate[path].pop(0)]
                    self.close_connection = True
                server.bytes_served += len(payload)
                try:
                    if path in server.trickle:
                        piece, pause = server.trickle[path]
                        for k in range(0, len(payload), piece):
                            time.sleep(pause)
                            self.wfile.write(payload[k : k + piece])
                            self.wfile.flush()
                    else:
                        self.wfile.write(payload)
                        self.wfile.flush()
                except OSError:  # the client gave up: that is what the tests want
                    self.close_connection = True

            def do_GET(self):
                self._serve("GET")

            def do_HEAD(self):
                self._serve("HEAD")

            def send_json(self, obj, status=200, headers=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class FakeHub(FileServer):
    """Minimal Hugging Face Hub: dataset repos of files, a dataset listing, model infos.

    ``add_file(repo_id, path, data)`` creates the dataset repo as needed;
    ``datasets_created`` maps repo ids to ``createdAt`` strings for
    ``/api/datasets`` (which also gives each repo's ``sha``, a digest of its
    files); ``models`` maps model repo ids to ``/api/models`` JSON.
    ``authorizations()`` lists the ``Authorization`` headers received.

    ``gated[repo_id]`` is the set of tokens granted access to a gated repo.  As
    on the Hub, its file listing stays public while its files (``resolve``)
    answer 401 without a token and 403 to a token not granted access, both
    with ``X-Error-Code: GatedRepo``.
    """

    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def __init__(self, certificate=None):
        super().__init__(certificate)
        self.repos: dict[str, dict[str, bytes]] = {}
        self.datasets_created: dict[str, str] = {}
        self.models: dict[str, dict] = {}
        self.gated: dict[str, set[str]] = {}

    def add_file(self, repo_id: str, path: str, data: bytes) -> None:
        self.repos.setdefault(repo_id, {})[path] = data
        self.files[f"/datasets/{repo_id}/resolve/main/{path}"] = data

    def repo_sha(self, repo_id: str) -> str:
        """The repo's commit id as the listing gives it: it changes whenever a file does."""
        digest = hashlib.sha1()
        for path, data in sorted(self.repos.get(repo_id, {}).items()):
            digest.update(path.encode() + b"\0" + hashlib.sha1(data).digest())
        return digest.hexdigest()

    def authorizations(self) -> list[str]:
        return [
            value
            for _, headers in self.headers
            for key, value in headers.items()
            if key.lower() == "authorization"
        ]

    def extra_headers(self, path):
        body = self.files[path]
        return {"X-Repo-Commit": self.COMMIT, "ETag": f'"{hashlib.sha256(body).hexdigest()}"'}

    def route(self, handler, method, path, query):
        not_found = {"X-Error-Code": "RepoNotFound"}
        if path == "/api/datasets":
            handler.send_json(
                [
                    {"id": repo, "createdAt": created, "sha": self.repo_sha(repo)}
                    for repo, created in self.datasets_created.items()
                ]
            )
            return True
        match = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/tree/main(/.*)?", path)
        if match:
            repo = match.group(1)
            if repo not in self.repos:
                handler.send_json({"error": "Repository not found"}, 404, not_found)
                return True
            handler.send_json(
                [
                    {"type": "file", "path": p, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                    for p, d in sorted(self.repos[repo].items())
                ]
            )
            return True
        match = re.fullmatch(r"/api/models/([^/]+/[^/]+)", path)
        if match:
            if match.group(1) not in self.models:
                handler.send_json({"error": "Repository not found"}, 404, not_found)
            else:
                handler.send_json({"id": match.group(1), **self.models[match.group(1)]})
            return True
        match = re.fullmatch(r"/datasets/([^/]+/[^/]+)/resolve/main/.*", path)
        if match and match.group(1) not in self.repos:
            handler.send_response(404)
            handler.send_header("X-Error-Code", "RepoNotFound")
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return True
        if match and match.group(1) in self.gated:
            sent = handler.headers.get("Authorization", "")
            token = sent[len("Bearer ") :] if sent.startswith("Bearer ") else None
            if token not in self.gated[match.group(1)]:
                status, message = (
                    (401, "You must have access to it and be authenticated to access it.")
                    if token is None
                    else (403, "You are not in the authorized list.")
                )
                handler.send_response(status)
                handler.send_header("X-Error-Code", "GatedRepo")
                handler.send_header(
                    "X-Error-Message", f"Access to dataset {match.group(1)} is restricted. {message}"
                )
                handler.send_header("Content-Length", "0")
                handler.end_headers()
                return True
        return False
