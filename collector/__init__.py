"""turnledger's collector: producing and receiving telemetry (OTLP codec, CLI, harness, server)."""

from .otlp import decode_json, decode_protobuf, encode_json, read_file

__all__ = ["decode_json", "decode_protobuf", "encode_json", "read_file"]
