"""Every ``TURNLEDGER_*`` environment variable, in one place.

| variable             | default                | meaning                                                   |
|----------------------|------------------------|-----------------------------------------------------------|
| TURNLEDGER_DB        | ./turnledger.duckdb    | the ledger file (``--db`` overrides)                      |
| TURNLEDGER_PRICES    | (none)                 | a price override TOML layered on the shipped defaults     |
| TURNLEDGER_SERVER    | (none)                 | URL of a running ``turnledger serve``; the CLI and        |
|                      |                        | dashboard read through it instead of opening the file     |
| TURNLEDGER_TOKEN     | (none)                 | bearer token the server requires for ingest and queries   |
| TURNLEDGER_CAPTURE   | redacted               | request capture in the harness: off, redacted or full     |
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["capture_mode", "db_path", "prices_file", "server_url", "token"]

DEFAULT_DB = "turnledger.duckdb"
CAPTURE_MODES = ("off", "redacted", "full")


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def db_path() -> Path:
    return Path(_env("TURNLEDGER_DB") or DEFAULT_DB)


def prices_file() -> Path | None:
    value = _env("TURNLEDGER_PRICES")
    return Path(value) if value else None


def server_url() -> str | None:
    return _env("TURNLEDGER_SERVER")


def token() -> str | None:
    return _env("TURNLEDGER_TOKEN")


def capture_mode() -> str:
    mode = (_env("TURNLEDGER_CAPTURE") or "redacted").lower()
    if mode not in CAPTURE_MODES:
        raise ValueError(f"TURNLEDGER_CAPTURE={mode!r}: choose one of {', '.join(CAPTURE_MODES)}")
    return mode
