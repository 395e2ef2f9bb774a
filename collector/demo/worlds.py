"""Small worlds with state and the tools that act on them, for the scenarios' loop shapes and support stories.

``FileWorld`` is a config file rewritten without change (the cycle shape),
``SuiteWorld`` a test suite no edit fixes (the stall shape); ``SHIPPING``
finds nothing for any order (a soft failure), ``ASSET`` looks up an IT asset.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from collector.harness.tools import Tool, ToolError, ToolResult

__all__ = ["ASSET", "SHIPPING", "FileWorld", "SuiteWorld", "get_shipping_status", "lookup_asset", "typed_tool"]


def typed_tool(name: str, description: str, fn: Callable[..., Any], **properties: str) -> Tool:
    """A tool whose arguments are all required and typed as given (``query="string"``)."""
    schema = {
        "type": "object",
        "properties": {k: {"type": v} for k, v in properties.items()},
        "required": list(properties),
    }
    return Tool({"name": name, "description": description, "input_schema": schema}, fn)


@dataclass
class FileWorld:
    """A config file an agent reads and rewrites without ever changing it."""

    files: dict[str, str] = field(default_factory=lambda: {"config.yaml": "retries: 3\ntimeout_s: 30\n"})

    def read_file(self, path: str) -> str:
        if path not in self.files:
            raise ToolError(f"No file {path!r}. Files: {sorted(self.files)}.")
        return self.files[path]

    def write_file(self, path: str, content: str) -> str:
        self.files[path] = content
        return "ok"

    def snapshot(self) -> dict[str, str]:
        return dict(self.files)

    def tools(self) -> tuple[Tool, ...]:
        return (
            typed_tool("read_file", "Read a file.", self.read_file, path="string"),
            typed_tool("write_file", "Overwrite a file.", self.write_file, path="string", content="string"),
        )


@dataclass
class SuiteWorld:
    """A test suite whose failures no edit fixes: work happens, progress does not."""

    edits: int = 0
    failing: int = 3

    def run_tests(self) -> str:
        return f"{self.failing} failed, 12 passed"

    def edit_file(self, path: str, patch: str) -> str:
        self.edits += 1
        return f"patched {path} ({len(patch)} chars)"

    def snapshot(self) -> dict[str, int]:
        return {"edits": self.edits}

    def progress(self) -> float:
        return float(15 - self.failing)

    def tools(self) -> tuple[Tool, ...]:
        return (
            typed_tool("run_tests", "Run the test suite.", self.run_tests),
            typed_tool("edit_file", "Apply a patch to a file.", self.edit_file, path="string", patch="string"),
        )


def get_shipping_status(order_id: str) -> ToolResult:
    """Every lookup runs fine and finds nothing: a soft failure, not an error."""
    return ToolResult(f"No tracking information found for order {order_id}.", soft_failure=True)


SHIPPING = typed_tool("get_shipping_status", "Tracking status of an order.", get_shipping_status, order_id="string")


def lookup_asset(asset_tag: str) -> str:
    return json.dumps({"asset_tag": asset_tag, "kind": "laptop", "owner": "bob", "purchased": "2024-02-12"})


ASSET = typed_tool(
    "lookup_asset",
    "An IT asset by its tag (e.g. LT-4471): kind, owner, purchase date.",
    lookup_asset,
    asset_tag="string",
)
