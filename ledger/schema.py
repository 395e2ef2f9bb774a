"""The ledger's tables, as numbered migrations recorded in the database.

Each migration runs once, inside a transaction, and its number is written to
``schema_migrations``; opening a database runs whatever is missing, so
re-running is always safe. Add a migration; never edit an applied one.

The tables as they stand after every migration are declared in
``ledger.tables``; a new price term's columns come from ``add_term_columns``.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
from collections.abc import Callable

import duckdb
import pyarrow as pa

from . import conventions as c
from . import lake, terms
from .conventions import EVENT_LOOP_TRIP
from .errors import TurnledgerError
from .health_columns import BACKFILL as HEALTH_BACKFILL
from .loops import call_fingerprint
from .runs import STEP_CAP_SHAPE, tools_used, version_aggregates
from .tables import USD, term_columns

__all__ = ["MIGRATIONS", "MigrationFailed", "add_term_columns", "migrate", "pending_migrations", "schema_version"]

_V1_TABLES = f"""
CREATE TABLE spans (
    trace_id        VARCHAR NOT NULL,
    span_id         VARCHAR NOT NULL,
    parent_span_id  VARCHAR NOT NULL,
    name            VARCHAR NOT NULL,
    kind            VARCHAR NOT NULL,
    operation       VARCHAR,          -- invoke_agent | chat | execute_tool | ... (normalized)
    tenant          VARCHAR,
    start_time      TIMESTAMP_NS NOT NULL,
    end_time        TIMESTAMP_NS NOT NULL,
    status_code     VARCHAR NOT NULL,
    status_message  VARCHAR,
    attributes      JSON,
    resource        JSON,
    events          JSON,
    scope_name      VARCHAR,
    scope_version   VARCHAR,
    ingested_at     TIMESTAMP NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);

-- One row per billed model-call attempt. The four USD terms are never pre-summed.
CREATE TABLE charges (
    trace_id              VARCHAR NOT NULL,
    span_id               VARCHAR NOT NULL,
    parent_span_id        VARCHAR NOT NULL,
    call_id               VARCHAR NOT NULL,
    start_time            TIMESTAMP_NS NOT NULL,
    latency_ms            DOUBLE,
    tenant                VARCHAR,
    call_site             VARCHAR NOT NULL,
    provider              VARCHAR NOT NULL,
    model                 VARCHAR NOT NULL,
    attempt               INTEGER NOT NULL,
    retry_cause           VARCHAR NOT NULL,
    status_code           VARCHAR NOT NULL,
    error_type            VARCHAR,
    finish_reason         VARCHAR,
    uncached_input_tokens BIGINT NOT NULL,
    cache_write_tokens    BIGINT NOT NULL,
    cache_read_tokens     BIGINT NOT NULL,
    output_tokens         BIGINT NOT NULL,
    reasoning_tokens      BIGINT NOT NULL,
    usd_input             {USD} NOT NULL,
    usd_output            {USD} NOT NULL,
    usd_cache_write       {USD} NOT NULL,
    usd_cache_read        {USD} NOT NULL,
    unpriced              BOOLEAN NOT NULL,
    price_source          VARCHAR NOT NULL,
    price_version         VARCHAR NOT NULL,
    token_convention      VARCHAR NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);

-- Guard decisions (loop trips, budget warn/stop, retries, offloads, denials, hand-offs).
CREATE TABLE guard_events (
    trace_id    VARCHAR NOT NULL,
    span_id     VARCHAR NOT NULL,
    seq         INTEGER NOT NULL,
    name        VARCHAR NOT NULL,
    time        TIMESTAMP_NS NOT NULL,
    shape       VARCHAR,
    action      VARCHAR,
    tool        VARCHAR,
    cause       VARCHAR,
    attributes  JSON,
    PRIMARY KEY (trace_id, span_id, seq)
);

