"""Earlier turnledger releases, built from this repository's history and installed once per machine.

Upgrades are tested the way users meet them: a ledger written by a real earlier release (its own
code, its own virtual environment), opened by this one. Each release is a commit of ``main`` that
ended a landing and changed the schema; its source comes from ``git archive`` (so the cache does
not depend on this checkout) and is installed, not linked, under the user cache dir.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "turnledger" / "releases"
_INSTALL_TIMEOUT_S = 1800  # a cold install on a loaded machine; a hang guard, not a figure


@dataclass(frozen=True)
class Release:
    """A landing's head and the newest migration it applies (what an upgrade from it must run past)."""

    commit: str
    schema: int
    what: str

    @property
    def name(self) -> str:
        return f"{self.commit[:7]}-v{self.schema}"


# The head of every landing that changed the schema since migration 15 (git log --first-parent main
# -- ledger/schema.py); 57f6f66 and the landing before it share today's migrations, so they are
# covered by opening this version's own ledgers.
RELEASES = (
    Release("c611968", 16, "health columns and sampling (15), versions on runs (16)"),
    Release("a3ced48", 18, "the tools each run called (18)"),
    Release("d01fe21", 19, "content blocks per run (19): the ledger of #41's report"),
)


def in_history(commit: str) -> bool:
    """Whether this checkout's git history holds the commit (a shallow clone may not)."""
    return (
        shutil.which("git") is not None
        and subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True).returncode
        == 0
    )


def installed(release: Release) -> Path:
    """The release's ``turnledger`` executable, built and installed on first use (then reused)."""
    home = CACHE / release.name
    exe = home / "venv" / "bin" / "turnledger"
    done = home / ".installed"
    if done.exists() and exe.exists():
        return exe
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir(parents=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", "--format=tar", release.commit], cwd=ROOT, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(home / "src", filter="data")
    subprocess.run([sys.executable, "-m", "venv", str(home / "venv")], check=True, timeout=_INSTALL_TIMEOUT_S)
    subprocess.run(
        [str(home / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", str(home / "src")],
        check=True,
        capture_output=True,
        timeout=_INSTALL_TIMEOUT_S,
    )
    done.touch()
    return exe
