"""``turnledger report``, ``context`` and ``diff``: read the ledger from the command line.

Each reads a ``ledger.sources.Source``: the file (read-only), or a running
collector's API with ``--server``/TURNLEDGER_SERVER; the output is the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from ledger.content import CAPTURE_SETTINGS
from ledger.errors import ContextNotCaptured, UnknownRun
from ledger.wire_request import WireRequest

from .args import add_filters, add_source, filters_of, reading

if TYPE_CHECKING:
    import pandas as pd

    from ledger.cache_diagnosis import CacheCheck
    from ledger.sources import Source

__all__ = ["add_context", "add_diff", "add_report", "cmd_context", "cmd_diff", "cmd_report", "resolve_trace"]


def add_report(p: argparse.ArgumentParser) -> None:
    """Cost, cache, guard and long-tail figures."""
    p.add_argument(
        "--json", action="store_true", help="machine-readable output (schema in README: 'Report JSON schema')"
    )
    p.add_argument("--top", type=int, default=10, help="rows in the most-expensive-runs table (default 10)")
    add_filters(p)
    add_source(p)


def cmd_report(a: argparse.Namespace) -> int:
    from ledger.report import build_report, format_report

    with reading(a) as source:
        report = build_report(source, filters_of(a, source), top=a.top)
    print(json.dumps(report, indent=2) if a.json else format_report(report))
    return 0


# --- context -----------------------------------------------------------------------------
_RUN_ID_HELP = (
    "the run's trace id (a unique prefix of 8+ characters works), or its conversation id "
    "(gen_ai.conversation.id; for our harness, the run id its result carries)"
)


def add_context(p: argparse.ArgumentParser) -> None:
    """Print the exact request payload and response of a run's turn."""
    p.add_argument("trace_id", metavar="ID", help=_RUN_ID_HELP)
    p.add_argument("--turn", type=int, default=None, help="model call number, 1-based (default: list the turns)")
    p.add_argument(
        "--show",
        choices=_SHOW,
        default="both",
        help="with --turn: the request in its provider's wire format (rebuilt from what the source recorded; "
        "the fields it did not report are named on stderr), the response as answered, both as "
        '{"request": ..., "response": ..., "not_reported": [...]}, or the request as the source recorded it '
        "(default: both)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help='with --show request: {"api": ..., "request": ..., "not_reported": [...]} on stdout',
    )
    add_source(p)


def resolve_trace(source: Source, prefix: str) -> str:
    """The one run whose conversation id is ``prefix``, or whose trace id starts with it (8+ characters, or whole)."""
    from ledger import queries as q

    prefix = prefix.strip().lower()
    rows = source.records(q.find_runs, q.NO_FILTERS, trace_id=prefix, limit=20)
    conversation = [r["trace_id"] for r in rows if (r["conversation_id"] or "").lower() == prefix]
    if len(conversation) == 1:
        return str(conversation[0])
    if conversation:
        raise UnknownRun(
            f"conversation {prefix!r} has several runs: give the trace id of one ({', '.join(conversation)})"
        )
    if len(prefix) < 8 and not (rows and rows[0]["trace_id"] == prefix):
        raise UnknownRun(f"trace id {prefix!r} is too short: give at least 8 characters")
    if not rows:
        raise UnknownRun(
            f"no run with trace id or conversation id {prefix!r} in the ledger (see `turnledger report` for ids)"
        )
    if len(rows) > 1:
        raise UnknownRun(f"trace id prefix {prefix!r} matches several runs: give more characters")
    return str(rows[0]["trace_id"])


def cmd_context(a: argparse.Namespace) -> int:
    with reading(a) as source:
        trace_id, turns = _run_turns(source, a.trace_id)
        if a.turn is None:
            print(_run_overview(source, trace_id))
            for row, check in zip(turns.itertuples(), _cache_checks(source, trace_id, turns), strict=True):
                print(
                    f"turn {row.turn}: {row.model} ({row.call_site}), {row.attempts} attempt(s), ${row.usd:.4f}"
                    f"   cache: {check.status} ({check.note})"
                )
            return 0
        doc = _turn_document(source, trace_id, turns, a.turn, a.show)
    if a.show == "request" and isinstance(doc, WireRequest):
        if not a.json:
            if doc.not_reported:
                print(f"not reported by the source: {', '.join(doc.not_reported)}", file=sys.stderr)
            doc = doc.body
        else:
            doc = doc.as_json()
    print(json.dumps(doc, indent=2, ensure_ascii=False))
    return 0


_SHOW = ("request", "response", "both", "recorded")


def _run_overview(source: Source, trace_id: str) -> str:
    """How the run ended and what its guards saw, above its turns: the stop cause, then each guard event
    (loop trips with their shape, step-cap halts, retries, budget warnings) in time order."""
    from ledger import queries as q
    from ledger.loops import DETECTED
    from ledger.wording import plural

    (run,) = source.records(q.run_summary, trace_id=trace_id)
    events = source.records(q.run_guard_events, trace_id=trace_id)
    lines = [
        f"run {trace_id}: {run['agent_name'] or 'agent ?'} / {run['tenant'] or '-'}, "
        f"stopped: {run['stop_cause'] or 'in progress'}, "
        + ", ".join(
            plural(run[field], *words)
            for field, *words in (
                ("turns", "turn"),
                ("tool_calls", "tool call"),
                ("loop_trips", "loop trip"),
                ("retry_attempts", "retry", "retries"),
            )
        )
        + f", ${run['usd_total']:.4f}"
    ]
    if not events:
        lines.append("guard events: none reported, none detected in the spans")
    else:
        detected = sum(e["action"] == DETECTED for e in events)
        lines.append(
            f"guard events ({len(events)}: {len(events) - detected} reported by the agent, {detected} detected in the spans):"
        )
        for e in events:
            details = ", ".join(f"{k} {e[k]}" for k in ("shape", "action", "tool", "cause") if e[k])
            lines.append(f"  +{e['offset_ms'] / 1000:,.1f} s  {e['name']}" + (f"  ({details})" if details else ""))
    return "\n".join(lines)


