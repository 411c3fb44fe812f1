"""A stand-in OpenTelemetry collector: an OTLP/HTTP receiver on loopback that keeps the spans it
is sent, decoded with opentelemetry-proto, for tests to wait on.

It answers ``POST /v1/traces`` (protobuf ``ExportTraceServiceRequest``) with an empty success,
and any other path with 200 too (metrics and logs are received and ignored).
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

KINDS = {1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: tuple[tuple[str, str], ...] = ()  # (trace id, span id)
    error: bool = False


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    return None if which is None else getattr(value, which)


@dataclass
class OtlpStub:
    url: str = ""
    decode: bool = True  # False: count requests and bytes only (benchmarks: cheap to receive)
    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0
    received_bytes: int = 0
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def receive(self, body: bytes) -> None:
        if not self.decode:
            with self._changed:
                self.requests += 1
                self.received_bytes += len(body)
            return
        request = ExportTraceServiceRequest.FromString(body)
        found = []
        for resource_spans in request.resource_spans:
            attributes = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
            service = str(attributes.get("service.name", ""))
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append(
                        ReceivedSpan(
                            service=service,
                            name=span.name,
                            kind=KINDS.get(span.kind, str(span.kind)),
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            links=tuple((ln.trace_id.hex(), ln.span_id.hex()) for ln in span.links),
                            error=span.status.code == 2,
                        )
                    )
        with self._changed:
            self.requests += 1
            self.spans.extend(found)
            self._changed.notify_all()

    def wait_for(
        self, found: Callable[[list[ReceivedSpan]], Any], timeout: float = 20, what: str = ""
    ) -> Any:
        """Wait until ``found(spans)`` is truthy (checked on each export); returns it."""
        with self._changed:
            result = self._changed.wait_for(lambda: found(list(self.spans)), timeout)
        if not result:
            names = sorted({(s.service, s.name) for s in self.spans})
            raise AssertionError(f"timed out waiting for {what or 'spans'}; received: {names}")
        return result


@contextmanager
def otlp_stub(*, decode: bool = True) -> Iterator[OtlpStub]:
    """A receiver on a free loopback port, stopped at the end."""
    stub = OtlpStub(decode=decode)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path == "/v1/traces":
                stub.receive(body)
                answer = ExportTraceServiceResponse().SerializeToString()
            else:
                answer = b""
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, name="otlp-stub", daemon=True)
    thread.start()
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def by_id(spans: list[ReceivedSpan]) -> dict[str, ReceivedSpan]:
    return {s.span_id: s for s in spans}


def ancestors(span: ReceivedSpan, spans: list[ReceivedSpan]) -> list[ReceivedSpan]:
    """The span's parent, its parent's parent, ... as far as the received spans go."""
    index = by_id(spans)
    chain = []
    current = index.get(span.parent_id)
    while current is not None and len(chain) < 100:
        chain.append(current)
        current = index.get(current.parent_id)
    return chain
