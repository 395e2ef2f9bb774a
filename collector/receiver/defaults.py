"""Where the collector listens by default (light: the CLI reads these to build its help)."""

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "MiB"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318  # the OTLP/HTTP port: exporters' default endpoint works unchanged
MiB = 1024 * 1024
