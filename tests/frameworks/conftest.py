"""Real agent frameworks, installed by the fixtures into the user cache dir and reused between runs."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.server.conftest import free_port, start_cli, wait_healthy

# The matrix's assertions live in matrix.py, shared by every test_<framework>.py: show their values.
pytest.register_assert_rewrite("tests.frameworks.matrix")

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


_VENVS = Path.home() / ".cache" / "turnledger" / "venvs"
INSTALLED = ".installed"  # written last: a venv without it is half made and is made again


def venv_dir(name: str, pins: Sequence[str]) -> Path:
    """``~/.cache/turnledger/venvs/<name>-<hash>``: the hash of the pins and this Python's version, so a
    changed pin or interpreter makes a new environment and never mixes into an old one."""
    key = "\n".join([sys.version.split()[0], *sorted(pins)])
    return _VENVS / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"


def framework_python(name: str, pins: Sequence[str]) -> Path:
    """The interpreter of a virtual environment holding exactly ``pins``, made once per machine.

    Each framework gets its own (they pin conflicting ``anthropic``/OpenTelemetry versions). Made
    with uv where the dev extras installed it (a cold install in seconds rather than minutes), pip
    otherwise; under a file lock, so two test workers never build the same one at once. The
    marker holds how long the install took, for the matrix's report."""
    venv = venv_dir(name, pins)
    python = venv / "bin" / "python"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(venv.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (venv / INSTALLED).exists():
            return python
        shutil.rmtree(venv, ignore_errors=True)
        started = time.monotonic()
        uv = shutil.which("uv", path=str(Path(sys.executable).parent))
        if uv:
            subprocess.run([uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True, timeout=120)
            install = [uv, "pip", "install", "-q", "--python", str(python), *pins]
        else:
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
            install = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins]
        done = subprocess.run(install, capture_output=True, text=True, timeout=_INSTALL_TIMEOUT_S)
        if done.returncode != 0:
            raise RuntimeError(f"installing {name} failed:\n{done.stderr[-4000:]}")
        seconds = round(time.monotonic() - started, 1)
        (venv / INSTALLED).write_text(
            json.dumps({"pins": list(pins), "install_s": seconds, "tool": "uv" if uv else "pip"})
        )
    return python


@pytest.fixture(scope="session")
def framework_venv() -> Callable[[str, Sequence[str]], Path]:
    """``framework_venv(name, pins)``: the Python of that framework's pinned environment."""
    return framework_python


class Serve:
    """``turnledger serve`` in its own process on free ports, its ledger in a temporary folder."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = start_cli(
            "serve", "--port", str(self.port), "--grpc-port", "0", "--decode-workers", "1", "--db", str(db)
        )  # fmt: skip
        wait_healthy(self.url, timeout=120)

    def stop(self) -> str:
        """Stops it as Ctrl-C does (every accepted span committed, the file closed); returns its output."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        out, _ = self.proc.communicate(timeout=120)
        return out


@pytest.fixture
def turnledger_serve(tmp_path: Path) -> Iterator[Serve]:
    serve = Serve(tmp_path / "ledger.duckdb")
    try:
        yield serve
    finally:
        if serve.proc.poll() is None:
            serve.proc.kill()
            serve.proc.wait(30)
