from __future__ import annotations

import base64
import difflib
import json

import pytest

from ledger.redact import REDACTED, Redactor, redact, redact_text
from ledger.rows import prepare
from ledger.settings import redaction_settings
from ledger.spans import Base64Bytes, SpanEvent, SpanLink, SpanRecord
from tests.redaction_corpus import CONTEXTS, SECRETS, ordinary_text

T0 = 1_790_000_000_000_000_000


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


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: f"{s.kind}:{s.text[:24]}")
@pytest.mark.parametrize("context", CONTEXTS)
def test_every_corpus_secret_is_redacted_in_any_context(secret, context):
    out = redact_text(context.format(secret.text))
    assert not [n for n in secret.needles if n in out]
    assert "[REDACTED:" in out


def test_each_redaction_leaves_a_typed_marker():
    out = redact_text("mail dana@example.org, card 3782 822463 10005, iban NL91ABNA0417164300, ssn 078-05-1120")
    assert out == "mail [REDACTED:email], card [REDACTED:card], iban [REDACTED:iban], ssn [REDACTED:ssn]"
    assert redact_text("BeArEr Zt7Yq2Wp9Xn4Lm6Kj8Hg") == "BeArEr [REDACTED:token]"  # any case


@pytest.mark.parametrize(
    "innocent",
    [
        "2026-09-25 12000 tokens",
        "trace 1790000000000000000",
        "order 1234567890123",
        "max_tokens=1024",
        "claude-sonnet-4-5-20250929",
        "2024-01-15 10:30:00",
        "gamma = 0.5772156649",
        "sha 3f786850e387550fdab836ed7e6dc881de23001b",  # a git commit: 40 hex, not an AWS secret
        "Bearer authentication is described in RFC 6750",
        "Basic auth over TLS",
        "token = next_token()",
        "4111 1111 1111 1112",  # fails Luhn
        "DE89 3704 0044 0532 0130 01",  # fails the IBAN checksum
        "id 000-12-3456",  # no SSN has area 000
    ],
)
def test_ids_dates_counts_and_prose_are_left_alone(innocent):
    assert redact_text(innocent) == innocent


def test_secret_field_names_are_replaced_whatever_their_value():
    out = redact({"input": {"api_key": "short", "Authorization": "x", "query": "fine"}, "list": [{"password": "p"}]})
    assert out == {
        "input": {"api_key": REDACTED, "Authorization": REDACTED, "query": "fine"},
        "list": [{"password": REDACTED}],
    }


@pytest.mark.parametrize(
    "key",
    [
        "password", "db_password", "openai_api_key", "OPENAI_API_KEY", "aws_secret_access_key", "passphrase",
        "http.request.header.authorization", "cookie", "Set-Cookie", "user.credentials", "private_key",
        "accessToken", "x-auth-token", "refresh_token", "apiKey", "x-api-key", "ocp-apim-subscription-key",
    ],
)  # fmt: skip
def test_secret_key_names(key):
    assert Redactor().is_secret_key(key)


@pytest.mark.parametrize(
    "key",
    [
        "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.request.max_tokens", "max_tokens",
        "llm.token_count.prompt", "llm.token_count.total", "gen_ai.usage.cache_read.input_tokens",
        "tokenizer", "turnledger.authorization.denied", "password_length", "secret_count", "gen_ai.request.model",
        "input_token_details", "output_token_details", "prompt_tokens_details", "completion_tokens_details",
        "cached_tokens", "reasoning_tokens", "accepted_prediction_tokens",
    ],
)  # fmt: skip
def test_numbers_about_tokens_and_secrets_are_not_secret_keys(key):
    assert not Redactor().is_secret_key(key)


def test_json_escapes_are_decoded_before_matching():
    assert redact_text("write to dana\\u0040example.org") == "write to [REDACTED:email]"
    assert (
        redact_text('{"url": "postgres:\\\\/\\\\/bob:Pg-Pass-1@db"}')
        == '{"url": "postgres://[REDACTED:url_credentials]@db"}'
    )
    plain = "C:\\Users\\dana\\notes.txt"  # backslashes that hide nothing stay as they were
    assert redact_text(plain) is plain
    # a secret found as written leaves the text's other escapes alone
    assert redact_text('"a\\"b" to dana@example.org') == '"a\\"b" to [REDACTED:email]'


def test_unchanged_values_come_back_as_the_same_objects():
    policy = Redactor()
    attrs = {"gen_ai.request.model": "claude-sonnet-4-6", "gen_ai.usage.input_tokens": 41, "tags": ["a", "b"]}
    assert policy.attributes(attrs) is attrs
    text = "nothing to see " * 3
    assert policy.text(text) is text and policy.text(text) is text  # the second time from the cache


def test_the_policy_is_configurable():
    policy = Redactor(extra_keys=["employee_pin"], extra_patterns={"employee_id": r"\bEMP-\d{6}\b"})
    assert policy.value({"employee_pin": "1234", "note": "ask EMP-123456"}) == {
        "employee_pin": REDACTED,
        "note": "ask [REDACTED:employee_id]",
    }
    off = Redactor(enabled=False)
    assert off.text("dana@example.org") == "dana@example.org"


