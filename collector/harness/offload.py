"""Offloading: large tool results go to a file; the context gets a pointer.

Every result stays in the history and the history is re-sent each turn, so a
40,000-character dump is paid for on every later call. A pointer that names
the size and shows the head and tail lets the model decide whether it needs
more, and ``read_artifact`` serves the slice it asks for.

``read_artifact`` takes a path from the model's output, which is shaped by
retrieved documents an attacker may have written. Containment resolves the
path (``realpath``: symlinks followed) and compares path components
(``commonpath``, not a string prefix), which rejects all four escapes: an
absolute path outside, a sibling whose name extends the root, a symlink
planted inside the root, and ``../`` traversal.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from .tools import Tool, ToolError

__all__ = ["READ_ARTIFACT_TOOL", "Offloader"]

HEAD_LINES, TAIL_LINES = 8, 4
MAX_READ_LINES = 500

READ_ARTIFACT_TOOL: dict[str, Any] = {
    "name": "read_artifact",
    "description": (
        "Read a slice of a tool output that was saved to a file. Use it when a result says "
        "[offloaded] and you need detail beyond its preview; ask for a narrow window."
    ),
    "input_schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "The path given in the [offloaded] pointer."},
            "offset": {"type": "integer", "description": "First line to read, 0-based."},
            "limit": {"type": "integer", "description": f"Lines to read, at most {MAX_READ_LINES}."},
        },
        "required": ["path"],
    },
}


class Offloader:
    def __init__(self, root: str | os.PathLike[str], threshold: int = 2000) -> None:
        self.root = Path(root)
        self.threshold = threshold
        self.root.mkdir(parents=True, exist_ok=True)

    def wrap(self, tool_name: str, text: str) -> tuple[str, str | None]:
        """``(content for the model, artifact path or None)``; small results pass untouched."""
        if len(text) <= self.threshold:
            return text, None
        # Named by content: deterministic across runs, and the same dump is stored once.
        safe = re.sub(r"[^A-Za-z0-9_-]", "_", tool_name)[:40]
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        path = self.root / f"{safe}-{digest}.txt"
        path.write_text(text, encoding="utf-8")
        lines = text.splitlines()
        head = "\n".join(lines[:HEAD_LINES])
        # The tail is shown only when it does not overlap the head.
        tail = "\n".join(lines[-TAIL_LINES:]) if len(lines) > HEAD_LINES + TAIL_LINES else ""
        pointer = (
            f"[offloaded] {tool_name} returned {len(lines)} lines / {len(text)} chars -> {path}\n"
            f"--- first {HEAD_LINES} lines ---\n{head}\n"
            + (f"--- last {TAIL_LINES} lines ---\n{tail}\n" if tail else "")
            + f"Use read_artifact(path='{path}', offset=N, limit=M) for the rest."
        )
        return pointer, str(path)

    def contains(self, path: str | os.PathLike[str]) -> bool:
        """True only if ``path``, with every symlink resolved, lies inside the root."""
        root = os.path.realpath(self.root)
        target = os.path.realpath(path)
        try:
            return os.path.commonpath([root, target]) == root
        except ValueError:  # different drives (Windows) or mixed absolute/relative
            return False

    def read(self, path: str, offset: int = 0, limit: int = 200) -> str:
        if not self.contains(path):
            raise ToolError(f"Path {path!r} is outside the artifact directory; use a path from an [offloaded] pointer.")
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (FileNotFoundError, IsADirectoryError):
            raise ToolError(f"No artifact at {path!r}; copy the path exactly from the [offloaded] pointer.") from None
        offset = max(0, int(offset))
        window = lines[offset : offset + max(1, min(int(limit), MAX_READ_LINES))]
        return f"[lines {offset}-{offset + len(window)} of {len(lines)}]\n" + "\n".join(window)

    def tool(self) -> Tool:
        """The ``read_artifact`` tool bound to this offloader."""
        return Tool(READ_ARTIFACT_TOOL, self.read)
