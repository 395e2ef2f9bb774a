"""The Health page (AppTest) and the run explorer's lookup by conversation id, on the sample ledger.

Expected values are ``ledger.queries`` run straight on the file (the ``rows``
fixture), never the dashboard's own loaders.
"""

from __future__ import annotations

from ledger import queries as q
from ledger.wording import duration

from .test_pages import app, figures, metrics, table, values  # noqa: F401  (app is a fixture)


def test_health_page_shows_the_ledgers_latency_errors_and_tools(app, sample_db, rows):  # noqa: F811
    at = app(sample_db, "health")
    run = rows(sample_db, q.run_latency()).to_dict("records")[0]
    calls = rows(sample_db, q.model_call_latency()).to_dict("records")[0]
    errors = rows(sample_db, q.error_rates()).to_dict("records")[0]
    shown = metrics(at)
    assert shown["Run p50"][0] == duration(run["p50_ms"])
    assert shown["Run p99"][0] == duration(run["p99_ms"])
    assert shown["Model call p99"][0] == duration(calls["p99_ms"])
    assert shown["Model-call error rate"] == (
        f"{errors['error_rate']:.1%}",
        f"{errors['failed']} of {errors['attempts']} attempts",
    )

    charts = figures(at)
    bars = {trace["name"]: values(trace["y"]) for trace in charts["Latency percentiles (nearest rank)"]["data"]}
    assert bars["p99"] == [run["p99_ms"], calls["p99_ms"]]  # no streamed call: no first-token bar
    causes = charts["Failed model-call attempts by cause"]
    assert causes["layout"]["xaxis"]["title"]["text"] == "Failed attempts"
    want = rows(sample_db, q.error_causes()).groupby("cause")["recovered"].sum().to_dict()
    recovered = next(t for t in causes["data"] if t["name"] == "recovered by a retry")
    assert dict(zip(recovered["y"], values(recovered["x"]), strict=True)) == want

    tools = table(at, "tool", "failure_rate")
    expected = rows(sample_db, q.tool_health())
    assert tools[["tool", "calls", "failures"]].to_dict("records") == expected[["tool", "calls", "failures"]].to_dict(
        "records"
    )
    assert tools.set_index("tool").loc["search_docs", "soft_failures"] == 5  # retry_and_loop's "0 results"


def test_health_page_follows_the_sidebar_filters(app, sample_db, rows):  # noqa: F811
    f = q.Filters(tenant="globex")
    at = app(sample_db, "health", tenant="globex")
    run = rows(sample_db, q.run_latency(f)).to_dict("records")[0]
    assert metrics(at)["Run p99"][0] == duration(run["p99_ms"])
    assert table(at, "tool", "failure_rate")["tool"].tolist() == rows(sample_db, q.tool_health(f))["tool"].tolist()


def test_run_explorer_opens_a_run_from_its_conversation_id(app, sample_db):  # noqa: F811
    at = app(sample_db, "run_explorer", trace="conv-five-turn-run")
    assert metrics(at)["Run cost"][0] == "$0.0997"
    assert table(at, "turn", "cumulative_usd")["usd"].round(4).tolist() == [0.0427, 0.0149, 0.0123, 0.0150, 0.0147]
    nothing = app(sample_db, "run_explorer", trace="conv-nobody")
    assert next(i.value for i in nothing.info).startswith("No run matches")
