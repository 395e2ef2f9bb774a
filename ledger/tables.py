"""The ledger tables' columns, declared once: name and DuckDB type, in table order.

Row building (``ledger.rows``), the Arrow conversion and the runs rebuild
(``ledger.runs``) all take their column lists from here, and a test checks
each declaration against the live schema after ``migrate``. The migrations in
``ledger.schema`` are history (SQL applied once); these are the tables as they
stand after all of them.

No DuckDB import: the decoder processes build rows with this and never load it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any

import pyarrow as pa

from . import terms
from .terms import PriceTerm

__all__ = ["USD", "WRITTEN", "Column", "Table", "table", "term_columns"]

USD = "DECIMAL(38,12)"  # exact money: sums of millions of sub-cent charges stay exact

# DuckDB type (as information_schema spells it) -> the Arrow type its rows are built as.
_ARROW = {
    "VARCHAR": pa.string(),
    "JSON": pa.string(),
    "BLOB": pa.binary(),
    "BIGINT": pa.int64(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "BOOLEAN": pa.bool_(),
    "TIMESTAMP_NS": pa.timestamp("ns"),
    "TIMESTAMP": pa.timestamp("us"),
    USD: pa.decimal128(38, 12),
    "VARCHAR[]": pa.list_(pa.string()),
}


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    sql_type: str

    @property
    def arrow_type(self) -> pa.DataType:
        return _ARROW[self.sql_type]


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]

    @cached_property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.arrow_type) for c in self.columns])

    def in_order(self, values: Mapping[str, str]) -> list[str]:
        """One value per column, in table order; raises naming any column without a value (or the reverse)."""
        if set(values) != set(self.names):
            odd = sorted(set(values) ^ set(self.names))
            raise ValueError(f"{self.name}: columns without a value or values without a column: {odd}")
        return [values[name] for name in self.names]

    def compile_row(self, params: str, values: Mapping[str, str]) -> Callable[..., tuple[Any, ...]]:
        """A function ``(params) -> row tuple in table order``, from each column's value by name.

        ``values`` maps every column to a Python expression over ``params``. Rows
        are tuples (the cheapest Python row) until ``to_arrow``; compiling the
        tuple in the declared order once, as ``namedtuple`` does, keeps building a
        row by name as cheap as writing the tuple by hand (a dict per row costs
        ~0.6 µs more, ~5% of ``prepare``).
        """
        body = ", ".join(self.in_order(values))
        namespace: dict[str, Any] = {}
        exec(f"def {self.name}_row({params}):\n    return ({body},)", {}, namespace)  # our own expressions, no input
        return namespace[f"{self.name}_row"]  # type: ignore[no-any-return]

    def to_arrow(self, rows: list[tuple[Any, ...]]) -> pa.Table:
        """Row tuples -> an Arrow table of exactly the declared types (so batches built apart concatenate)."""
        schema = self.arrow_schema
        columns = zip(*rows, strict=True) if rows else ([] for _ in schema)
        return pa.table([pa.array(col, type=f.type) for col, f in zip(columns, schema, strict=True)], schema=schema)


_BETWEEN_COLUMNS = re.compile(r",(?![^()]*\))")  # a comma outside parentheses: DECIMAL(38,12) is one type


def _columns(spec: str) -> tuple[Column, ...]:
    """``"name TYPE, name TYPE"`` -> columns; the compact form keeps a table on a few lines."""
    return tuple(Column(*part.split(maxsplit=1)) for part in (p.strip() for p in _BETWEEN_COLUMNS.split(spec)) if part)


def term_columns(term: PriceTerm) -> tuple[Column, Column]:
    """A term's columns in charges and runs: its token count and its dollars."""
    return Column(term.tokens_column, "BIGINT"), Column(term.usd_column, USD)


# Migration 1 created the first four terms' columns in its own order (token
# counts input side first, dollars in TERMS order); that layout is history.
# Every later term's columns are added by its migration at the end of the table.
_V1_TOKEN_ORDER = ("uncached_input", "cache_write", "cache_read", "output")
_V1_USD_ORDER = ("uncached_input", "output", "cache_write", "cache_read")


