"""The code stays lint-clean and formatted (settings in pyproject.toml), so style drift fails CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUFF = [sys.executable, "-m", "ruff"]


def test_ruff_check_is_clean():
    result = subprocess.run([*RUFF, "check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied():
    result = subprocess.run([*RUFF, "format", "--check", "--no-cache", "."], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
