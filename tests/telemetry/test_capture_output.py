"""What the model answered, as our harness puts it on the chat span (gen_ai.output.messages)."""

from __future__ import annotations

import json

from collector.harness.telemetry.capture import Capture

BLOCKS = [
    {"type": "thinking", "thinking": "Check the balance first.", "signature": "sig"},
    {"type": "text", "text": "Mail jane.doe@example.com the sk-ant-api03-SECRETSECRETSECRET123 key"},
    {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"who": "alice"}},
]


def test_the_answer_is_one_assistant_message_with_its_blocks_and_finish_reason_in_order() -> None:
    text = Capture("full").output_messages(BLOCKS, "tool_use")
    assert text is not None
    assert json.dumps(json.loads(text)) == json.dumps(
        [{"role": "assistant", "content": BLOCKS, "finish_reason": "tool_use"}]
    )


def test_the_answer_is_redacted_like_the_request_and_absent_when_capture_is_off() -> None:
    text = Capture("redacted").output_messages(BLOCKS, "end_turn")
    assert text is not None and "jane.doe@example.com" not in text and "sk-ant-api03-SECRET" not in text
    assert json.loads(text)[0]["content"][2] == BLOCKS[2]  # what holds no secret is kept as is
    assert Capture("off").output_messages(BLOCKS, "end_turn") is None
