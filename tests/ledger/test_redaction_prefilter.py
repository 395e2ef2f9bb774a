"""The one-pass pre-check (ledger.redact.prefilter) never spares a text a detector would change.

Two properties over random mixes of the corpus's secrets, ordinary code and prose, and the
characters where bytes and Python strings disagree (Kelvin sign, dotted capital I, Arabic
digits, no-break spaces, lone surrogates, JSON escapes): a text the pre-check calls clean
is one no detector changes; and a policy with the pre-check gives byte-identical output to
the same policy scanning every text in full.
"""

from __future__ import annotations

import json
import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.redact import Redactor
from ledger.redact.detectors import DETECTORS, Detector, TextView
from ledger.redact.policy import _decoded
from ledger.redact.prefilter import Prefilter
from tests.redaction_corpus import SECRETS, ordinary_text

# Characters whose lowercase, digit or space reading differs between str and bytes (an IBAN
# with Arabic-Indic check digits is still redacted).
_TRICKY = [
    "DE\u0668\u0669370400440532013000",
    "\u212a",
    "\u0130",
    "\u0131",
    "\u017f",
    "\u0663",
    "\u00a0",
    "\u2028",
    "\ud800",
    "É",
    "ß",
    "\\u0040",
    "\\/",
]
# The Kelvin sign lowers to k: the one non-ASCII character that lowers to an ASCII letter alone.
_WORDS = ["\u212aey", "TO\u212aEN", "api_\u212aey=", "key", "token", "bearer", "basic", "pass", "=", ":", "@", "://", "-----", "AKIA", "eyJ", "xox", "4111"]  # fmt: skip


def _pieces() -> list[str]:
    text = ordinary_text()
    rng = random.Random(13)
    starts = [rng.randrange(len(text) - 400) for _ in range(300)]
    return [text[s : s + rng.choice((8, 40, 120, 400))] for s in starts]


PIECES = _pieces()


def _full_scan() -> Redactor:
    """The same policy with no pre-check: a detector of no known shape makes no text clean."""
    policy = Redactor()
    policy._prefilter = Prefilter.of([*DETECTORS, Detector("any", None)])
    return policy


def _mixes():
    part = st.one_of(
        st.sampled_from(PIECES),
        st.sampled_from([s.text for s in SECRETS]),
        st.sampled_from(_TRICKY + _WORDS),
        st.text(alphabet="aB9 \t\n:=@-_./+()\"'\\", max_size=30),
        st.text(max_size=12),
    )
    return st.lists(part, min_size=1, max_size=8).map("".join)


FAST, FULL = Redactor(), _full_scan()


ALONE = [(d, Prefilter.of([d])) for d in FAST.detectors]  # each detector's sign on its own


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixes())
def test_a_text_clean_of_a_detectors_sign_is_one_it_leaves_alone(text):
    view = TextView(text)
    assert not [d.kind for d, alone in ALONE if alone.clean(text) and d.wanted(view) and d.apply(text) != text]
    if FAST._prefilter.clean(text):
        assert all(alone.clean(text) for _, alone in ALONE)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mixes(), _mixes(), st.sampled_from(["note", "api_key", "user.password", "my pass word (old)", "n"]))
def test_the_prefiltered_policy_redacts_exactly_as_the_full_scan(text, other, name):
    assert FAST.text(text) == FULL.text(text)
    attrs = {"gen_ai.tool.call.result": text, name: other, "count": 3, "ok": True, "list": [other]}
    assert FAST.attributes(attrs) == FULL.attributes(attrs)
    assert FAST.attributes(attrs, keep=("list",)) == FULL.attributes(attrs, keep=("list",))
    # a content block: JSON as the content store writes it (the fast path reads it unparsed)
    block = json.dumps(
        {"role": "user", "content": [{"type": "text", "text": text}, {name: other}]},
        separators=(",", ":"),
        ensure_ascii=False,
    )
    assert FAST.block(block) == FULL.block(block)


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: f"{s.kind}:{s.text[:24]}")
def test_no_corpus_secret_is_clean(secret):
    for text in (secret.text, f"ünïcode {secret.text} text"):
        # what an escape hides is read in the decoded text, which the policy scans too
        assert not (FAST._prefilter.clean(text) and FAST._prefilter.clean(_decoded(text)))


def test_most_ordinary_text_is_clean_and_an_extra_pattern_makes_none_clean():
    clean = sum(map(FAST._prefilter.clean, PIECES))
    assert clean > len(PIECES) // 3
    extra = Redactor(extra_patterns={"employee_id": r"EMP-\d{6}"})
    assert not any(map(extra._prefilter.clean, PIECES))
    assert extra.text("badge EMP-123456") == "badge [REDACTED:employee_id]"


def test_threads_redact_at_once_each_with_its_own_scratch_space():
    policy = Redactor()  # one policy per process, shared by the receiver's threads
    texts = [f"{piece} {SECRETS[i % len(SECRETS)].text}" for i, piece in enumerate(PIECES)] + PIECES
    expected = [FULL.text(t) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            assert list(pool.map(policy.text, texts)) == expected
            policy._texts.clear()  # scanned again, not read from the cache


@pytest.mark.parametrize("secret", SECRETS, ids=lambda s: f"{s.kind}:{s.text[:24]}")
def test_a_content_block_with_escaped_lines_redacts_exactly_as_the_full_scan(secret):
    # Message text has lines and tabs: a block is read with the escapes of its strings decoded in place.
    for text in (f"see:\n{secret.text}\nthanks", f"col\t{secret.text}\tcol", f"crlf\r\n{secret.text}\r\n"):
        block = json.dumps({"role": "user", "content": [{"type": "text", "text": text}]}, ensure_ascii=False)
        assert FAST.block(block) == FULL.block(block) != block
