"""Streamlit entry point: ``streamlit run dashboard/app.py -- --db PATH``.

Passes the login gate (``dashboard.auth``: a login when the app is reachable from
other machines) before anything is read, sets up the data source once per session,
draws the shared sidebar (source, refresh, filters) and hands over to the page
picked in the navigation.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

from dashboard import auth, loaders, ui
from dashboard.data import parse_app_args
from ledger.sources import source_spec

HERE = Path(__file__).parent
# Pages live in views/, not pages/: Streamlit auto-discovers a pages/ folder and serves
# a deep link (say /guards) from it before this script has called st.navigation.

st.set_page_config(page_title="turnledger", page_icon=":material/receipt_long:", layout="wide")
auth.require_login()  # stops the script here until the viewer may see the ledger

if "tl_source_spec" not in st.session_state:
    args = parse_app_args(sys.argv[1:])
    loaders.set_spec(source_spec(args.db, args.server))

OVERVIEW = st.Page(
    HERE / "views/overview.py", title="Spend overview", icon=":material/payments:", url_path="spend", default=True
)


def _overview_alias() -> None:
    """``/overview``, the name the navigation shows, opens the default page (served at the root URL)."""
    st.switch_page(OVERVIEW, query_params=st.query_params.to_dict())


PAGES = [
    OVERVIEW,
    st.Page(HERE / "views/long_tail.py", title="Long tail", icon=":material/trending_up:", url_path="long_tail"),
    st.Page(HERE / "views/run_explorer.py", title="Run explorer", icon=":material/account_tree:", url_path="run_explorer"),
    st.Page(HERE / "views/guards.py", title="Guards", icon=":material/shield:", url_path="guards"),
    st.Page(HERE / "views/budgets.py", title="Budgets & alerts", icon=":material/savings:", url_path="budgets"),
    st.Page(HERE / "views/models.py", title="Models & prices", icon=":material/sell:", url_path="models"),
    st.Page(HERE / "views/health.py", title="Health", icon=":material/monitor_heart:", url_path="health"),
    st.Page(HERE / "views/quality.py", title="Quality", icon=":material/grade:", url_path="quality"),
    st.Page(HERE / "views/review.py", title="Review", icon=":material/rate_review:", url_path="review"),
    st.Page(HERE / "views/compare.py", title="Compare versions", icon=":material/compare_arrows:", url_path="compare"),
    st.Page(_overview_alias, title="Spend overview", url_path="overview", visibility="hidden"),
]  # fmt: skip

page = st.navigation(PAGES)
ui.render_sidebar()
ui.auto_refresh_tick()
page.run()
