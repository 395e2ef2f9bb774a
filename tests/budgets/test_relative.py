"""Baseline-relative rules (issue 16): a candidate version against the baseline serving beside it.

The Must-show: the error-rate kill criterion, added with ``turnledger budget add … --server`` to the
real collector (built as ``turnledger serve`` builds it), fires exactly once when the candidate's
error rate crosses twice the concurrently serving baseline's, not before ``--min-runs``, and the
webhook body (the real delivery, to a local receiver) names both versions and the rollback text.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from collector.cli import main
from collector.cli.serve import build_server
from collector.demo.samples import Trace
from collector.receiver import ServerConfig
from ledger import compare_stats
from ledger import conventions as c
from ledger.budgets import Governor, list_alerts
from ledger.budgets.evaluate import evaluate
from ledger.budgets.relative import RELATIVE_METRICS, TEMPLATES, Relative, Version
from ledger.budgets.rules import Rule, Scope
from ledger.budgets.store import get_rule
from ledger.errors import InputError
from ledger.ingest import ingest
from ledger.spans import SpanRecord
from tests.dashboard.test_pages import app  # noqa: F401  (a fixture)

from .conftest import ns, post_spans

_keys = itertools.count()
ROLLBACK = "kubectl rollout undo deployment/support-agent --to-revision=41"


def runs(version: str, n: int, errors: int, *, at: datetime, usd_tokens: int = 1_000) -> list[SpanRecord]:
    """``n`` finished runs of a prompt version, the first ``errors`` of them ending in error."""
    spans: list[SpanRecord] = []
    for i in range(n):
        t = Trace(f"rel-{next(_keys)}", start=ns(at - timedelta(minutes=30)), root_attrs={c.PROMPT_VERSION: version})
        t.chat("claude-haiku-4-5", (usd_tokens, 0, 0, 50), finish="end_turn")
        spans += t.finish("error", status="ERROR") if i < errors else t.finish("completed")
    return spans


@pytest.fixture
def collector(tmp_path, clock, receiver):
    governor = Governor(clock=clock)
    server = build_server(ServerConfig(port=0, db=tmp_path / "ledger.duckdb"), governor=governor, sweep_interval=0)
    server.start()
    yield server
    server.stop()


def test_the_error_rate_kill_criterion_fires_once_past_twice_the_baseline_not_before_min_runs(
    collector, clock, receiver, capsys
) -> None:  # type: ignore[no-untyped-def]
    code = main(["budget", "add", "v7-errors", "--template", "error-rate", "--candidate", "prompt_version=v7",
                 "--baseline", "prompt_version=v6", "--min-runs", "50", "--window", "rolling_hour",
                 "--rollback", ROLLBACK, "--webhook", receiver.url + "/hook", "--server", collector.url])  # fmt: skip
    assert code == 0
    assert "error_rate of prompt_version=v7 > 2x baseline prompt_version=v6" in capsys.readouterr().out

    def export(*batches: list[SpanRecord]) -> list[dict]:  # type: ignore[type-arg]
        assert post_spans(collector.url, [s for b in batches for s in b]).status == 200
        assert collector.writer.drained(30)
        return list_alerts(collector.con.cursor(), budget="v7-errors")

    now = clock()
    # 40 runs each: the candidate errs three times as often, but neither version has 50 runs yet.
    assert export(runs("v6", 40, 4, at=now), runs("v7", 40, 12, at=now)) == []
    # 60 each: 20% against 10%, exactly twice the baseline, not above it.
    assert export(runs("v6", 20, 2, at=now), runs("v7", 20, 0, at=now)) == []
    # 70 candidate runs, 15 errors: 21.4% > 2 x 10%.
    (alert,) = export(runs("v7", 10, 3, at=now))
    assert alert["level"] == "exceeded"
    # Still above: the episode is open, nothing fires again.
    assert len(export(runs("v7", 10, 2, at=now))) == 1

    (post,) = receiver.wait_for("/hook", 1)
    body = post.body
    assert body["level"] == "exceeded" and body["rule"]["relative"]["rollback"] == ROLLBACK
    figures = body["figures"]["figures"]  # the evaluation's own figures, beside its value and level
    assert figures["candidate"] == {"version": "prompt_version=v7", "runs": 70, "value": "0.2142857143"}
    assert figures["baseline"] == {"version": "prompt_version=v6", "runs": 60, "value": "0.1", "is": "baseline"}
    assert figures["min_runs"] == 50 and figures["factor"] == "2"
    assert "prompt_version=v7" in body["text"] and "prompt_version=v6" in body["text"]
    assert body["text"].endswith(f"Roll back: {ROLLBACK}")
    assert len(receiver.wait_for("/hook", 2, timeout=0.5)) == 1  # exactly one delivery


def _rule(metric: str, factor: str, **relative: object) -> Rule:
    versions = {"candidate": Version("prompt_version", "v7"), "baseline": Version("prompt_version", "v6")}
    return Rule(
        "b_rel", "rel", Scope(), "rolling_hour", Decimal(factor), metric, relative=Relative(**(versions | relative))
    )  # type: ignore[arg-type]


def test_cost_per_hour_against_its_forecast_and_a_floor_metric(ledger, clock) -> None:  # type: ignore[no-untyped-def]
    now = clock()
    ingest(ledger, runs("v6", 30, 0, at=now, usd_tokens=1_000) + runs("v7", 30, 0, at=now, usd_tokens=4_000))
    cost = _rule("cost_per_hour", "3", to="forecast")
    ev = evaluate(ledger, cost, now)
    # The candidate's runs cost 3.4x what they would have at the baseline's cost per run ($0.00425 vs $0.00125).
    assert (ev.level, ev.value) == ("exceeded", Decimal("3.4"))
    assert evaluate(ledger, _rule("cost_per_hour", "4", to="forecast"), now).level == "ok"
    # Higher is better: a floor. Both succeed every time: 1.0 is not below 0.9 x 1.0.
    assert evaluate(ledger, _rule("success_rate", "0.9"), now).level == "ok"
    ingest(ledger, runs("v7", 10, 10, at=now))  # 30 of 40 candidate runs succeed: 0.75 < 0.9
    assert evaluate(ledger, _rule("success_rate", "0.9"), now).level == "exceeded"
    assert not cost.enforced  # a kill criterion alerts; the gate never refuses calls for it


def test_a_relative_rule_is_checked_and_stored_whole(ledger) -> None:  # type: ignore[no-untyped-def]
    for bad, message in (
        (lambda: _rule("spend", "2"), "metric 'spend' for a relative rule"),
        (lambda: _rule("cost_per_hour", "2"), "cost_per_hour is measured relative to forecast"),
        (lambda: Version.parse("v7"), "write DIMENSION=VALUE"),
        (lambda: Version.parse("colour=v7"), "version dimension 'colour'"),
        (lambda: Relative(Version("prompt_version", "v7"), Version("model", "x")), "values of one dimension"),
        (lambda: Relative.from_dict({"candidate": "prompt_version=a", "baseline": "prompt_version=b", "min_runs": "x"}), "min_runs='x'"),
    ):  # fmt: skip
        with pytest.raises(InputError, match=message):
            bad()
    with pytest.raises(InputError, match="scope is global, tenant, agent, model, not call_site"):
        Rule("b_x", "x", Scope("call_site", "agent"), "day", Decimal(2), "error_rate",
             relative=Relative(Version("variant", "a"), Version("variant", "b")))  # fmt: skip
    with pytest.raises(InputError, match="relative rule compares many runs"):
        Rule(
            "b_x",
            "x",
            Scope(),
            "run",
            Decimal(2),
            "error_rate",
            relative=Relative(Version("variant", "a"), Version("variant", "b")),
        )
    from ledger.budgets import add_rule

    stored = add_rule(ledger, _rule("error_rate", "2", min_runs=50, rollback=ROLLBACK))
    assert get_rule(ledger, "rel") == stored and stored.relative is not None and stored.relative.rollback == ROLLBACK
    assert Rule.from_dict(stored.to_dict()).relative == stored.relative


def test_every_template_is_a_compare_metric_with_its_direction() -> None:
    by_key = {m.key: m for m in compare_stats.METRICS}
    for name, lower_is_better in ((k, v[0]) for k, v in RELATIVE_METRICS.items() if k != "cost_per_hour"):
        assert by_key[name].higher_is_better is not lower_is_better, name
    assert {t.metric for t in TEMPLATES.values()} <= set(RELATIVE_METRICS)
    assert [t.describe() for t in TEMPLATES.values()] == [
        "error_rate > 2x baseline",
        "latency_p95 > 2x baseline",
        "cost per hour > 3x forecast",
        "tool_error_rate +50% over baseline",
        "escalation_rate +30% over baseline",
        "steps_per_success +40% over baseline",
    ]


def test_the_cli_edits_a_template_rule_and_lists_it(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "cli.duckdb")
    assert main(["budget", "add", "v7-tools", "--template", "tool-errors", "--factor", "1.8",
                 "--candidate", "variant=b", "--baseline", "variant=a", "--db", db]) == 0  # fmt: skip
    assert "tool_error_rate of variant=b > 1.8x baseline variant=a, global, rolling_hour, at least 30 runs" in (
        capsys.readouterr().out
    )
    assert main(["budget", "edit", "v7-tools", "--min-runs", "80", "--rollback", "flip flag b off", "--db", db]) == 0
    assert "at least 80 runs each" in capsys.readouterr().out
    assert main(["budget", "list", "--json", "--db", db]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["relative"]["rollback"] == "flip flag b off" and row["value"] == "no data"
    assert main(["budget", "add", "x", "--template", "error-rate", "--limit", "2", "--db", db]) == 2
    assert "limit is its --factor" in capsys.readouterr().err


def test_the_budgets_page_lists_a_relative_rule(app, tmp_path, clock) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    from ledger.budgets import add_rule
    from ledger.store import open_ledger

    db = tmp_path / "budgets.duckdb"
    con = open_ledger(db)
    add_rule(con, _rule("error_rate", "2", rollback=ROLLBACK))
    ingest(con, runs("v6", 30, 3, at=clock()) + runs("v7", 30, 9, at=clock()))
    # An alert of this rule: its value and limit are factors of the baseline, not the metric's rate.
    con.execute(
        "INSERT INTO alerts (id, budget_id, level, fired_at, value) VALUES ('a1', 'b_rel', 'exceeded', now(), 3)"
    )
    con.close()
    at = app(db, "budgets")
    table = next(df.value for df in at.dataframe if "limit" in df.value.columns and "name" in df.value.columns)
    assert table[["name", "limit"]].to_dict("records") == [{"name": "rel", "limit": "2.00x"}]
    alerts = next(df.value for df in at.dataframe if "fired_at" in df.value.columns)
    assert alerts[["budget", "value", "limit"]].to_dict("records") == [
        {"budget": "rel", "value": "3.00x", "limit": "2.00x"}
    ]
