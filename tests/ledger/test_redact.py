from __future__ import annotations

import pytest

from ledger.redact import REDACTED, redact, redact_text


@pytest.mark.parametrize(
    "secret",
    [
        "sk-ant-api03-abcdefghijklmnopqrstuvwxyz",
        "sk-proj-ABCDEFGHIJKLMNOPQRSTUV",
        "AKIAABCDEFGHIJKLMNOP",
        "ghp_abcdefghijklmnopqrstuvwxyz0123",
        "gho_abcdefghijklmnopqrstuvwxyz0123",
        "ghs_abcdefghijklmnopqrstuvwxyz0123",
        "github_pat_11ABCDEFG0abcdefghijklmnop",
        "xoxb-1234567890-abcdefghijkl",
        "xoxp-1234567890-abcdefghijkl",
        "Bearer abcdefghijklmnopqrstuvwxyz",
        "jane.doe+work@example.co.uk",
        "4111111111111111",
        "4111-1111-1111-1111",
        "5500 0000 0000 0004",
    ],
)
def test_patterns_are_redacted_inside_free_text(secret):
    out = redact_text(f"please use {secret} now")
    assert secret not in out and "please use" in out


@pytest.mark.parametrize("innocent", ["2026-09-25 12000 tokens", "trace 1790000000000000000", "order 1234567890123"])
def test_ids_dates_and_counts_are_left_alone(innocent):
    assert redact_text(innocent) == innocent


def test_secret_field_names_are_replaced_whatever_their_value():
    out = redact({"input": {"api_key": "short", "Authorization": "x", "query": "fine"}, "list": [{"password": "p"}]})
    assert out == {
        "input": {"api_key": REDACTED, "Authorization": REDACTED, "query": "fine"},
        "list": [{"password": REDACTED}],
    }
