"""Deployment bugs that break a prompt cache, for demo runs that show a real break.

The harness keeps the system prompt and the tool list byte-identical for a
whole run; real deployments often do not. :class:`DriftingClient` wraps a
client and rewrites each request it builds, as a buggy deployment would, so
the captured payloads carry the invalidator and the scripted provider's cache
(``collector.demo.scripted_llm.PromptCacheModel``) bills the re-write:

* :func:`clock_in_system_prompt` puts the current time at the top of the
  system prompt: every turn's prefix differs from the first characters on, so
  every turn writes the whole prompt again and reads nothing;
* :func:`tools_reordered` sends the tool list in another order from one turn
  on (a registry rebuilt from a set, an MCP server that reconnected): the
  prefix breaks once at its very first block, then caches again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from collector.harness.llm import LLM, CompleteBySending, LLMResponse

__all__ = ["DriftingClient", "Rewrite", "clock_in_system_prompt", "tools_reordered"]

# A rewrite takes the request built for a turn (0-based) and returns what is really sent.
Rewrite = Callable[[dict[str, Any], int], dict[str, Any]]


class DriftingClient(CompleteBySending):
    """``llm`` with every request passed through ``rewrite`` before it is sent (and captured)."""

    def __init__(self, llm: LLM, rewrite: Rewrite) -> None:
        self.llm = llm
        self.model = llm.model
        self.rewrite = rewrite
        self._turns = 0

    def build_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        max_tokens: int,
        **kw: Any,
    ) -> dict[str, Any]:
        # The harness builds one request per turn and re-sends it on a retry, so builds count turns.
        turn, self._turns = self._turns, self._turns + 1
        return self.rewrite(self.llm.build_request(system, messages, tools, max_tokens, **kw), turn)

    def send(self, request: Mapping[str, Any]) -> LLMResponse:
        return self.llm.send(request)


def clock_in_system_prompt(clock_ns: Callable[[], int]) -> Rewrite:
    """The time of each call at the top of the system prompt (``f"Current time: {now}"``)."""

    def rewrite(request: dict[str, Any], turn: int) -> dict[str, Any]:
        now = datetime.fromtimestamp(clock_ns() / 1e9, UTC).isoformat(timespec="milliseconds")
        stamp = f"Current time: {now}.\n\n"
        system = request.get("system")
        if isinstance(system, list) and system:
            request["system"] = [{**system[0], "text": stamp + system[0].get("text", "")}, *system[1:]]
        else:
            request["system"] = stamp + (system or "")
        return request

    return rewrite


def tools_reordered(from_turn: int) -> Rewrite:
    """From turn ``from_turn`` on, the tool list sorted by name instead of in its declared order."""

    def rewrite(request: dict[str, Any], turn: int) -> dict[str, Any]:
        if turn >= from_turn and request.get("tools"):
            request["tools"] = sorted(request["tools"], key=lambda tool: str(tool.get("name")))
        return request

    return rewrite
