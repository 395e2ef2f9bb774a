"""A local fake of the Anthropic Messages API, for driving the real SDK in tests.

Stdlib only: ``http.server`` on 127.0.0.1 with an OS-assigned port, in a
daemon thread. It records every request body exactly as received, answers
with scripted replies (usage with cache tokens included), speaks SSE when the
request says ``"stream": true`` (message_start, content_block_*,
message_delta, message_stop, so the SDK's stream helpers work), and can fail
first with a 429 carrying ``retry-after`` or a 529/500.

    with FakeAnthropicServer() as server:
        server.enqueue(FakeError.rate_limited(retry_after=7), FakeReply.text("hi"))
        client = anthropic.Anthropic(base_url=server.base_url, api_key="test", max_retries=0)
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from collector.demo.scripted_llm import PromptCacheModel, estimate_tokens

__all__ = ["Exchange", "FakeAnthropicServer", "FakeError", "FakeReply", "api_usage"]


def api_usage(
    input_tokens: int = 0, output_tokens: int = 0, *, cache_read: int = 0, cache_5m: int = 0, cache_1h: int = 0
) -> dict[str, Any]:
    """A usage object as the Messages API reports it with the cache writes split by TTL: the
    total in ``cache_creation_input_tokens``, the split under ``cache_creation``."""
    return {
        "input_tokens": input_tokens,
        "cache_creation_input_tokens": cache_5m + cache_1h,
        "cache_read_input_tokens": cache_read,
        "output_tokens": output_tokens,
        "cache_creation": {"ephemeral_5m_input_tokens": cache_5m, "ephemeral_1h_input_tokens": cache_1h},
    }


# Every fake in a test process numbers its response and request ids apart, as the
# real API's ids are unique: the ledger charges one billed call per response id.
_INSTANCES = itertools.count(1)


@dataclass(frozen=True)
class FakeReply:
    """A successful Messages API response. ``usage`` None: estimated from the
    request with the same prompt-cache model the scripted client uses; with the
    TTL split of the cache writes: ``api_usage(...)``."""

    content: list[dict[str, Any]]
    stop_reason: str = "end_turn"
    usage: Mapping[str, Any] | None = None
    model: str | None = None

    @classmethod
    def text(cls, text: str, **kw: Any) -> FakeReply:
        return cls([{"type": "text", "text": text}], **kw)

    @classmethod
    def tools(cls, *calls: tuple[str, str, Mapping[str, Any]], text: str = "", **kw: Any) -> FakeReply:
        """``FakeReply.tools(("toolu_1", "search_kb", {"query": "x"}), ...)``."""
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
        blocks += [{"type": "tool_use", "id": i, "name": n, "input": dict(a)} for i, n, a in calls]
        return cls(blocks, stop_reason="tool_use", **kw)


@dataclass(frozen=True)
class FakeError:
    status: int
    error_type: str
    message: str = "scripted failure"
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> FakeError:
        headers = {"retry-after": f"{retry_after:g}"} if retry_after is not None else {}
        return cls(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit.", headers)

    @classmethod
    def overloaded(cls) -> FakeError:
        return cls(529, "overloaded_error", "Overloaded")

    @classmethod
    def server_error(cls) -> FakeError:
        return cls(500, "api_error", "Internal server error")

    @classmethod
    def bad_request(cls, message: str = "messages: field required") -> FakeError:
        return cls(400, "invalid_request_error", message)


@dataclass
class Exchange:
    """One request as received and what was sent back."""

    path: str
    headers: dict[str, str]
    raw: bytes
    status: int = 0
    response: dict[str, Any] | None = None  # the full message (or error) body returned

    @property
    def body(self) -> Any:
        return json.loads(self.raw)


Script = FakeReply | FakeError


class FakeAnthropicServer:
    def __init__(
        self,
        responder: Callable[[dict[str, Any]], Script] | None = None,
        *,
        truncate_streams: bool = False,
        full_delta_usage: bool = False,
    ):
        """``responder(body)`` answers when the queue is empty; ``truncate_streams``
        ends every SSE stream before ``message_delta`` (a dropped connection);
        ``full_delta_usage``: ``message_delta`` carries the whole usage, as the API
        sends it today, rather than the classic shape with the output count only."""
        self.responder = responder
        self.truncate_streams = truncate_streams
        self.full_delta_usage = full_delta_usage
        self.exchanges: list[Exchange] = []
        self.cache = PromptCacheModel(min_tokens=0)
        self._queue: deque[Script] = deque()
        self._lock = threading.Lock()
        self._ids = 0
        self.instance = next(_INSTANCES)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ----------------------------------------------------------------
    def start(self) -> FakeAnthropicServer:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        # A short poll interval keeps shutdown (once per test) fast.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-anthropic", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeAnthropicServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        assert self._httpd is not None, "start the server first"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    # --- scripting ------------------------------------------------------------------
    def enqueue(self, *scripts: Script) -> None:
        with self._lock:
            self._queue.extend(scripts)

    @property
    def bodies(self) -> list[Any]:
        return [e.body for e in self.exchanges]

    @property
    def successes(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.status == 200]

    def _next(self, body: dict[str, Any]) -> Script:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.responder is None:
            return FakeError(500, "api_error", "fake server has no scripted reply left")
        return self.responder(body)

    def _message(self, body: dict[str, Any], reply: FakeReply) -> dict[str, Any]:
        with self._lock:
            self._ids += 1
            msg_id = f"msg_fake_{self.instance:03d}_{self._ids:04d}"
        if reply.usage is not None:
            usage = {
                "input_tokens": 0,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": 0,
                **reply.usage,
            }
        else:
            uncached, write, read = self.cache.usage(body)
            usage = {
                "input_tokens": uncached,
                "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read,
                "output_tokens": estimate_tokens(reply.content),
            }
        return {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "model": reply.model or body.get("model", "claude-opus-5"),
            "content": reply.content,
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }


def _event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def _deltas(index: int, delta_type: str, key: str, text: str, size: int) -> list[str]:
    return [
        _event("content_block_delta", index=index, delta={"type": delta_type, key: text[i : i + size]})
        for i in range(0, len(text), size)
    ]


def _sse(message: dict[str, Any], truncate: bool, full_delta_usage: bool = False) -> bytes:
    """The message as the Messages API streams it: input and cache counts on
    message_start (output a placeholder 1), the real output count on message_delta
    (with the input and cache counts again where ``full_delta_usage``)."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    out = [_event("message_start", message=start), _event("ping")]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            out.append(_event("content_block_start", index=index, content_block={"type": "text", "text": ""}))
            out += _deltas(index, "text_delta", "text", block["text"], 16)
        else:  # tool_use: the arguments arrive as partial JSON
            out.append(_event("content_block_start", index=index, content_block={**block, "input": {}}))
            out += _deltas(index, "input_json_delta", "partial_json", json.dumps(block["input"]), 10)
        out.append(_event("content_block_stop", index=index))
    if not truncate:
        delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
        final = usage if full_delta_usage else {"output_tokens": usage["output_tokens"]}
        out.append(_event("message_delta", delta=delta, usage=final))
        out.append(_event("message_stop"))
    return "".join(out).encode()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeAnthropicServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
        pass

    def _send(self, status: int, payload: bytes, content_type: str, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(payload)))
        self.send_header("request-id", f"req_fake_{self.fake.instance:03d}_{len(self.fake.exchanges):04d}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(payload)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        exchange = Exchange(self.path, {k.lower(): v for k, v in self.headers.items()}, raw)
        with self.fake._lock:
            self.fake.exchanges.append(exchange)
        if not self.path.startswith("/v1/messages"):
            exchange.status = 404
            self._send(
                404,
                b'{"type":"error","error":{"type":"not_found_error","message":"no such route"}}',
                "application/json",
            )
            return
        body = json.loads(raw)
        if self.path.startswith("/v1/messages/count_tokens"):  # free: counted, never billed
            exchange.status, exchange.response = 200, {"input_tokens": estimate_tokens(body.get("messages", []))}
            self._send(200, json.dumps(exchange.response).encode(), "application/json")
            return
        script = self.fake._next(body)
        if isinstance(script, FakeError):
            error = {"type": "error", "error": {"type": script.error_type, "message": script.message}}
            exchange.status, exchange.response = script.status, error
            self._send(script.status, json.dumps(error).encode(), "application/json", script.headers)
            return
        message = self.fake._message(body, script)
        exchange.status, exchange.response = 200, message
        if body.get("stream"):
            self._send(200, _sse(message, self.fake.truncate_streams, self.fake.full_delta_usage), "text/event-stream")
        else:
            self._send(200, json.dumps(message).encode(), "application/json")