-- One row per trace, fully derived from the rows above and rebuilt for every
-- trace an ingest touches (children usually arrive before their root).
CREATE TABLE runs (
    trace_id              VARCHAR PRIMARY KEY,
    root_span_id          VARCHAR,
    name                  VARCHAR,
    service_name          VARCHAR,
    agent_name            VARCHAR,
    agent_version         VARCHAR,
    prompt_version        VARCHAR,
    tool_schema_version   VARCHAR,
    tenant                VARCHAR,
    conversation_id       VARCHAR,
    started_at            TIMESTAMP_NS,
    ended_at              TIMESTAMP_NS,
    status_code           VARCHAR,
    error_type            VARCHAR,
    stop_cause            VARCHAR,
    stop_detail           VARCHAR,
    model_calls           INTEGER NOT NULL,
    turns                 INTEGER NOT NULL,
    tool_calls            INTEGER NOT NULL,
    soft_failures         INTEGER NOT NULL,
    loop_trips            INTEGER NOT NULL,
    retry_attempts        INTEGER NOT NULL,
    unpriced_calls        INTEGER NOT NULL,
    uncached_input_tokens BIGINT NOT NULL,
    cache_write_tokens    BIGINT NOT NULL,
    cache_read_tokens     BIGINT NOT NULL,
    output_tokens         BIGINT NOT NULL,
    usd_input             {USD} NOT NULL,
    usd_output            {USD} NOT NULL,
    usd_cache_write       {USD} NOT NULL,
    usd_cache_read        {USD} NOT NULL,
    usd_total             {USD} NOT NULL,  -- derived for sorting; the terms stay above
    models                VARCHAR
);

-- Captured request payloads, content-addressed. Every turn re-sends the whole
-- history, so message bodies are stored once each (globally) and a turn's
-- message list is a chain of nodes (hash of previous node + message) kept per
-- trace: storage grows linearly with turns, and a rebuild reads one run's nodes.
CREATE TABLE content_blocks (
    hash   VARCHAR PRIMARY KEY,
    body   VARCHAR USING COMPRESSION zstd NOT NULL
);
CREATE TABLE message_chain (
    trace_id  VARCHAR NOT NULL,
    node      VARCHAR NOT NULL,
    prev      VARCHAR,
    block     VARCHAR NOT NULL,
    PRIMARY KEY (trace_id, node)
);
CREATE TABLE contexts (
    trace_id      VARCHAR NOT NULL,
    span_id       VARCHAR NOT NULL,
    envelope      JSON NOT NULL,     -- key order + the small top-level fields inline
    system_block  VARCHAR,
    tools_block   VARCHAR,
    messages_node VARCHAR,
    payload_bytes BIGINT NOT NULL,   -- size of the full payload, for storage reports
    PRIMARY KEY (trace_id, span_id)
);

