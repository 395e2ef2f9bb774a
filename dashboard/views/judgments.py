"""The run explorer's judgments of one run: its feedback and evaluations, with their verdicts."""

from __future__ import annotations

import streamlit as st

from dashboard import ui
from dashboard.loaders import load
from ledger import queries as q

__all__ = ["render"]


def render(trace_id: str) -> None:
    found = load(q.run_evaluations, trace_id=trace_id)
    st.subheader("Feedback and evaluations", anchor=False)
    if found.empty:
        st.caption("No feedback or evaluation of this run (POST /v1/feedback, or gen_ai.evaluation.result events).")
        return
    failed = int(found["failed"].sum())
    st.caption(f"{ui.plural(len(found), 'judgment')}, {failed} failed; a failed safety judgment is a violation.")
    found["tags"] = [ui.parsed_json(t) or [] for t in found["tags"]]
    ui.table(found.drop(columns="eval_id"), hide_index=True, column_config={"tags": st.column_config.ListColumn("tags")},
             key="judgments")  # fmt: skip
