"""Who can reach a listening address, and what the dashboard and the collector require when others can.

The dashboard shows every captured prompt, tool argument and result. On a loopback
address only this machine reaches it and nothing changes (the password, when set,
is still asked). On any other address (``0.0.0.0``, an interface's IP, or
Streamlit's default of every interface) it requires a login:

1. ``TURNLEDGER_DASHBOARD_PASSWORD``, a shared password, when set; else
2. Streamlit's OIDC login (``st.login``), when ``.streamlit/secrets.toml`` has an
   ``[auth]`` section with ``redirect_uri`` and ``cookie_secret``; else
3. it refuses to start (:class:`DashboardExposed`, naming both fixes).

The collector (``turnledger serve``/``up``, ``CollectorServer``) takes spans and serves the ledger,
captured prompts included, to whoever holds its bearer token: on any other address than loopback
it refuses to start without ``TURNLEDGER_TOKEN`` unless told ``--insecure-no-auth`` in so many
words (:func:`collector_auth`), and then says so on every start and on ``/healthz``.

One decision for every way in: ``turnledger dashboard``/``up`` before they start the
process, ``python -m dashboard`` before it execs Streamlit, and the app itself before
it reads anything (``streamlit run dashboard/app.py --server.address 0.0.0.0``).
"""

from __future__ import annotations

import ipaddress
import tomllib
from pathlib import Path
from typing import Literal

from ledger.errors import InputError
from ledger.settings import DASHBOARD_PASSWORD, TOKEN

__all__ = [
    "INSECURE_NO_AUTH",
    "OPEN_BY_CHOICE",
    "CollectorExposed",
    "DashboardExposed",
    "Login",
    "collector_auth",
    "dashboard_login",
    "is_loopback",
    "oidc_configured",
    "secrets_files",
]

Login = Literal["none", "password", "oidc"]
INSECURE_NO_AUTH = "--insecure-no-auth"  # the flag, named once: the refusal, the banner and /healthz quote it
OPEN_BY_CHOICE = f"none ({INSECURE_NO_AUTH})"  # collector_auth's answer for a collector open on purpose


class DashboardExposed(InputError):
    """The dashboard would listen beyond this machine with no login configured."""


class CollectorExposed(InputError):
    """The collector would listen beyond this machine with no token, and was not told to anyway."""


def is_loopback(host: str | None) -> bool:
    """Only this machine can connect to ``host``. Empty or None is every interface (Streamlit's default)."""
    if not host:
        return False
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def secrets_files(cwd: Path | None = None) -> tuple[Path, Path]:
    """Where Streamlit reads secrets by default (its ``secrets.files`` option): the user's, then the project's."""
    return Path.home() / ".streamlit" / "secrets.toml", (cwd or Path.cwd()) / ".streamlit" / "secrets.toml"


def oidc_configured(cwd: Path | None = None) -> bool:
    """Does a secrets file Streamlit reads configure ``st.login`` (an ``[auth]`` section)?"""
    for path in secrets_files(cwd):
        try:
            auth = tomllib.loads(path.read_text()).get("auth")
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if isinstance(auth, dict) and auth.get("redirect_uri") and auth.get("cookie_secret"):
            return True
    return False


def dashboard_login(address: str | None, *, password: str | None, oidc: bool) -> Login:
    """Which login the dashboard on ``address`` asks for; raises :class:`DashboardExposed` when none would."""
    if password:
        return "password"
    if is_loopback(address):
        return "none"
    if oidc:
        return "oidc"
    where = repr(address) if address else "every interface"
    raise DashboardExposed(
        f"the dashboard would listen on {where}, reachable from other machines, and it shows every captured "
        f"prompt: set {DASHBOARD_PASSWORD} to a password, or configure Streamlit's OIDC login ([auth] in "
        ".streamlit/secrets.toml), or listen on 127.0.0.1"
    )


def collector_auth(host: str | None, *, token: str | None, insecure_no_auth: bool = False) -> str:
    """How the collector on ``host`` authenticates, as ``/healthz`` reports it; raises
    :class:`CollectorExposed` for a non-loopback address with no token unless ``insecure_no_auth``."""
    if token:
        return "bearer token"
    if is_loopback(host):
        return "none (loopback only)"
    if insecure_no_auth:
        return OPEN_BY_CHOICE
    where = repr(host) if host else "every interface"
    raise CollectorExposed(
        f"the collector would listen on {where}, reachable from other machines, with no token: anyone could "
        f"write spans and read the ledger and every captured prompt. Set {TOKEN} to a secret token (exporters "
        f"send it as `Authorization: Bearer <token>`), or listen on 127.0.0.1, or pass {INSECURE_NO_AUTH} "
        "to serve it open anyway"
    )
