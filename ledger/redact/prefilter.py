"""One cheap question asked of every string before the detectors: can any of them want it?

``Detector.wanted`` is a necessary condition of each detector's finding anything, but
asked detector by detector it costs a Python call each, and ``re`` searches ~10 ns a
character: ~10 µs for a typical string, though nearly every string holds nothing.
``Prefilter`` asks the union of those conditions in one Hyperscan pass (a few µs per
hundred KB, plus ~1 µs a call): the needles of every detector (case-insensitive where
the detector lowers the text), the ``key=value`` detector's needles together with its
``:``/``=``, the numberish stretch of the number detectors, the long word of the AWS
secret, the capital letter of the IBAN. ``clean(text)`` is True only when no detector's
``wanted`` can hold, so the detectors would all leave a clean text as it is; any other
text gets the full scan.

Hyperscan reads bytes, and the detectors' pre-checks read Python strings: an ASCII text
is read as it is (where ``\\d`` is ``[0-9]`` and ``.lower()`` is ASCII case), any other
as its UTF-8 followed by that of its ``.lower()`` (a needle found in either counts),
with the digit, capital-letter and numberish tests then asked in Python. A detector of a
shape it does not know (an operator's extra pattern) makes no text clean.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

import hyperscan

from .detectors import Detector, TextView

__all__ = ["Prefilter"]

_DIGITS = b"0123456789"
# str.split()'s white space among ASCII characters (a secret word is a run of anything else)
_NOT_SPACE = rb"[^ \t\n\r\x0b\x0c\x1c-\x1f]"
_NUMBERISH = rb"[+(0-9][0-9+() \t.\-/]{8}"  # detectors._NUMBERISH for ASCII text, its 9 first characters


def _literals(needles: Iterable[str], caseless: bool) -> bytes:
    found = sorted(set(needles), key=len, reverse=True)
    body = b"|".join(re.escape(n).encode() for n in found)
    return b"(?i:" + body + b")" if caseless else body


class Prefilter:
    """The union of the detectors' pre-checks, asked of a text in one pass."""

    def __init__(self, detectors: Iterable[Detector]) -> None:
        alone: list[bytes] = []  # any of these found: not clean
        pairs: list[tuple[bytes, bytes]] = []  # both of a pair found: not clean
        self.opens = False  # nothing is clean (a detector whose pre-check is none of the shapes below)
        self.numeric = False
        self.min_digits_upper = 0  # > 0: a text with a capital letter and this many digits is not clean
        for d in detectors:
            if d.needles:
                needles = _literals((n.lower() if d.lower else n for n in d.needles), d.lower)
                if d.also:
                    pairs.append((_literals(d.also, False), needles))
                else:
                    alone.append(needles)
            elif d.numeric:
                self.numeric = True
                alone.append(_NUMBERISH)
            elif d.min_word:
                alone.append(_NOT_SPACE + b"{%d}" % d.min_word)
            elif d.upper and d.min_digits:
                self.min_digits_upper = min(self.min_digits_upper or d.min_digits, d.min_digits)
            else:
                self.opens = True
        # Pattern ids: 0 a capital letter, 1 any of ``alone`` (if any), then the pairs' halves.
        expressions = [b"[A-Z]", *([b"|".join(b"(?:%s)" % p for p in alone)] if alone else [])]
        self._alone = 1 if alone else -1
        self._pairs = tuple((len(expressions) + 2 * i, len(expressions) + 2 * i + 1) for i in range(len(pairs)))
        expressions += [p for pair in pairs for p in pair]
        self._db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
        self._db.compile(
            expressions=expressions,
            ids=list(range(len(expressions))),
            elements=len(expressions),
            flags=hyperscan.HS_FLAG_SINGLEMATCH,
        )
        self._local = threading.local()  # a scratch space per thread: Hyperscan's rule

    def clean(self, text: str) -> bool:
        """Whether no detector can find anything in ``text`` (False: scan it)."""
        if self.opens:
            return False
        ascii_ = text.isascii()
        data = text.encode() if ascii_ else f"{text}\n{text.lower()}".encode("utf-8", "surrogatepass")
        found: set[int] = set()
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        self._db.scan(data, match_event_handler=_note, context=found, scratch=scratch)
        if self._alone in found or any(a in found and b in found for a, b in self._pairs):
            return False
        if ascii_:
            n = self.min_digits_upper
            return not (n and 0 in found and len(data) - len(data.translate(None, _DIGITS)) >= n)
        view = TextView(text)  # Unicode digits and capitals: asked as the detectors ask
        if self.numeric and view.numberish:
            return False
        return not (self.min_digits_upper and view.has_upper and view.digits >= self.min_digits_upper)


def _note(pattern: int, start: int, end: int, flags: int, found: object) -> None:
    assert isinstance(found, set)
    found.add(pattern)
