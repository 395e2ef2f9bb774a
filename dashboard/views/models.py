"""Models & prices: the price book in force, what priced the stored charges, unpriced models."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import ui
from dashboard.loaders import load
from dashboard.pricebook import price_book_summary, unit_prices
from ledger import queries as q
from ledger.terms import TERMS

UNPRICED_FIX = """# prices.toml: pass with --prices PATH or TURNLEDGER_PRICES=PATH (USD per million tokens)
[[model]]
name = "MODEL-NAME"
provider = "PROVIDER"
effective_from = 2026-01-01
input = "1.00"
output = "5.00"
# cache_write / cache_read / cache_write_1h default to 1.25x / 0.10x / 2x of input"""


def render() -> None:
    st.title("Models & prices")
    st.caption(
        "How every charge was priced. Prices come from the genai-prices database, with override files on top; "
        "a model neither knows is flagged unpriced and counted at $0, never silently free."
    )
    f = ui.current_filters()
    book = price_book_summary()
    c = st.columns(3)
    ui.metric(
        c[0],
        "genai-prices version",
        book["genai_prices_version"],
        "Version of the price database installed with this dashboard.",
    )
    ui.metric(
        c[1],
        "Override entries",
        str(len(book["overrides"])),
        "Model prices from override files; they take precedence over the database.",
    )
    ui.metric(
        c[2],
        "Override files",
        str(len(book["files"])),
        "The shipped ledger/data/prices.toml, then the user file (--prices / TURNLEDGER_PRICES) if set.",
    )
    st.text("Override files, in order: " + ", ".join(book["files"]))
    if ui.loaders.spec().kind == "server":
        st.caption(
            "This is the price book of the dashboard's own process; the server priced charges with its own (see below)."
        )

    if not ui.has_runs(f):  # the price book stands; what priced the charges depends on the selection
        return
    unpriced = load(q.unpriced_models, f)
    st.subheader("Unpriced models", anchor=False)
    if unpriced.empty:
        st.success("Every model call in this selection has a price.", icon=":material/check_circle:")
    else:
        st.error(
            f"{len(unpriced)} model(s) have no price: their calls are counted at $0 in every total until priced.",
            icon=":material/money_off:",
        )
        ui.table(unpriced, hide_index=True, key="unpriced_table")
        st.caption("Add a price in an override file, then re-ingest (or restart the server) to price new calls:")
        st.code(UNPRICED_FIX, language="toml")

    st.subheader("Prices applied to stored charges", anchor=False)
    st.caption(
        "Which source and version priced each model's charges, as stored on every charge row. Follows the sidebar filters."
    )
    applied = load(q.price_sources, f)
    if applied.empty:
        st.caption("No charges in this selection.")
    else:
        ui.table(
            applied,
            hide_index=True,
            column_config={
                "usd": st.column_config.NumberColumn("spend", format="$%.4f"),
                "first_call": st.column_config.DatetimeColumn("first call (UTC)", format="YYYY-MM-DD HH:mm"),
                "last_call": st.column_config.DatetimeColumn("last call (UTC)", format="YYYY-MM-DD HH:mm"),
            },
            key="applied_prices",
        )
        st.subheader("Current unit prices of these models", anchor=False)
        st.caption("USD per million tokens for each price term, as the price book prices a call today.")
        models = applied[["provider", "model"]].drop_duplicates()
        ui.table(
            pd.DataFrame(unit_prices(list(models.itertuples(index=False, name=None)))),
            hide_index=True,
            column_config={t.price_name: st.column_config.NumberColumn(t.label, format="$%.4f") for t in TERMS},
            key="unit_prices",
        )

    st.subheader("Override entries", anchor=False)
    ui.table(pd.DataFrame(book["overrides"]), hide_index=True, key="overrides_table")


ui.guarded(render)