CREATE TABLE budgets (
    id             VARCHAR PRIMARY KEY,
    name           VARCHAR NOT NULL,
    scope_kind     VARCHAR NOT NULL,  -- global | tenant | agent | model | call_site | run
    scope_value    VARCHAR,
    time_window    VARCHAR NOT NULL,  -- run | rolling_hour | rolling_day | day | month
    metric         VARCHAR NOT NULL,  -- spend | p95_run_cost | cache_hit_rate | ...
    limit_value    {USD},
    soft_fraction  DOUBLE NOT NULL DEFAULT 0.8,
    created_at     TIMESTAMP NOT NULL
);
CREATE TABLE alerts (
    id            VARCHAR PRIMARY KEY,
    budget_id     VARCHAR NOT NULL,
    level         VARCHAR NOT NULL,   -- ok | warn | exceeded
    window_start  TIMESTAMP,
    fired_at      TIMESTAMP NOT NULL,
    value         {USD},
    figures       JSON
);
CREATE TABLE alert_deliveries (
    alert_id      VARCHAR NOT NULL,
    attempt       INTEGER NOT NULL,
    target        VARCHAR NOT NULL,
    attempted_at  TIMESTAMP NOT NULL,
    status        VARCHAR NOT NULL,
    detail        VARCHAR,
    PRIMARY KEY (alert_id, target, attempt)
);
"""

_V2_INDEXES = """
CREATE INDEX charges_trace ON charges (trace_id);
CREATE INDEX guard_events_trace ON guard_events (trace_id);
"""

# Budget rules v2 (ledger.budgets): a rule's calendar time zone and webhooks; an
# alert's state key (a run's trace id for per-run rules), the window it dedups on,
# the level it left and the threshold it crossed; a delivery attempt's HTTP status
# and latency.
_V3_BUDGET_RULES = f"""
ALTER TABLE budgets ADD COLUMN timezone VARCHAR DEFAULT 'UTC';
ALTER TABLE budgets ADD COLUMN webhooks JSON;
ALTER TABLE alerts ADD COLUMN state_key VARCHAR DEFAULT '';
ALTER TABLE alerts ADD COLUMN window_key VARCHAR;
ALTER TABLE alerts ADD COLUMN window_end TIMESTAMP;
ALTER TABLE alerts ADD COLUMN previous_level VARCHAR;
ALTER TABLE alerts ADD COLUMN threshold {USD};
ALTER TABLE alert_deliveries ADD COLUMN http_status INTEGER;
ALTER TABLE alert_deliveries ADD COLUMN latency_ms DOUBLE;
CREATE INDEX alerts_rule ON alerts (budget_id, state_key);
"""

# Traces whose ``runs`` row is behind their spans. Under load the collector
# commits spans and acknowledges them first and rebuilds the runs of many
# commits at once (``ledger.ingest.write(defer_runs=True)``); the traces wait
# here, in the same transaction as their spans, so a crash in between is caught
# up on the next start.
_V4_RUNS_PENDING = """
CREATE TABLE runs_pending (
    trace_id    VARCHAR PRIMARY KEY,
    first_start TIMESTAMP_NS NOT NULL  -- earliest start among the trace's spans not yet in its runs row
);
"""

# One charge per billed call (ledger.billed, ledger.dedup): every model-call span
# is a copy of a billed call; the copies of one call share a key and only one is
# charged, the others name it in duplicate_of. Looked up by key and time (the
# copies of one call overlap in time), so start_time bounds every scan.
_V7_CALL_COPIES = """
CREATE TABLE call_copies (
    trace_id            VARCHAR NOT NULL,
    span_id             VARCHAR NOT NULL,
    parent_span_id      VARCHAR NOT NULL,
    billed_call         VARCHAR NOT NULL,  -- response:<id> | request:<id> | span:<trace>/<span>
    model               VARCHAR NOT NULL,
    start_time          TIMESTAMP_NS NOT NULL,
    end_time            TIMESTAMP_NS NOT NULL,
    usage_terms         INTEGER NOT NULL,  -- how complete its usage is: the most complete copy is charged
    scope_name          VARCHAR NOT NULL,
    duplicate_of_trace  VARCHAR,           -- the charged copy, when this one is not it
    duplicate_of        VARCHAR            -- one row per (trace_id, span_id), kept by ledger.write (no index:
);                                         -- every insert would pay for it)
"""


# Migration 14: judgments attached to traces (issue #15). One row per judgment of a run or a span:
# a user's feedback (POST /v1/feedback) or an evaluation (a `gen_ai.evaluation.result` span event,
# OpenInference's evaluation attributes). `failed` and `safety` are decided once, when the row is
# written (what counts as negative or as a safety judgment is configuration, `ledger.quality`), so
# the review queue, sampling and the alert rules all read the same verdict.
_V14_QUALITY = """
CREATE TABLE evaluations (
    eval_id      VARCHAR PRIMARY KEY,  -- feedback:{the client's id} (idempotent), event:/attr:{trace}/{span}/{which}
    kind         VARCHAR NOT NULL,  -- feedback | evaluation
    trace_id     VARCHAR NOT NULL,
    span_id      VARCHAR,           -- NULL: the judgment is of the whole run
    tenant       VARCHAR,
    name         VARCHAR NOT NULL,  -- the evaluation's name (gen_ai.evaluation.name); feedback: its source's name
    score        DOUBLE,
    label        VARCHAR,
    explanation  VARCHAR,           -- redacted like any captured text; feedback's comment
    tags         JSON,
    source       VARCHAR,           -- who judged: a user, an LLM judge, a human reviewer, a library
    failed       BOOLEAN NOT NULL,  -- negative feedback / a failed evaluation
    safety       BOOLEAN NOT NULL,  -- a safety judgment (a violation when also failed)
    time         TIMESTAMP_NS NOT NULL,
    ingested_at  TIMESTAMP NOT NULL
);
CREATE INDEX evaluations_trace ON evaluations (trace_id);
CREATE TABLE review_items (
    trace_id     VARCHAR PRIMARY KEY,  -- one item per run
    reason       VARCHAR NOT NULL,  -- why it entered: errored, step_cap, loop_halt, budget_stop,
                                    -- negative_feedback, failed_evaluation, manual
    entered_at   TIMESTAMP NOT NULL,
    status       VARCHAR NOT NULL,  -- open | closed
    tags         JSON,              -- from the fixed list (bad_plan, wrong_tool, ...; extensible in config)
    note         VARCHAR,
    reviewer     VARCHAR,
    closed_at    TIMESTAMP
);
"""


# A migration is SQL, or a function of the connection for changes SQL alone cannot make.
Migration = str | Callable[[duckdb.DuckDBPyConnection], None]


def add_term_columns(key: str) -> Migration:
    """The migration for a new entry in ``TERMS``: its columns in charges and runs, 0 in the rows already there.

    Listed as ``(N, "<term> price term", add_term_columns("<key>"))``.
    """
    columns = term_columns(terms.term(key))

    def add_columns(con: duckdb.DuckDBPyConnection) -> None:
        for table in ("charges", "runs"):
            for column in columns:
                _execute(con, _add_column(table, column.name, column.sql_type, "0"))

    return add_columns


def _add_column(table: str, column: str, sql_type: str, default: str) -> str:
    """A column added to a table that may hold rows: they get ``default``, and so does every row
    written without it.

    No NOT NULL (``ledger.write`` always fills the column): DuckDB 1.5 refuses SET NOT NULL in the
    transaction that added the column once the table holds rows ("Cannot create index with
    outstanding updates", #41: every ledger of a real user), and a migration is one transaction
    so that a crash or a failure leaves the ledger as the release before it wrote it. Nor are
    the table's indexes dropped around it: ADD COLUMN stands beside an index.
    """
    return f"ALTER TABLE {table} ADD COLUMN {column} {sql_type} DEFAULT {default}"


def _alter_indexed(con: duckdb.DuckDBPyConnection, table: str, alters: list[str]) -> None:
    """DuckDB refuses to alter a table an index depends on: drop its indexes, alter it, create them again."""
    indexes = con.execute("SELECT index_name, sql FROM duckdb_indexes() WHERE table_name = ?", [table]).fetchall()
    for name, _ in indexes:
        con.execute(f'DROP INDEX "{name}"')
    for alter in alters:
        _execute(con, alter)
    for _, create in indexes:
        con.execute(create)


def _execute(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Run migration SQL; on a DuckLake, without what it refuses (``ledger.lake.ddl``).

    Every statement of a migration goes through here, so a failure can name the one it was at."""
    if lake.is_lake(con):
        sql = lake.ddl(sql)
        if not sql.strip(" ;\n"):
            return
    _statements.set((*_statements.get(), sql))
    con.execute(sql)


# The statements the running migration has sent so far, for the message if one fails.
_statements: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("migration_statements", default=())


class MigrationFailed(TurnledgerError):
    """A migration could not be applied; it was rolled back whole (the message names it and its step).

    None of the four kinds: nothing the user sent is wrong and retrying will not help; the ledger
    stays readable by the release that wrote it."""


def _failed(version: int, name: str, exc: Exception) -> MigrationFailed:
    sent = _statements.get()
    step = " ".join(sent[-1].split())[:160] if sent else "before its first statement"
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return MigrationFailed(
        f"migration {version} ({name}) failed at step {len(sent) or 1} ({step}): {cause}. Nothing of it was "
        f"written: the ledger is as it was, and the turnledger release that wrote it still opens it. "
        "Report this with the message; a copy of the ledger file (or the lake's catalog) lets us reproduce it."
    )


def _v6_invalid_usage(con: duckdb.DuckDBPyConnection) -> None:
    """Charges whose reported usage could not be taken (negative, NaN, past MAX_TOKENS...) are
    flagged, and runs count them, like unpriced calls: never a silent $0."""
    _execute(con, _add_column("charges", "invalid_usage", "BOOLEAN", "false"))
    _execute(con, _add_column("runs", "invalid_usage_calls", "INTEGER", "0"))


def _v21_incomplete_usage(con: duckdb.DuckDBPyConnection) -> None:
    """Charges whose usage is only part of the call's (output with no input: a stream's last event)
    are flagged, and runs count them, as invalid usage is: charged as sent, listed, never a cache break."""
    _execute(con, _add_column("charges", "incomplete_usage", "BOOLEAN", "false"))
    _execute(con, _add_column("runs", "incomplete_usage_calls", "INTEGER", "0"))


def _v10_content_refs(con: duckdb.DuckDBPyConnection) -> None:
    """Responses, tool arguments and results leave the span's attributes for the content store
    (``ledger.content``): a span keeps references to them, a model call's answer hangs off its
    contexts row. Rebuilding a turn reads its trace's rows through single-column indexes (DuckDB
    uses no composite key for a lookup), so its cost follows the run's size, not the ledger's."""
    _alter_indexed(con, "spans", ["ALTER TABLE spans ADD COLUMN content_refs JSON"])
    _alter_indexed(con, "contexts", ["ALTER TABLE contexts ADD COLUMN response JSON"])
    _execute(con, "CREATE INDEX contexts_trace ON contexts (trace_id)")
    _execute(con, "CREATE INDEX message_chain_trace ON message_chain (trace_id)")


def _v12_step_cap_and_enabled(con: duckdb.DuckDBPyConnection) -> None:
    """A step-cap halt is the harness's step limit, not the loop detector: runs count it apart
    (``step_cap_halts``) and ``loop_trips`` no longer includes it. A budget rule can be
    switched off without losing it or its alert history."""
    _execute(con, _add_column("runs", "step_cap_halts", "INTEGER", "0"))
    con.execute(
        f"""UPDATE runs SET step_cap_halts = g.halts, loop_trips = runs.loop_trips - g.halts
FROM (SELECT trace_id, count(*) AS halts FROM guard_events WHERE name = '{EVENT_LOOP_TRIP}' AND shape = '{STEP_CAP_SHAPE}'
      GROUP BY trace_id) g WHERE g.trace_id = runs.trace_id"""
    )
    _execute(con, _add_column("budgets", "enabled", "BOOLEAN", "true"))


# Migration 13 (``ledger.content``): content blocks keyed by their 16-byte hash, and each call's
# message blocks listed on its contexts row, keyed by one 16-byte column, instead of a per-trace chain
# of nodes (one indexed row per message). The tables are rebuilt (DuckDB alters no column an index
# depends on; DuckLake changes no type), each old chain walked from its call's tail node to the root.
_V13_CONTENT_BLOCKS = """
CREATE TABLE content_blocks_v13 (
    hash   BLOB PRIMARY KEY,
    body   VARCHAR USING COMPRESSION zstd NOT NULL
);
INSERT INTO content_blocks_v13 SELECT unhex(hash), body FROM content_blocks;
DROP TABLE content_blocks;
ALTER TABLE content_blocks_v13 RENAME TO content_blocks;
"""
_V13_CONTEXTS = """
CREATE TABLE contexts_v13 (
    call          BLOB PRIMARY KEY,  -- _v13_call_key(trace_id, span_id)
    trace_id      VARCHAR NOT NULL,
    span_id       VARCHAR NOT NULL,
    envelope      JSON NOT NULL,
    system_block  BLOB,
    tools_block   BLOB,
    messages      VARCHAR USING COMPRESSION zstd,  -- the message blocks' keys in hex, in order
    payload_bytes BIGINT NOT NULL,
    response      JSON
);
INSERT INTO contexts_v13
WITH RECURSIVE walk (trace_id, span_id, node, depth, block) AS (
    SELECT trace_id, span_id, messages_node, 0, NULL::VARCHAR FROM contexts WHERE messages_node IS NOT NULL
    UNION ALL
    SELECT w.trace_id, w.span_id, m.prev, w.depth + 1, m.block
    FROM walk w JOIN message_chain m ON m.trace_id = w.trace_id AND m.node = w.node
), lists AS (
    SELECT trace_id, span_id, string_agg(block, '' ORDER BY depth DESC) FILTER (WHERE depth > 0) AS messages
    FROM walk GROUP BY trace_id, span_id
)
SELECT k.call, c.trace_id, c.span_id, c.envelope, unhex(c.system_block), unhex(c.tools_block), l.messages,
       c.payload_bytes, c.response
FROM contexts c JOIN v13_call_keys k ON k.trace_id = c.trace_id AND k.span_id = c.span_id
LEFT JOIN lists l ON l.trace_id = c.trace_id AND l.span_id = c.span_id
ORDER BY c.trace_id, c.payload_bytes;  -- a run's lists side by side: each one mostly repeats the one before
DROP TABLE contexts;
DROP TABLE message_chain;
ALTER TABLE contexts_v13 RENAME TO contexts;
"""


def _v13_call_key(trace_id: str, span_id: str) -> bytes:
    """Migration 13's key of a contexts row: the 16-byte blake2b of its ids (the ids' length keeps it unambiguous)."""
    return hashlib.blake2b(f"{len(trace_id)}:{trace_id}{span_id}".encode(), digest_size=16).digest()


def _v13_content_keys(con: duckdb.DuckDBPyConnection) -> None:
    _execute(con, _V13_CONTENT_BLOCKS)
    ids = con.execute("SELECT trace_id, span_id FROM contexts").fetchall()
    keys = pa.table(
        {
            "trace_id": pa.array([t for t, _ in ids], pa.string()),
            "span_id": pa.array([s for _, s in ids], pa.string()),
            "call": pa.array([_v13_call_key(t, s) for t, s in ids], pa.binary()),
        }
    )
    con.register("v13_call_keys", keys)  # the keys are blake2b, which DuckDB's SQL has not
    try:
        _execute(con, _V13_CONTEXTS)
    finally:
        con.unregister("v13_call_keys")


def _v15_health_columns(con: duckdb.DuckDBPyConnection) -> None:
    """The Health page's per-span facts (tool name, soft failure, time to first token) are decided
    at ingest (``ledger.health_columns``) instead of parsed from span JSON on every read, and a
    run counts its ERROR spans (``runs.error_spans``) instead of the page scanning spans; the rows
    already stored get them from the same definition in SQL. ``soft_failure`` has a default but
    no NOT NULL: on a table with a primary key DuckDB 1.5 refuses SET NOT NULL in the transaction
    that added the column ("Cannot create index with outstanding updates"); readers coalesce."""
    # Plain ADD COLUMN: DuckDB 1.5 allows it beside an index, and dropping and re-creating
    # charges' index around it in this transaction aborts the process at COMMIT.
    _execute(con, "ALTER TABLE spans ADD COLUMN tool VARCHAR")
    _execute(con, "ALTER TABLE spans ADD COLUMN soft_failure BOOLEAN DEFAULT false")
    _execute(con, "ALTER TABLE charges ADD COLUMN ttft_ms DOUBLE")
    _execute(con, "ALTER TABLE runs ADD COLUMN error_spans INTEGER DEFAULT 0")
    for sql in HEALTH_BACKFILL:
        con.execute(sql)
    # Sampling (ledger.retention.sampling): each run's detail decided once, after its grace period.
    _execute(
        con,
        "CREATE TABLE sampling_decisions (trace_id VARCHAR PRIMARY KEY, kept BOOLEAN NOT NULL, "
        "reason VARCHAR NOT NULL, decided_at TIMESTAMP NOT NULL)",
    )


def _v16_versions_and_relative_rules(con: duckdb.DuckDBPyConnection) -> None:
    """Service version, deployment environment and a free variant label are run dimensions beside the
    agent and prompt versions, filled in from the spans already stored; a budget rule can be measured
    against a baseline version (``ledger.budgets.relative``: its definition as JSON, NULL for the others)."""
    versions = version_aggregates("s")
    _alter_indexed(con, "runs", [f"ALTER TABLE runs ADD COLUMN {column} VARCHAR" for column in versions])
    con.execute(
        f"""UPDATE runs SET {", ".join(f"{k} = v.{k}" for k in versions)}
FROM (SELECT s.trace_id, {", ".join(f"{expr} AS {k}" for k, expr in versions.items())} FROM spans s GROUP BY 1) v
WHERE v.trace_id = runs.trace_id"""
    )
    _alter_indexed(con, "budgets", ["ALTER TABLE budgets ADD COLUMN relative JSON"])


def _v18_tools_used(con: duckdb.DuckDBPyConnection) -> None:
    """Each run lists the distinct tools it called (``runs.tools``, rebuilt with its other totals by
    ``ledger.runs``), so the Health page counts the runs using a tool over runs rows instead of
    distinct trace ids over every tool span; the runs already stored get it from their spans."""
    _alter_indexed(con, "runs", ["ALTER TABLE runs ADD COLUMN tools VARCHAR[]"])
    con.execute(
        f"""UPDATE runs SET tools = u.tools
FROM (SELECT s.trace_id, {tools_used("s")} AS tools FROM spans s WHERE s.operation = 'execute_tool' GROUP BY 1) u
WHERE u.trace_id = runs.trace_id"""
    )


# Migration 19 (``ledger.content``): a run's own blocks (messages, answers, tool arguments and results)
# move to ``run_blocks`` beside its trace id, found through a trace index (a few bytes a row) instead
# of one index entry per random hash (~49 bytes); ``content_blocks`` keeps what runs share (system
# prompts, tool lists). A call's contexts row is found by its trace id too: its 16-byte key and that
# key's index go, with the unused payload size. A block is found for a run wherever one of its rows
# names it (hex keys in message lists and references); each table is rebuilt with a run's rows together.
_V19_HASH = "'[0-9a-f]{32}'"
_V19_RUN_BLOCKS = f"""
CREATE TABLE run_blocks (
    trace_id VARCHAR NOT NULL,
    hash     BLOB NOT NULL,
    body     VARCHAR USING COMPRESSION zstd NOT NULL
);
INSERT INTO run_blocks
WITH named AS (
    SELECT trace_id, unhex(unnest(regexp_extract_all(messages, {_V19_HASH}))) AS hash FROM contexts
    WHERE messages IS NOT NULL
    UNION SELECT trace_id, unhex(unnest(regexp_extract_all(response::VARCHAR, {_V19_HASH}))) FROM contexts
    WHERE response IS NOT NULL
    UNION SELECT trace_id, unhex(unnest(regexp_extract_all(content_refs::VARCHAR, {_V19_HASH}))) FROM spans
    WHERE content_refs IS NOT NULL
)
SELECT n.trace_id, n.hash, b.body FROM named n JOIN content_blocks b ON b.hash = n.hash ORDER BY n.trace_id, n.hash;
CREATE INDEX run_blocks_trace ON run_blocks (trace_id);
CREATE TABLE content_blocks_v19 (
    hash   BLOB PRIMARY KEY,
    body   VARCHAR USING COMPRESSION zstd NOT NULL
);
INSERT INTO content_blocks_v19 SELECT hash, body FROM content_blocks
WHERE hash IN (SELECT system_block FROM contexts UNION SELECT tools_block FROM contexts);
DROP TABLE content_blocks;
ALTER TABLE content_blocks_v19 RENAME TO content_blocks;
CREATE TABLE contexts_v19 (
    trace_id      VARCHAR NOT NULL,
    span_id       VARCHAR NOT NULL,
    envelope      JSON NOT NULL,
    system_block  BLOB,
    tools_block   BLOB,
    messages      VARCHAR USING COMPRESSION zstd,  -- the message blocks' keys in hex, in order
    response      JSON
);
INSERT INTO contexts_v19
SELECT trace_id, span_id, envelope, system_block, tools_block, messages, response FROM contexts
ORDER BY trace_id, length(messages);  -- a run's lists side by side: each one mostly repeats the one before
DROP TABLE contexts;
ALTER TABLE contexts_v19 RENAME TO contexts;
CREATE INDEX contexts_trace ON contexts (trace_id);
"""


# Producers' own metrics (ledger.metrics): Claude Code's cost and token counters, kept to compare
# with the charges, never charged. One row per data point, keyed so a retried export adds nothing.
_V20_METRIC_POINTS = f"""
CREATE TABLE metric_points (
    name          VARCHAR NOT NULL,
    series        VARCHAR NOT NULL,
    start_time    TIMESTAMP_NS,
    time          TIMESTAMP_NS NOT NULL,
    value         {USD} NOT NULL,
    unit          VARCHAR,
    temporality   VARCHAR NOT NULL,
    monotonic     BOOLEAN NOT NULL,
    session_id    VARCHAR,
    model         VARCHAR,
    attributes    JSON NOT NULL,
    resource      JSON NOT NULL,
    scope_name    VARCHAR NOT NULL,
    scope_version VARCHAR NOT NULL,
    ingested_at   TIMESTAMP NOT NULL,
    PRIMARY KEY (name, series, time)
);
"""


def _v25_call_fingerprints(con: duckdb.DuckDBPyConnection) -> None:
    """A tool span's call fingerprint (``ledger.loops``: its tool and canonical arguments) decided at
    ingest, so a run's repeated calls are found by equality; the tool spans already stored get theirs
    from the same Python definition (SQL has no canonical JSON), and their soft failures from the
    result pattern. Their runs' detected loops appear when the runs are next rebuilt."""
    _execute(con, "ALTER TABLE spans ADD COLUMN call_fingerprint VARCHAR")
    rows = con.execute(
        f"SELECT trace_id, span_id, tool, json_extract(attributes, '$.\"{c.TOOL_CALL_ARGUMENTS}\"') "
        "FROM spans WHERE operation = 'execute_tool' AND tool IS NOT NULL"
    ).fetchall()
    keys = pa.table(
        {
            "trace_id": pa.array([r[0] for r in rows], pa.string()),
            "span_id": pa.array([r[1] for r in rows], pa.string()),
            "fp": pa.array([call_fingerprint(r[2], json.loads(r[3]) if r[3] else None) for r in rows], pa.string()),
        }
    )
    con.register("v25_fingerprints", keys)
    try:
        con.execute(
            "UPDATE spans SET call_fingerprint = f.fp FROM v25_fingerprints f "
            "WHERE spans.trace_id = f.trace_id AND spans.span_id = f.span_id"
        )
    finally:
        con.unregister("v25_fingerprints")
    con.execute(HEALTH_BACKFILL[1])  # soft failures, with the result pattern


def _v26_usage_basis(con: duckdb.DuckDBPyConnection) -> None:
    """How each charge's cache split and output count were known (reported, inferred, unknown), and the
    largest error its price may hold when one is unknown (NULL: none, or unbounded). Older charges read
    as reported: they were priced as such."""
    _execute(con, _add_column("charges", "cache_split", "VARCHAR", "''"))
    _execute(con, _add_column("charges", "output_count", "VARCHAR", "'reported'"))
    _execute(con, _add_column("charges", "usage_error_usd", USD, "NULL"))


def _v27_unknown_usage(con: duckdb.DuckDBPyConnection) -> None:
    """A charge with an unknown usage term is flagged unknown_usage, and runs count them. Its own
    migration: DuckDB 1.5.5 fails at COMMIT ("another transaction has altered this table") a fourth
    ADD COLUMN on one table in one transaction once the table holds rows."""
    _execute(con, _add_column("charges", "unknown_usage", "BOOLEAN", "false"))
    _execute(con, _add_column("runs", "unknown_usage_calls", "INTEGER", "0"))


MIGRATIONS: list[tuple[int, str, Migration]] = [
    (1, "initial tables", _V1_TABLES),
    (2, "trace indexes", _V2_INDEXES),
    (3, "budget rules v2", _V3_BUDGET_RULES),
    (4, "runs pending a rebuild", _V4_RUNS_PENDING),
    (5, "1-hour cache-write price term", add_term_columns("cache_write_1h")),
    (6, "invalid usage flag", _v6_invalid_usage),
    (7, "one charge per billed call", _V7_CALL_COPIES),
    (9, "span links", "ALTER TABLE spans ADD COLUMN links JSON DEFAULT '[]'"),
    (10, "content references and trace indexes", _v10_content_refs),
    (12, "step-cap halts apart from loop trips; budget rules switched off", _v12_step_cap_and_enabled),
    (13, "binary content keys; message lists on contexts", _v13_content_keys),
    (14, "feedback, evaluations and the review queue", _V14_QUALITY),
    (15, "health facts decided at ingest; sampling decisions", _v15_health_columns),
    (16, "service version, environment and variant on runs; baseline-relative rules", _v16_versions_and_relative_rules),
    (18, "the tools each run called", _v18_tools_used),
    (19, "content blocks per run; contexts found by trace", _V19_RUN_BLOCKS),
    (20, "producers' metric points, a cross-check series", _V20_METRIC_POINTS),
    (21, "incomplete usage flag", _v21_incomplete_usage),
    (25, "tool call fingerprints for loops seen in spans", _v25_call_fingerprints),
    (26, "how each charge's cache split and output count were known, and their largest error", _v26_usage_basis),
    (27, "charges whose usage is partly unknown, flagged and counted per run", _v27_unknown_usage),
]


def _applied(con: duckdb.DuckDBPyConnection) -> set[int]:
    exists = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'schema_migrations'"
    ).fetchone()
    if not exists or not exists[0]:
        return set()
    return {int(v) for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}


def schema_version(con: duckdb.DuckDBPyConnection) -> int:
    """The newest migration applied (0 for a database turnledger never opened)."""
    return max(_applied(con), default=0)


def pending_migrations(con: duckdb.DuckDBPyConnection) -> list[int]:
    """Versions in ``MIGRATIONS`` not yet applied to this database, in order."""
    applied = _applied(con)
    return [version for version, _, _ in MIGRATIONS if version not in applied]


def migrate(con: duckdb.DuckDBPyConnection) -> int:
    """Apply every migration not yet applied, in order; returns the schema version now in force.

    Each missing one is applied, not only those above the newest: migrations that
    were written side by side (say 5 and 6) land in either order on a ledger.
    """
    _execute(
        con,
        "CREATE TABLE IF NOT EXISTS schema_migrations "
        "(version INTEGER PRIMARY KEY, name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)",
    )
    missing = set(pending_migrations(con))
    for version, name, step in MIGRATIONS:
        if version not in missing:
            continue
        con.execute("BEGIN TRANSACTION")
        sent = _statements.set(())
        try:
            if callable(step):
                step(con)
            else:
                _execute(con, step)
            con.execute("INSERT INTO schema_migrations VALUES (?, ?, now())", [version, name])
            con.execute("COMMIT")
        except Exception as exc:
            with contextlib.suppress(duckdb.Error):  # a failed COMMIT has ended the transaction already
                con.execute("ROLLBACK")
            raise _failed(version, name, exc) from exc
        finally:
            _statements.reset(sent)
    return schema_version(con)
