"""OpenTelemetry traces: the SDK's middleware opens a span for every MCP request (tools/call search,
...); the backends add one per query under it. Nothing is recorded until `configure` names an OTLP
endpoint (`serve --otlp-endpoint URL`, or the standard OTEL_EXPORTER_OTLP_ENDPOINT variable); the
exporter comes with the optional extra: pip install 'kg-mcp[otel]'.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from opentelemetry import trace
from opentelemetry.propagate import extract, inject

from kg_mcp.errors import ConfigError

log = logging.getLogger(__name__)

_tracer = trace.get_tracer("kg-mcp")
_endpoint: str | None = None  # spans cost a few microseconds each: none at all unless traces are sent somewhere


def configure(endpoint: str, service_name: str = "kg-mcp") -> None:
    """Send spans to the OTLP/HTTP collector at `endpoint` (e.g. http://127.0.0.1:4318), in batches."""
    global _endpoint
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        raise ConfigError("Traces need the OpenTelemetry SDK and exporter: pip install 'kg-mcp[otel]'") from None
    resource = Resource.create({"service.name": service_name, "service.instance.id": f"{os.uname().nodename}:{os.getpid()}"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    trace.set_tracer_provider(provider)
    _endpoint = endpoint
    log.info("sending traces to %s", endpoint)


def endpoint() -> str | None:
    """Where spans go (None: traces are off); a worker process sends its own there too."""
    return _endpoint


def span(name: str, **attributes) -> AbstractContextManager:
    """A span under the current one (a tool call's), or nothing when traces are off."""
    if _endpoint is None:
        return nullcontext()
    return _span(name, attributes, None)


def carrier() -> dict[str, str]:
    """The current span's context as W3C headers, to continue the trace in another process."""
    headers: dict[str, str] = {}
    if _endpoint is not None:
        inject(headers)
    return headers


def continued(headers: dict[str, str], name: str, **attributes) -> AbstractContextManager:
    """A span under the one `carrier` described in another process (nothing when traces are off)."""
    if _endpoint is None or not headers:
        return nullcontext()
    return _span(name, attributes, extract(headers))


@contextmanager
def _span(name: str, attributes: dict, context) -> Iterator[None]:
    kept = {k: v for k, v in attributes.items() if v is not None}
    with _tracer.start_as_current_span(name, context=context, attributes=kept):
        yield


def shutdown() -> None:
    """Send what is still batched (at exit)."""
    provider = trace.get_tracer_provider()
    if _endpoint is not None and hasattr(provider, "shutdown"):
        provider.shutdown()
