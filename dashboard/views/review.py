"""Review: the runs queued for a look (errored, step cap, loop halt, budget stop, negative feedback, a
failed evaluation, or by hand); a reviewer tags each from the fixed list, with a note, and closes it."""

from __future__ import annotations

import streamlit as st

from dashboard import review_edits, ui
from dashboard.loaders import load
from dashboard.ui import count, metric
from ledger import queries as q
from ledger.errors import TurnledgerError
from ledger.quality import policy

EMPTY = (
    "**Nothing to review.** A run enters the queue on its own when it errors, hits the step cap, is halted as a "
    "loop, is stopped by a budget, or gets negative feedback or a failed evaluation; or by hand: "
    "`turnledger review add TRACE_ID`."
)


def render() -> None:
    st.title("Review")
    st.caption(
        "Every failure becomes a test case: look at a queued run, tag what went wrong, add a note, close it. "
        "`turnledger cases export --tag TAG --out cases.jsonl` turns tagged runs into replayable cases."
    )
    f = ui.current_filters()
    status = st.segmented_control("Items", ["open", "closed", "all"], default="open", key="review_status")
    items = load(q.review_queue, f, status=None if status in (None, "all") else status)
    items["tags"] = [ui.parsed_json(t) or [] for t in items["tags"]]
    cols = st.columns(2)
    metric(cols[0], "Items shown", count(len(items)), "Queued runs matching the filters and the choice above.")
    metric(cols[1], "Tagged", count(sum(1 for t in items["tags"] if t)), "Items with a tag.")
    if items.empty:
        st.info(EMPTY, icon=":material/task_alt:")
        return
    items.insert(0, "run", ui.run_links(items["trace_id"]))
    ui.table(
        items,
        hide_index=True,
        column_config={"run": ui.run_link_column(), "tags": st.column_config.ListColumn("tags")},
        key="queue",
    )

    st.subheader("Tag a run", anchor=False)
    with st.form("tag_run"):
        trace = st.selectbox("Run (trace id)", items["trace_id"].tolist(), key="review_trace")
        tags = st.multiselect("Tags", list(policy().review_tags), key="review_tags")
        note = st.text_area("Note", key="review_note", help="What went wrong, for whoever turns it into a case.")
        reviewer = st.text_input("Reviewer", key="review_reviewer")
        tag_it, close_it = st.columns(2)
        save = tag_it.form_submit_button("Save tags", type="primary")
        done = close_it.form_submit_button("Close item")
    try:
        if save:
            if not tags:
                st.warning("Pick at least one tag.")
                return
            review_edits.tag(trace, tags, note=note or None, reviewer=reviewer or None)
            st.toast(f"Tagged {trace}: {', '.join(tags)}.")
            st.rerun()
        if done:
            review_edits.close(trace, reviewer=reviewer or None)
            st.toast(f"Closed {trace}.")
            st.rerun()
    except TurnledgerError as exc:
        st.error(str(exc))


ui.guarded(render)
