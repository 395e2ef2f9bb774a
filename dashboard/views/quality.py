"""Quality: is it good — task success, evaluation scores, safety violations, by agent and prompt version."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from dashboard import ui
from dashboard.loaders import load
from dashboard.ui import count, metric, pct, plain
from ledger import queries as q

# How to send judgments, for the empty state (the README's "Feedback and evaluations" says more).
SEND_HINT = """No feedback or evaluation in this selection yet. Send some:

* **user feedback**: `POST /v1/feedback` with `{"trace_id": "…", "score": -1, "label": "thumbs_down",
  "comment": "…"}` (the run's `trace_id` comes back in the harness's result), or
  `turnledger feedback TRACE_ID --score -1 --comment "…"`;
* **evaluations**: a `gen_ai.evaluation.result` event on the judged span, with `gen_ai.evaluation.name`,
  `gen_ai.evaluation.score.value`, `gen_ai.evaluation.score.label` and `gen_ai.evaluation.explanation`
  (or OpenInference's `evaluation.*` / `annotation.*` attributes)."""


def success_figure(by_day: pd.DataFrame) -> go.Figure:
    """Share of finished runs that completed, per day, one line per agent / prompt version."""
    fig = go.Figure(
        [
            go.Scatter(
                name=plain(version), x=rows["day"], y=rows["success_rate"], mode="lines+markers",
                customdata=rows["runs"], hovertemplate="%{x}: %{y:.1%} of %{customdata} runs completed<extra></extra>",
            )
            for version, rows in by_day.groupby("version", sort=True)
        ]
    )  # fmt: skip
    fig.update_layout(
        title={"text": "Task success rate per day"},
        xaxis_title="Day (UTC)",
        xaxis_tickformat="%Y-%m-%d",
        xaxis_dtick=86_400_000,  # one tick a day (ms): a single day is a day, not hours
        yaxis_title="Runs that completed",
        yaxis_tickformat=".0%",
        yaxis_range=[0, 1.05],
        legend_title_text="agent version / prompt version",
        height=340,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def scores_figure(scores: pd.DataFrame, name: str) -> go.Figure:
    """One evaluation's mean score per day, one line per version (scores of other names are other scales)."""
    rows = scores[scores["name"] == name]
    fig = go.Figure(
        [
            go.Scatter(
                name=plain(version), x=part["day"], y=part["mean_score"], mode="lines+markers",
                customdata=part[["judgments", "failed"]],
                hovertemplate="%{x}: mean %{y:.3g} over %{customdata[0]} judgments, %{customdata[1]} failed"
                "<extra></extra>",
            )
            for version, part in rows.groupby("version", sort=True)
        ]
    )  # fmt: skip
    fig.update_layout(
        title={"text": f"“{plain(name)}”: mean score per day"},
        xaxis_title="Day (UTC)",
        xaxis_tickformat="%Y-%m-%d",
        xaxis_dtick=86_400_000,  # one tick a day (ms): a single day is a day, not hours
        yaxis_title="Mean score (this evaluation's own scale)",
        legend_title_text="agent version / prompt version",
        height=340,
        margin={"l": 10, "r": 10, "t": 60, "b": 10},
    )
    return fig


def render() -> None:
    st.title("Quality")
    st.caption(
        "Is it good: how many runs finish their task, what judges and users say, and any safety violation. "
        "Separate from Health (is it up and fast). Follows the sidebar filters."
    )
    f = ui.current_filters()
    if not ui.has_runs(f):
        return
    versions = load(q.task_success, f)
    runs, completed = int(versions["runs"].sum()), int(versions["completed"].sum())
    judged, passed = int(versions["judged_runs"].sum()), int(versions["passed_runs"].sum())
    violations = int(versions["safety_violations"].sum())
    cols = st.columns(4)
    metric(cols[0], "Task success", pct(completed / runs if runs else None), "Finished runs that completed.",
           delta=f"{count(completed)} of {count(runs)} runs", delta_color="off")  # fmt: skip
    metric(cols[1], "Passed evaluation", pct(passed / judged if judged else None),
           "Judged runs (feedback or evaluations) none of whose judgments failed.",
           delta=f"{count(passed)} of {count(judged)} judged runs", delta_color="off")  # fmt: skip
    metric(cols[2], "Safety violations", count(violations), "Failed safety judgments: alert at any nonzero count.",
           delta="none" if not violations else "look now", delta_color="off" if not violations else "inverse")  # fmt: skip
    metric(cols[3], "Judged runs", count(judged), "Runs with at least one feedback or evaluation.")

    st.subheader("Task success", anchor=False)
    st.plotly_chart(success_figure(load(q.task_success_by_day, f)), key="success_by_day")
    st.caption("A run succeeded when it completed: no error, step cap, loop halt, budget stop, refusal or hand-off.")
    ui.table(
        versions,
        hide_index=True,
        column_config={
            "success_rate": st.column_config.ProgressColumn("success", format="percent", min_value=0, max_value=1),
            "judged_runs": "judged runs",
            "passed_runs": "passed",
            "eval_pass_rate": st.column_config.NumberColumn("passed evaluation", format="percent"),
            "safety_violations": "safety violations",
        },
        key="by_version",
    )

    st.subheader("Evaluation scores", anchor=False)
    scores = load(q.evaluation_scores, f)
    if scores.empty:
        st.info(SEND_HINT, icon=":material/rate_review:")
        return
    names = sorted(scores["name"].unique())
    name = st.selectbox("Evaluation", names, key="evaluation_name", help="Each evaluation has its own scale.")
    st.plotly_chart(scores_figure(scores, name), key="scores")
    by_name = scores.groupby(["name", "kind"], as_index=False)[["judgments", "failed"]].sum()
    by_name["fail_rate"] = by_name["failed"] / by_name["judgments"]
    ui.table(
        by_name,
        hide_index=True,
        column_config={"fail_rate": st.column_config.NumberColumn("fail rate", format="percent")},
        key="scores_by_name",
    )

    st.subheader("Safety violations", anchor=False)
    found = load(q.safety_violations, f)
    if found.empty:
        st.success("No safety violation in this selection.", icon=":material/verified_user:")
        return
    found.insert(0, "run", ui.run_links(found["trace_id"]))
    ui.table(found, hide_index=True, column_config={"run": ui.run_link_column()}, key="violations")


ui.guarded(render)
