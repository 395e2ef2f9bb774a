"""Where the collector listens by default (light: the CLI reads these to build its help)."""

__all__ = ["DEFAULT_GRPC_PORT", "DEFAULT_HOST", "DEFAULT_MAX_DECODED_BYTES", "DEFAULT_PORT", "MiB"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4318  # the OTLP/HTTP port: exporters' default endpoint works unchanged
DEFAULT_GRPC_PORT = 4317  # the OTLP/gRPC port, likewise (`turnledger serve`; ServerConfig leaves gRPC off)
MiB = 1024 * 1024
DEFAULT_MAX_DECODED_BYTES = 64 * MiB  # a body after gzip/deflate; larger → 413
