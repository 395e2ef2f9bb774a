"""Run explorer: find a run, see its trace, its turns, and the exact context of any turn.

Everything captured from a run is untrusted text: it is shown with ``st.code``
and in table cells only, never rendered as markdown or HTML.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from dashboard import ui
from dashboard.analysis import payload_components
from dashboard.loaders import context, load, response, wire_request
from dashboard.pricebook import cache_minimum
from dashboard.ui import ALL, count, first_row, metric, pct, usd
from dashboard.views import judgments, waterfall
from ledger import conventions as conv
from ledger import queries as q
from ledger.cache_diagnosis import BROKEN, PREFIX_CHANGED, UNUSED, diagnose, previous_same_call
from ledger.content import CAPTURE_SETTINGS
from ledger.runs import STEP_CAP_SHAPE
from ledger.terms import TERMS, input_token_columns, token_columns
from ledger.turn_diff import change_summary, payload_diff, payload_json

TURN_COLUMNS = ["turn", "model", "call_site", "attempts", *token_columns(), "hit_rate", "usd", "cumulative_usd",
                "cache", "cache note"]  # fmt: skip
_INPUT_COLUMNS = input_token_columns()  # a call's input tokens: every input-side term, cached or not
EVENT_LABELS = {
    conv.EVENT_LOOP_TRIP: "loop trip",
    conv.EVENT_BUDGET_WARN: "budget warning",
    conv.EVENT_BUDGET_STOP: "budget stop",
    conv.EVENT_RETRY: "retry",
    conv.EVENT_OFFLOAD: "offload",
    conv.EVENT_AUTHORIZATION_DENIED: "authorization denied",
    conv.EVENT_HANDOFF: "hand-off",
}
CAPTURE_HINT = (
    f"This call was recorded without its request payload: content capture was off in the producer. To see it, "
    f"{CAPTURE_SETTINGS}, and run again."
)


def _find_run(f: Any) -> str | None:
    st.subheader("Find a run", anchor=False)
    st.caption("By trace id, stop cause or cost here; by tenant, agent, model or time in the sidebar filters.")
    c = st.columns([3, 2, 1, 1, 2])
    typed = c[0].text_input(
        "Trace id (or its first characters), conversation or run id",
        key="trace",
        bind="query-params",
        placeholder="e.g. c24a760f",
    )
    causes = ui.filter_options("stop_cause")
    cause = c[1].selectbox("Stop cause", causes, key="find_cause")
    low = c[2].number_input("Min cost ($)", min_value=0.0, value=None, step=0.01, format="%.4f", key="find_min")
    high = c[3].number_input("Max cost ($)", min_value=0.0, value=None, step=0.01, format="%.4f", key="find_max")
    order = c[4].radio(
        "Sort", ["recent", "cost"], format_func={"recent": "newest first", "cost": "most expensive first"}.get,
        horizontal=True, key="find_order",
    )  # fmt: skip
    found = load(
        q.find_runs,
        f,
        trace_id=(typed or "").strip().lower() or None,
        stop_cause=None if cause == ALL else cause,
        min_usd=low,
        max_usd=high,
        order=order,
        limit=200,
    )
    if found.empty:
        st.info("No run matches. Clear the trace id or widen the cost range and the sidebar filters.")
        return None
    labels = {
        r["trace_id"]: f"{r['trace_id'][:16]}… · {usd(r['usd_total'])} · {r['agent_name']} · {r['stop_cause']}"
        for r in found.to_dict("records")
    }
    ids = list(labels)
    with st.expander(ui.plural(len(found), "matching run") + (" (the first 200)" if len(found) == 200 else "")):
        ui.table(
            found,
            hide_index=True,
            column_config={
                "usd_total": st.column_config.NumberColumn("cost", format="$%.4f"),
                "started_at": st.column_config.DatetimeColumn("started (UTC)", format="YYYY-MM-DD HH:mm:ss"),
            },
            key="found_runs",
        )
    exact = (typed or "").strip().lower()
    index = next((i for i, t in enumerate(ids) if t == exact), 0)
    return st.selectbox("Run", ids, index=index, format_func=lambda t: labels.get(t, t), key=f"run_pick_{exact}")


NOT_REPORTED = "(not reported)"  # a source without a tenant or agent name: never "None"


# A run with a charge the ledger could not price as known says so before its figures (#43).
_FLAGS = (
    ("unpriced_calls", "unpriced (charged $0 until priced)"),
    ("invalid_usage_calls", "with token counts that could not be taken"),
    ("incomplete_usage_calls", "with usage of only part of the call"),
    ("unknown_usage_calls", "without a cache split or an output count from their source"),
)


def _flags(run: dict[str, Any]) -> None:
    said = [f"{ui.plural(run[column], 'model call')} {what}" for column, what in _FLAGS if run.get(column)]
    if said:
        st.warning(
            "This run's cost is not exact: " + "; ".join(said) + ". `turnledger report` lists them.",
            icon=":material/flag:",
        )


def _header(run: dict[str, Any], calls: int) -> None:
    stop = run.get("stop_cause") or "in progress"
    detail = f" ({run['stop_detail']})" if run.get("stop_detail") else ""
    # Names and causes arrived in spans: plain text only.
    st.text(
        f"trace {run['trace_id']} · agent {run.get('agent_name') or NOT_REPORTED} {run.get('agent_version') or ''} · "
        f"tenant {run.get('tenant') or NOT_REPORTED} · models {run.get('models') or NOT_REPORTED} · "
        f"stopped: {stop}{detail}"
    )
    _flags(run)
    c = st.columns(4)
    metric(c[0], "Run cost", usd(run["usd_total"]), "All charges of this run: every price term, every attempt.")
    metric(
        c[1],
        "Agent turns",
        count(run["turns"]),
        "Model calls made by the agent loop itself (call site `agent`), a retried call counted once.",
    )
    metric(
        c[2],
        "Model calls",
        count(calls),
        "Every model call of the run, one per row of the table below: the agent's turns plus calls from other "
        "call sites (a summarizer, a router), a retried call counted once "
        f"({ui.plural(run['model_calls'], 'attempt')} charged in all).",
    )
    metric(
        c[3],
        "Tool calls",
        count(run["tool_calls"]),
        "execute_tool spans. A soft failure is a tool that ran but reported a problem ('not found').",
        delta=f"{count(run['soft_failures'])} soft failures",
        delta_color="orange" if run["soft_failures"] else "gray",
        delta_arrow="off",
    )
    c = st.columns(4)
    metric(
        c[0],
        "Cache hit rate",
        pct(run.get("hit_rate")),
        "cache_read / all input tokens of this run's model calls. >70% healthy, >10% weak, else broken.",
        delta=run.get("verdict"),
        delta_color={"healthy": "green", "weak": "orange", "broken": "red"}.get(run.get("verdict") or "", "gray"),
        delta_arrow="off",
    )
    metric(
        c[1],
        "Loop-detector trips",
        count(run["loop_trips"]),
        "Nudges and halts by the loop detector (a run repeating a call, cycling, stalling).",
    )
    metric(
        c[2],
        "Step-cap halts",
        count(run.get("step_cap_halts") or 0),
        "Times the run hit the harness's step limit (max_steps) and was stopped: not a loop-detector trip.",
    )
    metric(c[3], "Retried attempts", count(run["retry_attempts"]), "Model-call attempts after the first, each charged.")


def _guard_events(trace_id: str, tree: pd.DataFrame) -> None:
    events = load(q.run_guard_events, trace_id=trace_id)
    st.subheader("Guard events", anchor=False)
    if events.empty:
        st.caption("No guard events: no loop trips, budget warnings, retries, offloads, denials or hand-offs.")
    else:
        events["event"] = [
            "step-cap halt" if n == conv.EVENT_LOOP_TRIP and shape == STEP_CAP_SHAPE else EVENT_LABELS.get(n, n)
            for n, shape in zip(events["name"], events["shape"], strict=True)
        ]
        st.caption("Decisions the harness's guards took during the run, in time order (details as recorded).")
        ui.table(
            events[["offset_ms", "event", "shape", "action", "tool", "cause", "attributes", "span_name"]],
            hide_index=True,
            column_config={
                "offset_ms": st.column_config.NumberColumn("at (ms)", format="%.0f"),
                "attributes": st.column_config.TextColumn("details", width="large"),
                "span_name": "on span",
            },
            key="guard_events",
        )
    attempts = tree[
        (tree["operation"] == "chat") & ((tree["attempt"].fillna(1) > 1) | (tree["status_code"] == "ERROR"))
    ]
    if not attempts.empty:
        st.caption(
            "Retried and failed attempts, each its own charge row. A failed attempt (a 429, a 529, a timeout) "
            "returned no answer, so the provider bills it nothing: its $0 is the real charge, not a missing one."
        )
        attempts = attempts.assign(
            billed=[_billed(s, u) for s, u in zip(attempts["status_code"], attempts["usd"], strict=True)]
        )
        ui.table(
            attempts[["offset_ms", "name", "attempt", "retry_cause", "status_code", "error_type", "billed"]],
            hide_index=True,
            column_config={"offset_ms": st.column_config.NumberColumn("at (ms)", format="%.0f")},
            key="retry_attempts",
        )


def _billed(status: Any, amount: Any) -> str:
    """An attempt's charge in words: a failed one was answered with an error, which is not billed."""
    if status == "ERROR" and not amount:
        return "$0: failed, not billed"
    return usd(amount)


