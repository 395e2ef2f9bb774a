"""The named-query API and its client: same answers as the file, typed parameters, auth, streaming reads."""

from __future__ import annotations

import inspect
import json
import threading
from datetime import datetime

import pandas as pd
import pyarrow as pa
import pytest

from collector.client import ServerClient
from collector.receiver import CollectorServer, ServerConfig
from ledger import queries as q
from ledger.content import load_context, load_turn
from ledger.errors import ServerError

from .conftest import ROOT, count, otlp_json, post_otlp, request, run_spans, wait_until

SAMPLES = ["five_turn_run", "cache_pair", "long_tail", "retry_and_loop", "budget_warn", "openai_style", "unpriced"]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """One collector holding every sample scenario, shared by the read-only tests below."""
    server = CollectorServer(ServerConfig(port=0, db=tmp_path_factory.mktemp("query") / "ledger.duckdb")).start()
    for name in SAMPLES:
        assert post_otlp(server.url, (ROOT / "sample_traces" / f"{name}.json").read_bytes()).status == 200
    yield server
    server.stop()


def _default_call(name: str, trace_id: str) -> dict[str, str]:
    params = inspect.signature(q.QUERIES[name]).parameters
    required = [p for p in params.values() if p.default is inspect.Parameter.empty]
    return {"trace_id": trace_id} if any(p.name == "trace_id" for p in required) else {}


@pytest.mark.parametrize("name", sorted(q.QUERIES))
def test_every_named_query_answers_what_the_file_answers(loaded, name):
    client = ServerClient(loaded.url)
    trace_id = count(loaded, "SELECT trace_id FROM runs ORDER BY usd_total DESC LIMIT 1")
    kwargs = _default_call(name, trace_id)
    with loaded.readers.connection() as cur:
        try:
            expected = q.run(cur, q.QUERIES[name](**kwargs))
        except Exception as exc:  # a builder broken on the file is broken through the API too
            with pytest.raises(ServerError) as err:
                client.query(name, **kwargs)
            assert err.value.status == 500, exc
            return
    got = client.query(name, **kwargs)
    # Same rows, columns and dtypes; row order only as far as the query's ORDER BY fixes it (ties may differ).
    pd.testing.assert_frame_equal(_canonical(got), _canonical(expected))


