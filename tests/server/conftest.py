"""Real collectors on 127.0.0.1 ephemeral ports, writing real DuckDB files in tmp_path."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from collector.otlp import encode_json
from collector.receiver import CollectorServer, ServerConfig
from ledger import conventions as c
from ledger.spans import SpanRecord
from tests.budgets.conftest import receiver  # noqa: F401  (a fixture: a local webhook receiver)
from tests.conftest import copy_ledger

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_790_000_000_000_000_000
MS = 1_000_000


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def request(
    url: str, method: str = "GET", body: bytes | None = None, headers: dict[str, str] | None = None
) -> Response:
    """One HTTP exchange with plain http.client (no retries, no redirects, any status returned)."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(method, parts.path + (f"?{parts.query}" if parts.query else ""), body=body, headers=headers or {})
        r = conn.getresponse()
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    finally:
        conn.close()


def post_otlp(
    url: str, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None
) -> Response:
    return request(f"{url}/v1/traces", "POST", body, {"Content-Type": content_type, **(headers or {})})


def otlp_json(spans: list[SpanRecord]) -> bytes:
    return json.dumps(encode_json(spans)).encode()


def gz(data: bytes) -> bytes:
    return gzip.compress(data)


def _hex(*parts: object, n: int) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:n]


def run_spans(key: str, turns: int = 2, *, model: str = "claude-sonnet-5", start: int = T0) -> list[SpanRecord]:
    """One small agent run in turnledger's conventions: a root, ``turns`` model calls, one tool call."""
    trace, root = _hex("t", key, n=32), _hex("r", key, n=16)
    spans = []
    clock = start + MS
    for i in range(turns):
        sid = _hex("c", key, i, n=16)
        attrs = {
            c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: model, c.TENANT: "acme",
            c.INPUT_TOKENS: 1000 + 100 * i, c.OUTPUT_TOKENS: 50, c.CACHE_READ_INPUT_TOKENS: 100 * i,
            c.CACHE_CREATION_INPUT_TOKENS: 0,
            c.REQUEST_BODY: json.dumps({"model": model, "messages": [{"role": "user", "content": f"turn {i} of {key}"}]}),
        }  # fmt: skip
        spans.append(SpanRecord(trace, sid, f"chat {model}", clock, clock + 500 * MS, root, "CLIENT", attributes=attrs))
        clock += 600 * MS
    tool = _hex("x", key, n=16)
    spans.append(
        SpanRecord(
            trace,
            tool,
            "execute_tool search",
            clock,
            clock + 100 * MS,
            root,
            attributes={c.OPERATION_NAME: "execute_tool", c.TOOL_NAME: "search"},
        )
    )
    spans.append(
        SpanRecord(
            trace,
            root,
            "invoke_agent demo",
            start,
            clock + 200 * MS,
            attributes={
                c.OPERATION_NAME: "invoke_agent",
                c.AGENT_NAME: "demo",
                c.TENANT: "acme",
                c.STOP_CAUSE: "completed",
            },
        )
    )
    return spans


@pytest.fixture
def make_server(tmp_path: Path, migrated_ledger: Path) -> Iterator[Callable[..., CollectorServer]]:
    started: list[CollectorServer] = []

    def _make(**config: Any) -> CollectorServer:
        config.setdefault("db", copy_ledger(migrated_ledger, tmp_path / "ledger.duckdb"))
        server = CollectorServer(ServerConfig(port=0, **config)).start()
        started.append(server)
        return server

    yield _make
    for server in started:
        server.stop()


@pytest.fixture
def server(make_server: Callable[..., CollectorServer]) -> CollectorServer:
    return make_server()


def count(server: CollectorServer, sql: str, params: list[Any] | None = None) -> Any:
    with server.readers.connection() as cur:
        rows = cur.execute(sql, params or []).fetchall()
    return rows[0][0] if rows else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``turnledger ARGS`` in its own process (own session, so signals reach only it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "collector.cli", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_healthy(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if request(f"{url}/healthz").status == 200:
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"no healthy collector at {url} after {timeout} s")


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.01)