def _v1_tokens() -> tuple[Column, ...]:
    return tuple(term_columns(terms.term(k))[0] for k in _V1_TOKEN_ORDER)


def _v1_usd() -> tuple[Column, ...]:
    return tuple(term_columns(terms.term(k))[1] for k in _V1_USD_ORDER)


def _later_terms() -> tuple[Column, ...]:
    return tuple(c for t in terms.TERMS if t.key not in _V1_TOKEN_ORDER for c in term_columns(t))


# Columns later migrations appended (after the terms' columns of migration 5), in migration order.
_APPENDED = {
    # 9: links, redacted; 10: references to moved content; 15, 25: health facts decided at ingest (ledger.health_columns)
    "spans": _columns("links JSON, content_refs JSON, tool VARCHAR, soft_failure BOOLEAN, call_fingerprint VARCHAR"),
    # 6: usage not taken as reported; 15: first token; 21: usage that is part of the call's; 26, 27: how it was known
    "charges": _columns(
        "invalid_usage BOOLEAN, ttft_ms DOUBLE, incomplete_usage BOOLEAN, cache_split VARCHAR, output_count VARCHAR, "
        f"usage_error_usd {USD}, unknown_usage BOOLEAN"
    ),
    "runs": _columns(  # 6, 12; 15: errored spans; 16: the version dimensions resources carry; 18: tools called; 21; 26
        "invalid_usage_calls INTEGER, step_cap_halts INTEGER, error_spans INTEGER, service_version VARCHAR, "
        "environment VARCHAR, variant VARCHAR, tools VARCHAR[], incomplete_usage_calls INTEGER, unknown_usage_calls INTEGER"
    ),
}


_SPANS = _columns("""
    trace_id VARCHAR, span_id VARCHAR, parent_span_id VARCHAR, name VARCHAR, kind VARCHAR, operation VARCHAR,
    tenant VARCHAR, start_time TIMESTAMP_NS, end_time TIMESTAMP_NS, status_code VARCHAR, status_message VARCHAR,
    attributes JSON, resource JSON, events JSON, scope_name VARCHAR, scope_version VARCHAR, ingested_at TIMESTAMP
""")
_CHARGES_HEAD = _columns("""
    trace_id VARCHAR, span_id VARCHAR, parent_span_id VARCHAR, call_id VARCHAR, start_time TIMESTAMP_NS,
    latency_ms DOUBLE, tenant VARCHAR, call_site VARCHAR, provider VARCHAR, model VARCHAR, attempt INTEGER,
    retry_cause VARCHAR, status_code VARCHAR, error_type VARCHAR, finish_reason VARCHAR
""")
_CHARGES_TAIL = _columns("unpriced BOOLEAN, price_source VARCHAR, price_version VARCHAR, token_convention VARCHAR")
_GUARD_EVENTS = _columns("""
    trace_id VARCHAR, span_id VARCHAR, seq INTEGER, name VARCHAR, time TIMESTAMP_NS, shape VARCHAR, action VARCHAR,
    tool VARCHAR, cause VARCHAR, attributes JSON
""")
# Migration 13 (``ledger.content``): blocks keyed by their 16-byte hash; 19: only what runs share (system
# prompts, tool lists) keyed by it alone, each run's other blocks beside its trace id, and a call's row
# (found by its trace id) lists its message blocks' keys (hex, in order) and references what the model answered.
_CONTENT_BLOCKS = _columns("hash BLOB, body VARCHAR")
_RUN_BLOCKS = _columns("trace_id VARCHAR, hash BLOB, body VARCHAR")
_CONTEXTS = _columns("""
    trace_id VARCHAR, span_id VARCHAR, envelope JSON, system_block BLOB, tools_block BLOB, messages VARCHAR,
    response JSON
""")
# Migration 7: one row per model-call span, the copy it is of a billed call (``ledger.billed``).
_CALL_COPIES = _columns("""
    trace_id VARCHAR, span_id VARCHAR, parent_span_id VARCHAR, billed_call VARCHAR, model VARCHAR,
    start_time TIMESTAMP_NS, end_time TIMESTAMP_NS, usage_terms INTEGER, scope_name VARCHAR,
    duplicate_of_trace VARCHAR, duplicate_of VARCHAR
""")
# Migration 14: feedback and evaluations attached to traces (``ledger.schema._V14_QUALITY`` says what each holds).
_EVALUATIONS = _columns("""
    eval_id VARCHAR, kind VARCHAR, trace_id VARCHAR, span_id VARCHAR, tenant VARCHAR, name VARCHAR, score DOUBLE,
    label VARCHAR, explanation VARCHAR, tags JSON, source VARCHAR, failed BOOLEAN, safety BOOLEAN,
    time TIMESTAMP_NS, ingested_at TIMESTAMP
""")
# Migration 20: producers' own metrics, a cross-check series (``ledger.metrics``), never charged.
_METRIC_POINTS = (
    *_columns("name VARCHAR, series VARCHAR, start_time TIMESTAMP_NS, time TIMESTAMP_NS"),
    Column("value", USD),  # (its type holds a comma, which the compact form splits on)
    *_columns("""
        unit VARCHAR, temporality VARCHAR, monotonic BOOLEAN, session_id VARCHAR, model VARCHAR, attributes JSON,
        resource JSON, scope_name VARCHAR, scope_version VARCHAR, ingested_at TIMESTAMP
    """),
)
_RUNS_HEAD = _columns("""
    trace_id VARCHAR, root_span_id VARCHAR, name VARCHAR, service_name VARCHAR, agent_name VARCHAR,
    agent_version VARCHAR, prompt_version VARCHAR, tool_schema_version VARCHAR, tenant VARCHAR,
    conversation_id VARCHAR, started_at TIMESTAMP_NS, ended_at TIMESTAMP_NS, status_code VARCHAR, error_type VARCHAR,
    stop_cause VARCHAR, stop_detail VARCHAR, model_calls INTEGER, turns INTEGER, tool_calls INTEGER,
    soft_failures INTEGER, loop_trips INTEGER, retry_attempts INTEGER, unpriced_calls INTEGER
""")


