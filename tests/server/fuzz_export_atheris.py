"""Coverage-guided fuzzing (atheris / libFuzzer) of the export path both transports share.

    python -m tests.server.fuzz_export_atheris [CORPUS_DIR] -runs=N [libFuzzer flags]   (from the repository root)

Each input is one export as ``routes.export`` receives it from either transport (after the
token check): a first byte choosing protobuf or OTLP/JSON and the Content-Encoding, then the
body. It runs against a real ``CollectorServer`` (real DuckDB file, real writer; no sockets,
so libFuzzer's coverage sees our decoders, ``prepare`` and the writer, not the HTTP server).
A crash is any of: a reply outside what OTLP allows (a 500, a 200 whose body is no
``ExportTraceServiceResponse``), an exception out of ``export``, or a decoder error the
receiver had to log as unexpected (a bug, even though the client got a 400).

An empty ``CORPUS_DIR`` is seeded with valid exports first, so mutations start from real OTLP.
``test_receiver_fuzz.py`` runs it for a fixed number of runs.
"""

from __future__ import annotations

import gzip
import json
import logging
import sys
import tempfile
import zlib
from pathlib import Path

import atheris
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

with atheris.instrument_imports(include=["collector", "ledger"]):  # coverage of our code only
    from collector.receiver import CollectorServer, ServerConfig
    from collector.receiver.otlp_http import JSON, PROTOBUF
    from collector.receiver.routes import export
    from tests import hostile_spans as h

ENCODINGS = (None, "gzip", "deflate")
ALLOWED = {200, 400, 413, 415, 429, 503}


class _Unexpected(logging.Handler):
    """Turns an error the receiver logs (a decoder bug it answered with a 400) into a crash."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            raise AssertionError(f"the receiver logged an unexpected error: {record.getMessage()}")


def _seed(corpus: Path) -> None:
    pb, js = h.must_show_protobuf(), h.must_show_json()
    seeds = {"pb": b"\x00" + pb, "json": b"\x01" + js, "pb-gzip": b"\x02" + gzip.compress(pb),
             "json-deflate": b"\x05" + zlib.compress(js), "deep": b"\x00" + h.deep_protobuf(50)}  # fmt: skip
    for name, data in seeds.items():
        (corpus / name).write_bytes(data)


def main() -> None:
    corpus = next((Path(a) for a in sys.argv[1:] if not a.startswith("-")), None)
    if corpus is not None:
        corpus.mkdir(parents=True, exist_ok=True)
        if not any(corpus.iterdir()):
            _seed(corpus)
    folder = tempfile.mkdtemp(prefix="turnledger-fuzz-")  # under $TMPDIR: libFuzzer exits without cleaning up
    server = CollectorServer(ServerConfig(port=0, db=f"{folder}/ledger.duckdb", max_body_bytes=1 << 20))
    logging.getLogger("turnledger.server").addHandler(_Unexpected())

    def one_input(data: bytes) -> None:
        if not data:
            return
        kind = JSON if data[0] & 1 else PROTOBUF
        encoding = ENCODINGS[(data[0] >> 1) % len(ENCODINGS)]
        reply = export(server, kind, data[1:], encoding)
        assert reply.status in ALLOWED, (reply.status, reply.body[:300])
        if reply.status == 200:
            if kind == JSON:
                assert isinstance(json.loads(reply.body), dict)
            else:
                ExportTraceServiceResponse.FromString(reply.body)

    atheris.Setup(sys.argv, one_input)
    try:
        atheris.Fuzz()  # exits the process when the runs are done (0) or on a crash (non-zero)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
