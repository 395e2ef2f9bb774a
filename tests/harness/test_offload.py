"""Offloading: big results become pointers, and read_artifact's containment
rejects all four escapes of seed 000 exercise 8 while a legitimate read works."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from collector.demo.scripted_llm import PolicyView, Reply, ScriptedLLM
from collector.harness import InMemoryObserver, Offloader, Tool, ToolError, run_agent
from ledger import conventions as c


@pytest.fixture
def offloader(tmp_path: Path) -> Offloader:
    return Offloader(tmp_path / "agent-artifacts")


def dump(rows: int = 400) -> str:
    return "\n".join(f"row {i}: a search hit with enough text to matter" for i in range(rows))


def test_small_results_pass_through_untouched(offloader: Offloader) -> None:
    assert offloader.wrap("search", "short") == ("short", None)
    assert list(offloader.root.iterdir()) == []


def test_a_large_result_becomes_a_descriptive_pointer(offloader: Offloader) -> None:
    text = dump()
    pointer, path = offloader.wrap("search_docs", text)
    assert path is not None and Path(path).read_text() == text
    assert len(pointer) < len(text) // 10
    assert f"400 lines / {len(text)} chars -> {path}" in pointer
    assert "row 0:" in pointer and "row 399:" in pointer and "row 200:" not in pointer  # head + tail only
    assert "read_artifact(path=" in pointer


def test_a_legitimate_artifact_reads(offloader: Offloader) -> None:
    _, path = offloader.wrap("dump", dump())
    assert offloader.read(path, 0, 2).startswith("[lines 0-2 of 400]\nrow 0:")


def test_absolute_path_outside_the_root_is_refused(offloader: Offloader) -> None:
    with pytest.raises(ToolError, match="outside the artifact directory"):
        offloader.read("/etc/passwd")


def test_sibling_prefix_is_refused(offloader: Offloader) -> None:
    sibling = Path(str(offloader.root) + "-evil")
    sibling.mkdir()
    (sibling / "secret.txt").write_text("tenant-b api key")
    # A string-prefix check would admit this path; that is the bug this test names.
    assert os.path.abspath(sibling / "secret.txt").startswith(os.path.abspath(offloader.root))
    with pytest.raises(ToolError, match="outside"):
        offloader.read(str(sibling / "secret.txt"))


def test_symlink_planted_inside_the_root_is_refused(offloader: Offloader, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("tenant-b api key")
    link = offloader.root / "innocent.txt"
    link.symlink_to(secret)
    assert os.path.abspath(link).startswith(os.path.abspath(offloader.root))  # passes a string check
    with pytest.raises(ToolError, match="outside"):
        offloader.read(str(link))


def test_dotdot_traversal_is_refused(offloader: Offloader) -> None:
    with pytest.raises(ToolError, match="outside"):
        offloader.read(os.path.join(offloader.root, "..", "..", "etc", "passwd"))


def test_a_missing_artifact_is_an_actionable_error(offloader: Offloader) -> None:
    with pytest.raises(ToolError, match="No artifact"):
        offloader.read(str(offloader.root / "nope.txt"))


def test_offload_and_read_back_in_a_run(offloader: Offloader) -> None:
    search = Tool(
        {
            "name": "search_docs",
            "description": "Search.",
            "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        lambda q: dump(),
    )
    pointers: list[str] = []

    def policy(view: PolicyView) -> Reply:
        results = view.tool_results()
        if not results:
            return Reply.use(("search_docs", {"q": "rotate key"}))
        if len(results) == 1:
            pointers.append(results[0]["content"])
            path = results[0]["content"].split(" -> ")[1].splitlines()[0]
            # An instruction planted in a document asks for a file outside the root, too.
            return Reply.use(
                ("read_artifact", {"path": path, "offset": 10, "limit": 2}), ("read_artifact", {"path": "/etc/passwd"})
            )
        return Reply.answer("Found it.")

    obs = InMemoryObserver()
    result = run_agent(ScriptedLLM(policy), "Find the rotation steps.", [search], offloader=offloader, observer=obs)

    assert result.stop_cause == "completed"
    assert pointers[0].startswith("[offloaded] search_docs returned 400 lines")
    offloads = obs.events_named(c.EVENT_OFFLOAD)
    assert len(offloads) == 1 and offloads[0].attributes["pointer_chars"] == len(pointers[0])
    legit, escape = result.steps[1].tool_executions
    assert not legit.is_error and legit.content.startswith("[lines 10-12 of 400]")
    assert escape.is_error and "outside the artifact directory" in escape.content
    assert result.steps[0].tool_executions[0].offloaded_to is not None
