"""A deterministic stand-in for a provider, for demo data and tests.

A *policy* (a plain function of the request) decides what the "model" says;
:class:`ScriptedLLM` estimates tokens from the request it was actually given
(about four characters of JSON per token), so input grows with the re-sent
history, and a prompt-cache model reproduces the API's write-then-read behaviour.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from collector.harness.llm import (
    DEFAULT_MODEL,
    CompleteBySending,
    LLMResponse,
    ToolCall,
    Usage,
    build_request,
    plain_json,
)
from ledger.pricing import PriceBook

__all__ = [
    "Policy",
    "PolicyView",
    "PromptCacheModel",
    "Reply",
    "ScriptedLLM",
    "cache_minimum",
    "estimate_tokens",
    "result_text",
]


# ---------------------------------------------------------------------------
# Token estimates and the prompt-cache model
# ---------------------------------------------------------------------------


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def estimate_tokens(value: Any) -> int:
    """About four characters of JSON per token, never zero."""
    text = value if isinstance(value, str) else _compact(value)
    return max(1, math.ceil(len(text) / 4))


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, Mapping) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _segments(request: Mapping[str, Any]) -> tuple[list[Any], list[int]]:
    """The request as cacheable blocks in the API's prefix order (tools, system,
    messages), and the indices that carry a cache breakpoint.

    A ``cache_control`` marker does not change what is cached, so it is dropped
    from the block before hashing: moving the marker does not break the cache.
    """
    blocks: list[Any] = []
    marks: list[int] = []

    def add(block: Any, tag: Any) -> None:
        if isinstance(block, Mapping) and block.get("cache_control"):
            marks.append(len(blocks))
        blocks.append([tag, _without_cache_control(block)])

    for tool in request.get("tools") or []:
        add(tool, "tool")
    system = request.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        add(block, "system")
    for message in request.get("messages") or []:
        content = message.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            add(block, message.get("role"))
    if request.get("cache_control") and blocks:
        marks.append(len(blocks) - 1)  # automatic caching: the last cacheable block
    return blocks, sorted(set(marks))


@functools.cache
def _shipped_price_book() -> PriceBook:
    # The shipped book only, never a user's price file: demo data must not depend on the machine.
    return PriceBook.default()


def cache_minimum(model: str) -> int:
    """The shortest prefix ``model`` caches, from the price book's ``[cache_minimum]`` table,
    the same figure the ledger's cache diagnosis reads; 0 (cache any length) for a model it
    does not list."""
    return _shipped_price_book().cache_minimum(model) or 0


class PromptCacheModel:
    """What a provider's prompt cache bills for a request, block by block.

    It keeps what real caching keeps: a prefix is identified by every byte
    before it (a rolling hash over blocks), entries are written at breakpoints,
    and a request reads the longest previously written prefix it starts with.
    So the first call writes its prefix, each later call reads the previous
    prefix and writes only the new part, and any change early in the prompt
    (a timestamp in the system prompt, reordered tools) makes the read 0.
    Prefixes shorter than ``min_tokens`` are never cached, as on the real API.
    """

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[str, int] = {}
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every entry (TTL lapsed, another replica): the next call reads 0."""
        with self._lock:
            self._entries.clear()

    @staticmethod
    def _prefixes(blocks: list[Any]) -> tuple[list[str], list[int]]:
        """Each block's prefix key (a rolling hash) and the tokens up to and including it."""
        keys: list[str] = []
        cumulative: list[int] = []
        digest, running = hashlib.sha256(), 0
        for block in blocks:
            digest.update(_compact(block).encode())
            keys.append(digest.copy().hexdigest())
            running += estimate_tokens(block)
            cumulative.append(running)
        return keys, cumulative

    def warm(self, request: Mapping[str, Any]) -> None:
        """Cache ``request``'s tools and system prompt, as an earlier run of the same deployment
        did minutes ago (a provider's cache is shared by every request of an organization)."""
        blocks, marks = _segments(request)
        keys, cumulative = self._prefixes(blocks)
        with self._lock:
            for m in marks:
                if blocks[m][0] in ("tool", "system") and cumulative[m] >= self.min_tokens:
                    self._entries[keys[m]] = cumulative[m]

    def usage(self, request: Mapping[str, Any]) -> tuple[int, int, int]:
        """``(uncached_input, cache_write, cache_read)`` for ``request``; records the writes."""
        blocks, marks = _segments(request)
        keys, cumulative = self._prefixes(blocks)
        total = cumulative[-1] if cumulative else 0
        with self._lock:
            hit = next((i for i in range(len(keys) - 1, -1, -1) if keys[i] in self._entries), -1)
            read = cumulative[hit] if hit >= 0 else 0
            cacheable = [m for m in marks if cumulative[m] >= self.min_tokens]
            end = cacheable[-1] if cacheable else -1
            write = cumulative[end] - read if end > hit else 0
            for m in cacheable:
                self._entries[keys[m]] = cumulative[m]
        return total - read - write, write, read