PREFIX_SCAN_MAX_TURNS = 60  # beyond this, only the turn picked below is compared


def _cache_checks(trace_id: str, turns: pd.DataFrame) -> list[Any]:
    """Each call's cache verdict; payloads are read only for runs short enough to scan."""
    rows = turns.to_dict("records")
    span = dict(zip(turns["turn"].astype(int), turns["span_id"].astype(str), strict=True))

    def payload(turn: int) -> dict[str, Any] | None:
        return context(trace_id, span[turn]) if len(turns) <= PREFIX_SCAN_MAX_TURNS else None

    return diagnose(rows, payload, cache_minimum)


def _turns(trace_id: str, turns: pd.DataFrame) -> list[Any]:
    st.subheader("Model calls, turn by turn", anchor=False)
    checks = _cache_checks(trace_id, turns)
    turns["cache"] = [c.status for c in checks]
    turns["cache note"] = [c.note for c in checks]
    broke = [c for c in checks if c.status == BROKEN]
    changed = [c for c in checks if c.status == PREFIX_CHANGED]
    if broke:
        st.warning(
            f"The prompt cache broke on turn {', '.join(str(c.turn) for c in broke)}: tokens cached by the previous "
            "call were billed again at the full input price. The cause is shown under 'What changed' below.",
            icon=":material/warning:",
        )
    if changed:
        st.warning(
            f"The request changed inside its stable prefix on turn {', '.join(str(c.turn) for c in changed)}: "
            "a prompt cache could not be reused there. See 'What changed' below.",
            icon=":material/warning:",
        )
    if all(c.status in UNUSED for c in checks) and len(checks) > 1:
        st.info("This run never used the prompt cache: every input token was billed at the full price.")
    st.caption(
        "One row per model call in time order (retries folded in). 'cache' says whether each call read back what "
        "the previous call of the same call site and model cached (cached), wrote a prefix (written), lost part "
        "of it (broken, with the first changed block), or why it used no cache: no breakpoint, or a prefix below "
        "the model's minimum cacheable length."
    )
    ui.table(
        turns[TURN_COLUMNS],
        hide_index=True,
        column_config={
            **{t.tokens_column: st.column_config.NumberColumn(t.label, format="%d") for t in TERMS},
            "hit_rate": st.column_config.NumberColumn("hit rate", format="percent"),
            "usd": st.column_config.NumberColumn("cost", format="$%.4f"),
            "cumulative_usd": st.column_config.NumberColumn("so far", format="$%.4f"),
            "cache note": st.column_config.TextColumn(width="large"),
        },
        key="turn_table",
    )
    return checks


