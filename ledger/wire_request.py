"""The request a model call sent, rebuilt in its provider's wire format from what the source recorded.

Sources record a call's request in their own terms: ours as the body itself
(``turnledger.request.body``), OpenInference on a provider SDK as the call's
keyword arguments (``input.value``), the GenAI conventions as
``gen_ai.input.messages`` / ``gen_ai.system_instructions`` /
``gen_ai.tool.definitions`` (parts: ``text``, ``tool_call``,
``tool_call_response``), older instrumentations as one event per message,
OpenInference on a framework and OpenLLMetry as flattened attributes
(``llm.input_messages.N.message.*``, ``gen_ai.prompt.N.*``), and the request's
parameters beside them (``gen_ai.request.max_tokens``, ``llm.invocation_parameters``,
``llm.is_streaming`` ...). ``ledger.captured`` gathers the content into one payload
at ingest; the parameters stay among the span's attributes.

``wire_request`` maps the two to the body the provider's API takes, chosen by the
call's provider (Anthropic Messages, OpenAI Chat Completions), by rules on the
shape of what was recorded, never on which framework recorded it: a message or
block already in the API's shape is kept as it is, a GenAI part or an
OpenAI/Converse-style block is translated, a parameter is taken where its
convention names it. Nothing is invented: a field no source reported is left out
and named in ``not_reported``, as are the details a convention cannot carry
(``cache_control`` on a block rebuilt from GenAI parts, say), so a reader knows
which parts of the dump are the wire's and which the source never said.

It runs at read time: the raw content and attributes are kept, so ingest pays
nothing, and a better rule applies to calls already stored.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import conventions as c
from .captured import json_value
from .model_names import resolve

__all__ = ["ANTHROPIC_MESSAGES", "OPENAI_CHAT", "WireRequest", "comparable", "provider_api", "wire_request"]

ANTHROPIC_MESSAGES = "anthropic.messages"
OPENAI_CHAT = "openai.chat.completions"

# Each API's top-level request fields: what a field "not reported" is drawn from (Anthropic: the
# anthropic SDK 2.17's Messages.create, then the sampling fields older clients sent and sources still
# report, which that SDK takes only in extra_body; OpenAI: the Chat Completions reference, December 2026).
_API_FIELDS: dict[str, tuple[str, ...]] = {
    ANTHROPIC_MESSAGES: (
        "model", "messages", "max_tokens", "system", "tools", "tool_choice", "stop_sequences", "stream", "metadata",
        "thinking", "output_config", "cache_control", "service_tier", "container", "inference_geo", "speed",
        "diagnostics", "user_profile_id", "workspace_id", "temperature", "top_p", "top_k",
    ),
    OPENAI_CHAT: (
        "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stop", "stream",
        "stream_options", "tools", "tool_choice", "parallel_tool_calls", "presence_penalty", "frequency_penalty",
        "seed", "response_format", "logprobs", "top_logprobs", "logit_bias", "user", "reasoning_effort",
        "service_tier", "store", "metadata", "modalities", "prediction", "audio", "web_search_options",
    ),
}  # fmt: skip

# GenAI request attributes -> each API's field (gen_ai.request.stream: the anthropic SDK's own spans).
_GENAI_PARAMETERS: dict[str, dict[str, str]] = {
    ANTHROPIC_MESSAGES: {
        "max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k",
        "stop_sequences": "stop_sequences", "stream": "stream",
    },
    OPENAI_CHAT: {
        "max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p", "stop_sequences": "stop",
        "stream": "stream", "frequency_penalty": "frequency_penalty", "presence_penalty": "presence_penalty",
        "seed": "seed", "choice.count": "n",
    },
}  # fmt: skip
_GENAI_REQUEST = "gen_ai.request."
# OpenLLMetry's own names for what the GenAI conventions had none for.
_OPENLLMETRY_PARAMETERS = {"llm.is_streaming": "stream", "llm.top_k": "top_k", "llm.request.top_k": "top_k"}
_INVOCATION_PARAMETERS = "llm.invocation_parameters"  # OpenInference: the call's parameters, as JSON
_REDACTED = re.compile(r"^\[REDACTED")

# A gap ``<path>:form``: whether a lone text at ``path`` was sent as a string or as text blocks (the
# GenAI parts say "text" either way); the rebuild writes blocks.
_FORM = ":form"


@dataclass(frozen=True, slots=True)
class WireRequest:
    """One model call's request as its provider's API takes it.

    ``body``: every field the source reported, in the API's shape. ``not_reported``: the
    API's fields the source did not report (top-level names), then the details it could
    not carry where it did report a field, as paths (``system[].cache_control``: the key
    in any item of that list). Equal to the wire request once those paths are taken away
    from it (``strip_paths``).
    """

    api: str
    body: dict[str, Any]
    not_reported: tuple[str, ...]

    def as_json(self) -> dict[str, Any]:
        return {"api": self.api, "request": self.body, "not_reported": list(self.not_reported)}


_ANTHROPIC_PROVIDERS = ("anthropic", "aws.bedrock.anthropic", "gcp.vertex_ai.anthropic")
_OPENAI_PROVIDERS = ("openai", "azure.ai.openai", "azure_openai", "azure")
_PROVIDER_KEYS = (c.PROVIDER_NAME, "gen_ai.system", "llm.provider", "llm.system")
_MODEL_FAMILIES = ((re.compile(r"^(anthropic[./:])?claude"), ANTHROPIC_MESSAGES),
                   (re.compile(r"^(openai[./:])?(gpt|o\d|chatgpt)"), OPENAI_CHAT))  # fmt: skip


def provider_api(attrs: Mapping[str, Any], model: str | None) -> tuple[str | None, str | None]:
    """The API a call went to and the model id it sent: a routed name's provider wins
    (``anthropic/claude-…`` through LiteLLM is the Anthropic API, sent as ``claude-…``;
    ``ledger.model_names``), then the span's provider, then the model's family; None: unknown."""
    said = next((str(attrs[k]).lower() for k in _PROVIDER_KEYS if attrs.get(k)), "")
    provider, model_id = resolve(said, model) if model else (said, model)
    for name in (provider, *(str(attrs.get(k) or "").lower() for k in _PROVIDER_KEYS)):
        if name in _ANTHROPIC_PROVIDERS:
            return ANTHROPIC_MESSAGES, model_id
        if name in _OPENAI_PROVIDERS:
            return OPENAI_CHAT, model_id
    for pattern, api in _MODEL_FAMILIES:
        if model_id and pattern.match(model_id.lower()):
            return api, model_id
    return None, model_id


def wire_request(payload: Mapping[str, Any] | None, attrs: Mapping[str, Any]) -> WireRequest | None:
    """The request body a call sent, rebuilt from its captured ``payload`` (``ledger.captured``)
    and its span's ``attrs``; None when neither reports a request or the provider is unknown."""
    payload = dict(payload or {})
    model = payload.get("model") or attrs.get(c.REQUEST_MODEL) or attrs.get("llm.model_name")
    api, model_id = provider_api(attrs, str(model) if model else None)
    if api is None or not (payload or any(k.startswith(_GENAI_REQUEST) for k in attrs)):
        return None
    rebuild = _Rebuild(api)
    if model_id != model:  # a router's name: what the source recorded is the router's input, which
        rebuild.gaps |= {f"messages[].content{_FORM}", f"system{_FORM}"}  # it writes out its own way
    body = rebuild.body(payload, attrs, model_id)
    fields = _API_FIELDS[api]
    missing = [f for f in fields if f not in body]
    gaps = sorted(g for g in rebuild.gaps if re.split(r"[.\[:]", g, maxsplit=1)[0] in body)  # within what is there
    for gap in gaps:  # where a lone text's form is not reported, the rebuild writes text blocks
        if gap.endswith(_FORM):
            body = _walk(body, gap[: -len(_FORM)].split("."), _as_blocks)
    return WireRequest(api, body, (*missing, *gaps))