def _declare(name: str) -> tuple[Column, ...]:
    if name == "charges":
        reasoning = Column("reasoning_tokens", "BIGINT")
        tail = (*_CHARGES_TAIL, *_later_terms(), *_APPENDED["charges"])
        return (*_CHARGES_HEAD, *_v1_tokens(), reasoning, *_v1_usd(), *tail)
    if name == "runs":
        usd_total = Column("usd_total", USD)  # derived for sorting; the terms stay beside it
        models = Column("models", "VARCHAR")
        return (*_RUNS_HEAD, *_v1_tokens(), *_v1_usd(), usd_total, models, *_later_terms(), *_APPENDED["runs"])
    fixed = {
        "spans": (*_SPANS, *_APPENDED["spans"]),
        "guard_events": _GUARD_EVENTS,
        "content_blocks": _CONTENT_BLOCKS,
        "run_blocks": _RUN_BLOCKS,
        "contexts": _CONTEXTS,
        "call_copies": _CALL_COPIES,
        "evaluations": _EVALUATIONS,
        "metric_points": _METRIC_POINTS,
    }
    return fixed[name]


# The tables ingest writes rows to, in insertion order (spans first; a model call's
# copies before its charge, which ``ledger.dedup`` keeps only for the charged copy).
WRITTEN = (
    "spans", "call_copies", "charges", "guard_events", "evaluations", "content_blocks", "run_blocks", "contexts",
    "metric_points",
)  # fmt: skip


def table(name: str) -> Table:
    """The declaration of a ledger table, with the columns of every term in ``TERMS`` now."""
    return _table(name, terms.TERMS)


@cache
def _table(name: str, _terms: tuple[PriceTerm, ...]) -> Table:  # keyed by the terms, so a test can add one
    return Table(name, _declare(name))
