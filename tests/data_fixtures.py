"""Local stand-ins for GitHub's LFS endpoint and the Hugging Face Hub (tests only).

:class:`FileServer` is a real HTTP server on 127.0.0.1 that serves byte
strings, honours ``Range`` requests and can be told to fail: answer a status
code for the first ``n`` requests to a path, or cut a body off after ``k``
bytes.  :class:`FakeHub` adds the few Hub endpoints that the real
``huggingface_hub`` client uses for ``hf_hub_download``, ``list_repo_files``,
``list_datasets`` and ``model_info``.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


class FileServer:
    """HTTP server for ``{path: bytes}`` with fault injection; use as a context manager."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.fail: dict[str, list[int]] = {}      # path -> statuses to answer first, in order
        self.truncate: dict[str, list[int]] = {}  # path -> byte counts after which to cut the body
        self.ignore_range = False
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Range header)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

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
                if server.fail.get(path):
                    status = server.fail[path].pop(0)
                    self.send_response(status)
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
                self.send_header("Content-Length", str(len(body) - start))
                if status == 206:
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                self.end_headers()
                if method == "HEAD":
                    return
                payload = body[start:]
                if server.truncate.get(path):
                    payload = payload[: server.truncate[path].pop(0)]
                    self.wfile.write(payload)
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(payload)

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
    ``/api/datasets``; ``models`` maps model repo ids to ``/api/models`` JSON.
    """

    COMMIT = "0123456789abcdef0123456789abcdef01234567"

    def __init__(self):
        super().__init__()
        self.repos: dict[str, dict[str, bytes]] = {}
        self.datasets_created: dict[str, str] = {}
        self.models: dict[str, dict] = {}

    def add_file(self, repo_id: str, path: str, data: bytes) -> None:
        self.repos.setdefault(repo_id, {})[path] = data
        self.files[f"/datasets/{repo_id}/resolve/main/{path}"] = data

    def extra_headers(self, path):
        body = self.files[path]
        return {"X-Repo-Commit": self.COMMIT, "ETag": f'"{hashlib.sha256(body).hexdigest()}"'}

    def route(self, handler, method, path, query):
        not_found = {"X-Error-Code": "RepoNotFound"}
        if path == "/api/datasets":
            handler.send_json([{"id": repo, "createdAt": created} for repo, created in self.datasets_created.items()])
            return True
        match = re.fullmatch(r"/api/datasets/([^/]+/[^/]+)/tree/main(/.*)?", path)
        if match:
            repo = match.group(1)
            if repo not in self.repos:
                handler.send_json({"error": "Repository not found"}, 404, not_found)
                return True
            handler.send_json([{"type": "file", "path": p, "size": len(d), "oid": hashlib.sha1(d).hexdigest()}
                               for p, d in sorted(self.repos[repo].items())])
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
        return False
