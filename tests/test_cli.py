"""The `turnledger` CLI on real files: ingest, report --json, context, errors."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys

import pytest

from collector.cli import main
from collector.demo.samples import build
from collector.otlp import read_file
from ledger.report import REPORT_SCHEMA
from ledger.store import open_ledger
from tests.conftest import SAMPLES, sample_as_protobuf


def _ingest_samples(db, capsys, *names):
    # The seed-vector files at the top of sample_traces/ (harness samples live in a subfolder).
    args = [str(SAMPLES / f"{n}.json") for n in names] or [str(p) for p in sorted(SAMPLES.glob("*.json"))]
    assert main(["ingest", *args, "--db", str(db)]) == 0
    capsys.readouterr()


def test_ingest_folder_then_report_json_has_the_documented_schema(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys)
    assert main(["report", "--json", "--db", str(db)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["schema"] == REPORT_SCHEMA
    assert set(r) >= {
        "runs", "total_usd", "cost_per_run", "successful_runs", "cost_per_successful_run", "cache",
        "where_the_money_went", "retries", "loop_trips", "step_cap_rate", "budget_stop_rate", "unpriced_calls",
        "stop_causes", "models", "call_sites", "unpriced", "long_tail",
    }  # fmt: skip
    assert set(r["cost_per_run"]) == {"median", "p95", "p99", "max", "mean"}
    assert r["cost_per_run"]["max"] == 9.93
    assert r["long_tail"][0]["usd_total"] == 9.93 and r["long_tail"][0]["stop_cause"] == "max_steps"
    # retry_and_loop reports 2 trips; long_tail's agent reports none, but three of its runs call
    # get_shipping_status with {"tracking": "12345"} over and over: one detected repeat each
    assert (r["loop_trips"]["trips"], r["loop_trips"]["detected"], r["loop_trips"]["runs_affected"]) == (5, 3, 4)
    assert r["retries"]["attempts"] == 1
    assert [u["model"] for u in r["unpriced"]] == ["mystery-model-1"]


def test_report_filters(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys)
    assert main(["report", "--json", "--tenant", "globex", "--db", str(db)]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["runs"] == 3 and round(r["total_usd"], 4) == round(0.2585 + 0.214 + 9.93, 4)


def test_human_report_names_unpriced_models(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys, "unpriced", "five_turn_run")
    assert main(["report", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "UNPRICED" in out and "someprovider/mystery-model-1" in out
    assert "median $0.0" in out


def test_malformed_files_are_named_and_nothing_is_written(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    folder = tmp_path / "in"
    folder.mkdir()
    shutil.copy(SAMPLES / "five_turn_run.json", folder / "a_good.json")
    (folder / "b_garbage.json").write_text("{not json")
    (folder / "c_wrong_shape.json").write_text(
        json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": 5}]}]}]})
    )
    assert main(["ingest", str(folder), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "nothing was ingested" in err
    assert "b_garbage.json: not JSON" in err
    assert "c_wrong_shape.json" in err and "attributes must be a list" in err
    con = open_ledger(db)
    assert con.execute("SELECT count(*) FROM spans").fetchone()[0] == 0


def test_missing_path_and_empty_folder_are_clear_errors(tmp_path, capsys):
    assert main(["ingest", str(tmp_path / "nope.json"), "--db", str(tmp_path / "l.duckdb")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path), "--db", str(tmp_path / "l.duckdb")]) == 2
    assert "no OTLP files" in capsys.readouterr().err


def test_report_without_a_ledger_says_how_to_make_one(tmp_path, capsys):
    assert main(["report", "--db", str(tmp_path / "none.duckdb")]) == 2
    assert "turnledger ingest sample_traces/" in capsys.readouterr().err


def test_protobuf_and_gzip_files_ingest_like_json(tmp_path, capsys):
    (tmp_path / "batch.pb").write_bytes(sample_as_protobuf(SAMPLES / "budget_warn.json"))
    (tmp_path / "batch.json.gz").write_bytes(gzip.compress((SAMPLES / "budget_warn.json").read_bytes()))
    assert read_file(tmp_path / "batch.pb") == read_file(SAMPLES / "budget_warn.json")
    db = tmp_path / "l.duckdb"
    assert main(["ingest", str(tmp_path / "batch.pb"), str(tmp_path / "batch.json.gz"), "--db", str(db)]) == 0
    assert "2 already in the ledger" in capsys.readouterr().err  # the same spans twice: charged once
    con = open_ledger(db)
    assert con.execute("SELECT count(*) FROM charges").fetchone()[0] == 1


def test_context_prints_the_exact_captured_payload(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys, "five_turn_run")
    spans = build("five_turn_run")
    trace_id = spans[0].trace_id
    chats = [s for s in spans if s.name.startswith("chat")]
    sent = json.loads(chats[2].attributes["turnledger.request.body"])
    assert main(["context", trace_id[:10], "--turn", "3", "--show", "request", "--db", str(db)]) == 0
    assert json.loads(capsys.readouterr().out) == sent
    assert main(["context", trace_id, "--db", str(db)]) == 0
    listing = capsys.readouterr().out
    assert "turn 1: claude-opus-5" in listing and "$0.0427" in listing


def test_context_errors_are_actionable(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys, "long_tail", "five_turn_run", "openai_style")
    a93 = build("long_tail")[-1].trace_id
    uncaptured = build("openai_style")[-1].trace_id  # the one sample span without a captured request
    assert main(["context", uncaptured, "--turn", "1", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "content capture was off" in err and "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true" in err  # #31
    assert main(["context", a93, "--turn", "99", "--db", str(db)]) == 2
    assert "has turns 1..40" in capsys.readouterr().err
    assert main(["context", "ffffffffff", "--db", str(db)]) == 2
    assert "no run with trace id" in capsys.readouterr().err


def test_console_script_exits_non_zero_on_error(tmp_path):
    exe = shutil.which("turnledger", path=str(__import__("pathlib").Path(sys.executable).parent))
    assert exe, "the console script is installed with the package"
    ok = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert ok.returncode == 0 and "ingest" in ok.stdout
    bad = subprocess.run([exe, "report", "--db", str(tmp_path / "x.duckdb")], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


@pytest.mark.parametrize("command", ["ingest", "report", "context", "samples"])
def test_every_command_has_help(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: turnledger" in capsys.readouterr().out


def test_runs_lists_filters_and_sorts_the_sample_runs(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys)
    assert main(["runs", "--json", "--sort", "cost", "--db", str(db)]) == 0
    by_cost = json.loads(capsys.readouterr().out)
    costs = [float(r["usd_total"]) for r in by_cost]
    assert costs == sorted(costs, reverse=True) and costs[0] == 9.93 and by_cost[0]["stop_cause"] == "max_steps"
    assert main(["runs", "--json", "--sort", "turns", "--limit", "2", "--db", str(db)]) == 0
    longest = json.loads(capsys.readouterr().out)
    assert len(longest) == 2 and longest[0]["turns"] == 40 and longest[0]["turns"] >= longest[1]["turns"]
    looped = build("retry_and_loop")[0].trace_id
    assert main(["runs", "--json", "--stop-cause", "loop_detected", "--db", str(db)]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["trace_id"], row["loop_trips"], row["retry_attempts"]) == (looped, 2, 1)
    assert main(["runs", "--tenant", "globex", "--sort", "recent", "--db", str(db)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["trace", "id"] and len(table) == 1 + 3  # globex has three runs
    starts = [line.split()[1] + " " + line.split()[2] for line in table[1:]]
    assert starts == sorted(starts, reverse=True)


def test_a_filter_value_no_run_has_is_named_with_the_near_ones(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys)
    for command in ("runs", "report"):
        assert main([command, "--tenant", "globx", "--db", str(db)]) == 2
        assert "tenant 'globx' is in no run: did you mean 'globex'?" in capsys.readouterr().err
        assert main([command, "--tenant", "ACME", "--db", str(db)]) == 2  # a case no difflib ratio finds
        assert "tenant 'ACME' is in no run: did you mean 'acme'?" in capsys.readouterr().err
    assert main(["runs", "--agent-version", "9.9", "--db", str(db)]) == 2
    assert "agent version '9.9' is in no run: the ledger has '1.4.0'" in capsys.readouterr().err
    assert main(["compare", "--by", "agent_version", "1.4.0", "1.4.1", "--db", str(db)]) == 2  # not an empty comparison
    assert "agent version '1.4.1' is in no run: did you mean '1.4.0'" in capsys.readouterr().err
    # A budget may come before its first run: kept, with a warning naming the near values.
    assert main(["budget", "add", "acme-day", "--limit", "5", "--scope", "tenant=ACME", "--db", str(db)]) == 0
    warned = capsys.readouterr().err
    assert "warning: tenant 'ACME' is in no run: did you mean 'acme'?" in warned and "rule is kept" in warned
    assert main(["budget", "add", "acme-day-2", "--limit", "5", "--scope", "tenant=acme", "--db", str(db)]) == 0
    assert "warning" not in capsys.readouterr().err
    assert main(["runs", "--sort", "costs", "--db", str(db)]) == 2
    assert "--sort 'costs': choose one of recent, cost, turns" in capsys.readouterr().err


def test_context_opens_with_the_stop_cause_and_the_guard_events(tmp_path, capsys):
    db = tmp_path / "l.duckdb"
    _ingest_samples(db, capsys, "retry_and_loop", "cache_pair")
    assert main(["context", build("retry_and_loop")[0].trace_id, "--db", str(db)]) == 0
    head = capsys.readouterr().out.splitlines()
    assert "stopped: loop_detected" in head[0] and "2 loop trips, 1 retry," in head[0]
    assert head[1] == "guard events (3: 3 reported by the agent, 0 detected in the spans):"
    assert [line.split("  ")[2] for line in head[2:5]] == [
        "turnledger.retry", "turnledger.loop_detector.trip", "turnledger.loop_detector.trip",
    ]  # fmt: skip
    assert "(shape repeat, action halt, tool search_docs)" in head[4] and head[5].startswith("turn 1:")
    assert main(["context", build("cache_pair")[-1].trace_id, "--db", str(db)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "guard events: none reported, none detected in the spans"