@pytest.mark.parametrize("key", ["pin", "PIN", "card_cvv", "cvc", "otp", "x-sig", "member_code"])
def test_every_secret_key_name_is_found_in_free_text_too(key):
    # A key the rule calls secret is redacted when written as key=value in prose, not only as a JSON key.
    policy = Redactor(extra_keys=["member_code"])
    assert policy.is_secret_key(key)
    assert policy.text(f"the user wrote {key}=48213 then {key}: 48213") == (
        f"the user wrote {key}={REDACTED} then {key}: {REDACTED}"
    )
    assert Redactor().text("spin=3 pinned=4 topic: otters") == "spin=3 pinned=4 topic: otters"


def test_settings_read_the_environment(monkeypatch):
    monkeypatch.setenv("TURNLEDGER_REDACT", "off")
    monkeypatch.setenv("TURNLEDGER_REDACT_KEYS", "employee_pin, badge")
    monkeypatch.setenv("TURNLEDGER_REDACT_PATTERNS", '{"employee_id": "EMP-\\\\d{6}"}')
    assert redaction_settings() == (False, ["employee_pin", "badge"], {"employee_id": "EMP-\\d{6}"})
    monkeypatch.setenv("TURNLEDGER_REDACT_PATTERNS", '{"bad": "("}')
    with pytest.raises(ValueError, match="TURNLEDGER_REDACT_PATTERNS"):
        redaction_settings()
    monkeypatch.setenv("TURNLEDGER_REDACT", "maybe")
    with pytest.raises(ValueError, match="TURNLEDGER_REDACT='maybe'"):
        redaction_settings()


def test_ordinary_prose_and_code_keep_99_percent_of_their_characters():
    text = ordinary_text()
    assert len(text) >= 200_000
    out = Redactor().text(text)
    lines, redacted = text.splitlines(), out.splitlines()
    assert len(lines) == len(redacted)
    lost = 0
    for a, b in zip(lines, redacted, strict=True):
        if a != b:
            kept = sum(m.size for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks())
            lost += len(a) - kept
    assert lost / len(text) <= 0.01, lost


def _chat(**fields):
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-sonnet-4-6",
        "gen_ai.usage.input_tokens": 41,
        "gen_ai.usage.output_tokens": 67,
        **fields.pop("attributes", {}),
    }
    name = fields.pop("name", "chat claude-sonnet-4-6")
    return SpanRecord("ab" * 16, "cd" * 8, name, T0, T0 + 10**9, attributes=attrs, **fields)


def test_prepare_redacts_every_stored_string_and_keeps_the_charge():
    secret = "dana@example.org"
    span = _chat(
        name=f"chat {secret}",
        status_code="ERROR",
        status_message=f"failed for {secret}",
        attributes={"api_key": "k", "tags": [secret], "nested": {"deep": [secret]}},
        events=(SpanEvent(f"e {secret}", T0 + 1, {"exception.message": secret}),),
        links=(SpanLink("ef" * 16, "12" * 8, {"note": secret}),),
        resource={"env.OPENAI_API_KEY": "sk-x", "service.name": "svc"},
    )
    plain = prepare([_chat(status_code="ERROR")]).rows
    rows = prepare([span]).rows
    stored = json.dumps(rows["spans"], default=str)
    assert secret not in stored and "sk-x" not in stored and '"k"' not in stored
    assert stored.count("[REDACTED:email]") == 7 and stored.count(REDACTED) == 2  # 7 places; 2 secret keys
    assert rows["charges"][0][4:] == plain["charges"][0][4:]  # the same model, tokens and dollars
    assert secret in json.dumps(prepare([span], redact_content=False).rows["spans"], default=str)


def test_attribute_keys_are_redacted_at_every_depth_and_none_is_lost():
    card, key = "4111 1111 1111 1111", "AKIAIOSFODNN7EXAMPLE"
    attrs = {f"note {key}": 1, "dana@example.org": "a", "fox@example.org": "b", "n": {f"k {card}": [key]}, "ok": 2}
    out = Redactor().attributes(attrs)
    assert out == {
        "note [REDACTED:key]": 1,
        "[REDACTED:email]": "a",
        "[REDACTED:email]#2": "b",  # two keys that redact alike: both values kept
        "n": {"k [REDACTED:card]": ["[REDACTED:key]"]},
        "ok": 2,
    }
    assert list(out) == ["note [REDACTED:key]", "[REDACTED:email]", "[REDACTED:email]#2", "n", "ok"]  # in order
    plain = {"gen_ai.usage.input_tokens": 3, "service.name": "x"}
    assert Redactor().attributes(plain) is plain


def test_bytes_values_are_read_redacted_and_encoded_again():
    policy = Redactor()
    secret = "ghp_aB3dE5gH7jK9mN1pQ3sT5vW7yZ9bC1eF3hJ5"
    text = Base64Bytes(base64.b64encode(f"token {secret} here".encode()).decode())
    binary = Base64Bytes(base64.b64encode(b"\x89PNG\x00\xff" + secret.encode() + b"\x00\xfe").decode())
    out = policy.attributes({"text": text, "binary": binary, "list": [text]})
    assert base64.b64decode(out["text"]) == b"token [REDACTED:token] here"
    assert base64.b64decode(out["binary"]) == b"\x89PNG\x00\xff[REDACTED:token]\x00\xfe"  # the rest as it was
    assert base64.b64decode(out["list"][0]) == b"token [REDACTED:token] here"
    clean = Base64Bytes(base64.b64encode(b"\x00\x01 an ordinary payload").decode())
    assert policy.value(clean) is clean
    assert policy.value(Base64Bytes("not base64 AKIAIOSFODNN7EXAMPLE")) == "not base64 [REDACTED:key]"