def _turn_document(source: Source, trace_id: str, turns: pd.DataFrame, turn: int, show: str) -> Any:
    """What ``context --turn N --show …`` prints; an actionable error when that part was not captured.

    The request is the one rebuilt in its provider's wire format (``ledger.wire_request``) where the
    provider is known; otherwise, as with ``--show recorded``, the payload as the source recorded it."""
    if show == "recorded":
        return _turn_payload(source, trace_id, turns, turn)
    _check_turn(trace_id, turns, turn)
    captured = source.turn(trace_id, str(turns.iloc[turn - 1]["span_id"]))
    if show == "request":
        if captured is not None and captured.wire is not None:
            return captured.wire
        return _turn_payload(source, trace_id, turns, turn)
    request, response = (captured.request, captured.response) if captured is not None else (None, None)
    wire = captured.wire if captured is not None else None
    if wire is not None:
        return {"request": wire.body, "response": response, "not_reported": list(wire.not_reported)}
    if show == "response":
        if response is None:
            raise ContextNotCaptured(
                f"turn {turn} of run {trace_id} was recorded without its response: the producer captured no "
                f"output messages; {CAPTURE_SETTINGS}."
            )
        return response
    if request is None and response is None:
        _turn_payload(source, trace_id, turns, turn)  # raises the not-captured error
    return {"request": request, "response": response}


# --- diff --------------------------------------------------------------------------------------
def add_diff(p: argparse.ArgumentParser) -> None:
    """Compare two turns' request payloads: the first change inside the cached prefix, then the full diff."""
    p.add_argument("trace_id", metavar="ID", help=_RUN_ID_HELP)
    p.add_argument("--turns", type=int, nargs=2, metavar=("A", "B"), required=True, help="the two model calls, 1-based")
    p.add_argument("--summary", action="store_true", help="only the finding, without the full diff")
    add_source(p)


def cmd_diff(a: argparse.Namespace) -> int:
    from ledger.cache_diagnosis import UNUSED
    from ledger.turn_diff import change_summary, payload_diff

    earlier, later = sorted(a.turns)
    if earlier == later:
        raise UnknownRun("--turns needs two different turns")
    with reading(a) as source:
        trace_id, turns = _run_turns(source, a.trace_id)
        before, after = (_turn_payload(source, trace_id, turns, n) for n in (earlier, later))
        verdict = _cache_checks(source, trace_id, turns)[later - 1]
    uncached = verdict.note if verdict.status in UNUSED else None
    change, sentence = change_summary(earlier, later, before, after, uncached)
    print(sentence)
    print(f"turn {later} cache: {verdict.status} ({verdict.note})")
    if change is not None:
        print(change.details())
    if not a.summary:
        print()
        print(payload_diff(before, after) or "(identical payloads)")
    return 0


def _cache_checks(source: Source, trace_id: str, turns: pd.DataFrame) -> list[CacheCheck]:
    """Each turn's cache verdict, in the words of the run explorer (``ledger.cache_diagnosis``)."""
    from ledger.cache_diagnosis import diagnose
    from ledger.pricing import PriceBook
    from ledger.settings import prices_file

    span = dict(zip(turns["turn"].astype(int), turns["span_id"].astype(str), strict=True))
    payloads: dict[int, dict[str, Any] | None] = {}

    def payload(turn: int) -> dict[str, Any] | None:
        if turn not in payloads:
            payloads[turn] = source.context(trace_id, span[turn])
        return payloads[turn]

    return diagnose(turns.to_dict("records"), payload, PriceBook.default(prices_file()).cache_minimum)


def _run_turns(source: Source, trace_prefix: str) -> tuple[str, pd.DataFrame]:
    """The run's trace id and its model calls, one row per turn."""
    from ledger import queries as q

    trace_id = resolve_trace(source, trace_prefix)
    turns = source.query(q.run_turns, trace_id=trace_id)
    if turns.empty:
        raise UnknownRun(f"run {trace_id} has no model calls")
    return trace_id, turns


def _check_turn(trace_id: str, turns: pd.DataFrame, turn: int) -> None:
    if not 1 <= turn <= len(turns):
        raise UnknownRun(f"run {trace_id} has turns 1..{len(turns)}; turn {turn} is out of range")


def _turn_payload(source: Source, trace_id: str, turns: pd.DataFrame, turn: int) -> dict[str, Any]:
    """The captured request payload of a turn; an actionable error when out of range or not captured."""
    _check_turn(trace_id, turns, turn)
    payload = source.context(trace_id, str(turns.iloc[turn - 1]["span_id"]))
    if payload is None:
        raise ContextNotCaptured(
            f"turn {turn} of run {trace_id} was recorded without its request payload: content capture was off; "
            f"{CAPTURE_SETTINGS}, and run again."
        )
    return payload
