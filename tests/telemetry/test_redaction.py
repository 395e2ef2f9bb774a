"""Secrets in a prompt, in tool arguments and in a tool result never reach the ledger file.

An API key, an email address and a (Luhn-valid) 16-digit card number go into
the task and into a tool's arguments; the tool echoes them back. After the run
the checkpointed .duckdb file's bytes and every text column of every table are
searched. The same run with capture ``full`` and no re-redaction at ingest
must find them: proof that the search can see a secret when one is there.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import Runtime, Tool, run_agent
from ledger import conventions as c
from ledger.redact import REDACTED
from tests.telemetry.helpers import Traced, by_name

API_KEY = "sk-ant-api03-Zx9Qw8Er7Ty6Ui5Op4As3Df2Gh1Jk0Lz"
EMAIL = "dana.scully@example.org"
CARD = "4111 1111 1111 1111"
SECRETS = [API_KEY, EMAIL, CARD, CARD.replace(" ", ""), "Zx9Qw8Er7Ty6Ui5Op4As3Df2", "dana.scully"]

TASK = f"Update my billing: card {CARD}, contact {EMAIL}. Use key {API_KEY} for the vendor API."


def policy(view: PolicyView) -> Reply:
    if not view.tool_results():
        args = {"email": EMAIL, "card": CARD, "api_key": API_KEY, "note": f"key {API_KEY} for {EMAIL}"}
        return Reply.use(("update_billing", args))
    return Reply.answer("Billing updated.")


def update_billing(email: str, card: str, api_key: str, note: str) -> str:
    return f"updated {email}: card ending {card[-4:]} (full {card}), key {api_key} verified"


TOOL = Tool(
    {
        "name": "update_billing",
        "description": "Update billing details.",
        "input_schema": {
            "type": "object",
            "properties": {k: {"type": "string"} for k in ("email", "card", "api_key", "note")},
        },
    },
    update_billing,
)


def run_and_close(t: Traced) -> Path:
    result = run_agent(
        ScriptedLLM(policy), TASK, [TOOL], tenant="acme", observer=t.observer, runtime=Runtime.seeded(5, sleep=t.sleeps)
    )
    assert result.stop_cause == "completed"
    t.close()  # checkpointed: everything is in the one file
    assert not Path(f"{t.db}.wal").exists()
    return t.db


def found_in_file(db: Path) -> set[str]:
    data = db.read_bytes()
    return {s for s in SECRETS if s.encode() in data}


def found_in_columns(db: Path) -> set[str]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        columns = con.execute(
            """SELECT table_name, column_name FROM information_schema.columns
               WHERE table_schema = 'main' AND data_type IN ('VARCHAR', 'JSON', 'BLOB')"""
        ).fetchall()
        assert len(columns) > 20  # spans, charges, guard events, content blocks, contexts, runs...
        found = set()
        for table, column in columns:
            for secret in SECRETS:
                hit = con.execute(
                    f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS VARCHAR) LIKE ?', [f"%{secret}%"]
                ).fetchone()
                if hit and hit[0]:
                    found.add(secret)
        return found
    finally:
        con.close()


def test_secrets_never_reach_the_database(traced: Callable[..., Traced]) -> None:
    t = traced("redacted")
    db = run_and_close(t)
    # Spans carried the content (redacted), so the check below is about content that was captured.
    chat = by_name(t.spans(), "chat")[0]
    body = chat.attributes[c.REQUEST_BODY]
    assert "[REDACTED:card]" in body and "[REDACTED:email]" in body and "[REDACTED:key]" in body
    tool = by_name(t.spans(), "execute_tool")[0]
    assert f'"api_key": "{REDACTED}"' in tool.attributes[c.TOOL_CALL_ARGUMENTS]
    assert "[REDACTED:card]" in tool.attributes[c.TOOL_CALL_RESULT]
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM contexts").fetchone() == (2,)
    assert found_in_file(db) == set()
    assert found_in_columns(db) == set()


def test_the_search_finds_secrets_when_capture_is_full(traced: Callable[..., Traced]) -> None:
    t = traced("full", redact_content=False)
    db = run_and_close(t)
    assert found_in_columns(db) >= {API_KEY, EMAIL, CARD}


@pytest.mark.parametrize("mode", ["redacted", "off"])
def test_tool_content_follows_the_capture_mode(traced: Callable[..., Traced], mode: str) -> None:
    t = traced(mode)
    run_and_close(t)
    tool = by_name(t.spans(), "execute_tool")[0]
    chat = by_name(t.spans(), "chat")[0]
    if mode == "off":
        assert c.TOOL_CALL_ARGUMENTS not in tool.attributes and c.TOOL_CALL_RESULT not in tool.attributes
        assert c.REQUEST_BODY not in chat.attributes
        assert tool.attributes[c.TOOL_RESULT_LENGTH] > 0  # sizes are not content
    else:
        assert c.TOOL_CALL_ARGUMENTS in tool.attributes and c.REQUEST_BODY in chat.attributes
