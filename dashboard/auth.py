"""The login gate the app passes before it reads anything (the decision is ``ledger.exposure``'s).

On loopback with no password set it lets everyone through, as before. Otherwise the
viewer logs in with the shared password (compared in constant time, remembered for
this browser session only) or through Streamlit's OIDC login; an exposed app with
neither configured shows why and how to fix it, and nothing else. Wrong passwords are
throttled per client address and in total (:mod:`dashboard.login_throttle`).
"""

from __future__ import annotations

import hmac

import streamlit as st

from dashboard import login_throttle
from ledger import settings
from ledger.exposure import DashboardExposed, dashboard_login, oidc_configured

__all__ = ["require_login"]

_LOGGED_IN = "tl_logged_in"


def require_login() -> None:
    """Return only when the viewer may see the ledger; otherwise draw the login (or the refusal) and stop."""
    if not st.runtime.exists():
        # Bare mode (the script imported outside a Streamlit server, as a multiprocessing child
        # re-importing the main module does): nothing is served, there is no one to log in, and
        # st.stop() would not stop.
        return
    password = settings.dashboard_password()
    try:
        login = dashboard_login(st.get_option("server.address"), password=password, oidc=oidc_configured())
    except DashboardExposed as exc:
        st.error(f"This dashboard will not show the ledger: {exc}", icon=":material/lock:")
        st.stop()
    if login == "password":
        _password_gate(str(password))
    elif login == "oidc":
        _oidc_gate()


def _log_out() -> None:
    st.session_state.clear()  # filters and cached choices go with the login


def _password_gate(expected: str) -> None:
    if st.session_state.get(_LOGGED_IN):
        st.sidebar.button("Log out", on_click=_log_out, icon=":material/logout:")
        return
    st.title("turnledger")
    st.caption("This dashboard shows captured prompts and tool results: log in to see them.")
    with st.form("tl_login"):
        given = st.text_input("Password", type="password")
        submitted = st.form_submit_button("Log in")
    if submitted:
        client = _client()
        throttle = login_throttle.THROTTLE
        wait = throttle.wait(client)
        if wait > 0:  # not even compared: a right password now would tell the guesser it is right
            st.error(f"Too many wrong passwords: try again in {wait:.0f} s.", icon=":material/timer:")
            st.stop()
        if hmac.compare_digest(given.encode(), expected.encode()):
            throttle.succeeded(client)
            st.session_state[_LOGGED_IN] = True
            st.rerun()
        throttle.failed(client)
        st.error("Wrong password.", icon=":material/error:")
    st.stop()


def _client() -> str:
    """Who is guessing: the browser's address (a new websocket from it is the same client).
    Behind a reverse proxy every viewer has the proxy's address: the per-client limit
    becomes the proxy's, and the global one still holds."""
    address = st.context.ip_address  # None on localhost
    return address if isinstance(address, str) and address else "unknown address"


def _oidc_gate() -> None:
    if st.user.get("is_logged_in"):  # absent when Streamlit sees no [auth]: not logged in
        st.sidebar.button("Log out", on_click=st.logout, icon=":material/logout:")
        return
    st.title("turnledger")
    st.caption("This dashboard shows captured prompts and tool results: log in to see them.")
    st.button("Log in", on_click=st.login, icon=":material/login:")
    st.stop()
