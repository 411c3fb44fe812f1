"""A loopback HTTP service for the durable HTTP call tests (docs/durable.md, "A durable HTTP
call"): it counts the requests it gets and keeps each one's method, path, Idempotency-Key and
body, in a thread of the test's process (``with CallService() as service``).

Paths: ``/echo`` answers at once with JSON ``{"n": requests so far, "method", "key", "body"}``;
``/slow?s=N`` the same after N seconds; ``/status/N`` answers status N with a text body;
``/big?n=N`` N bytes of text; ``/redirect?to=URL&status=N`` a redirect (302 unless N).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    key: str | None
    body: bytes
    headers: dict[str, str]


class CallService:
    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                key = self.headers.get("Idempotency-Key")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with service._lock:
                    service.seen.append(Seen(self.command, parts.path, key, body, headers))
                    n = len(service.seen)
                if parts.path == "/slow":
                    time.sleep(float(query.get("s", "1")))
                if parts.path.startswith("/status/"):
                    self._send(int(parts.path.rsplit("/", 1)[1]), b"status", "text/plain")
                elif parts.path == "/nan":  # JSON's type, Python's json.dumps(nan)
                    self._send(200, b'{"x": NaN}', "application/json")
                elif parts.path == "/big":
                    self._send(200, b"x" * int(query["n"]), "text/plain")
                elif parts.path == "/redirect":
                    self.send_response(int(query.get("status", "302")))
                    self.send_header("Location", query["to"])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                else:
                    text = body.decode()
                    answer = {"n": n, "method": self.command, "key": key, "body": text}
                    self._send(200, json.dumps(answer).encode(), "application/json")

            def _send(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("X-Seen", "1")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def count(self, path: str | None = None) -> int:
        with self._lock:
            return sum(1 for s in self.seen if path is None or s.path == path)

    def __enter__(self) -> CallService:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
