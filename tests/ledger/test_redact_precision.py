"""Precision: what holds no secret comes back as it was.

Over ≥ 1 MB of ordinary data of every kind (``tests/redaction_corpus.ordinary_by_type``:
prose and code, a slice of this interpreter's standard library and of a JavaScript
bundle, base64 images, UUIDs, git SHAs, 10- and 16-digit ids) at least 99.5% of the
characters are kept, and an id is replaced only when its checksum passes (a 16-digit
id that passes Luhn may be a card number; nothing else an id looks like has a
checksum, so none is replaced). The ground truth for the checksum is python-stdnum's
Luhn, not our detectors. Token accounting (LangChain's ``input_token_details``) is
never taken for a credential, and code is not mail.
"""

from __future__ import annotations

import difflib
import json

import pytest
from stdnum import luhn

from ledger.redact import Redactor
from ledger.rows import prepare
from ledger.spans import SpanRecord
from ledger.tables import table
from tests.redaction_corpus import ID_TYPES, message_pieces, ordinary_by_type

T0 = 1_790_000_000_000_000_000


def _lost(text: str, policy: Redactor) -> int:
    """Characters of ``text`` not in its redacted copy, piece by piece."""
    lost = 0
    for piece in message_pieces(text):
        out = policy.text(piece)
        if out != piece:
            matcher = difflib.SequenceMatcher(None, piece, out, autojunk=False)
            lost += len(piece) - sum(m.size for m in matcher.get_matching_blocks())
    return lost


def test_ordinary_data_of_every_kind_keeps_995_per_mille_of_its_characters():
    corpus = ordinary_by_type()
    assert sum(map(len, corpus.values())) >= 1_000_000
    assert min(map(len, corpus.values())) >= 50_000
    policy = Redactor()
    lost = {kind: _lost(text, policy) for kind, text in corpus.items()}
    for kind, text in corpus.items():
        if kind != "id_16_digits":  # where a number passes Luhn and a card's prefix, it may be one
            assert lost[kind] / len(text) <= 0.005, (kind, lost[kind])
    assert sum(lost.values()) / sum(map(len, corpus.values())) <= 0.005


@pytest.mark.parametrize("kind", ID_TYPES)
def test_an_id_is_replaced_only_when_its_checksum_passes(kind):
    policy = Redactor()
    lines = ordinary_by_type()[kind].splitlines()
    replaced = [line for line in lines if policy.text(line) != line]
    if kind == "id_16_digits":
        digits = ["".join(ch for ch in line if ch.isdigit()) for line in replaced]
        assert all(luhn.is_valid(d) for d in digits), [d for d in digits if not luhn.is_valid(d)][:5]
        failing = [line for line in lines if not luhn.is_valid("".join(ch for ch in line if ch.isdigit()))]
        assert len(failing) > 0.8 * len(lines)  # nine in ten fail Luhn: each is left alone
    else:
        assert replaced == []  # no checksum to pass: a UUID, a SHA, a 10-digit id is never replaced


@pytest.mark.parametrize(
    "code",
    [
        "h = x@self.weights", "y = h@self.W_out.T + b", "scores = q@self.key_proj.weight", "a@cls.table",
        "out = inputs@self.kernel", "logits = feats@this.classifier",
    ],
)  # fmt: skip
def test_a_matrix_product_is_not_an_email(code):
    assert Redactor().text(code) == code


def test_an_email_is_one_in_any_script_and_needs_a_real_domain():
    policy = Redactor()
    for address in ("dana@example.org", "josé@exämple.de", "用户@例子.中国", "ops@corp.internal"):
        assert policy.text(f"to {address}") == "to [REDACTED:email]"
    assert policy.text("x@self.weights y@model.layers") == "x@self.weights y@model.layers"  # no such TLD


def test_forty_base64_characters_are_a_key_only_beside_what_names_one():
    policy, forty = Redactor(), "Lq8+Zr3/Tb6nWm1pVx4cYh7kJd0sGf2aEu9iOo5R"
    assert policy.text(f"digest {forty}") == f"digest {forty}"
    assert policy.text(f"aws_secret {forty}") == "aws_secret [REDACTED:key]"
    assert policy.text(f"AKIAIOSFODNN7EXAMPLE {forty}") == "[REDACTED:key] [REDACTED:key]"


def test_digits_alone_are_a_phone_number_only_where_a_word_says_so():
    policy = Redactor()
    assert policy.text("order 4155552671 shipped") == "order 4155552671 shipped"
    assert policy.text("call 4155552671") == "call [REDACTED:phone]"
    assert policy.text("order 415-555-2671") == "order [REDACTED:phone]"  # written as a phone number is
    assert policy.text("+14155552671") == "[REDACTED:phone]"


USAGE = {
    "input_tokens": 120,
    "output_tokens": 42,
    "total_tokens": 162,
    "input_token_details": {"audio": 0, "cache_read": 100, "cache_creation": 0},
    "output_token_details": {"audio": 0, "reasoning": 12},
}


def test_token_accounting_is_stored_as_received():
    message = {"type": "ai", "content": "done", "usage_metadata": USAGE, "response_metadata": {"model": "x"}}
    span = SpanRecord(
        "ab" * 16, "cd" * 8, "ChatAnthropic", T0, T0 + 10**9,
        attributes={
            "output.value": json.dumps({"generations": [[{"message": message}]]}),
            "langchain.usage_metadata": USAGE,
            "input_token_details": USAGE["input_token_details"],
            "prompt_tokens_details": {"cached_tokens": 3},
        },
    )  # fmt: skip
    row = dict(zip(table("spans").names, prepare([span]).rows["spans"][0], strict=True))
    stored = json.loads(row["attributes"])
    assert "[REDACTED" not in row["attributes"]
    assert stored["langchain.usage_metadata"] == USAGE
    assert stored["input_token_details"] == USAGE["input_token_details"]
    assert stored["prompt_tokens_details"] == {"cached_tokens": 3}
    assert json.loads(stored["output.value"])["generations"][0][0]["message"]["usage_metadata"] == USAGE
