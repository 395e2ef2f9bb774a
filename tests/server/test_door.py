"""Trust at the door, over HTTP: impossible numbers refused span by span, no body ever a 500,
and one client's poison never fails another client's spans."""

from __future__ import annotations

import threading

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

import collector.receiver.writer as writer_module
from ledger.report import build_report
from tests import hostile_spans as h

from .conftest import count, otlp_json, post_otlp, run_spans, wait_until

PROTOBUF = "application/x-protobuf"


def _landed(server) -> set[str]:
    return {r[0] for r in server.con.cursor().execute("SELECT span_id FROM spans").fetchall()}


def _check_the_must_show_request(server, message: str, rejected: int) -> None:
    assert rejected == len(h.REJECTED)
    for n in h.REJECTED + h.INVALID_USAGE + h.CONTENT_NOT_STORED:  # each span named, with its field
        assert f"{h.TRACE}/{h.span_id(n)}" in message, n
        assert h.HOSTILE[n][1] in message.split(f"{h.TRACE}/{h.span_id(n)}", 1)[1], n
    kept = {h.span_id(n) for n in h.GOOD + h.INVALID_USAGE + h.CONTENT_NOT_STORED}
    assert _landed(server) == kept
    flagged = server.con.cursor().execute("SELECT span_id FROM charges WHERE invalid_usage ORDER BY 1").fetchall()
    assert [r[0] for r in flagged] == [h.span_id(n) for n in h.INVALID_USAGE]
    # the good spans are priced exactly (41 in, 67 out on claude-sonnet-4-6: $3 / $15 per Mtok)
    usd = "SELECT usd_input + usd_output FROM charges WHERE span_id = ?"
    assert count(server, usd, [h.span_id(1)]) == (41 * 3 + 67 * 15) / __import__("decimal").Decimal(10**6)
    # the flagged ones carry $0 only for the unusable term, and say so
    assert count(server, "SELECT usd_output FROM charges WHERE span_id = ?", [h.span_id(5)]) == 0
    assert count(server, "SELECT usd_input FROM charges WHERE span_id = ?", [h.span_id(5)]) > 0
    assert count(server, "SELECT count(*) FROM contexts") == 0  # no payload for non-JSON / non-list messages
    assert server.writer.drained(10)
    with server.readers.connection() as cur:
        report = build_report(cur)
    assert report["invalid_usage_calls"] == len(h.INVALID_USAGE)
    assert [(u["model"], u["calls"]) for u in report["invalid_usage"]] == [(h.MODEL, len(h.INVALID_USAGE))]


@pytest.mark.parametrize("workers", [0, 1])
def test_the_must_show_json_request_lands_the_good_spans_and_names_each_bad_one(make_server, workers):
    server = make_server(decode_workers=workers)
    r = post_otlp(server.url, h.must_show_json())
    assert r.status == 200
    partial = r.json()["partialSuccess"]
    _check_the_must_show_request(server, partial["errorMessage"], int(partial["rejectedSpans"]))


def test_the_must_show_protobuf_request_lands_the_good_spans_and_names_each_bad_one(server):
    r = post_otlp(server.url, h.must_show_protobuf(), PROTOBUF)
    assert r.status == 200
    partial = ExportTraceServiceResponse.FromString(r.body).partial_success
    _check_the_must_show_request(server, partial.error_message, partial.rejected_spans)


def test_nesting_past_the_parser_is_a_400_for_the_whole_body_never_a_500(server):
    # Structural: the parser itself refuses the body (JSON ~1,000 levels, protobuf 100 messages deep).
    json_reply = post_otlp(server.url, h.deep_json(500))
    assert json_reply.status == 400 and "not JSON" in json_reply.json()["message"]
    assert post_otlp(server.url, h.deep_protobuf(500), PROTOBUF).status == 400
    assert count(server, "SELECT count(*) FROM spans") == 0


def _poison(monkeypatch, trace_id: str) -> None:
    """A commit fails whenever it holds this trace: after validation no real value is known to fail
    the insert, so the failure is injected at the ``write`` boundary, for that request only."""
    real = writer_module.write
    gate = threading.Event()

    def write(con, batches, **kw):
        # The first commit waits until the test saw every client queued, so the rest are coalesced with it.
        # Only a hang guard bounds it: a shorter wait let a slow machine commit early, and the
        # test's "all 80 spans queued" was then never seen (a flake under load).
        gate.wait(120)
        if any(trace_id in b.first_starts for b in batches):
            raise RuntimeError("this request's rows cannot be inserted")
        return real(con, batches, **kw)

    monkeypatch.setattr(writer_module, "write", write)
    return gate


@pytest.mark.parametrize("workers", [0, 2])
def test_twenty_clients_one_poison_every_other_client_lands_exactly_once(make_server, monkeypatch, workers):
    server = make_server(decode_workers=workers)
    runs = [run_spans(f"client-{i}") for i in range(20)]
    poison = runs[7][0].trace_id
    # Every decoder process imported and answering before the clients come: a cold start under
    # load (a spawned worker imports for seconds) must not eat the clients' wait for their commit.
    for _ in range(max(1, workers)):
        server.decoder.prepare(otlp_json(run_spans("warm-up")), "application/json")
    gate = _poison(monkeypatch, poison)
    replies: dict[int, object] = {}
    threads = [
        threading.Thread(target=lambda i=i: replies.setdefault(i, post_otlp(server.url, otlp_json(runs[i]))))
        for i in range(20)
    ]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: server.writer.queued_spans == 20 * 4, timeout=60)
    finally:
        gate.set()  # also when the wait failed: the writer must not hang the teardown
    for t in threads:
        t.join(60)
    statuses = {i: r.status for i, r in replies.items()}
    assert statuses == {i: 400 if i == 7 else 200 for i in range(20)}
    assert "cannot be inserted" in replies[7].json()["message"]
    per_trace = dict(server.con.cursor().execute("SELECT trace_id, count(*) FROM spans GROUP BY 1").fetchall())
    assert per_trace == {r[0].trace_id: 4 for i, r in enumerate(runs) if i != 7}  # exactly once each
    assert count(server, "SELECT count(*) FROM charges") == 19 * 2
    assert server.writer.stats.failed_batches >= 1


def test_a_failure_every_request_meets_stays_a_retryable_503(server, monkeypatch):
    def broken(con, batches, **kw):
        raise RuntimeError("disk full")

    monkeypatch.setattr(writer_module, "write", broken)
    replies: list[object] = []
    threads = [threading.Thread(target=lambda i=i: replies.append(post_otlp(server.url, otlp_json(run_spans(f"d{i}")))))
               for i in range(4)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(r.status for r in replies) == [503] * 4
