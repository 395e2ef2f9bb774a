"""The request payload a span carries, and which of its attributes hold it.

Producers record the exact context of a model call in different places: ours
as one JSON body (``turnledger.request.body``), the current GenAI conventions as
``gen_ai.input.messages`` / ``gen_ai.system_instructions`` / ``gen_ai.tool.definitions``
(attributes, or events on older instrumentations), OpenInference as its SDK call's
keyword arguments (``input.value``) or as flattened ``llm.input_messages.N.…``
attributes (preferred to ``input.value`` when that is a framework's own serialization,
such as LangChain's ``{"lc": 1, ...}`` objects). ``captured_payload`` gathers one
payload from any of them; ingest moves those attributes to the content store
(``ledger.content``), and ``ledger.wire_request`` turns the payload and the span's
other attributes into the provider's wire request when it is read.

What the model answered is found the same way (``captured_response``): the GenAI
``gen_ai.output.messages`` (ours: provider-native content blocks, with each
message's ``finish_reason``), OpenInference ``llm.output_messages.N.…`` or
``output.value`` on an LLM span, Traceloop ``gen_ai.completion.N.…``. Those, and
a tool's arguments and result, are content too (``content_keys``): stored
content-addressed, referenced from the span.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import orjson

from . import conventions as c
from .spans import SpanRecord

__all__ = [
    "CONTENT_ATTRIBUTES",
    "OPENINFERENCE_MESSAGE",
    "OPENINFERENCE_REQUEST",
    "captured_payload",
    "captured_response",
    "content_keys",
    "json_value",
]

# Attributes that carry captured request content: moved to the content store at ingest.
CONTENT_ATTRIBUTES = (c.REQUEST_BODY, c.INPUT_MESSAGES, c.SYSTEM_INSTRUCTIONS, c.TOOL_DEFINITIONS)
# Flattened request content (one attribute per field): also moved, matched by prefix.
# (The name is historical: it covers OpenLLMetry's legacy families as well.)
OPENINFERENCE_MESSAGE = re.compile(
    r"^(llm\.input_messages|llm\.tools|gen_ai\.prompt|llm\.prompts|llm\.request\.functions)\.(\d+)\.(.+)$"
)
_OPENINFERENCE_INPUT = "input.value"
_OPENINFERENCE_INPUT_MIME = "input.mime_type"
# On an OpenInference LLM span (and only there) input.value IS the request: it moves to the
# content store like CONTENT_ATTRIBUTES. On TOOL/CHAIN spans it is the tool's input and stays.
OPENINFERENCE_REQUEST = (_OPENINFERENCE_INPUT, _OPENINFERENCE_INPUT_MIME)
# What the model answered: the whole list, or flattened one field per attribute.
_OUTPUT_FLATTENED = re.compile(r"^(llm\.output_messages|gen_ai\.completion)\.(\d+)\.(.+)$")
_OPENINFERENCE_OUTPUT = "output.value"
# A tool's input and output: GenAI attributes, or OpenInference's input/output.value off an LLM span.
_TOOL_CONTENT = (c.TOOL_CALL_ARGUMENTS, c.TOOL_CALL_RESULT)
_OPENINFERENCE_IO = (_OPENINFERENCE_INPUT, _OPENINFERENCE_OUTPUT)
_DETAILS_EVENT = "gen_ai.client.inference.operation.details"
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def json_value(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)  # captured payloads are large: ~2x the stdlib's speed
        except orjson.JSONDecodeError:
            pass
        try:
            return json.loads(raw)  # what orjson refuses but JSON-ish producers send (NaN)
        except (json.JSONDecodeError, RecursionError):  # nested past the parser: kept as the text it is
            return raw
    return raw


_WRAPPERS = ("message", "message_content", "tool_call", "tool", "function")


def _nest(pairs: list[tuple[str, Any]]) -> Any:
    """Rebuild a value from flattened ``a.b.0.c`` keys: numeric segments become list positions."""
    root: dict[str, Any] = {}
    for path, value in pairs:
        node = root
        parts = path.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                break
        else:
            node[parts[-1]] = value
    return _listify(root)


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(k.isdigit() for k in node):
        return [_listify(node[k]) for k in sorted(node, key=int)]
    out = {k: _listify(v) for k, v in node.items()}
    # OpenInference namespaces every field ("message.role", "message_content.text"):
    # a dict holding just one such namespace is that namespace's content.
    if len(out) == 1 and next(iter(out)) in _WRAPPERS and isinstance(next(iter(out.values())), dict):
        return next(iter(out.values()))
    return out


def _flattened_content(attrs: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Messages and tools from flattened attributes, by family: {"messages": [...], "tools": [...]}."""
    found: dict[str, dict[int, list[tuple[str, Any]]]] = {}
    for key, value in attrs.items():
        m = OPENINFERENCE_MESSAGE.match(key)
        if m:
            family = "tools" if m.group(1) in ("llm.tools", "llm.request.functions") else "messages"
            found.setdefault(family, {}).setdefault(int(m.group(2)), []).append((m.group(3), value))
    out: dict[str, list[Any]] = {}
    for family, items in found.items():
        values = []
        for i in sorted(items):
            item = _nest(items[i])
            if family == "tools" and isinstance(item, dict) and set(item) == {"json_schema"}:
                item = json_value(item["json_schema"])  # OpenInference: the tool's whole schema as JSON
            values.append(item)
        out[family] = values
    return out


