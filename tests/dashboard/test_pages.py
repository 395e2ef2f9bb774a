"""Every page through Streamlit's AppTest, on real ledgers: the figures shown are the ledger's.

Expected values come from ``ledger.queries`` run directly on the file (the
``rows`` fixture) and from the seed worked examples, never from the
dashboard's own loaders.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from dashboard.data import CACHE_TTL_S
from dashboard.ui import pct, usd
from ledger import queries as q
from ledger.content import load_context, load_response
from ledger.pricing import GENAI_PRICES_VERSION
from ledger.store import open_ledger
from ledger.turn_diff import payload_json

from .conftest import CACHE_BREAK, FIVE_TURN
from .scenarios import CLOCK_AFTER, CLOCK_BEFORE

APP = Path(__file__).resolve().parents[2] / "dashboard" / "app.py"
RETRY_RUN = "e75d8bc5a27f11b433ccb1283df48b52"


@pytest.fixture
def app(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``app(db, page=None, **query_params)``: the dashboard on ``db``, run once, on that page."""
    monkeypatch.delenv("TURNLEDGER_SERVER", raising=False)
    monkeypatch.delenv("TURNLEDGER_PRICES", raising=False)

    def _app(db: Path, page: str | None = None, **params: str) -> AppTest:
        monkeypatch.setenv("TURNLEDGER_DB", str(db))
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.query_params.update(params)
        if page:  # url paths equal the file names, so the page can be chosen before the first run
            at.switch_page(f"views/{page}.py")
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    return _app


def metrics(at: AppTest) -> dict[str, tuple[str, str]]:
    return {m.label: (m.value, m.proto.delta) for m in at.metric}


def figures(at: AppTest) -> dict[str, dict[str, Any]]:
    """Plotly figures by title, as the browser receives them."""
    out = {}
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out[spec["layout"]["title"]["text"]] = spec
    return out


def values(v: Any) -> list[Any]:
    """A plotly array: a plain list, or the typed base64 form plotly.py 6+ sends."""
    if isinstance(v, dict) and "bdata" in v:
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"])).tolist()
    return list(v)


def first(df: pd.DataFrame) -> dict[str, Any]:
    return df.to_dict("records")[0]


def waterfall(at: AppTest) -> list[tuple[str, dict[str, str], list[str]]]:
    """The trace waterfall's spans: (expander label, timing and figures, arguments/result shown)."""
    out = []
    for exp in at.expander:
        if not re.match(r"^(↳ )*\d+\. ", exp.label):
            continue
        (details,) = [d.value for d in exp.dataframe]
        shown = [c.value for c in exp.code] + [j.value for j in exp.json]
        out.append((exp.label, details["value"].to_dict(), shown))
    return out


def table(at: AppTest, *columns: str) -> pd.DataFrame:
    """The dataframe shown that has these columns."""
    for df in at.dataframe:
        if set(columns) <= set(df.value.columns):
            return df.value
    raise AssertionError(f"no table with columns {columns}: {[list(d.value.columns) for d in at.dataframe]}")


# --- 1. Spend overview ---------------------------------------------------------------------------
def test_overview_headline_numbers_are_the_ledgers(app, sample_db, rows):
    at = app(sample_db)
    cost = first(rows(sample_db, q.cost_per_run()))
    success = first(rows(sample_db, q.cost_per_successful_run()))
    cache = first(rows(sample_db, q.cache_hit_rate()))
    guards = first(rows(sample_db, q.guard_summary()))
    retry = rows(sample_db, q.retry_charges())
    shown = metrics(at)
    assert shown["Runs"][0] == str(cost["runs"]) == "10"
    assert shown["Total spend"][0] == usd(cost["total_usd"]) == "$11.56"
    assert shown["Median cost per run"][0] == usd(cost["median_usd"]) == "$0.0997"  # seed: the five-turn run
    assert shown["p95 cost per run"][0] == usd(cost["p95_usd"]) == "$9.93"  # seed: a93
    assert shown["p99 cost per run"][0] == usd(cost["p99_usd"])
    assert shown["Most expensive run"][0] == usd(cost["max_usd"])
    assert shown["Cost per successful run"][0] == usd(success["usd_per_successful_run"]) == "$1.44"
    assert shown["Cache hit rate"] == (pct(cache["hit_rate"]), cache["verdict"]) == ("4.0%", "broken")
    assert shown["Retry charges (answered)"][0] == usd(retry["usd"].sum()) == "$0.0050"
    assert shown["Retry charges (answered)"][1] == f"{pct(retry['share_of_spend'].sum(), 2)} of spend"
    # Two reported by the retry run's loop detector, three found in the long-tail runs' spans.
    assert shown["Loop-detector trips"][0] == str(int(guards["loop_trips"])) == "5"
    assert shown["Step-cap stops"][0] == pct(guards["step_cap_rate"]) == "10.0%"
    assert shown["Budget stops"][0] == pct(guards["budget_stop_rate"]) == "0.0%"
    assert shown["Unpriced calls"][0] == "1"
    assert shown["Incomplete usage"][0] == str(int(guards["incomplete_usage_calls"])) == "0"
    assert all(m.proto.help for m in at.metric), "every headline number has its definition on hover"


