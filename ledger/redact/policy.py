"""The one redaction policy every stored string passes: by key name, then by value pattern.

``Redactor.value`` walks a JSON-like value: under a secret-named key
(``ledger.redact.keys``) the whole value becomes ``[REDACTED:secret]``; every
other string is searched by the detectors (``ledger.redact.detectors``) and by
``key=value`` secrets written in free text (the same key rule decides which keys
count). Literal JSON escapes (``\\u0040``, ``\\/``) are decoded before matching.
Numbers, booleans and the strings that match nothing come back as the very same
objects, so a caller can tell cheaply that nothing changed. A string where
``prefilter.Prefilter`` finds no detector's sign (nearly all) skips the detectors.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import itertools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

import orjson

from ..spans import Base64Bytes
from .detectors import DETECTORS, MIN_AWS_SECRET, MIN_NUMBER_DIGITS, MIN_WORD, Detector, TextView, marker
from .keys import KeyRule
from .plugins import PLUGIN_DETECTORS
from .prefilter import Prefilter

__all__ = ["CHAIN", "REDACTED", "Redactor"]

REDACTED = marker("secret")  # what a value under a secret-named key becomes
# Every detector, in the order they run: detect-secrets' plugins before the bearer, key=value,
# e-mail and 40-character rules, which would otherwise cut into a longer token they find first.
_FIRST_GENERIC = next(i for i, d in enumerate(DETECTORS) if d.kind == "jwt")
CHAIN: tuple[Detector, ...] = (*DETECTORS[:_FIRST_GENERIC], *PLUGIN_DETECTORS, *DETECTORS[_FIRST_GENERIC:])

_KEY_VALUE = re.compile(
    r"(?<![A-Za-z0-9_.\-])(?P<key>[A-Za-z_][A-Za-z0-9_.\-]{0,63}+)[\"']?[ \t]*(?:=(?!=)|:(?!=|//))[ \t]*"
    # The value in a lookahead: it may hold the next pair (note: password=x), which is matched on its own.
    r"(?=(?P<s>\"[^\"\n]{1,256}\"|'[^'\n]{1,256}'"
    r"|(?:(?i:bearer|basic|token|digest)[ \t]+)?[^\s\"'`,;&<>()\[\]{}]{1,512}))"
)
_NOT_A_SECRET = frozenset({"null", "none", "nil", "true", "false", "undefined", "eof", "''", '""'})
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|([/\\\"]))")
_SIMPLE_ESCAPES = (("\\n", "\n"), ("\\t", "\t"), ("\\r", "\r"), ("\\b", "\b"), ("\\f", "\f"), ("\\/", "/"))
_ESCAPE_LAYERS = 4  # JSON inside JSON inside ...: each layer doubles the backslashes
_GATED_CHARS = 256  # texts up to this long are first searched for any detector's needle at once
_CACHED_CHARS = 512
_GROUPS = ("text", "word", "number")  # strings up to this long are remembered: names, models, tools and ids repeat
_CACHE_ENTRIES = 65_536
# Personal data written as numbers or addresses: never in an identifier a provider or an instrumentation
# issued (msg_…, toolu_…), whose random characters these detectors' pre-checks misread (~60% of hex ids
# pass the IBAN or NI-number sign, 17 µs of detectors each). Secrets are still looked for there.
_PERSONAL = frozenset({"email", "card", "iban", "ni_number", "ssn", "ip_address", "phone"})
_SCALARS = frozenset({str, int, float, bool, type(None)})
_ARRAYS = (list, tuple)
_NAME_SETS, _REMEMBERED_NAMES = 4_096, 64  # sets of attribute names remembered: bounded in count and size


def _decoded(text: str) -> str:
    """``text`` with JSON escapes decoded, layer after layer (the same object if it has none)."""
    decoded = text
    for _ in range(_ESCAPE_LAYERS):
        if (layer := _ESCAPE.sub(_unescape, decoded)) == decoded:
            break
        decoded = layer
    return text if decoded == text else decoded


def _strings_in_place(raw: str) -> str | None:
    """A JSON text with the escapes of its strings decoded in place, so that each of its strings
    is a piece of it; None if one is not a simple escape (an escaped quote, backslash or ``\\u``
    would move the strings' bounds or hide letters: a backslash is left)."""
    for escape, char in _SIMPLE_ESCAPES if "\\" in raw else ():
        raw = raw.replace(escape, char)
    return raw if "\\" not in raw else None


# Code that computes a secret rather than holds one, by what follows the value: an operator between
# spaces (TSPECIALS | WSP), or for a string a method (', '.join) or a format's operator ('%s' % x).
_OPERATOR = re.compile(r"[ \t]+(?:[|+*/%&^<>\-]|and|or|if|else)[ \t]")
_STRING_CODE = re.compile(r"\.[a-z_]+\(|[ \t]+\+[ \t]")
_FORMATTED = re.compile(r"[ \t]*%[ \t]")
_PLACEHOLDER = re.compile(r"%(?:\(\w+\))?[sdrfx]|\{[\w.]*\}|\$\{?\w+\}?")  # %s, {name}, $VAR
_OPERANDS = re.compile(r"[*+|&]")
_ASSIGNED = re.compile(r"[ \t]=[ \t]")  # code's spacing (a config line or a URL writes key=value)
_DOTTED_NUMBER = re.compile(r"\d+(?:\.\d+){2,}")  # an OID or a version: 1.3.6.1.5.5.7.3.1
_NAME = re.compile(r"[A-Za-z][\w.\-]*")
_WORDS = re.compile(r"[A-Za-z][a-z]*,? [a-z]+,? [a-z]+")  # three words of letters: a sentence
_SHORTEST = 4  # a secret has four characters at least (a PIN); 'yes' or 1 is a setting


def _not_held(text: str, m: re.Match[str], value: str, is_secret: Callable[[str], bool]) -> bool:
    """Whether a ``key=value``'s value is no secret however its key is named: a template's placeholder
    (``token=%r``), a setting (``'yes'``, ``1``), a dotted number, the name of a secret field
    (``auth_header = 'Proxy-Authorization'``), prose (``pwd: expected bytes, got``), or code that
    computes the secret rather than holds one: a call (``token = next_token()``), a string's
    method or format (``', '.join``, ``'%s' % x``, ``"Basic " + b64``), or a plain name (not a
    random-looking one, like ``Tr0ub4dor3``) indexed (``token = self[0]``), in an operation, or
    assigned with code's spacing (``self.token = nextchar``, ``token = 1*tchar``)."""
    end = m.end("s")
    inner = value.strip("\"'\\")
    if (
        len(inner) < _SHORTEST
        or _PLACEHOLDER.fullmatch(inner)
        or _DOTTED_NUMBER.fullmatch(inner)
        or text.startswith("(", end)
        or inner.startswith((",", ")"))  # what lies between two strings of code: '...:", sep="'
        or (_NAME.fullmatch(inner) is not None and not inner[-1].isdigit() and is_secret(inner))
    ):
        return True
    if value[0] in "\"'":
        return _STRING_CODE.match(text, end) is not None or (
            _PLACEHOLDER.search(inner) is not None and _FORMATTED.match(text, end) is not None
        )
    if text[m.end("key") : m.start("s")].lstrip("\"'").startswith(":") and _WORDS.match(text, m.start("s")):
        return True  # prose: "password:  The password for the authentication."
    assigned = _ASSIGNED.search(text, m.end("key"), m.start("s") + 1) is not None
    names = [n for n in _OPERANDS.split(value) if n] if assigned else [value]
    if not all(_plain_name(n.removeprefix("self.").removeprefix("cls.")) for n in names):
        return False
    return assigned or text.startswith("[", end) or _OPERATOR.match(text, end) is not None


def _plain_name(name: str) -> bool:
    """A dotted name people write (or a number), not a random-looking word."""
    return name.isdigit() or (all(part.isidentifier() for part in name.split(".")) and not _random_looking(name))


def _random_looking(name: str) -> bool:
    """Letters and digits alternating (Tr0ub4dor3) or mixed case inside a word (aB3dE): a name
    people write has words, in one case each, and digits at their ends."""
    shifts = sum(a.isdigit() != b.isdigit() for a, b in itertools.pairwise(name) if a.isalnum() and b.isalnum())
    humps = sum(a.islower() and b.isupper() for a, b in itertools.pairwise(name))
    return shifts >= 3 or humps >= 3


def _unescape(m: re.Match[str]) -> str:
    code = m.group(1)
    return m.group(2) if code is None else chr(int(code, 16))


class Redactor:
    """A redaction policy. ``extra_keys``: more secret key-name words; ``extra_patterns``:
    ``{kind: regex}``, each match replaced by ``[REDACTED:kind]``; ``enabled=False``
    (a trusted lab) stores everything as received; ``ip_addresses=False`` keeps IP addresses."""

    def __init__(
        self,
        extra_keys: Iterable[str] = (),
        extra_patterns: Mapping[str, str] | None = None,
        *,
        enabled: bool = True,
        ip_addresses: bool = True,
    ) -> None:
        self.enabled = enabled
        self.keys = KeyRule(extra_keys)
        extra = tuple(Detector(kind, re.compile(p)) for kind, p in (extra_patterns or {}).items())
        self.detectors = (
            tuple(
                (
                    dataclasses.replace(d, needles=self.keys.fragments, find=self._key_values, sign=self.keys.sign())
                    if d.kind == "secret"
                    else d
                )
                for d in CHAIN
                if ip_addresses or d.kind != "ip_address"
            )
            + extra
        )

        # Detectors are tried in groups that share a cheap gate, so most strings are spared a
        # Python call per detector: the short ones hold no needle of any detector of a group.
        def needles_of(group: str, lower: bool) -> re.Pattern[str]:
            found = {n.lower() if lower else n for d in self.detectors if d.group == group for n in d.needles}
            return re.compile("|".join(map(re.escape, sorted(found, key=len, reverse=True))))

        self._text_needles = needles_of("text", True)
        self._word_needles = needles_of("word", False)
        self._plan = tuple((d, d.group) for d in self.detectors)
        self._ungrouped = tuple(d for d in self.detectors if not d.group)
        self._prefilter = Prefilter.of(self.detectors)
        self._secrets = tuple(d for d in self.detectors if d.kind not in _PERSONAL)
        self._secrets_prefilter = Prefilter.of(self._secrets)
        self._json_keys = Prefilter([self.keys.json_sign()])  # clean: no secret-named key in a JSON text
        self._texts: dict[str, str] = {}
        self._plain_names: dict[tuple[str, ...], bool] = {}  # attribute names -> none is secret-named
        self.block = lru_cache(maxsize=16_384)(self._block)

    def is_secret_key(self, key: str) -> bool:
        return self.keys.is_secret(key)

    # --- strings ---------------------------------------------------------------------------------
    def text(self, text: str) -> str:
        """``text`` with every secret replaced by its marker (the same object if none was found)."""
        if not self.enabled or not text:
            return text
        if len(text) > _CACHED_CHARS:
            return self._text(text)
        done = self._texts.get(text, text)  # a miss and "nothing to redact" both give the text itself
        if done is text and text not in self._texts:
            if len(self._texts) >= _CACHE_ENTRIES:
                self._texts.clear()
            done = self._text(text)
            # Only changes are remembered by value; "unchanged" is remembered as the empty string,
            # so a hit hands back the caller's own object and ``is`` tells it nothing changed.
            self._texts[text] = "" if done is text else done
        return done or text

    def identifier(self, text: str) -> str:
        """An identifier the ledger joins on (a response, tool call or call id) with every secret
        replaced (an API key sent as an id is still a key); personal-data detectors are not run
        (``_PERSONAL``): they only ever broke ids, and two calls became one charge. The same object
        if none was found."""
        if not self.enabled or not text or self._secrets_prefilter.clean(text):
            return text
        view = TextView(text)
        for detector in self._secrets:
            if detector.wanted(view):
                found = detector.apply(text)
                if found != text:
                    text, view = found, TextView(found)
        return text

    def encoded(self, value: Base64Bytes) -> str:
        """A ``bytesValue`` redacted: the bytes it encodes are read as UTF-8 text (in binary data,
        each byte that is not UTF-8 read as a character of its own, which no pattern spans, so
        any text written in the data is read as text) and encoded again, every secret replaced
        and every other byte as it was; the same object if none was found. Base64 that does not
        decode is a string like any other."""
        try:
            data = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return self.text(value)
        read = data.decode("utf-8", "surrogateescape")
        done = self.text(read)
        if done is read:
            return value
        try:
            redacted = done.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:  # a surrogate spelled by a JSON escape the scan decoded
            redacted = done.encode("utf-8", "surrogatepass")
        return Base64Bytes(base64.b64encode(redacted).decode())

    def _text(self, text: str) -> str:
        redacted = self._scan(text)
        if "\\" not in text:
            return redacted
        # An escape must not hide what it spells: read the text decoded too. The redacted text
        # keeps its escapes unless its decoded form still holds a secret (only one an escape hid).
        decoded = _decoded(redacted)
        if decoded is redacted:
            return redacted
        again = self._scan(decoded)
        return redacted if again is decoded else again

    def _scan(self, text: str) -> str:
        if self._prefilter.clean(text):
            return text
        original, view = text, TextView(text)
        gates = {group: self._gate(group, view) for group in _GROUPS}
        if not any(gates.values()) and not any(d.wanted(view) for d in self._ungrouped):
            return text  # the common case, decided without a call per detector
        for detector, group in self._plan:
            if group:
                passed = gates.get(group)
                if passed is None:
                    passed = gates[group] = self._gate(group, view)
                if not passed:
                    continue
            if detector.wanted(view):
                found = detector.apply(text)
                if found != text:
                    text, view = found, TextView(found)
                    gates.clear()
        return original if text == original else text

    def _gate(self, group: str, view: TextView) -> bool:
        """Whether any detector of the group may find something (False spares them all)."""
        short = len(view.text) <= _GATED_CHARS  # searched whole; a long text by its parts
        if group == "text":  # a long text nearly always holds some needle: no gate there
            return not short or self._text_needles.search(view.low) is not None
        if group == "word":
            words = view.text if short else view.long_words(MIN_WORD)
            return self._word_needles.search(words) is not None or bool(view.long_words(MIN_AWS_SECRET))
        return (short or view.digits >= MIN_NUMBER_DIGITS) and view.numberish  # "number"

    def _key_values(self, text: str) -> list[tuple[int, int]]:
        """Values of ``key=value`` / ``"key": "value"`` pairs whose key is secret-named."""
        spans = []
        for m in _KEY_VALUE.finditer(text):
            value = m.group("s")
            if (
                value.lower() in _NOT_A_SECRET
                or "[REDACTED:" in value
                or not self.keys.is_secret(m.group("key"))
                or _not_held(text, m, value, self.keys.is_secret)  # code: cache_token = current_token
            ):
                continue
            start, end = m.span("s")
            if value[0] in "\"'":
                start, end = start + 1, end - 1
            spans.append((start, end))
        return spans

    # --- JSON-like values ------------------------------------------------------------------------
    def value(self, value: Any) -> Any:
        """A redacted copy of a JSON-like value (the same object when nothing is redacted)."""
        if not self.enabled:
            return value
        if type(value) is Base64Bytes:
            return self.encoded(value)
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return self.attributes(value)
        if isinstance(value, (list, tuple)):
            items = [self.value(v) for v in value]
            return value if all(a is b for a, b in zip(items, value, strict=True)) else items
        return value

    def attributes(self, attrs: dict[str, Any], keep: Iterable[str] = ()) -> dict[str, Any]:
        """``attrs`` redacted by key and value (a key is a string stored like any other, so it
        is redacted as text too); the keys in ``keep`` left as they are."""
        if not self.enabled or self._untouched(attrs, keep):
            return attrs
        out: dict[str, Any] | None = None
        renamed = False
        secret, text, seen = self.keys.is_secret, self.text, self._texts
        for key, value in attrs.items():
            if keep and key in keep:
                continue
            name = text(key) if type(key) is str else key
            kind = type(value)  # exact types first: this loop runs for every attribute of every span
            if kind is str:
                if secret(key) and value:
                    new = REDACTED
                else:
                    done = seen.get(value)  # the text cache read here: a call less per attribute
                    new = value if done == "" else done if done is not None else text(value)
            elif kind is bool or value is None:
                new = value
            elif kind is int or kind is float:
                new = REDACTED if secret(key) else value
            else:
                new = REDACTED if secret(key) else self.value(value)
            if new is not value or name is not key:
                if out is None:
                    out = dict(attrs)
                out[key] = new
                renamed = renamed or name is not key
        if out is None:
            return attrs
        return self._renamed(out, keep) if renamed else out

    def _renamed(self, attrs: dict[str, Any], keep: Iterable[str]) -> dict[str, Any]:
        """``attrs`` (values redacted) with their keys redacted, in order. Two keys that redact
        alike are told apart by a count (``[REDACTED:key]#2``), so neither value is lost."""
        out: dict[str, Any] = {}
        for key, value in attrs.items():
            name = key if (keep and key in keep) or type(key) is not str else self.text(key)
            unique, n = name, 1
            while unique in out:
                n += 1
                unique = f"{name}#{n}"
            out[unique] = value
        return out

    def _untouched(self, attrs: dict[str, Any], keep: Iterable[str]) -> bool:
        """Whether ``attributes`` would leave ``attrs`` as they are, asked at once (C loops, not a
        Python one per attribute): no secret-named key (remembered per set of names), scalars and
        arrays of them only, and their strings, joined, clean (a piece of a clean text is clean)."""
        names = tuple(attrs)
        plain = self._plain_names.get(names)
        if plain is None:  # no name secret-named, and none that redaction would change
            plain = not any(map(self.keys.is_secret, names)) and all(
                type(n) is str and self.text(n) is n for n in names
            )
            if len(names) <= _REMEMBERED_NAMES:  # spans of one source share a few sets of names
                if len(self._plain_names) >= _NAME_SETS:
                    self._plain_names.clear()
                self._plain_names[names] = plain
        if not plain:
            return False
        values: Iterable[Any] = [v for k, v in attrs.items() if k not in keep] if keep else attrs.values()
        kinds = set(map(type, values))
        if not _SCALARS.issuperset(kinds):
            if not _SCALARS.union(_ARRAYS).issuperset(kinds):
                return False
            values = [
                *(v for v in values if type(v) not in _ARRAYS),
                *(x for v in values if type(v) in _ARRAYS for x in v),
            ]
            if not _SCALARS.issuperset(map(type, values)):  # arrays of scalars only (as OTLP sends)
                return False
        joined = "\n".join([v for v in values if type(v) is str])
        return "\\" not in joined and self._prefilter.clean(joined)  # an escape: each string is decoded

    def _block(self, raw: str) -> str:
        """One JSON text redacted (the content store's blocks; cached, since every turn
        re-sends the history and redacting it again would make ingest quadratic in turns)."""
        text = _strings_in_place(raw)
        if text is not None and self._prefilter.clean(text) and self._json_keys.clean(text):
            # Each string of the JSON is a piece of ``text``, and a piece of a clean text is clean:
            # with no secret-named key either, walking the value would change nothing.
            return raw
        try:
            value = orjson.loads(raw)  # ~2x the stdlib's speed
        except orjson.JSONDecodeError:  # what only the stdlib writes and reads (integers past 64 bits)
            value = json.loads(raw)
        redacted = self.value(value)
        if redacted is value:
            return raw
        try:
            return orjson.dumps(redacted).decode()
        except (orjson.JSONEncodeError, TypeError):  # integers past 64 bits
            return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))