def _event_content(span: SpanRecord) -> dict[str, Any]:
    """Request content carried by span events instead of attributes."""
    out: dict[str, Any] = {}
    messages: list[Any] = []
    for e in span.events:
        ea = e.attributes
        if e.name == _DETAILS_EVENT:
            if c.SYSTEM_INSTRUCTIONS in ea:
                out["system"] = json_value(ea[c.SYSTEM_INSTRUCTIONS])
            if c.TOOL_DEFINITIONS in ea:
                out["tools"] = json_value(ea[c.TOOL_DEFINITIONS])
            if c.INPUT_MESSAGES in ea:
                out["messages"] = json_value(ea[c.INPUT_MESSAGES])
        elif e.name in _MESSAGE_EVENTS:
            message = {"role": ea.get("role") or _MESSAGE_EVENTS[e.name]}
            for k, v in ea.items():
                if k not in ("role", "gen_ai.system", c.PROVIDER_NAME):
                    message[k] = json_value(v)
            messages.append(message)
    if messages and "messages" not in out:
        out["messages"] = messages
    return out


def captured_payload(span: SpanRecord) -> dict[str, Any] | None:
    """The request payload a span carries: ours verbatim, or rebuilt from GenAI/OpenInference content."""
    a = span.attributes
    if c.REQUEST_BODY in a:
        body = json_value(a[c.REQUEST_BODY])
        return body if isinstance(body, dict) else {"body": body}
    # OpenInference records the call's input as input.value: on a provider SDK's span its keyword
    # arguments (the exact request), on a framework's its own serialization (LangChain's
    # {"lc": 1, ...} objects), which the flattened llm.input_messages.* say in provider terms.
    framework_input: dict[str, Any] | None = None
    if _OPENINFERENCE_INPUT in a and "json" in str(a.get(_OPENINFERENCE_INPUT_MIME, "")).lower():
        body = json_value(a[_OPENINFERENCE_INPUT])
        if isinstance(body, dict) and "messages" in body:
            if _provider_messages(body["messages"]):
                return body
            framework_input = body
    payload: dict[str, Any] = {}
    model = a.get(c.REQUEST_MODEL) or a.get("llm.model_name")
    if c.SYSTEM_INSTRUCTIONS in a:
        payload["system"] = json_value(a[c.SYSTEM_INSTRUCTIONS])
    if c.TOOL_DEFINITIONS in a:
        payload["tools"] = json_value(a[c.TOOL_DEFINITIONS])
    if c.INPUT_MESSAGES in a:
        payload["messages"] = json_value(a[c.INPUT_MESSAGES])
    for key, value in _flattened_content(a).items():
        payload.setdefault(key, value)
    if span.events:
        for key, value in _event_content(span).items():
            payload.setdefault(key, value)
    if not payload:
        return framework_input
    return {"model": str(model), **payload} if model else payload


def _provider_messages(messages: Any) -> bool:
    """A list of provider-shaped messages (each an object with a role), not a framework's serialization."""
    return isinstance(messages, list) and all(isinstance(m, dict) and "role" in m for m in messages)


def content_keys(keys: tuple[str, ...], openinference_kind: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Of a span's attribute keys, (what the model answered, a tool's arguments and result).

    ``openinference_kind``: the span's ``openinference.span.kind``. On an LLM span
    ``output.value`` is the answer (and ``input.value`` the request, which
    ``captured_payload`` reads); on its other spans (TOOL, CHAIN, AGENT ...) they
    are what the step took and gave. Without a kind ``input.value`` may be a
    GenAI chat span's request, so it stays where ``captured_payload`` finds it.
    """
    llm = openinference_kind == "LLM"
    outputs = tuple(
        k for k in keys if k == c.OUTPUT_MESSAGES or _OUTPUT_FLATTENED.match(k) or (llm and k == _OPENINFERENCE_OUTPUT)
    )
    steps = openinference_kind is not None and not llm
    tools = tuple(k for k in keys if k in _TOOL_CONTENT or (steps and k in _OPENINFERENCE_IO))
    return outputs, tools


def captured_response(attrs: Mapping[str, Any], llm_span: bool) -> Any:
    """What the model answered, from a span's output attributes: the list of output messages
    (``gen_ai.output.messages`` as sent, or rebuilt from flattened attributes), or
    OpenInference's ``output.value``; None when the span carries none."""
    if c.OUTPUT_MESSAGES in attrs:
        return json_value(attrs[c.OUTPUT_MESSAGES])
    items: dict[int, list[tuple[str, Any]]] = {}
    for key, value in attrs.items():
        m = _OUTPUT_FLATTENED.match(key)
        if m:
            items.setdefault(int(m.group(2)), []).append((m.group(3), value))
    if items:
        return [_nest(items[i]) for i in sorted(items)]
    if llm_span and _OPENINFERENCE_OUTPUT in attrs:
        return json_value(attrs[_OPENINFERENCE_OUTPUT])
    return None
