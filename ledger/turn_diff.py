"""Comparing two turns' request payloads: what changed inside the prefix a cache keeps.

``first_prefix_change`` finds the first difference inside the part of a request
that should have stayed byte-identical between two turns of one conversation
(model, tools, system, the earlier messages): that change is the cache
invalidator; the new messages at the end are supposed to differ and are
ignored, as the seed's audit does. ``change_summary`` says it in one sentence,
the words the run explorer and ``turnledger diff`` both print, and
``payload_diff`` is the unified diff of the two payloads. Pure functions on
JSON values: no SQL, no Streamlit.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PrefixChange",
    "change_summary",
    "compact_json",
    "estimate_tokens",
    "first_prefix_change",
    "payload_diff",
    "payload_json",
]

_SNIPPET = 40


def compact_json(value: Any) -> str:
    # Key order kept: an ordering change is itself an invalidator worth seeing.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


CHARS_PER_TOKEN = 4  # a rough rule for English text and JSON; real counts come from usage


def estimate_tokens(value: Any) -> int:
    """~characters / 4 of the compact JSON (a string counts by its own characters)."""
    text = value if isinstance(value, str) else compact_json(value)
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def payload_json(payload: Any) -> str:
    """The payload as indented JSON text, key order as sent (for display and download)."""
    return json.dumps(payload, ensure_ascii=False, indent=2)


@dataclass(frozen=True)
class PrefixChange:
    """The first difference inside what should have been a stable prefix."""

    part: str  # "model", "tools", "system", "messages[2]", "field order"
    path: str  # JSON path of the first differing value, e.g. system[0].text
    what: str  # one sentence: what changed
    before: str  # a snippet of the earlier payload at that spot
    after: str  # the same spot in the later payload

    def details(self) -> str:
        """Where, what, before and after, one per line (payload text: show it as code, never markup)."""
        return f"where:   {self.path or self.part}\nwhat:    {self.what}\nbefore:  {self.before}\nafter:   {self.after}"


def _snippet(text: str, at: int) -> str:
    start = max(0, at - _SNIPPET)
    end = at + _SNIPPET
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _first_difference(a: Any, b: Any, path: str) -> PrefixChange | None:
    """Walk two JSON values in their own key order; report the first place they differ."""
    if type(a) is not type(b):
        return PrefixChange(
            "", path, f"type changed from {type(a).__name__} to {type(b).__name__}", compact_json(a), compact_json(b)
        )
    if isinstance(a, dict):
        ka, kb = list(a), list(b)
        for key in ka:
            if key not in b:
                return PrefixChange("", f"{path}.{key}", f"key {key!r} removed", compact_json(a[key]), "(absent)")
        for key in kb:
            if key not in a:
                return PrefixChange("", f"{path}.{key}", f"key {key!r} added", "(absent)", compact_json(b[key]))
        for key in ka:
            found = _first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        if ka != kb:
            return PrefixChange(
                "", path, "same keys in a different order (serialize with a fixed key order)", str(ka), str(kb)
            )
        return None
    if isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        if len(a) != len(b):
            return PrefixChange("", path, f"list length changed from {len(a)} to {len(b)}", str(len(a)), str(len(b)))
        return None
    if isinstance(a, str):
        if a == b:
            return None
        at = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
        return PrefixChange("", path, f"text differs from character {at}", _snippet(a, at), _snippet(b, at))
    if a != b:
        return PrefixChange("", path, "value changed", compact_json(a), compact_json(b))
    return None


def first_prefix_change(earlier: Mapping[str, Any], later: Mapping[str, Any]) -> PrefixChange | None:
    """The cache invalidator between two payloads of one conversation, or None.

    The stable prefix is what the provider caches, in its order: the model, the
    tool definitions, the system prompt, then every message of ``earlier``. The
    messages ``later`` appends after those are expected to be new and are not
    a finding. A history that got shorter (truncated or summarized) is one.
    A request that neither grows the earlier one nor starts like it is an
    independent call (a summarizer's next document): only model, tools and
    system prompt are compared.
    """
    if earlier.get("model") != later.get("model"):
        return PrefixChange(
            "model",
            "model",
            "model switched (a cache belongs to one model)",
            compact_json(earlier.get("model")),
            compact_json(later.get("model")),
        )
    for part in ("tools", "system"):
        a, b = earlier.get(part), later.get(part)
        if compact_json(a) == compact_json(b):
            continue
        found = _first_difference(a, b, part) or PrefixChange(part, part, "changed", compact_json(a), compact_json(b))
        return PrefixChange(part, found.path, found.what, found.before, found.after)
    old = earlier.get("messages") or []
    new = later.get("messages") or []
    if len(new) <= len(old) and old and new and compact_json(old[0]) != compact_json(new[0]):
        old = []  # not a continuation: an independent request (a summarizer's next document)
    for i, message in enumerate(old):
        if i >= len(new):
            return PrefixChange(
                f"messages[{i}]",
                f"messages[{i}]",
                f"history shrank from {len(old)} to {len(new)} messages (truncated or summarized)",
                compact_json(message),
                "(absent)",
            )
        if compact_json(message) != compact_json(new[i]):
            diff = _first_difference(message, new[i], f"messages[{i}]")
            if diff is None:  # equal values, different serialization: cannot happen with json.dumps
                diff = PrefixChange("", f"messages[{i}]", "changed", compact_json(message), compact_json(new[i]))
            return PrefixChange(f"messages[{i}]", diff.path, diff.what, diff.before, diff.after)
    order = [k for k in earlier if k in ("tools", "system", "messages")]
    if order != [k for k in later if k in ("tools", "system", "messages")]:
        return PrefixChange(
            "field order", "", "request fields sent in a different order", str(list(earlier)), str(list(later))
        )
    return None


def payload_diff(earlier: Any, later: Any, context: int = 2) -> str:
    """A unified diff of the two payloads' indented JSON (key order as sent, never sorted)."""
    a = payload_json(earlier).splitlines()
    b = payload_json(later).splitlines()
    return "\n".join(difflib.unified_diff(a, b, "earlier turn", "later turn", lineterm="", n=context))


def change_summary(
    before_turn: int,
    after_turn: int,
    a: Mapping[str, Any],
    b: Mapping[str, Any],
    uncached: str | None = None,
) -> tuple[PrefixChange | None, str]:
    """The first prefix change of turn ``after_turn``'s payload ``b`` against turn ``before_turn``'s ``a``
    (None: the prefix was kept), and one sentence saying what that means for the cache.

    ``uncached`` is why the later turn used no cache at all, when it did not (its verdict's note,
    ``ledger.cache_diagnosis``): a kept prefix is then not called cacheable.
    """
    change = first_prefix_change(a, b)
    if change is None:
        outcome = f"yet nothing was cached: {uncached}" if uncached else "cacheable"
        new = len(b.get("messages") or []) - len(a.get("messages") or [])
        if new > 0:
            return None, (
                f"Turn {after_turn} kept turn {before_turn}'s prefix byte-for-byte (model, tools, system, "
                f"earlier messages) and appended {new} message(s); {outcome}."
            )
        scope = "" if uncached else " up to the end of the system prompt"
        return None, (
            f"Turn {after_turn} is a separate request, not a continuation of turn {before_turn}; it kept the "
            f"same model, tools and system prompt; {outcome}{scope}."
        )
    return change, (
        f"First change inside the stable prefix between turn {before_turn} and turn {after_turn}: "
        "everything after it was recomputed and billed at the full input price (the cache invalidator)."
    )
