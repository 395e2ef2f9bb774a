"""Identifiers the ledger joins on are stored as sent unless they hold a secret; every other string is redacted.

A response id, a tool call id and a call id are issued by a provider or an instrumentation, and the
ledger joins on them (one charge per billed call is decided by the response id). Scanning them cost
most of a span's redaction and could only ever break them: an id whose characters happen to spell a
valid IBAN was stored as ``msg_[REDACTED:iban]``, and two calls with such ids became one.
"""

from __future__ import annotations

import json

from ledger import conventions as c
from ledger.ingest import ingest
from ledger.rows import IDENTIFIER_KEYS
from ledger.spans import SpanRecord
from ledger.store import open_ledger

T0 = 1_790_000_000_000_000_000
MS = 1_000_000
# Each spells a valid IBAN after its prefix (the detectors' own test IBANs): the redaction of
# any other attribute finds and replaces them.
IDS = ("msg_GB82WEST12345698765432", "msg_NL91ABNA0417164300")
USAGE = {c.INPUT_TOKENS: 1200, c.OUTPUT_TOKENS: 310}


def _chat(trace: str, span: str, response_id: object, **extra: object) -> SpanRecord:
    attrs = {
        c.OPERATION_NAME: "chat", c.PROVIDER_NAME: "anthropic", c.REQUEST_MODEL: "claude-sonnet-5",
        c.RESPONSE_ID: response_id, **USAGE, **extra,
    }  # fmt: skip
    return SpanRecord(trace * 32, span * 16, "chat claude-sonnet-5", T0, T0 + 50 * MS, kind="CLIENT", attributes=attrs)


def _stored(con, span: str) -> dict[str, object]:
    (attrs,) = con.execute("SELECT attributes FROM spans WHERE span_id = ?", [span * 16]).fetchone()
    return json.loads(attrs)


def test_the_identifier_keys_are_the_ones_the_ledger_joins_on():
    assert {c.RESPONSE_ID, c.TOOL_CALL_ID, c.CALL_ID} == IDENTIFIER_KEYS


def test_two_calls_whose_ids_look_like_ibans_stay_two_charges_with_their_ids():
    con = open_ledger(":memory:")
    ingest(con, [_chat("a", "1", IDS[0]), _chat("b", "2", IDS[1])])
    assert con.execute("SELECT count(*) FROM charges").fetchone() == (2,)
    assert [_stored(con, s)[c.RESPONSE_ID] for s in "12"] == list(IDS)


def test_every_other_string_of_the_span_is_still_redacted():
    con = open_ledger(":memory:")
    ids = {c.TOOL_CALL_ID: "toolu_GB82WEST12345698765432", c.CALL_ID: "call_GB82WEST12345698765432"}
    ingest(con, [_chat("a", "1", IDS[0], note=f"pay to {IDS[0][4:]}", **ids)])
    stored = _stored(con, "1")
    assert stored["note"] == "pay to [REDACTED:iban]"
    assert {k: stored[k] for k in ids} == ids


def test_what_is_no_short_string_under_an_identifier_key_is_scanned_as_any_value_is():
    con = open_ledger(":memory:")
    long_id = IDS[0] + " " + "x" * 130  # longer than any identifier
    ingest(con, [_chat("a", "1", long_id), _chat("b", "2", [IDS[1]])])
    assert _stored(con, "1")[c.RESPONSE_ID].startswith("msg_[REDACTED:iban]")
    assert _stored(con, "2")[c.RESPONSE_ID] == ["msg_[REDACTED:iban]"]


def test_a_secret_sent_as_an_identifier_is_still_redacted():
    """Ids skip the personal-data detectors only: an API key under an id key is a key."""
    con = open_ledger(":memory:")
    key = "sk-ant-api03-" + "Zq7" * 30 + "AA"
    ingest(con, [_chat("a", "1", key, **{c.TOOL_CALL_ID: f"toolu {key}"})])
    stored = _stored(con, "1")
    assert key not in json.dumps(stored)
    assert stored[c.RESPONSE_ID] == "[REDACTED:key]" and stored[c.TOOL_CALL_ID] == "toolu [REDACTED:key]"
