"""No secret of the corpus is stored, wherever a span carries it, over OTLP/JSON and protobuf.

Every secret of ``tests/redaction_corpus.py`` is sent in every place a span can
carry text: its name, status message, attributes under plain and secret-named
keys, arrays and nested values, event names and attributes (an exception, a
``gen_ai.user.message``), links' attributes, resource attributes, the captured
request (GenAI attributes, our request body, OpenInference's flattened
messages), the response, tool arguments and results, and JSON-escaped text.
A running receiver takes the request; then every text column of every table,
the WAL (before any checkpoint) and the checkpointed file's bytes are searched.
The same request to a receiver with redaction off finds them: proof the search
can see a secret when one is stored. The charges are those of the same spans
without secrets.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import http.client
import json
import os
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collector.cli.serve import _config, add_serve
from collector.otlp import encode_json
from collector.receiver import CollectorServer
from ledger import conventions as c
from ledger import redact
from ledger.errors import TurnledgerError
from ledger.rows import prepare
from ledger.spans import Base64Bytes, SpanEvent, SpanLink, SpanRecord
from ledger.tables import table
from tests.redaction_corpus import IP_ADDRESSES, SECRETS, Secret
from tests.server.conftest import T0

MODEL = "claude-sonnet-4-6"
LOCATIONS = (
    "name", "status", "attribute", "secret_key", "array", "nested", "event_name", "exception", "user_message",
    "link", "resource", "input_messages", "request_body", "flattened", "response", "tool", "escaped",
    "key", "nested_key", "event_key", "link_key", "bytes", "event_bytes", "scope",
)  # fmt: skip
SECRET_KEYS = (
    "http.request.header.authorization", "api_key", "password", "db_password", "openai_api_key",
    "aws_secret_access_key", "passphrase", "cookie", "user.credentials", "private_key", "x-auth-token",
)  # fmt: skip
USAGE = {"gen_ai.usage.input_tokens": 41, "gen_ai.usage.output_tokens": 67}
CHARGE_FIGURES = ("model", "provider", "uncached_input_tokens", "output_tokens", "usd_input", "usd_output", "unpriced")


def _escaped(text: str) -> str:
    """The text as JSON-escaping producers write it inside a string: ``@`` and ``/`` escaped."""
    return text.replace("@", "\\u0040").replace("/", "\\/")


def _span(trace: str, n: int, where: str, secret: str, resource: dict[str, Any] | None = None) -> SpanRecord:
    """A model-call span (41 in, 67 out) carrying ``secret`` at ``where``."""
    start = T0 + n * 10**6
    s = SpanRecord(
        trace, hashlib.sha256(f"{trace}/{n}".encode()).hexdigest()[:16], f"chat {MODEL}", start, start + 5 * 10**5,
        kind="CLIENT", resource=resource or {}, scope_name="corpus", scope_version="1",
        attributes={c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: MODEL, **USAGE},
    )  # fmt: skip
    attrs = s.attributes
    message = [{"role": "user", "parts": [{"type": "text", "content": f"Here it is: {secret}"}]}]
    match where:
        case "name":
            s.name = f"chat {secret}"
        case "status":
            s.status_code, s.status_message = "ERROR", f"upstream refused {secret}"
        case "attribute":
            attrs["note"] = f"see {secret} for details"
        case "secret_key":
            attrs[SECRET_KEYS[n % len(SECRET_KEYS)]] = secret
        case "array":
            attrs["tags"] = ["ok", f"v {secret}", secret]
        case "nested":
            attrs["request.headers"] = {"x-trace": "1", "inner": {"value": secret, "list": [f"x {secret}"]}}
        case "event_name":
            s.events = (SpanEvent(f"note {secret}", start + 2),)
        case "exception":
            exc = {"exception.type": "ValueError", "exception.message": f"bad value {secret}"}
            exc["exception.stacktrace"] = f'Traceback:\n  File "x.py"\nValueError: {secret}'
            s.events = (SpanEvent("exception", start + 2, exc),)
        case "user_message":
            s.events = (SpanEvent("gen_ai.user.message", start + 2, {"content": f"my details: {secret}"}),)
        case "link":
            s.links = (SpanLink("ab" * 16, "cd" * 8, {"link.note": f"triggered by {secret}", "api_key": secret}),)
        case "input_messages":
            attrs[c.INPUT_MESSAGES] = json.dumps(message)
            attrs[c.SYSTEM_INSTRUCTIONS] = json.dumps([{"type": "text", "content": f"Use {secret}"}])
        case "request_body":
            body = {"model": MODEL, "system": f"Key: {secret}", "messages": [{"role": "user", "content": secret}]}
            attrs[c.REQUEST_BODY] = json.dumps({**body, "metadata": {"user_id": secret, "api_key": secret}})
        case "flattened":
            attrs["llm.input_messages.0.message.role"] = "user"
            attrs["llm.input_messages.0.message.content"] = f"text {secret}"
        case "response":
            attrs["gen_ai.output.messages"] = json.dumps([{**message[0], "role": "assistant"}])
            attrs["gen_ai.completion.0.content"] = f"Answer: {secret}"
            attrs["output.value"] = secret
        case "tool":
            attrs[c.TOOL_CALL_ARGUMENTS] = json.dumps({"query": secret, "token": secret})
            attrs[c.TOOL_CALL_RESULT] = f"found: {secret}"
        case "escaped":
            attrs["raw.json"] = json.dumps({"value": _escaped(secret)})
            attrs["raw.text"] = _escaped(f"contact: {secret}")
        case "key":  # an attribute name is stored as any string is
            attrs[secret] = "x"
            attrs[f"user.{secret}"] = 1
        case "nested_key":
            attrs["request.headers"] = {secret: "1", "inner": {f"x {secret}": ["a"]}}
        case "event_key":
            s.events = (SpanEvent("note", start + 2, {secret: "x", f"detail {secret}": True}),)
        case "link_key":
            s.links = (SpanLink("ab" * 16, "cd" * 8, {f"by {secret}": "x"}),)
        case "bytes":  # bytesValue: base64 on the wire, which no pattern reads
            attrs["payload"] = _bytes(f"Here it is: {secret}")
            attrs["blobs"] = [_bytes(secret), _bytes(b"\x00\xff" + secret.encode())]  # not UTF-8
        case "scope":  # the instrumentation scope's name and version are stored with the span
            s.scope_name, s.scope_version = f"lib {secret}", secret
        case "event_bytes":
            s.events = (SpanEvent("upload", start + 2, {"body": _bytes(f"{{'v': '{secret}'}}")}),)
    return s


def _bytes(data: str | bytes) -> Base64Bytes:
    return Base64Bytes(base64.b64encode(data.encode() if isinstance(data, str) else data).decode())


def corpus_request(trace: str) -> dict[str, Any]:
    """OTLP/JSON: per secret, a resource carrying it and one span per location."""
    spans = []
    for i, secret in enumerate(SECRETS):
        resource = {
            "service.name": "corpus", "env.OPENAI_API_KEY": secret.text, "deployment.note": secret.text,
            f"deployment.{secret.text}": "x",
        }  # fmt: skip
        spans += [
            _span(trace, i * len(LOCATIONS) + j, where, secret.text, resource) for j, where in enumerate(LOCATIONS)
        ]
    return encode_json(spans)


def as_protobuf(doc: dict[str, Any]) -> bytes:
    """The same request as protobuf (OTLP/JSON ids are hex; the protobuf JSON mapping wants base64)."""

    def ids(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64encode(bytes.fromhex(v)).decode() if k in ("traceId", "spanId", "parentSpanId") else ids(v)
                for k, v in node.items()
            }
        return [ids(x) for x in node] if isinstance(node, list) else node

    return json_format.ParseDict(ids(doc), ExportTraceServiceRequest()).SerializeToString()


def base64_forms(needle: str) -> set[str]:
    """What ``needle`` is, inside any base64 text, at each of the three byte alignments: the
    characters that encode its bytes alone (those shared with the bytes around it left out)."""
    data = needle.encode()
    forms = set()
    for pad, skip in ((0, 0), (1, 2), (2, 3)):
        encoded = base64.b64encode(b"\0" * pad + data).decode()
        if (pad + len(data)) % 3:
            encoded = encoded[:-4]  # the last group: its bits are shared with what follows
        forms.add(encoded[skip:])
    return forms


def needles(secrets: Iterable[Secret] = SECRETS) -> set[str]:
    found = {n for s in secrets for n in s.needles}
    return found | {_escaped(n) for n in found} | {f for n in found if len(n) >= 12 for f in base64_forms(n)}


def text_columns(server: CollectorServer) -> Iterator[tuple[str, str, str]]:
    """(table, column, every value of it joined) for every text column of every table."""
    with server.readers.connection() as cur:
        columns = cur.execute(
            """SELECT table_name, column_name FROM information_schema.columns
               WHERE table_schema = 'main' AND data_type IN ('VARCHAR', 'JSON')"""
        ).fetchall()
        assert len(columns) > 30  # spans, charges, call copies, guard events, content, runs...
        for table, column in columns:
            values = cur.execute(f'SELECT "{column}"::VARCHAR FROM "{table}"').fetchall()
            yield table, column, "\n".join(v for (v,) in values if v)


def found_in_columns(server: CollectorServer) -> dict[str, set[str]]:
    wanted = needles()
    return {f"{t}.{col}": hits for t, col, text in text_columns(server) if (hits := {n for n in wanted if n in text})}


def found_in_bytes(data: bytes) -> set[str]:
    return {n for n in needles() if n.encode() in data}


def charge_figures(server: CollectorServer) -> list[tuple[Any, ...]]:
    with server.readers.connection() as cur:
        return cur.execute(f"SELECT DISTINCT {', '.join(CHARGE_FIGURES)} FROM charges").fetchall()


def ingest(server: CollectorServer, doc: dict[str, Any], encoding: str) -> None:
    """The corpus in one request (one commit: the WAL holds it all), ~3,600 spans: answered in
    seconds, given a generous hang guard (a loaded machine's first, cold request took over 30 s)."""
    body, kind = (json.dumps(doc).encode(), "application/json")
    if encoding != "json":
        body, kind = as_protobuf(doc), "application/x-protobuf"
    url = urllib.parse.urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=300)
    try:
        conn.request("POST", "/v1/traces", body=body, headers={"Content-Type": kind})
        r = conn.getresponse()
        status, answer = r.status, r.read()
    finally:
        conn.close()
    assert status == 200, answer
    assert b"rejected" not in answer  # no partial success: every span was stored


