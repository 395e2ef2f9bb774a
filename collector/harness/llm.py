"""Model clients behind one small protocol, and the real Anthropic SDK behind it.

The harness only ever talks to :class:`LLM`. A call is split in two halves on
purpose: ``build_request`` (pure, gives the exact JSON payload) and ``send``
(does the I/O). The loop records the payload *before* sending, so a telemetry
layer can capture the exact context of an attempt even when that attempt fails.

Usage follows the Anthropic convention throughout: ``input_tokens`` is the
*uncached* input only; cache writes and cache reads are separate counts, and
the writes' 1-hour share (billed at 2x input, 5-minute writes at 1.25x) is
kept from the API's ``usage.cache_creation``.
The scripted stand-in for a provider lives with the demo data
(:mod:`collector.demo.scripted_llm`).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from ledger.errors import LLMError
from ledger.terms import split_cache_writes

__all__ = [
    "DEFAULT_MODEL",
    "LLM",
    "ClaudeLLM",
    "CompleteBySending",
    "IncompleteStreamError",
    "LLMResponse",
    "ProviderError",
    "ToolCall",
    "Usage",
    "build_request",
    "final_message",
    "plain_json",
    "response_from_message",
]

DEFAULT_MODEL = "claude-opus-5"
EPHEMERAL = {"type": "ephemeral"}


# ---------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Usage:
    """Billed tokens of one call (or a sum of calls), Anthropic convention.

    The four counts never overlap: ``input_tokens`` excludes both cache counts.
    ``cache_creation_input_tokens`` is every cache write, as the API reports it;
    ``cache_creation_1h_input_tokens`` is the part of it written with a 1-hour
    TTL (the rest are 5-minute writes).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            self.cache_read_input_tokens + other.cache_read_input_tokens,
            self.cache_creation_1h_input_tokens + other.cache_creation_1h_input_tokens,
        )

    @property
    def cache_creation_5m_input_tokens(self) -> int:
        """The cache writes with a 5-minute TTL (every write, when the API gave no split)."""
        return self.cache_creation_input_tokens - self.cache_creation_1h_input_tokens

    @property
    def prompt_tokens(self) -> int:
        """Every input token the model read, cached or not (the OTel GenAI convention)."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.output_tokens

    @classmethod
    def from_api(cls, usage: Any) -> Usage:
        """From an SDK usage object or a usage dict; absent cache counts are 0.

        The TTL split comes from ``usage.cache_creation`` (``ephemeral_5m_input_tokens``,
        ``ephemeral_1h_input_tokens``), read as the ledger reads it
        (``ledger.terms.split_cache_writes``): the total written is then the two TTLs' sum.
        """

        def get(source: Any, name: str) -> int:
            value = source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)
            return int(value or 0)

        written = get(usage, "cache_creation_input_tokens")
        split = usage.get("cache_creation") if isinstance(usage, Mapping) else getattr(usage, "cache_creation", None)
        five_minute, one_hour = written, 0
        if split is not None:
            five_minute, one_hour = split_cache_writes(
                written, get(split, "ephemeral_1h_input_tokens"), get(split, "ephemeral_5m_input_tokens")
            )
        return cls(
            get(usage, "input_tokens"),
            get(usage, "output_tokens"),
            five_minute + one_hour,
            get(usage, "cache_read_input_tokens"),
            one_hour,
        )


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class LLMResponse:
    """One successful model call.

    ``assistant_content`` is the reply as plain JSON blocks, ready to be appended
    to the history unchanged (thinking blocks must go back exactly as received).
    ``request`` is the payload exactly as sent (``"stream": true`` included).
    """

    text: str
    tool_calls: tuple[ToolCall, ...]
    assistant_content: list[dict[str, Any]]
    stop_reason: str
    usage: Usage
    model: str
    request: dict[str, Any]
    response_id: str = ""


class ProviderError(LLMError):
    """A provider failure raised by scripted clients (and usable by any adapter).

    ``status`` is the HTTP status, or None for a dropped connection.
    ``retry_after`` is the server's hint in seconds, when it sent one.
    """

    def __init__(self, status: int | None, message: str = "", *, retry_after: float | None = None) -> None:
        self.status = status
        self.retry_after = retry_after
        super().__init__(message or (f"HTTP {status}" if status else "connection error"))


class IncompleteStreamError(LLMError, ConnectionError):
    """A streamed response ended before its final usage arrived.

    Recording the ``message_start`` usage instead would book a silent near-zero
    output count, so this is a (retryable) transport failure, never a success.
    """


@runtime_checkable
class LLM(Protocol):
    """What the harness needs from a model client."""

    model: str

    def build_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> dict[str, Any]:
        """The exact JSON payload this client would send (pure; a deep copy)."""
        ...

    def send(self, request: Mapping[str, Any]) -> LLMResponse:
        """Send a payload from ``build_request``; raise the provider's error on failure."""
        ...

    def complete(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> LLMResponse: ...


class CompleteBySending:
    """``complete`` is always ``send(build_request(...))``; written once here."""

    def complete(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> LLMResponse:
        return self.send(self.build_request(system, messages, tools, max_tokens, **kw))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# Request building (shared by both clients so both record the same shape)
# ---------------------------------------------------------------------------


def plain_json(value: Any) -> Any:
    """A deep, JSON-only copy: the recorded payload must not change when the loop
    appends to its history afterwards, and must be exactly what goes on the wire."""
    return json.loads(json.dumps(value, ensure_ascii=False))


def build_request(
    model: str,
    system: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    max_tokens: int,
    *,
    cache: bool = True,
    stream: bool = False,
    **extra: Any,
) -> dict[str, Any]:
    """The Messages API payload for one call.

    With ``cache`` the system prompt carries a breakpoint (the stable prefix) and
    the top-level ``cache_control`` asks the API to place a second one on the
    last block, so each turn reads the history the previous turn wrote.
    """
    payload: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
    if system:
        payload["system"] = [{"type": "text", "text": system, "cache_control": EPHEMERAL}] if cache else system
    payload["messages"] = list(messages)
    if tools:
        payload["tools"] = list(tools)
    if cache:
        payload["cache_control"] = EPHEMERAL
    payload.update(extra)
    if stream:
        payload["stream"] = True
    return plain_json(payload)


def _block_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, Mapping):
        return plain_json(block)
    # SDK models: only what the server sent, JSON-safe, no nulls (e.g. citations).
    return block.to_dict(mode="json", exclude_none=True)


def response_from_message(message: Any, request: Mapping[str, Any]) -> LLMResponse:
    """An :class:`LLMResponse` from an SDK ``Message`` (or the same shape as a dict)."""
    get = message.get if isinstance(message, Mapping) else lambda k, d=None: getattr(message, k, d)
    content = [_block_dict(b) for b in get("content") or []]
    text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
    calls = tuple(
        ToolCall(b["id"], b["name"], dict(b.get("input") or {})) for b in content if b.get("type") == "tool_use"
    )
    return LLMResponse(
        text=text,
        tool_calls=calls,
        assistant_content=content,
        stop_reason=get("stop_reason") or "end_turn",
        usage=Usage.from_api(get("usage")),
        model=get("model") or str(request.get("model", "")),
        request=dict(request),
        response_id=get("id") or "",
    )


# ---------------------------------------------------------------------------
# ClaudeLLM: the real SDK
# ---------------------------------------------------------------------------


class ClaudeLLM(CompleteBySending):
    """Claude through the official ``anthropic`` SDK, streamed or not.

    The SDK's own retries are off (``max_retries=0``): the harness retries, and
    records every attempt as its own charge, which hidden SDK retries would defeat.
    The SDK's own OpenTelemetry spans are off too: our harness emits the ``chat``
    span for each attempt, and a second one per call would be charged twice.
    """

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        client: Any = None,
        stream: bool = False,
        cache: bool = True,
        timeout: float = 600.0,
        **client_kwargs: Any,
    ) -> None:
        self.model = model
        self.stream = stream
        self.cache = cache
        if client is None:
            import anthropic  # imported lazily: ~2.5 s, and scripted runs never need it

            client = anthropic.Anthropic(max_retries=0, timeout=timeout, open_telemetry=False, **client_kwargs)
        self._client = client
        create_params = inspect.signature(client.messages.create).parameters
        stream_params = inspect.signature(client.messages.stream).parameters
        self._known = {"create": set(create_params), "stream": set(stream_params)}

    def close(self) -> None:
        """Close the SDK client's connection pool."""
        self._client.close()

    def __enter__(self) -> ClaudeLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def build_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> dict[str, Any]:
        stream = kw.pop("stream", self.stream)
        return build_request(self.model, system, messages, tools, max_tokens, cache=self.cache, stream=stream, **kw)

    def _split(self, body: dict[str, Any], method: str) -> dict[str, Any]:
        # Fields this SDK version has no keyword for travel in extra_body, so the
        # wire body is still exactly the payload we recorded.
        known = self._known[method]
        kwargs = {k: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items() if k not in known}
        if extra:
            kwargs["extra_body"] = extra
        return kwargs

    def send(self, request: Mapping[str, Any]) -> LLMResponse:
        body = dict(request)
        if not body.pop("stream", False):
            return response_from_message(self._client.messages.create(**self._split(body, "create")), request)
        with self._client.messages.stream(**self._split(body, "stream")) as stream:
            message = final_message(stream)
        return response_from_message(message, request)


def final_message(stream: Any) -> Any:
    """Drain an SDK ``MessageStream`` and return its final message.

    The output count only arrives on the closing ``message_delta`` event;
    ``message_start`` carries a placeholder (typically 1). Reading usage any
    earlier books a silent near-zero for the most expensive calls, so a stream
    that ends without ``message_delta`` is an error, never a success.
    """
    final_usage_seen = False
    for event in stream:
        final_usage_seen = final_usage_seen or getattr(event, "type", None) == "message_delta"
    if not final_usage_seen:
        raise IncompleteStreamError("stream ended before message_delta: its output usage is unknown")
    return stream.get_final_message()
