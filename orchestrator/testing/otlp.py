"""An OTLP/HTTP receiver on loopback: what a collector would get from ``baton`` processes.

:class:`OtlpReceiver` accepts ``POST /v1/traces`` and ``POST /v1/metrics`` (protobuf, plain or
gzip), answers 200 and keeps what came, decoded with ``opentelemetry-proto`` (installed with the
OTLP exporter, the ``otel`` extra). Point a process at it with
``OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url``. Waiting is on a condition the handler signals,
never a sleep: :meth:`OtlpReceiver.wait_for` returns as soon as what was received satisfies it.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

AttributeValue = str | bool | int | float


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as it arrived: ids in hex (as in a ``traceparent``), kind as OTLP names it."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: str
    attributes: dict[str, AttributeValue]
    service: str
    status_code: int = 0


@dataclass
class _Received:
    spans: list[ReceivedSpan] = field(default_factory=list)
    metrics: dict[str, set[str]] = field(default_factory=dict)
    """Metric name -> the services that sent it."""
    requests: int = 0
    body_bytes: int = 0


def _value(value: AnyValue) -> AttributeValue:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    return str(value)


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, AttributeValue]:
    return {pair.key: _value(pair.value) for pair in pairs}


class OtlpReceiver:
    """A loopback OTLP/HTTP endpoint in a thread; use as ``with OtlpReceiver() as receiver``.

    ``decode=False`` only counts requests and bytes (a benchmark's collector, which must not
    spend the measured process's CPU on parsing).
    """

    def __init__(self, *, decode: bool = True) -> None:
        self.decode = decode
        self._received = _Received()
        self._changed = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.headers.get("Content-Encoding", "").lower() == "gzip":
                    body = gzip.decompress(body)
                known = self.path in ("/v1/traces", "/v1/metrics")
                if known:
                    receiver._take(self.path, body)
                self.send_response(200 if known else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                return None  # quiet: a test's output is its own

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The base URL, for ``OTEL_EXPORTER_OTLP_ENDPOINT`` (the exporters add ``/v1/...``)."""
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> OtlpReceiver:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def _take(self, path: str, body: bytes) -> None:
        spans: list[ReceivedSpan] = []
        metrics: list[tuple[str, str]] = []
        if self.decode and path == "/v1/traces":
            spans = _spans(body)
        elif self.decode:
            metrics = _metrics(body)
        with self._changed:
            self._received.requests += 1
            self._received.body_bytes += len(body)
            self._received.spans.extend(spans)
            for name, service in metrics:
                self._received.metrics.setdefault(name, set()).add(service)
            self._changed.notify_all()

    @property
    def requests(self) -> int:
        with self._changed:
            return self._received.requests

    @property
    def body_bytes(self) -> int:
        with self._changed:
            return self._received.body_bytes

    def spans(self) -> list[ReceivedSpan]:
        with self._changed:
            return list(self._received.spans)

    def metrics(self) -> dict[str, set[str]]:
        """Metric name -> the services that sent it, so far."""
        with self._changed:
            return {name: set(services) for name, services in self._received.metrics.items()}

    def wait_for(self, ready: Callable[[list[ReceivedSpan]], bool], timeout: float) -> bool:
        """Whether the spans received satisfy ``ready`` within ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: ready(self._received.spans), timeout)


def _service(attributes: dict[str, AttributeValue]) -> str:
    return str(attributes.get("service.name", ""))


def _spans(body: bytes) -> list[ReceivedSpan]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found: list[ReceivedSpan] = []
    for resource_spans in request.resource_spans:
        service = _service(_attributes(resource_spans.resource.attributes))
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                found.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        kind=Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                        attributes=_attributes(span.attributes),
                        service=service,
                        status_code=span.status.code,
                    )
                )
    return found


def _metrics(body: bytes) -> list[tuple[str, str]]:
    from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
        ExportMetricsServiceRequest,
    )

    request = ExportMetricsServiceRequest()
    request.ParseFromString(body)
    found: list[tuple[str, str]] = []
    for resource_metrics in request.resource_metrics:
        service = _service(_attributes(resource_metrics.resource.attributes))
        for scope in resource_metrics.scope_metrics:
            found.extend((metric.name, service) for metric in scope.metrics)
    return found
