"""One cheap question asked of every string before the detectors: can any of them find anything?

Nearly every stored string holds no secret, but asking each detector's own pre-check
(``Detector.wanted``) costs a Python call a detector, and ``re`` searches ~10 ns a
character: ~10 µs for a typical string. ``Prefilter`` asks the detectors' signs at once,
in one Hyperscan pass over the text's bytes (~1 µs a call and ~4 ns a byte): each detector's
``sign``, a pattern found in every text where it finds something (a tighter test than
its needles), or else its needles. ``clean(text)`` is True only when none is found, so
every detector would leave a clean text as it is; any other text gets the full scan.

Hyperscan reads bytes, the detectors read Python strings: an ASCII text is read as it
is; any other as its UTF-8 followed by the UTF-8 of its ``.lower()`` (what a detector
that lowers the text reads), and the signs read a non-ASCII character as a possible
digit. A detector with neither sign nor needles (an operator's extra pattern) makes no
text clean.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from functools import lru_cache

import hyperscan

from .detectors import Detector

__all__ = ["Prefilter"]


def _literals(needles: Iterable[str], caseless: bool) -> bytes:
    body = b"|".join(re.escape(n).encode() for n in sorted(set(needles)))
    return b"(?i:%s)" % body if caseless else body


@lru_cache(maxsize=8)  # a policy is built per configuration, and tests build many alike
def _database(expression: bytes) -> hyperscan.Database:
    db = hyperscan.Database(mode=hyperscan.HS_MODE_BLOCK)
    db.compile(expressions=[expression], flags=hyperscan.HS_FLAG_SINGLEMATCH)  # one match is all we ask
    return db


def _signs(detectors: Iterable[Detector]) -> list[bytes] | None:
    """Each detector's sign, or its needles; None if one has neither (then no text is clean)."""
    signs = []
    for d in detectors:
        if d.sign is not None:
            signs.append(d.sign)
        elif d.needles:  # (its ``also`` is left out: it only narrows the needles)
            signs.append(_literals((n.lower() if d.lower else n for n in d.needles), d.lower))
        else:
            return None
    return signs


class Prefilter:
    """Signs (Hyperscan patterns) looked for in a text in one pass; ``of(detectors)`` the detectors'."""

    def __init__(self, signs: Iterable[bytes] | None) -> None:
        found = b"|".join(b"(?:%s)" % s for s in signs) if signs is not None else b""
        self._db = _database(found) if found else None  # None: nothing is clean
        self._local = threading.local()  # a scratch space per thread: Hyperscan's rule

    @classmethod
    def of(cls, detectors: Iterable[Detector]) -> Prefilter:
        return cls(_signs(detectors))

    def clean(self, text: str) -> bool:
        """Whether no sign is found in ``text``: of the detectors', none can find anything there."""
        if self._db is None:
            return False
        data = text.encode() if text.isascii() else f"{text}\n{text.lower()}".encode("utf-8", "surrogatepass")
        scratch = getattr(self._local, "scratch", None)
        if scratch is None:
            scratch = self._local.scratch = hyperscan.Scratch(self._db)
        found: list[int] = []
        self._db.scan(data, match_event_handler=_note, context=found, scratch=scratch)
        return not found


def _note(pattern: int, start: int, end: int, flags: int, found: object) -> None:
    assert isinstance(found, list)
    found.append(pattern)
