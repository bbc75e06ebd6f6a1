"""What an operator watches: Prometheus metrics (kg_mcp.observability.metrics) and OpenTelemetry
traces (kg_mcp.observability.tracing).

Both sit below the tools and the backends, which record into them; the serving side exposes the
metrics at /metrics and sends traces where an OTLP endpoint is configured.
"""