# ---------------------------------------------------------------------------
# ScriptedLLM: a deterministic provider driven by a policy
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """What a scripted model says on one call.

    ``stop_reason`` defaults to ``tool_use`` when there are calls, else ``end_turn``.
    ``output_tokens`` defaults to an estimate from the content. ``evict_cache``
    drops the provider's prompt cache before this call (a cache break).
    """

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    stop_reason: str | None = None
    output_tokens: int | None = None
    evict_cache: bool = False

    @classmethod
    def answer(cls, text: str, **kw: Any) -> Reply:
        return cls(text=text, **kw)

    @classmethod
    def use(cls, *calls: tuple[str, Mapping[str, Any]], text: str = "", **kw: Any) -> Reply:
        """``Reply.use(("search_kb", {"query": "x"}), ...)``: one or more tool calls in one turn."""
        return cls(text=text, tool_calls=tuple(ToolCall("", name, dict(args)) for name, args in calls), **kw)


@dataclass(frozen=True)
class PolicyView:
    """The request as a scripted model sees it, with the look-ups policies need."""

    system: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    max_tokens: int
    call_index: int

    @property
    def tool_names(self) -> list[str]:
        return [t["name"] for t in self.tools]

    def tool_results(self) -> list[dict[str, Any]]:
        """Every tool_result block in the history, oldest first."""
        return [
            b
            for m in self.messages
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]

    def last_results(self) -> list[dict[str, Any]]:
        """The tool_result blocks of the latest user message (one turn's answers)."""
        content = self.messages[-1]["content"] if self.messages else []
        return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]

    def user_texts(self) -> list[str]:
        """Plain user text, in order (the task, harness notes, goal feedback)."""
        out: list[str] = []
        for m in self.messages:
            if m["role"] != "user":
                continue
            if isinstance(m["content"], str):
                out.append(m["content"])
            else:
                out.extend(b["text"] for b in m["content"] if b.get("type") == "text")
        return out

    @property
    def task(self) -> str:
        texts = self.user_texts()
        return texts[0] if texts else ""


Policy = Callable[[PolicyView], Reply]


def result_text(block: Mapping[str, Any]) -> str:
    """The text of a tool_result block, whether its content is a string or blocks."""
    content = block.get("content", "")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, Mapping))


def _view(request: Mapping[str, Any], call_index: int) -> PolicyView:
    system = request.get("system") or ""
    if not isinstance(system, str):
        system = "".join(b.get("text", "") for b in system)
    return PolicyView(
        system=system,
        messages=list(request.get("messages") or []),
        tools=list(request.get("tools") or []),
        max_tokens=int(request.get("max_tokens") or 0),
        call_index=call_index,
    )


