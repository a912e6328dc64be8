"""OpenTelemetry export for every ``baton`` command, set up from the standard ``OTEL_*`` variables.

The engine reports spans and metrics through the OpenTelemetry API (:mod:`baton.engine.telemetry`);
this sets up the SDK behind it, so a user exports with no code of their own. Nothing happens (and
nothing of OpenTelemetry is imported) unless a variable asks for export:

- traces: ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``; comma-separated), or, when
  it is unset, ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``;
- metrics: ``OTEL_METRICS_EXPORTER`` likewise, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
  ``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``;
- ``OTEL_SDK_DISABLED=true`` turns all of it off.

``otlp`` is OTLP over HTTP (protobuf), the exporters reading their own variables (endpoint,
headers, timeout, compression); ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` uses the gRPC exporter when
it is installed. The resource comes from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``
(service name ``baton`` when neither names one), plus ``baton.command``. Spans go out in batches
(``OTEL_BSP_*``) and metrics every ``OTEL_METRIC_EXPORT_INTERVAL``; both are flushed when the
command ends. A provider someone else installed (``opentelemetry-instrument baton ...``) is left
as it is. These are OpenTelemetry's own variables, which its exporters read themselves, so they are
read here rather than in :mod:`baton.settings`.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Literal, cast

from baton.errors import install_hint

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import MetricExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import SpanExporter

log = logging.getLogger(__name__)

Signal = Literal["traces", "metrics"]
DEFAULT_SERVICE = "baton"
INSTALL_HINT = install_hint("otel")


def exporters_wanted(signal: Signal, environ: Mapping[str, str]) -> list[str]:
    """The exporter names asked for ``signal`` (lower case, ``none`` dropped); [] for none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = environ.get(f"OTEL_{signal.upper()}_EXPORTER")
    if not named:  # unset, or set empty (which counts as unset, as for baton's own settings)
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT")
        return ["otlp"] if any(environ.get(name) for name in endpoints) else []
    names = (name.strip().lower() for name in named.split(","))
    return [name for name in dict.fromkeys(names) if name and name != "none"]


@contextmanager
def exporting(command: str, environ: Mapping[str, str] | None = None) -> Iterator[None]:
    """Export spans and metrics for the length of ``command`` when the variables ask for it,
    flushing and shutting the providers down at the end, however the command ends."""
    closers = start_export(command, os.environ if environ is None else environ)
    try:
        yield
    finally:
        for close in closers:
            try:
                close()
            except Exception:  # an exporter's fault must not turn the command's exit into one
                log.warning("OpenTelemetry did not shut down cleanly", exc_info=True)


def start_export(command: str, environ: Mapping[str, str]) -> list[Callable[[], None]]:
    """Install the global providers the variables ask for; their shutdowns, in order."""
    traces, metrics = exporters_wanted("traces", environ), exporters_wanted("metrics", environ)
    if not traces and not metrics:
        return []
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        log.warning(
            "OTEL_* variables ask for export, but the OpenTelemetry SDK is not installed: %s",
            INSTALL_HINT,
        )
        return []
    resource = Resource.create({"baton.command": command.removeprefix("baton ")})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": DEFAULT_SERVICE}))
    closers: list[Callable[[], None]] = []
    if traces:
        closers.extend(_tracing(traces, resource, environ))
    if metrics:
        closers.extend(_metering(metrics, resource, environ))
    return closers


def _protocol(signal: Signal, environ: Mapping[str, str]) -> str:
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
    return (specific or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").lower()


def _grpc(module: str, exporter: str) -> object | None:
    """The gRPC exporter when ``OTEL_EXPORTER_OTLP_PROTOCOL=grpc`` and it is installed (it is
    not part of the ``otel`` extra: grpcio is large); None, with a warning, to fall back on HTTP."""
    try:
        found = importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{module}")
    except ImportError:
        log.warning(
            "OTLP over gRPC needs opentelemetry-exporter-otlp-proto-grpc; exporting over HTTP "
            "instead (usually port 4318)"
        )
        return None
    made: object = getattr(found, exporter)()
    return made


def _tracing(
    names: list[str], resource: Resource, environ: Mapping[str, str]
) -> list[Callable[[], None]]:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return []  # someone set one up already (auto-instrumentation): theirs rules
    exporters = [e for e in (_span_exporter(n, environ) for n in names) if e is not None]
    if not exporters:
        return []
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return [provider.shutdown]


def _span_exporter(name: str, environ: Mapping[str, str]) -> SpanExporter | None:
    if name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout is the command's (--json)
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER: unknown exporter %r (known: otlp, console, none)", name)
        return None
    if _protocol("traces", environ) == "grpc":
        grpc = _grpc("trace_exporter", "OTLPSpanExporter")
        if grpc is not None:
            return cast("SpanExporter", grpc)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("the OTLP/HTTP exporter is not installed (%s); no traces", INSTALL_HINT)
        return None
    return OTLPSpanExporter()


def _metering(
    names: list[str], resource: Resource, environ: Mapping[str, str]
) -> list[Callable[[], None]]:
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    if isinstance(metrics.get_meter_provider(), MeterProvider):
        return []  # someone set one up already: theirs rules
    exporters = [e for e in (_metric_exporter(n, environ) for n in names) if e is not None]
    if not exporters:
        return []
    readers = [PeriodicExportingMetricReader(exporter) for exporter in exporters]
    provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
    metrics.set_meter_provider(provider)
    return [provider.shutdown]


def _metric_exporter(name: str, environ: Mapping[str, str]) -> MetricExporter | None:
    if name == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stderr)
    if name != "otlp":
        log.warning("OTEL_METRICS_EXPORTER: unknown exporter %r (known: otlp, console, none)", name)
        return None
    if _protocol("metrics", environ) == "grpc":
        grpc = _grpc("metric_exporter", "OTLPMetricExporter")
        if grpc is not None:
            return cast("MetricExporter", grpc)
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    except ImportError:
        log.warning("the OTLP/HTTP exporter is not installed (%s); no metrics", INSTALL_HINT)
        return None
    return OTLPMetricExporter()
