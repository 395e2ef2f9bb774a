"""Issue #15 must-show: an evaluation exported by the official OTLP exporter and feedback through
``POST /v1/feedback`` both appear on the run; negative feedback queues the run; tagging and
``turnledger cases export`` give the exact (redacted) request and the model's answer."""

from __future__ import annotations

import dataclasses
import json

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from collector.cli import main
from collector.client import ServerClient
from ledger import conventions as c
from ledger import queries as q
from ledger.errors import InputError

from .conftest import count, otlp_json, post_otlp, request, run_spans

TOKEN = "quality-token"
SECRET = "sk-ant-api03-" + "Zz9Yy8Xx" * 10
REQUEST = {
    "model": "claude-sonnet-5",
    "system": "You are a support agent.",
    "messages": [{"role": "user", "content": f"where is my parcel? my key is {SECRET}"}],
}
ANSWER = [{"role": "assistant", "parts": [{"type": "text", "content": "It ships tomorrow."}]}]


def _export_judged_run(server) -> tuple[str, str]:
    """One run through the official exporter: a captured chat span judged by a gen_ai.evaluation.result event."""
    provider = TracerProvider(resource=Resource.create({"service.name": "support"}))
    exporter = OTLPSpanExporter(
        endpoint=f"{server.url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
    )  # the SDK's 10 s default is shorter than a first commit takes on a loaded machine
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("my.agent", "1.0")
    attrs = {c.OPERATION_NAME: "invoke_agent", c.AGENT_NAME: "support", c.STOP_CAUSE: "completed"}
    with tracer.start_as_current_span("invoke_agent support", attributes=attrs) as root:
        with tracer.start_as_current_span("chat claude-sonnet-5") as chat:
            chat.set_attributes({
                c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-5",
                c.INPUT_TOKENS: 1200, c.OUTPUT_TOKENS: 40, c.REQUEST_BODY: json.dumps(REQUEST),
                c.OUTPUT_MESSAGES: json.dumps(ANSWER),
            })  # fmt: skip
            chat.add_event(
                "gen_ai.evaluation.result",
                {
                    "gen_ai.evaluation.name": "faithfulness",
                    "gen_ai.evaluation.score.value": 0.1,
                    "gen_ai.evaluation.score.label": "fail",
                    "gen_ai.evaluation.explanation": "made up a shipping date",
                },
            )
            span_id = format(chat.get_span_context().span_id, "016x")
        trace_id = format(root.get_span_context().trace_id, "032x")
    provider.shutdown()
    return trace_id, span_id


def test_evaluation_and_feedback_reach_the_run_and_the_tagged_case_replays(make_server, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TURNLEDGER_TOKEN", TOKEN)  # for the CLI below
    server = make_server(token=TOKEN)
    trace_id, span_id = _export_judged_run(server)
    client = ServerClient(server.url, TOKEN)

    # feedback: refused without the token, idempotent on the client's id
    body = {"id": "fb-1", "trace_id": trace_id, "score": -1, "label": "thumbs_down", "comment": f"wrong! {SECRET}"}
    assert request(f"{server.url}/v1/feedback", "POST", json.dumps(body).encode()).status == 401
    for _ in range(2):
        assert client.feedback(body)["id"] == "fb-1"
    assert count(server, "SELECT count(*) FROM evaluations WHERE kind = 'feedback'") == 1

    # both judgments on the run, through the named-query API
    judgments = client.query(q.query_name(q.run_evaluations), trace_id=trace_id)
    by_kind = {row.kind: row for row in judgments.itertuples()}
    assert set(by_kind) == {"evaluation", "feedback"}
    assert (by_kind["evaluation"].name, by_kind["evaluation"].span_id, by_kind["evaluation"].failed) == (
        "faithfulness",
        span_id,
        True,
    )
    assert by_kind["feedback"].failed and SECRET not in by_kind["feedback"].explanation

    # the run is queued once, with its first reason (the failed evaluation arrived first)
    (item,) = client.review_items()
    assert (item["trace_id"], item["reason"], item["status"]) == (trace_id, "failed_evaluation", "open")

    # tagged through the CLI (via the server), then exported as a case
    assert main(["review", "tag", trace_id, "hallucination", "--note", "invented a date", "--server", server.url]) == 0
    out = tmp_path / "cases.jsonl"
    assert main(["cases", "export", "--tag", "hallucination", "--out", str(out), "--server", server.url]) == 0
    (case,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert (case["trace_id"], case["span_id"], case["turn"]) == (trace_id, span_id, "judged")
    sent = json.loads(json.dumps(REQUEST).replace(SECRET, "[REDACTED:key]"))
    assert case["request"] == sent and SECRET not in out.read_text()
    assert case["response"] == ANSWER
    assert case["tags"] == ["hallucination"] and case["note"] == "invented a date"
    assert case["outcome"]["stop_cause"] == "completed"
    capsys.readouterr()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b"not json", "JSON"),
        (b"[]", "JSON object"),
        (json.dumps({"trace_id": "ab" * 16, "score": "NaN"}).encode(), "score"),
        (json.dumps({"trace_id": "ab" * 16, "score": 1, "comment": "x" * 9000}).encode(), "comment"),
        (b'{"trace_id": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "JSON"),
    ],
)
def test_hostile_feedback_is_400_naming_the_field_and_writes_nothing(server, body, field):
    r = request(f"{server.url}/v1/feedback", "POST", body, {"Content-Type": "application/json"})
    assert r.status == 400 and field in r.json()["error"]
    assert count(server, "SELECT count(*) FROM evaluations") == 0


def test_a_negative_feedback_queues_the_run_and_review_works_through_the_server(server):
    spans = run_spans("happy")
    chats = [s for s in spans if s.name.startswith("chat")]
    answered = dataclasses.replace(
        chats[-1], attributes={**chats[-1].attributes, c.OUTPUT_MESSAGES: json.dumps(ANSWER)}
    )
    spans = [answered if s is chats[-1] else s for s in spans]
    assert post_otlp(server.url, otlp_json(spans)).status == 200
    client = ServerClient(server.url)
    trace = spans[0].trace_id
    assert client.review_items() == []
    assert "warning" not in client.feedback({"trace_id": trace, "score": 0})  # a run the ledger has
    typo = trace[:8] + "0" * 24  # #31: feedback for no run is kept, but says so and names the near run
    assert f"did you mean {trace}?" in client.feedback({"trace_id": typo, "score": 1})["warning"]
    (item,) = client.review_items()
    assert item["reason"] == "negative_feedback"
    with pytest.raises(InputError, match="tag"):
        client.review_tag(trace, ["nonsense"])
    client.review_tag(trace, ["unhelpful_tone"], reviewer="ana")
    closed = client.review_close(trace)
    assert closed["status"] == "closed" and closed["tags"] == ["unhelpful_tone"]
    assert client.review_items(status="open") == []
    # the case: the run's last model call, its request as sent and the answer as given
    (case,) = client.cases("unhelpful_tone")
    assert (case["span_id"], case["turn"]) == (answered.span_id, "last_call")
    assert case["request"] == json.loads(answered.attributes[c.REQUEST_BODY])
    assert case["response"] == ANSWER and case["reason"] == "negative_feedback"
