"""The Compare page through AppTest: the same figures as ``turnledger compare --json``, the choice in the URL."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from collector.cli import main
from collector.demo.variants import Variant
from tests.dashboard.test_pages import app, figures  # noqa: F401  (app is a fixture)
from tests.ledger.test_compare import play_rollout

RUNS = 40


@pytest.fixture(scope="module")
def compare_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("compare_page") / "rollout.duckdb"
    play_rollout(db, (RUNS, Variant("hr-v1", error_rate=0.05), Variant("hr-v2", prompt_growth=5.5, error_rate=0.2)))
    return db


def _json(db: Path, capsys, *args: str) -> dict:  # type: ignore[no-untyped-def,type-arg]
    assert main(["compare", *args, "--json", "--db", str(db)]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_page_shows_the_figures_of_compare_json(app, compare_db, capsys) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    want = _json(compare_db, capsys, "--by", "prompt_version", "hr-v1", "hr-v2")
    at = app(compare_db, "compare", by="prompt_version", a="hr-v1", b="hr-v2")
    numbers = next(df.value for df in at.dataframe if "interval_low" in df.value.columns)
    shown = numbers.to_dict("records")
    assert [r["key"] for r in shown] == [m["metric"] for m in want["metrics"]]
    for row, m in zip(shown, want["metrics"], strict=True):
        low, high = m["interval"]
        shown_figures = [row[k] for k in ("a", "b", "difference", "interval_low", "interval_high")]
        # An end the runs cannot bound is null in the JSON, NaN in a table.
        assert [None if pd.isna(v) else v for v in shown_figures] == [m["a"], m["b"], m["difference"], low, high], m[
            "metric"
        ]
        assert row["verdict"] == m["says"]
    words = next(df.value for df in at.dataframe if "B − A [95% interval]" in df.value.columns)
    assert words["verdict"].tolist() == [m["says"] for m in want["metrics"]]
    assert "worse" in words["verdict"].tolist()
    figs = figures(at)
    change = next(v for k, v in figs.items() if k.startswith("B against A"))
    assert {t["name"] for t in change["data"]} <= {m["says"] for m in want["metrics"]}
    assert "Tool selection: share of each version's tool calls" in figs
    assert at.query_params["a"] == "hr-v1" and at.query_params["b"] == "hr-v2"


def test_by_default_the_newest_version_is_the_candidate_and_the_url_keeps_the_choice(app, compare_db) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = app(compare_db, "compare")
    assert at.selectbox(key="cmp_by").value == "prompt_version"
    # Both versions serve side by side; the one first seen last is the candidate.
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == ("hr-v1", "hr-v2")
    assert at.query_params["by"] == "prompt_version" and at.query_params["b"] == "hr-v2"


def test_with_too_few_runs_the_page_says_the_verdicts_wait(app, compare_db) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = app(compare_db, "compare", a="hr-v1", b="hr-v2", tenant="acme")  # a third of the traffic: under 30 each
    assert any("Too few runs to call any difference" in w.value for w in at.warning)
    words = next(df.value for df in at.dataframe if "B − A [95% interval]" in df.value.columns)
    assert words["verdict"].str.startswith("too few runs to call").all()


def test_nothing_to_compare_says_so(app, compare_db) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    at = app(compare_db, "compare", by="model")  # every run used the one model
    assert any("Fewer than two values of model" in i.value for i in at.info)


def test_it_opens_on_the_newest_pair_that_can_reach_a_verdict_not_two_newer_one_run_versions(
    app,  # noqa: F811
    compare_db,
    tmp_path,
) -> None:  # type: ignore[no-untyped-def]
    """#31: Compare opened on the newest two versions, two one-run trials that could never be called."""
    import shutil

    import duckdb

    from collector.demo.samples import Trace
    from ledger import conventions as c
    from ledger.ingest import ingest
    from ledger.store import open_ledger

    db = tmp_path / "with-trials.duckdb"
    shutil.copy(compare_db, db)
    with duckdb.connect(str(db), read_only=True) as con:
        (last,) = con.execute("SELECT epoch_ns(max(started_at)) FROM runs").fetchone()
    con = open_ledger(db)
    for i, trial in enumerate(("hr-v3-trial", "hr-v4-trial")):
        t = Trace(trial, start=last + (i + 1) * 3_600 * 10**9, root_attrs={c.PROMPT_VERSION: trial})
        t.chat("claude-sonnet-4-6", (100, 0, 0, 20))
        ingest(con, t.finish("completed"))
    con.close()
    at = app(db, "compare")
    assert (at.selectbox(key="cmp_a").value, at.selectbox(key="cmp_b").value) == ("hr-v1", "hr-v2")
    assert [o for o in at.selectbox(key="cmp_b").options][:2] == ["hr-v4-trial", "hr-v3-trial"]  # still offered