def test_overview_charts_carry_the_ledgers_figures(app, sample_db, rows):
    figs = figures(app(sample_db))
    assert set(figs) == {
        "Spend per hour, by model", "Cost per run", "Spend per model, split by price term",
        "Spend per call site", "Why runs stopped",
    }  # fmt: skip
    over_time = figs["Spend per hour, by model"]
    assert sum(sum(values(t["y"])) for t in over_time["data"]) == pytest.approx(11.5577)
    assert over_time["layout"]["yaxis"]["title"]["text"] == "Spend (USD)"

    dist = figs["Cost per run"]
    assert dist["layout"]["xaxis"]["type"] == "log"
    assert [t["name"] for t in dist["data"]] == ["runs", "median $0.0997", "p95 $9.93"]
    assert sum(values(dist["data"][0]["y"])) == 9  # the $0 unpriced run cannot sit on a log axis

    terms = figs["Spend per model, split by price term"]
    attribution = rows(sample_db, q.model_attribution()).set_index("model")
    assert [t["name"] for t in terms["data"]] == [
        "uncached input", "output", "cache write", "cache read", "cache write (1 h)",
    ]  # fmt: skip
    opus = {t["name"]: dict(zip(values(t["y"]), values(t["x"]), strict=True))["claude-opus-5"] for t in terms["data"]}
    assert opus == pytest.approx(
        {"uncached input": attribution.loc["claude-opus-5", "usd_input"], "output": attribution.loc["claude-opus-5", "usd_output"],
         "cache write": attribution.loc["claude-opus-5", "usd_cache_write"], "cache read": attribution.loc["claude-opus-5", "usd_cache_read"],
         "cache write (1 h)": attribution.loc["claude-opus-5", "usd_cache_write_1h"]}
    )  # fmt: skip
    assert "mystery-model-1 (UNPRICED)" in values(terms["data"][0]["y"])

    stops = figs["Why runs stopped"]["data"][0]
    assert dict(zip(values(stops["y"]), values(stops["x"]), strict=True)) == {
        "completed": 8,
        "max_steps": 1,
        "loop_detected": 1,
    }
    sites = figs["Spend per call site"]["data"][0]
    assert values(sites["y"]) == ["agent"] and values(sites["x"]) == pytest.approx([11.5577])


def test_overview_follows_the_sidebar_filters(app, sample_db, rows):
    at = app(sample_db)
    assert at.sidebar.selectbox(key="f_tenant").options == ["All", "acme", "globex", "initech"]
    # Set through session state: after a rerun AppTest drops st.navigation apps' sidebar
    # from its element tree (the browser test checks the real sidebar).
    at.session_state["f_tenant"] = "globex"
    at.run()
    globex = first(rows(sample_db, q.cost_per_run(q.Filters(tenant="globex"))))
    shown = metrics(at)
    assert shown["Runs"][0] == "3" and shown["Total spend"][0] == usd(globex["total_usd"]) == "$10.40"
    assert shown["Loop-detector trips"][0] == "3"  # globex's runs each repeat get_shipping_status
    at.session_state["f_range"] = "Last hour"  # the samples are from 2026-09-21
    at.run()
    assert not at.metric and "No runs match the filters" in at.info[0].value


def test_filters_live_in_the_url_so_a_copied_link_reopens_the_same_view(app, sample_db, rows):
    at = app(sample_db)
    at.session_state["f_tenant"] = "globex"
    at.session_state["f_range"] = "Custom dates"
    at.session_state["f_dates"] = (date(2026, 9, 20), date(2026, 9, 22))
    at.run()
    link = dict(at.query_params)
    assert {k: v[0] if isinstance(v, list) else v for k, v in link.items()} == {
        "tenant": "globex", "range": "custom", "from": "2026-09-20", "to": "2026-09-22",
    }  # fmt: skip
    # A new session opened on that link shows the same filtered figures.
    shared = app(sample_db, **{k: v[0] if isinstance(v, list) else v for k, v in link.items()})
    assert (shared.session_state["f_tenant"], shared.session_state["f_range"]) == ("globex", "Custom dates")
    f = q.Filters(tenant="globex", since=datetime(2026, 9, 20), until=datetime(2026, 9, 23))
    assert metrics(shared)["Total spend"][0] == usd(first(rows(sample_db, q.cost_per_run(f)))["total_usd"])
    assert metrics(shared)["Runs"][0] == "3"
    # Back to the defaults: nothing left in the link.
    shared.session_state["f_tenant"] = "All"
    shared.session_state["f_range"] = "All time"
    shared.run()
    assert not dict(shared.query_params)
    assert app(sample_db, range="bogus", **{"from": "not-a-date"}).session_state["f_range"] == "All time"