def _show_change(before_turn: int, after_turn: int, a: dict[str, Any], b: dict[str, Any], later: Any) -> None:
    uncached = later.note if later is not None and later.status in UNUSED else None
    change, sentence = change_summary(before_turn, after_turn, a, b, uncached)
    if change is None and uncached:
        st.warning(sentence, icon=":material/warning:")
        return
    if change is None:
        st.success(sentence, icon=":material/check_circle:")
        return
    st.error(sentence, icon=":material/error:")
    # Paths and snippets come from the payload: code blocks, never markdown.
    st.code(change.details(), language=None, wrap_lines=True)


def _context(trace_id: str, turns: pd.DataFrame, checks: list[Any]) -> None:
    st.subheader("Exact context of a turn", anchor=False)
    numbers = turns["turn"].astype(int).tolist()
    flagged = [c.turn for c in checks if c.status in (BROKEN, PREFIX_CHANGED)]
    default = flagged[0] if flagged else numbers[-1]
    turn = st.selectbox("Turn", numbers, index=numbers.index(default), key=f"ctx_turn_{trace_id}")
    row = turns[turns["turn"] == turn].iloc[0]
    payload = context(trace_id, str(row["span_id"]))
    if payload is None:
        st.info(CAPTURE_HINT, icon=":material/visibility_off:")
        return
    parts = payload_components(payload)
    total = sum(p.tokens for p in parts) or 1
    left, right = st.columns([2, 3])
    with left:
        st.caption(
            f"What turn {turn} sent, part by part. Tokens are an estimate (characters / 4 of the JSON); "
            f"the provider counted {count(sum(row[k] for k in _INPUT_COLUMNS))} input tokens."
        )
        ui.table(
            pd.DataFrame(
                [
                    {"part": p.part, "what": p.label, "chars": p.chars, "≈ tokens": p.tokens, "share": p.tokens / total}
                    for p in parts
                ]
            ),
            hide_index=True,
            column_config={"share": st.column_config.ProgressColumn(format="percent", min_value=0, max_value=1)},
            key="components",
        )
    with right:
        wire = wire_request(trace_id, str(row["span_id"]))
        text = payload_json(wire.body if wire is not None else payload)
        if wire is None:
            st.caption("The request as the source recorded it (after redaction), as JSON text; its provider is "
                       "not known, so it is not rebuilt in a wire format. Copy with the icon, or download.")  # fmt: skip
        else:
            st.caption(f"The request in the {wire.api} wire format, rebuilt from what the source recorded (after "
                       "redaction), as JSON text. Copy with the icon, or download.")  # fmt: skip
            if wire.not_reported:
                st.caption("Not reported by the source, so not in the dump: " + ", ".join(wire.not_reported))
        st.code(text, language="json", wrap_lines=True, height=460)
        st.download_button(
            "Download JSON",
            data=text.encode(),
            file_name=f"{trace_id[:16]}-turn{turn}.json",
            mime="application/json",
            icon=":material/download:",
            key="download_ctx",
        )
        answer = response(trace_id, str(row["span_id"]))
        st.caption(f"What the model answered on turn {turn} (after redaction), stop reason included.")
        if answer is None:
            st.info("No response was captured for this call.", icon=":material/visibility_off:")
        else:
            st.code(payload_json(answer), language="json", wrap_lines=True, height=300)

    st.subheader("What changed between two turns", anchor=False)
    st.caption(
        "The part that should stay identical from turn to turn (model, tools, system prompt, earlier messages) "
        "is what the prompt cache reuses. The first change inside it is the invalidator; new messages at the end "
        "are expected and not a finding."
    )
    c = st.columns(2)
    # Compare with the previous call of the same call site and model: a summarizer's
    # request between two agent turns shares no prefix with them.
    previous = previous_same_call(turns.to_dict("records"))
    earlier_default = previous.get(turn, max(1, turn - 1))
    later_default = turn if turn > 1 else min(turn + 1, numbers[-1])
    earlier = c[0].selectbox(
        "Earlier turn", numbers, index=numbers.index(earlier_default), key=f"diff_a_{trace_id}_{turn}"
    )
    later = c[1].selectbox("Later turn", numbers, index=numbers.index(later_default), key=f"diff_b_{trace_id}_{turn}")
    if earlier == later:
        st.caption("Pick two different turns to compare.")
        return
    a_row = turns[turns["turn"] == earlier].iloc[0]
    a = context(trace_id, str(a_row["span_id"]))
    b = payload if later == turn else context(trace_id, str(turns[turns["turn"] == later].iloc[0]["span_id"]))
    if a is None or b is None:
        st.info(CAPTURE_HINT)
        return
    if earlier > later:
        earlier, later, a, b = later, earlier, b, a
    _show_change(earlier, later, a, b, next((c for c in checks if c.turn == later), None))
    with st.expander("Full diff of the two payloads"):
        st.code(payload_diff(a, b) or "(identical)", language="diff", wrap_lines=True, height=400)


def render() -> None:
    st.title("Run explorer")
    st.caption("Debug one run: its trace, guard events, turns, and the exact context the model saw on any turn.")
    f = ui.current_filters()
    if not ui.has_runs(f):
        return
    trace_id = _find_run(f)
    if not trace_id:
        return
    run = first_row(load(q.run_header, trace_id=trace_id))
    if not run:
        st.info("That run is not in the ledger (anymore). Pick another one above.")
        return
    st.divider()
    turns = load(q.run_turns, trace_id=trace_id)
    _header(run, len(turns))
    tree = load(q.run_trace_tree, trace_id=trace_id)
    _guard_events(trace_id, tree)
    judgments.render(trace_id)
    waterfall.render(trace_id, tree)
    if turns.empty:
        st.info("This run made no model calls.")
        return
    checks = _turns(trace_id, turns)
    _context(trace_id, turns, checks)


ui.guarded(render)