def expected_charge() -> tuple[Any, ...]:
    """The charge of the same model call with no secret anywhere, built by ingest itself."""
    row = dict(
        zip(table("charges").names, prepare([_span("ef" * 16, 0, "nowhere", "")]).rows["charges"][0], strict=True)
    )
    return tuple(row[k] for k in CHARGE_FIGURES)


@pytest.mark.parametrize("encoding", ["json", "protobuf"])
def test_no_secret_is_stored_anywhere(
    make_server: Callable[..., CollectorServer], tmp_path: Path, encoding: str
) -> None:
    assert len({s.text for s in SECRETS}) >= 60
    db = tmp_path / "ledger.duckdb"
    server = make_server(db=db)
    ingest(server, corpus_request("ab" * 16), encoding)
    spans = len(SECRETS) * len(LOCATIONS)
    with server.readers.connection() as cur:
        assert cur.execute("SELECT count(*) FROM spans").fetchone() == (spans,)
        assert cur.execute("SELECT count(*) FROM charges").fetchone() == (spans,)
        assert cur.execute("SELECT count(*) FROM contexts").fetchone()[0] >= 4 * len(SECRETS)
    assert found_in_columns(server) == {}
    assert charge_figures(server) == [expected_charge()]  # redaction never touches what is billed
    wal = Path(f"{db}.wal")
    assert wal.stat().st_size > 0 and b"[REDACTED:" in wal.read_bytes()  # the WAL holds the rows, in clear
    assert found_in_bytes(wal.read_bytes()) == set()
    server.stop()
    assert found_in_bytes(db.read_bytes()) == set()