def test_empty_and_missing_ledgers_say_what_to_do(app, tmp_path):
    empty = tmp_path / "empty.duckdb"
    open_ledger(empty).close()
    at = app(empty)
    assert "no runs yet" in at.info[0].value and "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318" in at.info[0].value
    assert "turnledger ingest sample_traces/" in at.info[0].value
    at = app(tmp_path / "missing.duckdb")
    assert "no ledger at" in at.error[0].value and "turnledger ingest sample_traces/" in at.error[0].value


def test_a_ledger_held_by_a_collector_says_to_read_through_it(app, tmp_path):
    """A held file is not an empty one: the page says how to read through the server, not how to load samples."""
    import subprocess
    import sys

    held = tmp_path / "held.duckdb"
    open_ledger(held).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", f"import duckdb, sys; c = duckdb.connect({str(held)!r}); print('held', flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        at = app(held)
        (error,) = at.error
        assert "another process holds it" in error.value and "--server URL" in error.value
        assert not [i for i in at.info if "ingest sample_traces" in i.value]
    finally:
        holder.communicate("")


def test_a_run_below_the_models_cache_minimum_says_so_in_the_table_and_the_comparison(app, tmp_path):
    from ledger.ingest import ingest

    from .scenarios import below_minimum_run

    db = tmp_path / "below.duckdb"
    con = open_ledger(db)
    ingest(con, below_minimum_run())
    con.close()
    at = app(db, "run_explorer", trace=below_minimum_run()[0].trace_id)
    turns = table(at, "turn", "cache")
    assert turns["cache"].tolist() == ["below minimum", "below minimum"]
    assert "claude-opus-5 caches 512 or more" in turns["cache note"].iloc[1]
    assert "never used the prompt cache" in at.info[0].value
    comparison = " ".join(w.value for w in at.warning)
    assert "kept turn 1's prefix byte-for-byte" in comparison and "yet nothing was cached: prefix below" in comparison
    assert not [s for s in at.success if "cacheable" in s.value]


# --- 2. Long tail ---------------------------------------------------------------------------------
def test_long_tail_lists_the_expensive_runs_with_reasons(app, sample_db, rows):
    at = app(sample_db, "long_tail")
    want = rows(sample_db, q.long_tail(limit=20))
    want = want[want["times_median"] > 1]  # the runs at or below the median are not listed as expensive
    assert 0 < len(want) < 20
    shown = table(at, "why", "usd_total")
    assert shown["trace_id"].tolist() == want["trace_id"].tolist()
    assert shown["usd_total"].tolist() == pytest.approx(want["usd_total"].tolist())
    assert shown["why"].iloc[0].startswith("40 turns") and "step cap" in shown["why"].iloc[0]  # a93
    assert not shown["why"].str.startswith("not expensive").any()
    assert f"Only {len(want)} runs cost more than the median" in " ".join(c.value for c in at.caption)
    typical = first(rows(sample_db, q.typical_run()))
    assert metrics(at)["Spend in the tail"][0] == pct(typical["share_of_spend_from_p95"]) == "85.9%"

    figs = figures(at)
    turns = figs["Turns vs cost per run"]["data"]
    by_turns = rows(sample_db, q.cost_by_turns())
    assert values(turns[0]["x"]) == by_turns["turns"].tolist()
    assert values(turns[0]["y"]) == pytest.approx(by_turns["median_usd"].tolist())
    assert turns[2]["name"].startswith("fit: ")
    cumulative = figs["Cumulative cost per turn"]["data"]
    assert values(cumulative[0]["y"])[-1] == pytest.approx(9.93) and len(values(cumulative[0]["y"])) == 40


def test_long_tail_budget_line_comes_from_the_runs_budget_event(app, sample_db):
    at = app(sample_db, "long_tail")
    at.selectbox(key="tail_run").select("35bdd0c8ce66d31423d98455448ff3ab").run()
    lines = figures(at)["Cumulative cost per turn"]["data"]
    assert lines[1]["name"] == "limit (budget.warn) $1.00" and values(lines[1]["y"]) == [1.0, 1.0]
    assert values(lines[0]["y"]) == pytest.approx([0.82])


# --- 3. Run explorer --------------------------------------------------------------------------------
def test_run_explorer_shows_the_five_turn_run(app, sample_db, rows):
    at = app(sample_db, "run_explorer", trace=FIVE_TURN)
    shown = metrics(at)
    assert shown["Run cost"][0] == "$0.0997"
    assert shown["Cache hit rate"] == ("76.5%", "healthy")  # seed: 0.765
    turns = table(at, "turn", "cumulative_usd")
    assert turns["usd"].round(4).tolist() == [0.0427, 0.0149, 0.0123, 0.0150, 0.0147]  # seed per-turn costs
    assert turns["cumulative_usd"].iloc[-1] == pytest.approx(0.0997)
    assert turns["cache"].tolist() == ["written", "cached", "cached", "cached", "cached"]

    spans = waterfall(at)
    assert len(spans) == 9 and spans[0][0].startswith("1. agent run invoke_agent support-agent · at 0 ms for ")
    assert [d["cost"] for _, d, _ in spans if "cost" in d] == ["$0.0427", "$0.0149", "$0.0123", "$0.0150", "$0.0147"]
    assert all(label.startswith("↳ ") for label, _, _ in spans[1:])  # children indented under the run
    search = next(shown for _, d, shown in spans if d.get("tool") == "search_docs")
    assert any("rotate API key" in str(x) for x in search) and "38,059 chars" in search  # arguments and result
    assert "Trace waterfall" in [h.value for h in at.subheader]
    events = table(at, "event", "attributes")
    assert events["event"].tolist() == ["offload"]

    # The exact context of the default (last) turn and what the model answered, as text, equal to what is stored.
    con = open_ledger(sample_db, read_only=True)
    last = rows(sample_db, q.run_turns(FIVE_TURN))["span_id"].iloc[-1]
    want, answer = load_context(con, FIVE_TURN, last), load_response(con, FIVE_TURN, last)
    con.close()
    code = [c for c in at.code if c.language == "json"]
    assert [c.value for c in code] == [payload_json(want), payload_json(answer)]
    assert "[src:" in payload_json(answer)  # the cited final answer of turn 5
    parts = table(at, "part", "≈ tokens")
    assert parts["part"].tolist()[:4] == ["model", "max_tokens", "system", "tools[0]"]
    system_chars = len(json.dumps(want["system"], ensure_ascii=False, separators=(",", ":")))
    assert parts.set_index("part").loc["system", "≈ tokens"] == -(-system_chars // 4)  # ~chars / 4
    assert len(parts) == 2 + 1 + len(want["tools"]) + len(want["messages"])
    assert at.get("download_button")
    assert "kept turn 4's prefix byte-for-byte" in at.success[0].value


def test_run_explorer_flags_the_turn_where_the_cache_broke_and_names_the_invalidator(app, extended_db):
    at = app(extended_db, "run_explorer", trace=CACHE_BREAK)
    assert "cache broke on turn 3" in at.warning[0].value
    turns = table(at, "turn", "cache")
    assert turns["cache"].tolist() == ["written", "cached", "broken"]
    assert "6,300 re-billed" in turns["cache note"].iloc[2]
    assert turns["cache note"].iloc[2].startswith("broken by system[0].text: text differs from character")
    assert at.selectbox(key=f"ctx_turn_{CACHE_BREAK}").value == 3  # opens on the broken turn
    assert "First change inside the stable prefix between turn 2 and turn 3" in at.error[0].value
    finding = next(c.value for c in at.code if c.value.startswith("where:"))
    assert "system[0].text" in finding and "14:20:00" in finding and "14:25:00" in finding
    assert CLOCK_BEFORE[:10] in finding and CLOCK_AFTER[-10:] in finding


def test_run_explorer_shows_guard_events_and_retry_charges(app, sample_db):
    at = app(sample_db, "run_explorer", trace=RETRY_RUN[:10])
    assert metrics(at)["Run cost"][0] == "$0.0335"
    events = table(at, "event", "attributes")
    assert events["event"].tolist() == ["retry", "loop trip", "loop trip"]
    assert events["action"].tolist()[1:] == ["nudge", "halt"]
    attempts = table(at, "attempt", "retry_cause")
    assert attempts["billed"].tolist() == ["$0: failed, not billed", usd(0.00495)]  # a failed attempt's $0, said why
    spans = waterfall(at)
    assert sum(label.endswith("· soft failure") for label, _, _ in spans) == 5
    assert any("0 results" in text for _, _, shown in spans for text in shown)  # a tool's result beside its timing


def test_run_explorer_finds_runs_by_cost_and_stop_cause(app, sample_db):
    at = app(sample_db, "run_explorer")
    at.selectbox(key="find_cause").select("max_steps").run()
    found = table(at, "trace_id", "usd_total", "soft_failures")
    assert found["trace_id"].tolist() == ["b70f36bc38254433cfd5faee14c1b6a5"]
    assert metrics(at)["Agent turns"][0] == "40"
    assert "never used the prompt cache" in at.info[0].value
    # The sample now carries its payloads (#14): each turn says why it was not cached.
    assert not [i for i in at.info if "recorded without its request payload" in i.value]
    assert set(table(at, "turn", "cache")["cache"]) == {"no breakpoint"}


# --- 4. Guards ---------------------------------------------------------------------------------------
def test_guards_page_shows_loop_and_retry_figures(app, sample_db, rows):
    at = app(sample_db, "guards")
    loops = first(rows(sample_db, q.loop_spend()))
    retry = first(rows(sample_db, q.charge_totals()))
    shown = metrics(at)
    assert shown["Loop-detector trips"][0] == "5" and shown["Runs that looped"][0] == "4"
    assert shown["Spent inside loops"][0] == usd(loops["loop_usd"]) == "$9.76"
    assert shown["Spend of looping runs"][0] == usd(loops["spend_in_affected_runs"]) == "$10.44"
    assert shown["Retried attempts"][0] == "1" and shown["Retry charges (answered)"][0] == usd(retry["retry_usd"])
    loop_runs = table(at, "repeated_calls", "loop_usd")
    assert loop_runs[["tool", "actions", "trips", "repeated_calls"]].values.tolist() == [
        ["get_shipping_status", "detected", 1, 39], ["get_shipping_status", "detected", 1, 5],
        ["get_shipping_status", "detected", 1, 4], ["search_docs", "halt, nudge", 2, 5],
    ]  # fmt: skip
    figs = figures(at)
    trips = {t["name"]: values(t["y"]) for t in figs["Loop-detector trips per hour"]["data"]}
    assert trips == {"repeat · get_shipping_status": [1, 1, 1], "repeat · search_docs": [2]}
    causes = figs["Retry charges by cause"]["data"][0]
    assert values(causes["y"]) == ["429"] and values(causes["x"]) == pytest.approx([0.00495])


# --- 5. Budgets & alerts ---------------------------------------------------------------------------
def test_budgets_page_explains_itself_while_no_budget_exists(app, sample_db):
    at = app(sample_db, "budgets")
    assert "No budgets yet" in at.info[0].value and "turnledger budget add" in at.info[0].value
    assert "ships" not in at.info[0].value  # the feature exists: the page says how to use it
    events = table(at, "spent", "limit", "fraction")
    assert events[["level", "spent", "limit", "fraction"]].values.tolist() == [["warn", "$0.8200", "$1.00", 0.82]]


def test_budgets_page_lists_budgets_and_alerts(app, sample_db, tmp_path):
    db = tmp_path / "budgets.duckdb"
    shutil.copy(sample_db, db)
    con = open_ledger(db)
    con.execute(
        "INSERT INTO budgets (id, name, scope_kind, scope_value, time_window, metric, limit_value, soft_fraction, created_at) "
        "VALUES ('b1', 'acme monthly', 'tenant', 'acme', 'month', 'spend', 100, 0.8, now()),"
        "       ('b2', 'cache floor', 'global', NULL, 'day', 'cache_hit_rate', 0.5, 0.8, now())"
    )
    # One evaluation that crosses both lines records warn and exceeded at the same instant.
    con.execute(
        "INSERT INTO alerts (id, budget_id, level, fired_at, value, figures) VALUES ('a0', 'b1', 'warn', "
        'TIMESTAMP \'2026-11-30 10:00\', 130, \'{"level_now": "exceeded", "figures": {"spend": "130", "charges": 1204}}\'),'
        " ('a1', 'b1', 'exceeded', TIMESTAMP '2026-11-30 10:00', 130, NULL),"
        " ('a2', 'b2', 'warn', TIMESTAMP '2026-11-30 09:00', 0.42, NULL)"
    )
    # A target that failed its last 5 attempts (its circuit is open) and one that is fine.
    now = datetime.now(UTC).replace(tzinfo=None)
    for n in range(1, 6):
        con.execute(
            "INSERT INTO alert_deliveries (alert_id, attempt, target, attempted_at, status, detail) VALUES "
            "('a0', ?, 'json:http://down.example/hook#1', ?, 'retrying', 'no answer within 5s'), "
            "('a1', ?, 'json:http://up.example/hook#2', ?, ?, 'HTTP 200')",
            [
                n,
                now - timedelta(seconds=6 - n),
                n,
                now - timedelta(seconds=6 - n),
                "delivered" if n == 5 else "retrying",
            ],
        )
    con.close()
    at = app(db, "budgets")
    targets = table(at, "state", "target", "failures_in_a_row").set_index("target")
    assert targets.loc["json:http://down.example/hook#1", ["state", "failures_in_a_row"]].tolist() == ["open", 5]
    assert targets.loc["json:http://up.example/hook#2", ["state", "failures_in_a_row"]].tolist() == ["closed", 0]
    budgets = table(at, "value", "limit", "used", "burn_rate")
    by_name = budgets.set_index("name")
    assert by_name.loc["acme monthly", ["limit", "last_level", "alerts"]].tolist() == ["$100.00", "exceeded", 2]
    assert by_name.loc["acme monthly", "value"] == "$0.00"  # no acme spend this calendar month: the samples are older
    # A rate is never shown as money, and in the same format as the alert table (and `budget list`).
    assert by_name.loc["cache floor", "limit"] == "50.0%"
    assert pd.isna(by_name.loc["cache floor", "used"])  # a floor is not "used up"
    alerts = table(at, "fired_at", "level", "budget")
    assert sorted(alerts[["budget", "level", "value", "limit"]].values.tolist()) == [
        ["acme monthly", "exceeded", "$130.00", "$100.00"],
        ["acme monthly", "warn", "$130.00", "$100.00"],
        ["cache floor", "warn", "42.0%", "50.0%"],
    ]
    # The figures an alert recorded, in words and units, not raw JSON.
    assert "level then: exceeded; spend: $130.00; charges: 1,204" in alerts["figures"].tolist()


# --- 6. Models & prices ------------------------------------------------------------------------------
def test_models_page_shows_the_price_book_and_unpriced_models(app, sample_db, rows):
    from ledger.pricing import PriceBook

    at = app(sample_db, "models")
    shown = metrics(at)
    assert shown["genai-prices version"][0] == GENAI_PRICES_VERSION
    assert shown["Override entries"][0] == str(len(PriceBook.default().override_rows()))
    assert "1 model(s) have no price" in at.error[0].value
    unpriced = table(at, "provider", "model", "calls", "runs")
    assert unpriced[["provider", "model", "calls"]].values.tolist() == [["someprovider", "mystery-model-1", 1]]
    applied = table(at, "price_source", "price_version")
    pd.testing.assert_frame_equal(applied.reset_index(drop=True), rows(sample_db, q.price_sources()), check_dtype=False)
    units = table(at, "input", "cache_read").set_index("model")
    assert units.loc["claude-opus-5", ["input", "output", "cache_write", "cache_read"]].tolist() == pytest.approx(
        [5, 25, 6.25, 0.5]
    )
    assert units.loc["mystery-model-1", "source"] == "UNPRICED"


# --- live data and the server ----------------------------------------------------------------------
def test_refresh_reads_spans_that_arrived_since(app, sample_db, tmp_path):
    """Results are cached per refresh generation; Refresh (browser test) bumps it."""
    from collector.demo.samples import Trace
    from ledger.ingest import ingest
    from ledger.sources import FileSource

    db = tmp_path / "live.duckdb"
    shutil.copy(sample_db, db)
    at = app(db)
    cached_at = time.monotonic()
    assert metrics(at)["Runs"][0] == "10"
    assert at.sidebar.button[0].label == "Refresh" and at.sidebar.toggle[0].label == "Auto-refresh"
    FileSource(db).close()  # hand the file to the writer now rather than after the idle delay
    con = open_ledger(db)
    t = Trace("arrived-later", tenant="acme")
    t.chat("claude-opus-5", (1_000, 0, 0, 100), finish="end_turn")
    ingest(con, t.finish("completed"))
    con.close()
    at.run()
    if time.monotonic() - cached_at < CACHE_TTL_S - 1:  # on a loaded machine the entries may have expired
        assert metrics(at)["Runs"][0] == "10"  # still the cached figures...
    # ...until Refresh bumps the generation. (AppTest re-runs only the page script after the
    # first run of an st.navigation app, so the sidebar button itself is clicked in the browser test.)
    at.session_state["tl_generation"] = 1
    at.run()
    assert metrics(at)["Runs"][0] == "11"


def test_pages_read_through_a_running_server(app, sample_db, tmp_path, monkeypatch, rows):
    from collector.receiver import CollectorServer, ServerConfig

    served = tmp_path / "served.duckdb"
    shutil.copy(sample_db, served)
    server = CollectorServer(ServerConfig(port=0, db=served)).start()
    try:
        monkeypatch.setenv("TURNLEDGER_SERVER", server.url)
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        assert f"server {server.url}" in at.sidebar.text[0].value
        shown = metrics(at)
        assert shown["Total spend"][0] == "$11.56" and shown["Median cost per run"][0] == "$0.0997"
        at.session_state["f_tenant"] = "globex"
        at.run()
        assert metrics(at)["Runs"][0] == "3"
        at.session_state["f_tenant"] = "All"
        at.query_params["trace"] = FIVE_TURN
        at.switch_page("views/run_explorer.py").run()
        assert metrics(at)["Cache hit rate"] == ("76.5%", "healthy")
        turns = table(at, "turn", "cumulative_usd")
        assert turns["usd"].round(4).tolist() == [0.0427, 0.0149, 0.0123, 0.0150, 0.0147]
        assert any(c.language == "json" and "rotate an API key" in c.value for c in at.code)
    finally:
        server.stop()


# --- 1-hour cache writes (issue #12) ------------------------------------------------------------------
@pytest.fixture
def one_hour_db(tmp_path: Path) -> tuple[Path, str]:
    """One call of issue #12's worked example, its 6,100 cache-write tokens written for 1 hour."""
    from ledger import conventions as c
    from ledger.ingest import ingest
    from ledger.spans import SpanRecord

    attrs = {
        c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-4-6",
        c.INPUT_TOKENS: 6_141, c.OUTPUT_TOKENS: 67, c.CACHE_CREATION_INPUT_TOKENS: 6_100,
        c.CACHE_CREATION_1H_INPUT_TOKENS: 6_100, c.CACHE_CREATION_5M_INPUT_TOKENS: 0,
    }  # fmt: skip
    start = 1_780_000_000 * 10**9
    span = SpanRecord("ab" * 16, "cd" * 8, "chat claude-sonnet-4-6", start, start + 10**9, attributes=attrs,
                      scope_name="turnledger.harness")  # fmt: skip
    path = tmp_path / "one_hour.duckdb"
    with open_ledger(path) as con:
        ingest(con, [span])
    return path, span.trace_id


def test_pages_show_the_1_hour_cache_write_term(app, one_hour_db):
    db, trace_id = one_hour_db
    at = app(db)
    models = table(at, "model", "usd_cache_write_1h")
    assert models["usd_cache_write_1h"].tolist() == pytest.approx([0.0366])
    assert models["usd_total"].tolist() == pytest.approx([0.037728])
    terms = figures(at)["Spend per model, split by price term"]
    assert "cache write (1 h)" in [t["name"] for t in terms["data"]]

    at = app(db, "run_explorer", trace=trace_id)
    turns = table(at, "turn", "cumulative_usd")
    assert (turns["cache_write_tokens"].tolist(), turns["cache_write_1h_tokens"].tolist()) == ([0], [6_100])
    calls = [d for _, d, _ in waterfall(at) if "input tokens" in d]
    assert [d["input tokens"] for d in calls] == ["6,141"]  # every input-side term, the 1-hour writes included

    at = app(db, "models")
    units = table(at, "input", "cache_write_1h").set_index("model")
    assert units.loc["claude-sonnet-4-6", ["input", "cache_write", "cache_write_1h"]].tolist() == pytest.approx(
        [3, 3.75, 6]
    )


def test_a_step_cap_halt_is_not_counted_as_a_loop_detector_trip(app, sample_db, tmp_path):
    from collector.otlp import read_file
    from ledger.ingest import ingest

    from .test_step_cap_halts import STEP_CAPPED

    db = tmp_path / "step_cap.duckdb"
    shutil.copy(sample_db, db)
    con = open_ledger(db)
    ingest(con, read_file(STEP_CAPPED))  # a run stopped by max_steps: one `step_cap · halt` event
    con.close()
    shown = metrics(app(db, "guards"))
    # The samples' five loop trips only (two reported, three detected); the halt is counted apart,
    # beside the long-tail run stopped at max_steps.
    assert shown["Loop-detector trips"] == ("5", "+ 2 step-cap halts")
    assert shown["Runs that looped"][0] == "4"
    trace_id = read_file(STEP_CAPPED)[0].trace_id
    at = app(db, "run_explorer", trace=trace_id)
    shown = metrics(at)
    assert (shown["Loop-detector trips"][0], shown["Step-cap halts"][0]) == ("0", "1")
    assert table(at, "event", "attributes")["event"].tolist() == ["step-cap halt"]


@pytest.mark.parametrize("page", ["models", "budgets", "overview", "long_tail", "guards", "run_explorer"])
def test_a_filter_that_matches_nothing_says_so(app, sample_db, page):
    at = app(
        sample_db, None if page == "overview" else page, range="custom", **{"from": "2020-01-01", "to": "2020-01-02"}
    )
    assert any("No runs match the filters" in i.value for i in at.info), [i.value for i in at.info]


def test_token_budget_events_show_tokens_spent_against_the_limit(app, sample_db, tmp_path):
    from collector.otlp import read_file
    from ledger.ingest import ingest

    db = tmp_path / "tokens.duckdb"
    shutil.copy(sample_db, db)
    con = open_ledger(db)
    ingest(con, read_file(Path(__file__).resolve().parents[2] / "sample_traces" / "harness" / "budget_burner.json"))
    con.close()
    events = table(app(db, "budgets"), "spent", "limit", "fraction")
    tokens = events[events["spent"].str.endswith("tokens")]
    assert not tokens.empty and tokens["limit"].str.endswith(" tokens").all()
    assert "None" not in events.astype(str).to_numpy().ravel().tolist()


def test_a_hostile_span_name_never_reaches_a_waterfall_label(app, extended_db):
    from .conftest import HOSTILE

    at = app(extended_db, "run_explorer", trace=HOSTILE)
    labels = [label for label, _, _ in waterfall(at)]
    assert labels and not [x for x in labels if any(ch in x for ch in "<>[]()!:*`")]  # our words and numbers only


def test_a_budget_scope_no_run_has_is_added_with_a_warning(app, sample_db, tmp_path):
    """A rule may come before its first run, but a typo is likelier: the page says which values exist."""
    db = tmp_path / "budgets.duckdb"
    shutil.copy(sample_db, db)
    at = app(db, "budgets")
    at.text_input(key="budget_add_name").input("acme-day")
    at.text_input(key="budget_add_scope").input("tenant=ACME")
    at.number_input(key="budget_add_limit_spend").set_value(5.0)
    next(b for b in at.button if b.label == "Add budget").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "Budget added." in [s.value for s in at.success]
    assert [w.value for w in at.warning] == ["Its scope names nothing seen yet: a typo?"]
    assert any("did you mean 'acme'?" in t.value for t in at.text)


def test_budgets_are_managed_through_the_server_the_page_reads_from(sample_db, tmp_path, monkeypatch):
    """While `turnledger serve` owns the file, the page's changes go through its budget routes."""
    from collector.client import ServerClient
    from collector.receiver import CollectorServer, ServerConfig

    served = tmp_path / "served.duckdb"
    shutil.copy(sample_db, served)
    server = CollectorServer(ServerConfig(port=0, db=served)).start()
    try:
        monkeypatch.setenv("TURNLEDGER_SERVER", server.url)
        client = ServerClient(server.url)
        at = AppTest.from_file(str(APP), default_timeout=60)
        at.switch_page("views/budgets.py")
        at.run()
        at.selectbox(key="budget_add_metric").select("cache_hit_rate").run()
        at.text_input(key="budget_add_name").input("cache-floor")
        at.number_input(key="budget_add_limit_cache_hit_rate").set_value(40.0)  # typed as a percentage
        next(b for b in at.button if b.label == "Add budget").click().run()
        assert not at.exception, [e.value for e in at.exception]
        (rule,) = client.budgets()
        assert (rule["name"], rule["metric"], rule["limit"], rule["enabled"]) == (
            "cache-floor",
            "cache_hit_rate",
            "0.4",
            True,
        )
        assert "Budget added." in [s.value for s in at.success]
        shown = table(at, "burn_rate", "limit").set_index("name")
        assert shown.loc["cache-floor", "limit"] == "40.0%"

        at.toggle(key=f"budget_edit_on_{rule['id']}").set_value(False)
        next(b for b in at.button if b.label == "Save changes").click().run()
        (rule,) = client.budgets()
        assert rule["enabled"] is False and rule["limit"] == "0.4"
        assert table(at, "burn_rate", "limit").set_index("name").loc["cache-floor", "level"] == "disabled"

        next(b for b in at.button if b.label == "Remove rule").click().run()
        assert client.budgets() and at.warning  # not without the confirmation
        at.checkbox(key=f"budget_edit_confirm_{rule['id']}").check()
        next(b for b in at.button if b.label == "Remove rule").click().run()
        assert client.budgets() == []
    finally:
        server.stop()
