"""Real agent frameworks, installed by the fixtures into the user cache dir and reused between runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

# The version the ledger's reading of Claude Code's events was checked against (ledger.claude_code).
CLAUDE_CODE_VERSION = "2.1.197"
_NPM_CACHE = Path.home() / ".cache" / "turnledger" / "npm"
_INSTALL_TIMEOUT_S = 900  # a first install downloads ~250 MB; a hang guard, not a figure


@pytest.fixture(scope="session")
def claude_cli() -> Path:
    """The real Claude Code CLI (npm ``@anthropic-ai/claude-code``), installed once per machine.

    The package's postinstall copies the platform's native binary over its placeholder; npm may
    hold install scripts back (``allowScripts``), so the fixture runs that step itself."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if npm is None or node is None:
        pytest.skip("Claude Code needs node and npm, and neither is on PATH")
    prefix = _NPM_CACHE / f"claude-code-{CLAUDE_CODE_VERSION}"
    package = prefix / "node_modules" / "@anthropic-ai" / "claude-code"
    binary = package / "bin" / "claude.exe"
    if not _runs(binary):
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
             f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"],
            check=True, capture_output=True, timeout=_INSTALL_TIMEOUT_S,
        )  # fmt: skip
        subprocess.run([node, "install.cjs"], cwd=package, check=True, capture_output=True, timeout=_INSTALL_TIMEOUT_S)
    version = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120, check=True)
    assert version.stdout.startswith(CLAUDE_CODE_VERSION), version.stdout
    return binary


def _runs(binary: Path) -> bool:
    if not binary.exists():
        return False
    try:
        return subprocess.run([binary, "--version"], capture_output=True, timeout=120).returncode == 0
    except OSError:  # the placeholder stub before the native binary is copied over it
        return False