def test_the_search_finds_the_secrets_when_redaction_is_off(
    make_server: Callable[..., CollectorServer], tmp_path: Path
) -> None:
    db = tmp_path / "open.duckdb"
    server = make_server(db=db, redact_content=False)
    ingest(server, corpus_request("ab" * 16), "json")
    stored = set().union(*found_in_columns(server).values())
    assert {s.needles[0] for s in SECRETS} - {"monica.reyes"} <= stored  # each as sent
    assert len(found_in_bytes(Path(f"{db}.wal").read_bytes())) >= len(SECRETS)
    assert charge_figures(server) == [expected_charge()]


def test_ip_addresses_are_stored_as_sent_when_the_policy_says_off_and_nothing_else_is(
    make_server: Callable[..., CollectorServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TURNLEDGER_REDACT_IP", "off")
    redact._configured.cache_clear()
    try:
        db = tmp_path / "ips.duckdb"
        server = make_server(db=db)
        ingest(server, corpus_request("ab" * 16), "json")
        stored = set().union(*found_in_columns(server).values())
        assert {n for s in IP_ADDRESSES for n in s.needles} <= stored  # each address, as sent
        assert stored <= needles(IP_ADDRESSES)  # and no other kind of secret
        assert found_in_bytes(Path(f"{db}.wal").read_bytes()) <= needles(IP_ADDRESSES)
    finally:
        redact._configured.cache_clear()


def test_serve_takes_the_policy_from_its_flag_or_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = argparse.ArgumentParser()
    add_serve(parser)
    db = ["--db", str(tmp_path / "x.duckdb")]
    monkeypatch.setenv("TURNLEDGER_REDACT", "on")  # and undone after: _config sets it for --redact
    assert _config(parser.parse_args(db)).redact_content is True
    assert _config(parser.parse_args([*db, "--redact", "off"])).redact_content is False
    assert os.environ["TURNLEDGER_REDACT"] == "off"  # what its decoder processes inherit
    monkeypatch.setenv("TURNLEDGER_REDACT_PATTERNS", '{"employee_id": "("}')
    with pytest.raises(TurnledgerError, match="TURNLEDGER_REDACT_PATTERNS"):
        _config(parser.parse_args(db))
