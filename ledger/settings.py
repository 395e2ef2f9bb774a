"""Every ``TURNLEDGER_*`` environment variable, in one place.

| variable                   | default             | meaning                                                  |
|----------------------------|---------------------|----------------------------------------------------------|
| TURNLEDGER_DB              | ./turnledger.duckdb | the ledger file (``--db`` overrides), or a DuckLake:     |
|                            |                     | ``ducklake:postgres:dbname=… host=… port=…``             |
| TURNLEDGER_DATA_PATH       | (none)              | where a new DuckLake writes its Parquet files (a folder  |
|                            |                     | or s3://bucket/prefix); the lake's catalog keeps it      |
| TURNLEDGER_PRICES          | (none)              | a price override TOML layered on the shipped defaults    |
| TURNLEDGER_SERVER          | (none)              | URL of a running ``turnledger serve``; the CLI and       |
|                            |                     | dashboard read through it instead of opening the file    |
| TURNLEDGER_TOKEN           | (none)              | bearer token the server requires for ingest and queries  |
| TURNLEDGER_CAPTURE         | redacted            | request capture in the harness: off, redacted or full    |
| TURNLEDGER_REDACT          | on                  | redaction of every stored string at ingest: on, or off   |
|                            |                     | (a trusted lab: spans are stored as received)            |
| TURNLEDGER_REDACT_KEYS     | (none)              | more secret key names, comma-separated: a key whose      |
|                            |                     | words contain one is redacted whatever its value         |
| TURNLEDGER_REDACT_PATTERNS | (none)              | more value patterns, a JSON object ``{"kind": "regex"}``;|
|                            |                     | each match becomes ``[REDACTED:kind]``                   |
| TURNLEDGER_REDACT_IP       | on                  | IP addresses are personal data (GDPR): on, or off to     |
|                            |                     | store them (loopback, link-local, multicast and reserved |
|                            |                     | addresses, and version strings, are kept either way)     |
| TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS | off (``up``: on) | budget webhooks may target private and loopback    |
|                            |                     | addresses (link-local and cloud metadata: never)         |
| TURNLEDGER_QUALITY         | (none)              | what counts as negative feedback, a failed or a safety   |
|                            |                     | evaluation, and more review tags: a JSON object of       |
|                            |                     | ``ledger.quality.QualityPolicy`` fields                  |
| TURNLEDGER_SOFT_FAILURE    | (see below)         | a regex: a tool result it finds is a soft failure (the   |
|                            |                     | tool ran, and said it found nothing or failed)           |
| TURNLEDGER_DASHBOARD_PASSWORD | (none)           | the dashboard's shared login password; required (or OIDC)|
|                            |                     | when it listens on a non-loopback address                |
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

__all__ = [
    "allow_private_webhooks",
    "capture_mode",
    "dashboard_password",
    "data_path",
    "db_path",
    "prices_file",
    "quality_settings",
    "redact_ip_addresses",
    "redaction_settings",
    "server_url",
    "soft_failure_pattern",
    "token",
]

DEFAULT_DB = "turnledger.duckdb"
CAPTURE_MODES = ("off", "redacted", "full")
REDACT_MODES = ("on", "off")


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None


def db_path() -> Path:
    return Path(_env("TURNLEDGER_DB") or DEFAULT_DB)


def data_path() -> str | None:
    return _env("TURNLEDGER_DATA_PATH")


def prices_file() -> Path | None:
    value = _env("TURNLEDGER_PRICES")
    return Path(value) if value else None


def quality_settings() -> str | None:
    return _env("TURNLEDGER_QUALITY")


def server_url() -> str | None:
    return _env("TURNLEDGER_SERVER")


TOKEN = "TURNLEDGER_TOKEN"


def token() -> str | None:
    return _env(TOKEN)


def capture_mode() -> str:
    mode = (_env("TURNLEDGER_CAPTURE") or "redacted").lower()
    if mode not in CAPTURE_MODES:
        raise ValueError(f"TURNLEDGER_CAPTURE={mode!r}: choose one of {', '.join(CAPTURE_MODES)}")
    return mode


def redaction_settings() -> tuple[bool, list[str], dict[str, str]]:
    """(redaction on?, extra secret key names, extra ``{kind: regex}`` patterns), checked
    (``TURNLEDGER_REDACT_IP`` too, so that a server refuses a wrong one before it starts)."""
    mode = (_env("TURNLEDGER_REDACT") or "on").lower()
    if mode not in REDACT_MODES:
        raise ValueError(f"TURNLEDGER_REDACT={mode!r}: choose one of {', '.join(REDACT_MODES)}")
    redact_ip_addresses()
    keys = [k.strip() for k in (_env("TURNLEDGER_REDACT_KEYS") or "").split(",") if k.strip()]
    raw = _env("TURNLEDGER_REDACT_PATTERNS")
    patterns: dict[str, str] = {}
    if raw:
        try:
            patterns = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"TURNLEDGER_REDACT_PATTERNS is not JSON: {exc}") from None
        if not isinstance(patterns, dict) or not all(isinstance(v, str) for v in patterns.values()):
            raise ValueError('TURNLEDGER_REDACT_PATTERNS must be a JSON object {"kind": "regex", ...}')
        for kind, pattern in patterns.items():
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"TURNLEDGER_REDACT_PATTERNS[{kind!r}] = {pattern!r}: {exc}") from None
    return mode == "on", keys, patterns


def redact_ip_addresses() -> bool:
    """Whether redaction replaces IP addresses (``TURNLEDGER_REDACT_IP``, on unless told off)."""
    mode = (_env("TURNLEDGER_REDACT_IP") or "on").lower()
    if mode not in REDACT_MODES:
        raise ValueError(f"TURNLEDGER_REDACT_IP={mode!r}: choose one of {', '.join(REDACT_MODES)}")
    return mode == "on"


# --- exposure: webhook targets and the dashboard's login ------------------------------------
ALLOW_PRIVATE_WEBHOOKS = "TURNLEDGER_ALLOW_PRIVATE_WEBHOOKS"
DASHBOARD_PASSWORD = "TURNLEDGER_DASHBOARD_PASSWORD"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def allow_private_webhooks() -> bool | None:
    """The operator's choice for private/loopback webhook targets; None when unset (the command decides)."""
    value = (_env(ALLOW_PRIVATE_WEBHOOKS) or "").lower()
    if not value:
        return None
    if value not in _TRUE + _FALSE:
        raise ValueError(f"{ALLOW_PRIVATE_WEBHOOKS}={value!r}: use 1/true/yes/on or 0/false/no/off")
    return value in _TRUE


def dashboard_password() -> str | None:
    """Taken as set, spaces included: a password is compared byte for byte."""
    return os.environ.get(DASHBOARD_PASSWORD) or None


# "No shipment found for 12345." (seed 004's bad run), "ERROR: …", "not found", "no results",
# {"error": …}: a result that reads as a failure, matched at its start (a result quoting one later
# is data). Case-insensitive; RE2 syntax, so DuckDB's regexp_matches reads it as Python does.
DEFAULT_SOFT_FAILURE = (
    r"(?i)^\s*(error\b|failed\b|no\s[^\n]{0,80}\bfound\b|not found\b|nothing found\b|no results?\b|\{\s*\"error\"\s*:)"
)


def soft_failure_pattern() -> str:
    """The tool-result regex of a soft failure (TURNLEDGER_SOFT_FAILURE); refused at start when it does not compile."""
    pattern = _env("TURNLEDGER_SOFT_FAILURE") or DEFAULT_SOFT_FAILURE
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(f"TURNLEDGER_SOFT_FAILURE {pattern!r} is not a regular expression: {e}") from None
    return pattern
