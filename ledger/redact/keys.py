"""Which attribute and field names hold a secret, whatever their value looks like.

A name is split into lowercase words (on dots, dashes, underscores, spaces and
camelCase): ``http.request.header.authorization``, ``OPENAI_API_KEY`` and
``awsSecretAccessKey`` all match. Only the last dotted segment is read, so
``llm.token_count.prompt`` (a number the ledger needs) is not taken for a token;
a segment that measures something (``max_tokens``, ``token_count``,
``secret_length``) is a number about a secret, never the secret itself, and one
that accounts for a model's tokens (``input_token_details``) holds no credential.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

__all__ = ["SECRET_KEY_WORDS", "KeyRule"]

# A segment holds a secret when its joined words contain one of these...
SECRET_KEY_WORDS = (
    "password", "passwd", "passphrase", "secret", "apikey", "authorization", "cookie", "credential",
    "privatekey", "accesskey", "accountkey", "subscriptionkey", "sessionid",
)  # fmt: skip
# ...or one of its words is one of these short ones (too short to match inside other words)...
_EXACT_WORDS = frozenset({"pwd", "ssn", "cvv", "cvc", "pin", "otp", "auth", "sig"})
# ...or is, or ends with, "token" (accesstoken, x-auth-token; not "tokens").
_TOKEN = "token"
# Words that make the segment a measure or a kind, not a secret: token counts are what we bill.
_MEASURE_WORDS = frozenset(
    {"count", "counts", "length", "len", "size", "limit", "limits", "max", "min", "total", "num", "number",
     "type", "kind", "expires", "expiry", "ttl", "usage", "budget", "estimate", "present", "name"}
)  # fmt: skip
# Words that make a "token" name one of a model's token figures or their breakdown, never a credential.
_TOKEN_ACCOUNTING = frozenset(
    {"input", "output", "prompt", "completion", "reasoning", "cached", "audio", "image", "text",
     "details", "detail", "breakdown", "read", "write", "creation", "accepted", "rejected", "prediction"}
)  # fmt: skip
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Lowercase fragments one of which every secret-named key written in free text contains, however
# its words are joined (api_key, apiKey, API-KEY): the free-text detector's cheap gate.
_KEY_FRAGMENTS = ("pass", "pwd", "secret", "token", "key", "auth", "credential", "cookie", "session", *_EXACT_WORDS)


class KeyRule:
    """Decides, once per distinct name (cached), whether a name holds a secret."""

    def __init__(self, extra_words: Iterable[str] = ()) -> None:
        extra = [w for w in extra_words if w.strip()]
        self.words = tuple(dict.fromkeys((*SECRET_KEY_WORDS, *(_joined(w) for w in extra))))
        # An extra word's first part is in every spelling of a key that holds it (routing_number: "routing").
        firsts = (words[0].lower() for w in extra if (words := _WORD.findall(w)))
        self.fragments = tuple(dict.fromkeys((*_KEY_FRAGMENTS, *firsts)))
        self.is_secret = lru_cache(maxsize=16_384)(self._is_secret)

    def _is_secret(self, key: object) -> bool:
        if not isinstance(key, str):  # a JSON value's keys are strings; a Python caller's may not be
            return False
        segment = key.rsplit(".", 1)[-1]
        words = [w.lower() for w in _WORD.findall(segment)]
        if not words or _MEASURE_WORDS.intersection(words):
            return False
        joined = "".join(words)
        if any(w in joined for w in self.words) or any(w in _EXACT_WORDS for w in words):
            return True
        # "token" names a credential (access_token, x-auth-token) unless the name accounts for
        # a model's tokens: LangChain's input_token_details, prompt_token_count, cached_token.
        return any(w.endswith(_TOKEN) for w in words) and not _TOKEN_ACCOUNTING.intersection(words)

    def sign(self) -> bytes:
        """A Hyperscan pattern found in every ``key=value`` (or ``key: value``) of free text whose
        key is secret-named: a secret word, its letters perhaps parted by ``_`` or ``-``, then more
        key characters, a quote perhaps, and the ``:`` or ``=`` (``keys`` are ASCII there)."""
        return self._spelled(b"[_\\-]*") + b"[A-Za-z0-9_.\\-]*[\"']?[ \t]*[:=]"

    def json_sign(self) -> bytes:
        """A Hyperscan pattern found in every JSON text without backslashes that has a secret-named
        key: a secret word, its letters parted by anything but letters, digits and quotes (which
        the words of a name leave out), then the rest of the key and its ':'."""
        return self._spelled(b'[^A-Za-z0-9"]*') + b'[^"]*"[ \t\r\n]*:'

    def _spelled(self, between: bytes) -> bytes:
        words = (*self.words, *_EXACT_WORDS, _TOKEN)
        if not all(words):
            return b""  # an empty word is in every name
        return b"(?i:%s)" % b"|".join(between.join(re.escape(ch).encode() for ch in w) for w in words)


def _joined(word: str) -> str:
    return "".join(w.lower() for w in _WORD.findall(word))