class ScriptedLLM(CompleteBySending):
    """A deterministic provider: ``policy`` decides the reply, usage is estimated.

    ``faults`` scripts infrastructure failures: ``{2: [ProviderError(429, retry_after=7)]}``
    makes the third logical call fail once with a 429 before it succeeds. Each
    failure is consumed by one attempt, exactly like a flaky server.
    ``min_cacheable_tokens`` defaults to the model's minimum in the price book.
    ``warm_cache`` starts with the first request's tools and system prompt already
    cached (another run of the deployment wrote them within the cache's lifetime).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        model: str = DEFAULT_MODEL,
        cache: bool = True,
        min_cacheable_tokens: int | None = None,
        faults: Mapping[int, Iterable[BaseException]] | None = None,
        id_prefix: str = "toolu_",
        warm_cache: bool = False,
    ) -> None:
        self.model = model
        self.policy = policy
        self.cache = cache
        minimum = cache_minimum(model) if min_cacheable_tokens is None else min_cacheable_tokens
        self.prompt_cache = PromptCacheModel(minimum)
        self._faults = {k: list(v) for k, v in (faults or {}).items()}
        self._id_prefix = id_prefix
        self._warm = warm_cache
        self._calls = 0  # successful calls so far: the index faults are keyed by
        self._answered: Counter[str] = Counter()  # replies so far to each distinct request
        self._tool_ids = 0
        self._lock = threading.Lock()

    @property
    def calls(self) -> int:
        return self._calls

    def _response_id(self, request: Mapping[str, Any]) -> str:
        """Deterministic, and distinct for distinct requests, as the API's ids are unique: the ledger
        charges one billed call per response id. Numbered per distinct request, not per call, so
        calls made at once from several threads (a tool's summaries) get the same ids every time."""
        digest = hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()[:16]
        with self._lock:
            seen = self._answered[digest]
            self._answered[digest] += 1
        return f"msg_scripted_{seen:04d}_{digest}"

    def build_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> dict[str, Any]:
        return build_request(self.model, system, messages, tools, max_tokens, cache=self.cache, **kw)

    def send(self, request: Mapping[str, Any]) -> LLMResponse:
        with self._lock:
            index = self._calls
            pending = self._faults.get(index)
            if pending:
                raise pending.pop(0)
            self._calls += 1
        reply = self.policy(_view(request, index))
        with self._lock:
            calls = []
            for c in reply.tool_calls:
                self._tool_ids += 1
                calls.append(replace(c, id=c.id or f"{self._id_prefix}{self._tool_ids:04d}"))
        content = _content(reply.text, calls)
        stop = reply.stop_reason or ("tool_use" if calls else "end_turn")
        output = reply.output_tokens if reply.output_tokens is not None else estimate_tokens(content)
        limit = int(request.get("max_tokens") or 0)
        if limit and output > limit:
            # Cut off mid-reply, as the API does: the text is clipped and a tool
            # call in flight keeps only part of its arguments.
            stop, output = "max_tokens", limit
            content = _truncate(content, limit)
        if reply.evict_cache:
            self.prompt_cache.clear()
        if self._warm:
            self._warm = False
            self.prompt_cache.warm(request)
        uncached, write, read = self.prompt_cache.usage(request)
        text = "".join(b["text"] for b in content if b["type"] == "text")
        tool_calls = tuple(ToolCall(b["id"], b["name"], b["input"]) for b in content if b["type"] == "tool_use")
        return LLMResponse(
            text=text,
            tool_calls=tool_calls,
            assistant_content=content,
            stop_reason=stop,
            usage=Usage(uncached, output, write, read),
            model=self.model,
            request=dict(request),
            response_id=self._response_id(request),
        )


def _content(text: str, calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": plain_json(c.input)} for c in calls]
    return blocks


def _truncate(content: list[dict[str, Any]], max_tokens: int) -> list[dict[str, Any]]:
    budget = max_tokens * 4  # characters
    out: list[dict[str, Any]] = []
    for block in content:
        size = len(_compact(block))
        if size <= budget:
            out.append(block)
            budget -= size
            continue
        if block["type"] == "text":
            out.append({"type": "text", "text": block["text"][: max(budget, 0)]})
        else:  # a tool call cut off mid-argument: its input is incomplete
            out.append({**block, "input": {}})
        break
    return out
