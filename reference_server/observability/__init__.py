"""Running the server as a service: Prometheus metrics (`GET /metrics`), the health check
(`GET /health`), and one structured log line per request (`--log-format json`)."""

from reference_server.observability.logs import configure_logging
from reference_server.observability.metrics import ServingMetrics

__all__ = ["ServingMetrics", "configure_logging"]