# --- the rebuild --------------------------------------------------------------------------------
class _Rebuild:
    def __init__(self, api: str) -> None:
        self.api = api
        self.gaps: set[str] = set()  # nested details the recorded convention could not carry

    def body(self, payload: dict[str, Any], attrs: Mapping[str, Any], model: Any) -> dict[str, Any]:
        fields = _API_FIELDS[self.api]
        if _is_wire(payload, self.api):  # recorded as sent (ours, an SDK call's keyword arguments): kept as is
            body = {k: v for k, v in payload.items() if k not in _CLIENT_OPTIONS}
        else:  # rebuilt: in the order the API's reference lists its fields, the model as the API knows it
            content = {**self._content(payload), **({"model": model} if model else {})}
            body = {k: content[k] for k in (*fields, *content) if k in content}
        if model and "model" not in body:
            body = {"model": str(model), **body}
        for key, value in _parameters(attrs, self.api).items():
            body.setdefault(key, value)
        return body

    # -- content ----------------------------------------------------------------------------------
    def _content(self, payload: dict[str, Any]) -> dict[str, Any]:
        body: dict[str, Any] = {k: v for k, v in payload.items() if k in _API_FIELDS[self.api] and k not in _CONTENT}
        system = payload.get("system")
        messages = [m for m in payload.get("messages") or [] if isinstance(m, dict)]
        lifted = [m for m in messages if m.get("role") in _SYSTEM_ROLES]
        if self.api == ANTHROPIC_MESSAGES:
            if system is None and lifted:  # Anthropic takes the system prompt beside the messages
                system = _join_system([self._anthropic_content(m, "system") for m in lifted])
                messages = [m for m in messages if m not in lifted]
            if system is not None:
                body["system"] = self._anthropic_system(system)
            if messages or "messages" in payload:
                body["messages"] = [self._anthropic_message(m) for m in messages]
            if payload.get("tools") is not None:
                body["tools"] = [self._anthropic_tool(t) for t in _items(payload["tools"])]
                self._optional_gaps("tools", body["tools"], _ANTHROPIC_TOOL_OPTIONS)
        else:
            out = []
            if system is not None:
                out.append({"role": "system", "content": _openai_text(_texts(system))})
            for m in messages:
                out.extend(self._openai_messages(m))
            if out or "messages" in payload:
                body["messages"] = out
            if payload.get("tools") is not None:
                body["tools"] = [self._openai_tool(t) for t in _items(payload["tools"])]
        return body

    def _optional_gaps(self, where: str, items: list[Any], options: tuple[str, ...]) -> None:
        """A rebuilt list's optional keys no item has: the source may have dropped them (flattened
        attributes carry a tool's name, description and schema only), so they are not reported."""
        for key in options:
            if not any(isinstance(item, dict) and key in item for item in items):
                self.gaps.add(f"{where}[].{key}")

    # -- Anthropic Messages -----------------------------------------------------------------------
    def _anthropic_system(self, system: Any) -> Any:
        system = json_value(system)
        if isinstance(system, str):
            return system
        blocks = [self._anthropic_block(b, "system") for b in _items(system)]
        return [b for b in blocks if b is not None]

    def _anthropic_message(self, m: Mapping[str, Any]) -> dict[str, Any]:
        role = str(m.get("role") or "user")
        if role in ("tool", "function", "ipython"):
            out_role = "user"
        elif role in ("assistant", "model", "ai"):
            out_role = "assistant"
        else:
            out_role = "user"
        content = self._anthropic_content(m, "messages")
        calls = m.get("tool_calls")
        if calls:  # OpenAI-style assistant message: the calls become tool_use blocks after the text
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) and content else []
            if isinstance(content, list):
                blocks = content
            blocks += [_anthropic_tool_use(call) for call in _items(calls)]
            content = blocks
        if role in ("tool", "function") and m.get("tool_call_id") is not None and not _has_tool_result(content):
            self.gaps.add("messages[].content[].is_error")
            if "parts" in m:  # GenAI text parts: a string or text blocks alike
                self.gaps.add(f"messages[].content[].content{_FORM}")
            content = [{"type": "tool_result", "tool_use_id": m["tool_call_id"], "content": content}]
        return {"role": out_role, "content": content}

    def _anthropic_content(self, m: Mapping[str, Any], where: str) -> Any:
        """A message's content as Anthropic takes it: a string stays one, blocks are translated."""
        if "parts" in m:  # GenAI: a list of typed parts
            raw: Any = m["parts"]
        elif "contents" in m:  # OpenInference: llm.input_messages.N.message.contents.M.message_content.*
            raw = m["contents"]  # a block's type and text only
            self.gaps.add(f"{where}[].cache_control" if where == "system" else f"{where}[].content[].cache_control")
        else:
            raw = m.get("content")
        raw = json_value(raw) if isinstance(raw, str) and raw[:1] in "[{" else raw
        if raw is None:
            return ""
        if isinstance(raw, str):
            return raw
        blocks: list[dict[str, Any]] = []
        for part in _items(raw):
            block = self._anthropic_block(part, where)
            if block is None:
                continue
            if "cachePoint" in part and blocks:  # Converse: a cache breakpoint after the block before it
                blocks[-1] = {**blocks[-1], "cache_control": {"type": "ephemeral"}}
                continue
            blocks.append(block)
        return blocks

    def _anthropic_block(self, part: Any, where: str) -> dict[str, Any] | None:
        if isinstance(part, str):
            self.gaps.add(f"{where}[].cache_control" if where == "system" else f"{where}[].content[].cache_control")
            return {"type": "text", "text": part}
        if not isinstance(part, dict):
            return None
        kind = part.get("type")
        if kind in _ANTHROPIC_BLOCKS and _native_anthropic(part):
            return dict(part)  # already the API's block: kept whole, cache_control included
        if kind is None:  # Converse blocks ({"text"}, {"toolUse"}, {"toolResult"}): cache points are blocks too
            return self._converse_block(part, where)
        self.gaps.add(f"{where}[].cache_control" if where == "system" else f"{where}[].content[].cache_control")
        if kind == "text":
            self.gaps.add(f"{where}{_FORM}" if where == "system" else f"{where}[].content{_FORM}")
            return {"type": "text", "text": part.get("text", part.get("content", ""))}
        if kind in ("tool_call", "function_call"):  # GenAI
            return _anthropic_tool_use(part)
        if kind in ("tool_call_response", "function_call_response"):  # GenAI
            self.gaps |= {"messages[].content[].is_error", f"messages[].content[].content{_FORM}"}
            result = part.get("response", part.get("result"))
            return {"type": "tool_result", "tool_use_id": part.get("id"), "content": _tool_result_content(result)}
        if kind in ("reasoning", "thinking"):
            self.gaps.add("messages[].content[].signature")
            return {"type": "thinking", "thinking": part.get("content", part.get("thinking", ""))}
        return dict(part)

    def _converse_block(self, part: dict[str, Any], where: str) -> dict[str, Any] | None:
        if "cachePoint" in part:
            return {}  # folded into the block before it (``_anthropic_content``)
        if "text" in part:
            return {"type": "text", "text": part["text"]}
        if "toolUse" in part:
            use = part["toolUse"]
            return {"type": "tool_use", "id": use.get("toolUseId"), "name": use.get("name"), "input": use.get("input")}
        if "toolResult" in part:
            res = part["toolResult"]
            content = [self._anthropic_block(b, where) for b in _items(res.get("content"))]
            return {"type": "tool_result", "tool_use_id": res.get("toolUseId"),
                    "content": [b for b in content if b], "is_error": res.get("status") == "error"}  # fmt: skip
        return dict(part)

    def _anthropic_tool(self, tool: Any) -> Any:
        if not isinstance(tool, dict):
            return tool
        if "input_schema" in tool or tool.get("type", "custom") not in ("custom", "function"):
            return dict(tool)  # the API's own shape, or a server tool: as recorded
        fn = tool["function"] if isinstance(tool.get("function"), dict) else tool
        out = {"name": fn.get("name"), "description": fn.get("description"),
               "input_schema": json_value(fn.get("parameters", fn.get("input_schema")))}  # fmt: skip
        return {k: v for k, v in out.items() if v is not None}

    # -- OpenAI Chat Completions ------------------------------------------------------------------
    def _openai_messages(self, m: Mapping[str, Any]) -> list[dict[str, Any]]:
        if "parts" not in m and "contents" not in m:  # OpenAI-shaped already (a string, or its parts)
            return [{k: json_value(v) if k == "content" else v for k, v in m.items()}]
        parts = _items(m.get("parts") if "parts" in m else m.get("contents"))
        role = str(m.get("role") or "user")
        texts = [p for p in parts if isinstance(p, dict) and (p.get("type") == "text" or set(p) == {"text"})]
        calls = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"]
        results = [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call_response"]
        out: list[dict[str, Any]] = []
        for r in results:
            result = r.get("response", r.get("result"))
            out.append({"role": "tool", "tool_call_id": r.get("id"),
                        "content": result if isinstance(result, str) else _json_dumps(result)})  # fmt: skip
        if texts or calls or not results:
            msg: dict[str, Any] = {"role": role, "content": _openai_text([_part_text(p) for p in texts]) or None}
            if calls:
                msg["tool_calls"] = [
                    {"id": p.get("id"), "type": "function",
                     "function": {"name": p.get("name"), "arguments": _arguments_text(p.get("arguments"))}}
                    for p in calls
                ]  # fmt: skip
            out.insert(0, msg)
        return out

    def _openai_tool(self, tool: Any) -> Any:
        if not isinstance(tool, dict) or isinstance(tool.get("function"), dict):
            return tool
        params = tool.get("parameters", tool.get("input_schema"))
        fn = {"name": tool.get("name"), "description": tool.get("description"), "parameters": json_value(params)}
        return {"type": "function", "function": {k: v for k, v in fn.items() if v is not None}}


_CONTENT = ("system", "messages", "tools")
# A custom tool's optional keys (Messages API reference): absent from a rebuilt tool, not reported.
# ``input_schema`` too: a source may record a tool without its schema (``"parameters": null``).
_ANTHROPIC_TOOL_OPTIONS = ("input_schema", "type", "cache_control", "strict", "defer_loading", "input_examples")
# An SDK call's keyword arguments that configure the client, never part of the body it sends.
_CLIENT_OPTIONS = frozenset({"extra_headers", "extra_query", "extra_body", "timeout", "betas"})
_SYSTEM_ROLES = ("system", "developer")
_ANTHROPIC_BLOCKS = frozenset(
    {"text", "image", "document", "tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use",
     "web_search_tool_result", "search_result", "container_upload"}
)  # fmt: skip


def _native_anthropic(part: Mapping[str, Any]) -> bool:
    """An Anthropic block, not a GenAI part of the same type name (``text`` is both: GenAI says ``content``)."""
    kind = part.get("type")
    if kind == "text":
        return "text" in part
    if kind == "tool_use":
        return "input" in part
    if kind == "tool_result":
        return "tool_use_id" in part
    return True


def _is_wire(payload: Mapping[str, Any], api: str) -> bool:
    """Recorded as the API took it: every message already in its shape (no GenAI parts, no flattened
    namespaces, no roles the API has not), and a system prompt, if any, beside them as the API wants."""
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    if any(not isinstance(m, dict) or "parts" in m or "contents" in m for m in messages):
        return False
    roles = {m.get("role") for m in messages}
    if api == ANTHROPIC_MESSAGES:
        if not roles <= {"user", "assistant"}:
            return False
        return all(
            isinstance(m.get("content"), str) or all(isinstance(b, dict) and _native_anthropic(b) and
                                                   b.get("type") in _ANTHROPIC_BLOCKS for b in m.get("content") or [])
            for m in messages
        )  # fmt: skip
    return roles <= {"system", "developer", "user", "assistant", "tool", "function"} and "system" not in payload


def _items(value: Any) -> list[Any]:
    value = json_value(value)
    return value if isinstance(value, list) else [value] if value is not None else []


def _part_text(part: Mapping[str, Any]) -> str:
    return str(part.get("text", part.get("content", "")))


def _texts(system: Any) -> list[str]:
    system = json_value(system)
    if isinstance(system, str):
        return [system]
    return [p if isinstance(p, str) else _part_text(p) for p in _items(system) if isinstance(p, (str, dict))]


def _openai_text(texts: list[str]) -> str | list[dict[str, str]]:
    return texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts]