def _canonical(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(list(df.columns), key=lambda col: col.astype(str)).reset_index(drop=True) if len(df) else df


def test_filters_and_builder_arguments_are_typed(loaded):
    client = ServerClient(loaded.url)
    by_model = client.query("cache_hit_rate", by="model", tenant="acme", since=datetime(2026, 1, 1))
    with loaded.readers.connection() as cur:
        expected = q.run(cur, q.cache_hit_rate(q.Filters(since=datetime(2026, 1, 1), tenant="acme"), by="model"))
    pd.testing.assert_frame_equal(_canonical(by_model), _canonical(expected))
    assert len(client.query("long_tail", limit=2)) == 2
    # ISO times with a zone are converted to the ledger's UTC
    late = client.query("runs_table", since="2099-01-01T00:00:00+02:00")
    assert late.empty
    # exact money stays exact on the wire
    table = client.query_arrow("cost_per_run")
    assert pa.types.is_decimal(table.schema.field("total_usd").type)


@pytest.mark.parametrize(
    ("path", "status", "names"),
    [
        ("/api/query/no_such_query", 404, "no_such_query"),
        ("/api/query/long_tail?limit=lots", 400, "limit"),
        ("/api/query/long_tail?colour=red", 400, "colour"),
        ("/api/query/long_tail?since=the-day-before", 400, "since"),
        ("/api/query/long_tail?limit=1&limit=2", 400, "limit"),
        ("/api/query/run_turns", 400, "trace_id"),
        ("/api/query/run_turns?trace_id=abc&tenant=acme", 400, "tenant"),
        ("/api/query/cache_hit_rate?by=colour", 400, "by"),
        ("/api/query/cost_per_run?format=xml", 400, "format"),
    ],
)
def test_bad_requests_name_what_is_wrong(loaded, path, status, names):
    r = request(loaded.url + path)
    assert r.status == status
    assert r.headers["content-type"] == "application/json"
    assert names in r.json()["error"]


def test_json_format_keeps_money_exact(loaded):
    r = request(f"{loaded.url}/api/query/cost_per_run?format=json")
    assert r.status == 200 and r.headers["content-type"] == "application/json"
    row = r.json()[0]
    assert row["runs"] == count(loaded, "SELECT count(*) FROM runs")
    assert isinstance(row["total_usd"], str) and row["total_usd"] == str(
        count(loaded, "SELECT sum(usd_total) FROM runs")
    )
    arrow = request(f"{loaded.url}/api/query/cost_per_run")
    assert arrow.headers["content-type"] == "application/vnd.apache.arrow.stream"


def test_context_endpoint_returns_the_captured_payload(loaded):
    client = ServerClient(loaded.url)
    trace_id, span_id = (
        loaded.con.cursor()
        .execute("SELECT trace_id, span_id FROM contexts ORDER BY length(messages) DESC, span_id LIMIT 1")
        .fetchone()
    )
    with loaded.readers.connection() as cur:
        assert client.context(trace_id, span_id) == load_context(cur, trace_id, span_id)
    assert client.context(trace_id, "0" * 16) is None
    assert request(f"{loaded.url}/api/context/{trace_id}/{'0' * 16}").status == 404


def test_a_half_read_result_never_poisons_a_pooled_connection(loaded):
    runs = count(loaded, "SELECT count(*) FROM runs")
    with loaded.readers.connection() as cur:
        cur.execute("SELECT * FROM spans").fetchone()  # DuckDB now refuses other work on `cur` until dropped
    # the pool is LIFO: the API's next query gets that very connection
    assert ServerClient(loaded.url).query("cost_per_run")["runs"][0] == runs


def test_query_listing_describes_parameters(server):
    listing = request(f"{server.url}/api/queries").json()
    assert set(listing) == set(q.QUERIES)
    names = {p["name"]: p for p in listing["long_tail"]["parameters"]}
    assert names["limit"] == {"name": "limit", "type": "int", "required": False, "default": 20, "filter": False}
    assert names["since"]["type"] == "datetime" and names["since"]["filter"]


def test_token_guards_ingest_and_queries_but_not_healthz(make_server):
    server = make_server(token="s3cret-token")
    body = otlp_json(run_spans("auth"))
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic s3cret-token"}):
        r = post_otlp(server.url, body, headers=headers)
        assert r.status == 401
        assert request(f"{server.url}/api/query/cost_per_run", headers=headers).status == 401
        assert request(f"{server.url}/api/context/{'a' * 32}/{'b' * 16}", headers=headers).status == 401
    assert count(server, "SELECT count(*) FROM spans") == 0
    assert server.writer.stats.batches == 0
    assert ServerClient(server.url).healthy()  # /healthz needs no token
    with pytest.raises(ServerError) as err:
        ServerClient(server.url).query("cost_per_run")
    assert err.value.status == 401
    assert post_otlp(server.url, body, headers={"Authorization": "Bearer s3cret-token"}).status == 200
    assert ServerClient(server.url, token="s3cret-token").query("cost_per_run")["runs"][0] == 1


def test_healthz(server):
    r = request(f"{server.url}/healthz")
    assert r.status == 200
    health = r.json()
    assert health["status"] == "ok" and health["writer"]["alive"] and health["queued_spans"] == 0
    assert not ServerClient("http://127.0.0.1:9").healthy()  # nothing listens there: False, no exception


def test_queries_keep_answering_while_spans_stream_in_and_every_acknowledged_run_shows(server):
    """A dashboard polling while an agent fleet exports: no query fails, every acknowledged run becomes visible.

    How soon it shows is a figure, not a test: ``benchmarks/visibility_lag.py``.
    """
    client = ServerClient(server.url)
    stop = threading.Event()
    query_errors: list[Exception] = []
    answered = [0]

    def dashboard() -> None:
        names = ["cost_per_run", "runs_table", "cache_hit_rate", "model_attribution", "long_tail"]
        while not stop.is_set():
            for name in names:
                try:
                    client.query(name)
                    answered[0] += 1
                except Exception as exc:
                    query_errors.append(exc)

    readers = [threading.Thread(target=dashboard) for _ in range(2)]
    for t in readers:
        t.start()
    answered_while_streaming = []
    try:
        for n in range(5):
            spans = [s for k in range(20) for s in run_spans(f"stream-{n}-{k}", turns=3)]
            trace_id = spans[0].trace_id
            assert post_otlp(server.url, otlp_json(spans)).status == 200
            # A hang guard, not a latency bound: the run must become visible at all.
            wait_until(lambda t=trace_id: not client.query("run_summary", trace_id=t).empty, timeout=60)
            answered_while_streaming.append(answered[0])
    finally:
        stop.set()
        for t in readers:
            t.join()
    assert not query_errors, query_errors[:3]
    assert answered_while_streaming[-1] > answered_while_streaming[0]  # the dashboards were answered meanwhile
    assert client.query("cost_per_run")["runs"][0] == 20 * 5  # every run once


def test_turn_endpoint_returns_request_and_response_as_the_file_does(server):
    spans = run_spans("answered", turns=2)
    answer = [{"role": "assistant", "content": [{"type": "text", "text": "done " * 300}], "finish_reason": "end_turn"}]
    chat = next(s for s in spans if s.name.startswith("chat"))
    chat.attributes["gen_ai.output.messages"] = json.dumps(answer)
    assert post_otlp(server.url, otlp_json(spans)).status == 200
    client = ServerClient(server.url)
    turn = client.turn(chat.trace_id, chat.span_id)
    with server.readers.connection() as cur:
        assert turn == load_turn(cur, chat.trace_id, chat.span_id)
    assert turn is not None and turn.response == answer and turn.request is not None
    assert client.turn(chat.trace_id, "0" * 16) is None
    assert request(f"{server.url}/api/turn/{chat.trace_id}/{'0' * 16}").status == 404
