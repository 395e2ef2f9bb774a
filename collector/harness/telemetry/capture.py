"""What content goes on spans, and in what form: the redaction layer at the producer.

Four things carry content: the exact request payload of each model-call attempt
(``turnledger.request.body``), what the model answered (``gen_ai.output.messages``),
tool arguments and tool results. All four pass
through :class:`Capture`, whose mode comes from ``TURNLEDGER_CAPTURE``
(``ledger.settings.capture_mode``):

* ``redacted`` (default): secrets and personal data are replaced by typed markers
  (``ledger.redact``, the policy ingest applies: by field name and by pattern)
  before anything reaches a span;
* ``full``: content as is (a deliberate choice, for a developer's own machine);
* ``off``: no content at all: no request payload, no answer, no tool arguments or results,
  only their sizes and flags (a soft failure is still flagged).

Every turn re-sends the whole history, so redacting each payload from scratch
would cost time quadratic in turns. A payload is redacted block by block (each
message once, cached by its JSON text), which keeps the per-call cost linear in
what is new. Tool arguments and results are truncated to a few KB *after*
redaction (a secret cut in half would slip past the patterns) and their
original length is recorded.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from ledger.redact import REDACTED, explicit_policy, redact, redact_text
from ledger.settings import CAPTURE_MODES, capture_mode

__all__ = ["DEFAULT_MAX_CHARS", "Capture", "truncate"]

DEFAULT_MAX_CHARS = 4_096  # tool arguments and results on a span
# Text beyond the kept part that is still redacted, so a secret straddling the
# cut is matched whole before it is cut (no secret pattern is longer than this).
_REDACT_MARGIN = 4_096
_REMEMBERED = 256  # conversations whose last payload is kept for reuse (an LRU; ended runs are dropped)


@dataclass(frozen=True, slots=True)
class _Previous:
    values: dict[str, Any]
    texts: dict[str, str]
    messages: Sequence[Any]
    message_texts: Sequence[str]


def _dumps(value: Any) -> str:
    # Same form as the content store: key order kept, compact, non-ASCII as is.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


@lru_cache(maxsize=256)
def _key(name: str) -> str:
    return _dumps(name)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}…[truncated, {len(text)} chars]"


class Capture:
    """The content policy of one observer: ``off``, ``redacted`` or ``full``.

    ``mode`` None reads ``TURNLEDGER_CAPTURE`` once, at construction.
    """

    def __init__(self, mode: str | None = None, *, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        mode = (mode or capture_mode()).lower()
        if mode not in CAPTURE_MODES:
            raise ValueError(f"capture mode {mode!r}: choose one of {', '.join(CAPTURE_MODES)}")
        if max_chars < 1:
            raise ValueError(f"max_chars must be positive, got {max_chars!r}")
        self.mode = mode
        self.max_chars = max_chars
        self._previous: OrderedDict[Hashable, _Previous] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    def request_body(self, payload: Mapping[str, Any], key: Hashable | None = None) -> str | None:
        """The payload as JSON for ``turnledger.request.body`` (equal in value to what
        was sent, secrets aside), or None when capture is off.

        ``key`` names a conversation (a run and call site): consecutive payloads
        of one conversation share their history, and the parts equal to the
        previous payload's are not serialized or redacted again.
        """
        if self.mode == "off":
            return None
        previous = None
        if key is not None:
            with self._lock:
                previous = self._previous.get(key)
        values: dict[str, Any] = {}
        texts: dict[str, str] = {}
        message_texts: Sequence[str] = ()
        parts = []
        for name, value in payload.items():
            if name == "messages" and isinstance(value, list):
                old = previous.messages if previous else ()
                old_texts = previous.message_texts if previous else ()
                same = 0
                # Deep equality is C-fast; serializing is not. (It calls 1 == 1.0 == True equal,
                # which a re-sent history never trips over: its messages are the same JSON.)
                for a, b in zip(old, value, strict=False):
                    if a != b:
                        break
                    same += 1
                message_texts = (*old_texts[:same], *(self._block(m) for m in value[same:]))
                text = "[" + ",".join(message_texts) + "]"
            elif previous is not None and name in previous.values and previous.values[name] == value:
                text = previous.texts[name]
            elif (
                self.mode == "redacted"
                and isinstance(name, str)
                and explicit_policy().is_secret_key(name)
                and value not in (None, "")
            ):
                text = _dumps(REDACTED)
            else:
                text = self._block(value)
            values[name], texts[name] = value, text
            parts.append(f"{_key(str(name))}:{text}")
        if key is not None:
            messages = values.get("messages")
            remembered = _Previous(
                values,
                texts,
                messages if isinstance(messages, list) else [],
                message_texts if isinstance(messages, list) else (),
            )
            with self._lock:
                self._previous[key] = remembered
                self._previous.move_to_end(key)
                while len(self._previous) > _REMEMBERED:
                    self._previous.popitem(last=False)
        return "{" + ",".join(parts) + "}"

    def forget(self, key: Hashable) -> None:
        """Drop what ``request_body`` remembers for ``key`` (the conversation ended)."""
        with self._lock:
            self._previous.pop(key, None)

    def _block(self, value: Any) -> str:
        text = _dumps(value)
        # The policy's block cache: the history is re-sent every turn.
        return explicit_policy().block(text) if self.mode == "redacted" else text

    def output_messages(self, content: Sequence[Any], finish_reason: str) -> str | None:
        """What the model answered, as ``gen_ai.output.messages`` JSON (one assistant message:
        the content blocks as the API returned them, like the request's messages, and its
        ``finish_reason``), redacted like the request; None when capture is off."""
        if self.mode == "off":
            return None
        return "[" + self._block({"role": "assistant", "content": list(content), "finish_reason": finish_reason}) + "]"

    def tool_arguments(self, args: Mapping[str, Any]) -> str | None:
        """Arguments as JSON (keys sorted, so the same call always reads the same), or None."""
        if self.mode == "off":
            return None
        value = dict(args) if self.mode == "full" else redact(dict(args))
        return truncate(json.dumps(value, ensure_ascii=False, sort_keys=True, default=str), self.max_chars)

    def tool_result(self, content: str) -> str | None:
        """The result the model was given, redacted and truncated, or None."""
        if self.mode == "off":
            return None
        if self.mode == "full":
            return truncate(content, self.max_chars)
        # Only the part that can be kept is redacted (plus a margin): a 400 KB
        # result costs no more than a 8 KB one.
        kept = redact_text(content[: self.max_chars + _REDACT_MARGIN])
        if len(kept) <= self.max_chars and len(content) <= self.max_chars + _REDACT_MARGIN:
            return kept
        return f"{kept[: self.max_chars]}…[truncated, {len(content)} chars]"