def _join_system(contents: list[Any]) -> Any:
    if all(isinstance(x, str) for x in contents):
        return "\n\n".join(contents) if len(contents) > 1 else contents[0]
    blocks: list[Any] = []
    for x in contents:
        blocks += [{"type": "text", "text": x}] if isinstance(x, str) else x
    return blocks


def _json_dumps(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else _json_dumps(arguments)


def _anthropic_tool_use(call: Mapping[str, Any]) -> dict[str, Any]:
    fn = call["function"] if isinstance(call.get("function"), dict) else call
    arguments = fn.get("arguments", fn.get("input"))
    return {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": json_value(arguments)}


def _tool_result_content(result: Any) -> Any:
    if isinstance(result, str):
        return [{"type": "text", "text": result}]
    return result


def _has_tool_result(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def _parameters(attrs: Mapping[str, Any], api: str) -> dict[str, Any]:
    """The request parameters the span's attributes report, under the API's names."""
    out: dict[str, Any] = {}
    fields = _API_FIELDS[api]
    invocation = json_value(attrs.get(_INVOCATION_PARAMETERS))
    if isinstance(invocation, dict):  # OpenInference: only what the API itself names, set
        out.update({k: v for k, v in invocation.items() if k in fields and k not in ("messages",) and v is not None})
    for suffix, field in _GENAI_PARAMETERS[api].items():
        value = attrs.get(_GENAI_REQUEST + suffix)
        if _reported(value):
            out.setdefault(field, list(value) if isinstance(value, (list, tuple)) else value)
    for key, field in _OPENLLMETRY_PARAMETERS.items():
        if field in fields and _reported(attrs.get(key)):
            out.setdefault(field, attrs[key])
    if "stream" in out:
        stream = out.pop("stream")
        # Said as a bool or its spelling; false is the API's default, and whether the client wrote
        # it out is not said: only a streamed call's stream is reported.
        if stream is True or str(stream).lower() == "true":
            out["stream"] = True
    return out


def _reported(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and _REDACTED.match(value))


# --- comparing with what was sent ---------------------------------------------------------------
def comparable(sent: Any, not_reported: Iterable[str]) -> Any:
    """What of a request as sent its rebuild must equal: without what ``not_reported`` names (a
    top-level key, or ``a[].b``: key ``b`` of every item of list ``a``, as deep as the path goes),
    and a lone text written as text blocks where its form was not reported (``<path>:form``)."""
    out = sent
    for path in not_reported:
        if path.endswith(_FORM):
            out = _walk(out, path[: -len(_FORM)].split("."), _as_blocks)
        else:
            out = _walk(out, path.split("."), None)
    return out


def _as_blocks(value: Any) -> Any:
    return [{"type": "text", "text": value}] if isinstance(value, str) else value


def _walk(node: Any, steps: list[str], change: Callable[[Any], Any] | None) -> Any:
    """``node`` with the key at ``steps`` removed (``change`` None) or changed."""
    if not steps or not isinstance(node, dict):
        return node
    head, rest = steps[0], steps[1:]
    each = head.endswith("[]")
    key = head[:-2] if each else head
    if key not in node:
        return node
    if not rest:
        if change is None:
            return {k: v for k, v in node.items() if k != key}
        return {**node, key: change(node[key])}
    value = node[key]
    if each and isinstance(value, list):
        return {**node, key: [_walk(item, rest, change) for item in value]}
    return {**node, key: _walk(value, rest, change)}
