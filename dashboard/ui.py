"""Shared page furniture: number formats, the sidebar (filters, refresh), empty states.

Stored content (prompts, tool results, names that arrived in spans) is
untrusted. It is shown only through elements that render text as text:
``st.code``, ``st.text``, ``st.dataframe`` cells and widget option labels. It is
never passed to ``st.markdown`` / ``st.write`` / captions / metric labels, and
plotly labels go through ``plain`` first.
"""

from __future__ import annotations

import html
import json
import math
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pandas as pd
import streamlit as st

from ledger import queries as q
from ledger.wording import count, plural

from . import loaders

__all__ = [
    "ALL",
    "FILTERED_PAGES_NOTE",
    "OTLP_HINT",
    "auto_refresh_tick",
    "bucket_for",
    "count",
    "current_filters",
    "filter_options",
    "first_row",
    "guarded",
    "has_runs",
    "metric",
    "missing",
    "parsed_json",
    "pct",
    "plain",
    "plural",
    "render_sidebar",
    "run_link_column",
    "run_links",
    "run_who",
    "table",
    "usd",
]

ALL = "All"
OTLP_HINT = (
    "Point an OpenTelemetry-instrumented agent at the collector "
    "(`turnledger serve`, then `OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318`), "
    "or load the sample traces: `turnledger ingest sample_traces/`."
)
_RANGES = {
    "All time": None,
    "Last hour": timedelta(hours=1),
    "Last 24 hours": timedelta(days=1),
    "Last 7 days": timedelta(days=7),
    "Last 30 days": timedelta(days=30),
    "Custom dates": "custom",
}
# The time range as it appears in a link (?range=7d): short, and stable if a label is reworded.
_RANGE_CODES = {"All time": "all", "Last hour": "1h", "Last 24 hours": "24h", "Last 7 days": "7d",
                "Last 30 days": "30d", "Custom dates": "custom"}  # fmt: skip
_DIMENSIONS = [
    ("tenant", "Tenant"),
    ("agent", "Agent"),
    ("model", "Model"),
    ("agent_version", "Agent version"),
    ("prompt_version", "Prompt version"),
    ("service_version", "Service version"),
    ("environment", "Environment"),
    ("variant", "Variant"),
]
_FILTER_HELP = {
    "model": "Run figures (runs, cost per run, stop causes) cover the runs that called this model, with all "
    "their charges; charge breakdowns (per model, per call site, spend over time, cache, retries) cover "
    "only this model's calls.",
}
FILTERED_PAGES_NOTE = "Filters apply to every figure on Spend overview, Long tail, Guards, Models and the run search."


MISSING = "—"  # what an empty figure or table cell shows (never "None")


# --- formats ---------------------------------------------------------------------------
def missing(x: Any) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x)) or x is pd.NA or x is pd.NaT


def parsed_json(value: Any) -> Any:
    """A JSON column's value as Python (DuckDB hands JSON over as text); unparsable text stays as it is."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def table(data: Any, **kwargs: Any) -> Any:
    """``st.dataframe`` with empty cells shown as a dash (Streamlit prints "None" by default)."""
    return st.dataframe(data, placeholder=MISSING, **kwargs)


def run_links(trace_ids: Any) -> list[str]:
    """Links that open each run in the Run explorer (its trace box is bound to ``?trace=``)."""
    return [f"./run_explorer?trace={t}" for t in trace_ids]


def run_link_column() -> Any:
    """The column config that shows ``run_links`` as a link named by the run's id prefix (``f79eb473 ↗``)."""
    return st.column_config.LinkColumn("run", display_text=r"trace=([0-9a-f]{8})", width="small")


def run_who(rows: Any) -> list[str]:
    """Who ran each run and how it ended, for a table row: ``support-agent · acme · max_steps``."""
    return [
        " · ".join(str(v) if not missing(v) and v != "" else "—" for v in (agent, tenant, stop))
        for agent, tenant, stop in zip(rows["agent_name"], rows["tenant"], rows["stop_cause"], strict=True)
    ]


def usd(x: Any) -> str:
    """$11.56 from a dollar up, $0.0997 below it, two significant digits under a hundredth of a cent."""
    if missing(x):
        return MISSING
    x = float(x)
    if abs(x) >= 1:
        return f"${x:,.2f}"
    if x == 0 or abs(x) >= 0.0001:
        return f"${x:.4f}"
    return f"${x:.2g}"


def pct(x: Any, digits: int = 1) -> str:
    return MISSING if missing(x) else f"{float(x):.{digits}%}"


def plain(text: Any) -> str:
    """A data value made safe as a plotly label: plotly reads a subset of HTML in labels."""
    return html.escape("" if missing(text) else str(text), quote=False)


def first_row(df: pd.DataFrame) -> dict[str, Any]:
    return {} if df.empty else {k: (None if missing(v) else v) for k, v in df.iloc[0].items()}


def bucket_for(span: timedelta) -> str:
    """A time bucket giving at most ~60 bars over the span covered."""
    if span <= timedelta(hours=1):
        return "minute"
    if span <= timedelta(days=2):
        return "hour"
    if span <= timedelta(days=90):
        return "day"
    return "week"


# --- sidebar -----------------------------------------------------------------------------
def filter_options(dimension: str) -> list[str]:
    """A filter dimension's choices, ``ALL`` first. Every dimension's values come from one cached
    query (``q.filter_options``), so the sidebar costs one query per page, not one per dimension."""
    try:
        rows = loaders.load(q.filter_options)
    except loaders.SourceError:
        return [ALL]
    return [ALL, *(str(v) for v in rows.loc[rows["dimension"] == dimension, "value"])]


def current_filters() -> q.Filters:
    """The sidebar's filters (they live in session state, so every page sees the same ones)."""
    s = st.session_state
    since = until = None
    choice = s.get("f_range", "All time")
    span = _RANGES.get(choice)
    if isinstance(span, timedelta):
        # Rounded to the minute so cached results are reused between reruns.
        now = datetime.now(UTC).replace(tzinfo=None, second=0, microsecond=0)
        since = now - span
    elif span == "custom":
        picked: tuple[Any, ...] = tuple(s.get("f_dates") or ())
        if len(picked) >= 1 and isinstance(picked[0], date):
            since = datetime.combine(picked[0], time())
        if len(picked) == 2 and isinstance(picked[1], date):
            until = datetime.combine(picked[1] + timedelta(days=1), time())
    values = {}
    for dim, _ in _DIMENSIONS:
        v = s.get(f"f_{dim}", ALL)
        values[dim] = None if v in (None, ALL) else v
    return q.Filters(since=since, until=until, **values)


def _filters_from_url() -> None:
    """Once per session, before the widgets exist: the filters a shared link carries become the sidebar's."""
    s, params = st.session_state, st.query_params
    if s.get("_tl_filters_from_url"):
        return
    s["_tl_filters_from_url"] = True
    by_code = {code: label for label, code in _RANGE_CODES.items()}
    if params.get("range") in by_code:
        s["f_range"] = by_code[params["range"]]
    try:
        picked = tuple(date.fromisoformat(params[k]) for k in ("from", "to") if k in params)
    except ValueError:
        picked = ()  # a hand-edited link: keep the default dates
    if picked:
        s["f_dates"] = picked
    for dim, _ in _DIMENSIONS:
        if params.get(dim):
            s[f"f_{dim}"] = params[dim]


def _filters_to_url() -> None:
    """The sidebar's filters in the address bar, so the view can be shared (defaults left out)."""
    s, params = st.session_state, st.query_params
    wanted: dict[str, str] = {}
    choice = s.get("f_range", "All time")
    if choice != "All time":
        wanted["range"] = _RANGE_CODES[choice]
    dates = tuple(s.get("f_dates") or ()) if choice == "Custom dates" else ()
    wanted |= {k: d.isoformat() for k, d in zip(("from", "to"), dates, strict=False) if isinstance(d, date)}
    wanted |= {dim: str(s[f"f_{dim}"]) for dim, _ in _DIMENSIONS if s.get(f"f_{dim}", ALL) != ALL}
    for key in ("range", "from", "to", *(dim for dim, _ in _DIMENSIONS)):
        if key in wanted and params.get(key) != wanted[key]:
            params[key] = wanted[key]
        elif key not in wanted and key in params:
            del params[key]


def render_sidebar() -> None:
    _filters_from_url()
    spec = loaders.spec()
    sb = st.sidebar
    sb.caption("Reading from")
    sb.text(spec.describe())
    if sb.button("Refresh", icon=":material/refresh:", help="Read the ledger again now"):
        loaders.refresh()
    sb.toggle("Auto-refresh", key="auto_refresh", help="Re-read the ledger every few seconds while spans stream in")
    if st.session_state.get("auto_refresh"):
        sb.select_slider("Every (seconds)", options=[5, 10, 30, 60], value=5, key="auto_refresh_s")
    sb.caption(f"Last refreshed {loaders.refreshed_at():%H:%M:%S} UTC")
    sb.divider()
    sb.subheader("Filters")
    sb.selectbox("Time range (UTC, by run start)", list(_RANGES), key="f_range")
    if st.session_state.get("f_range") == "Custom dates":
        today = datetime.now(UTC).date()
        st.session_state.setdefault("f_dates", (today - timedelta(days=7), today))  # a link may have set them
        sb.date_input("From – to", key="f_dates")
    for dim, label in _DIMENSIONS:
        options = filter_options(dim)
        if st.session_state.get(f"f_{dim}") not in options:
            st.session_state[f"f_{dim}"] = ALL
        sb.selectbox(label, options, key=f"f_{dim}", help=_FILTER_HELP.get(dim))
    sb.caption(FILTERED_PAGES_NOTE + " They are kept in the page's address: copy it to share this view.")
    _filters_to_url()


def auto_refresh_tick() -> None:
    """While auto-refresh is on: every N seconds, bump the generation and rerun the app.

    Called from the app script, which runs only on full reruns; the fragment
    below also runs alone on its timer. Time since the last full run tells
    the two apart, so a click never triggers an extra refresh.
    """
    if not st.session_state.get("auto_refresh"):
        return
    every = int(st.session_state.get("auto_refresh_s", 5))
    st.session_state["_tl_full_run_at"] = _monotonic()

    @st.fragment(run_every=every)
    def _tick() -> None:
        if _monotonic() - st.session_state.get("_tl_full_run_at", 0.0) >= every - 0.5:
            loaders.refresh()
            st.rerun(scope="app")

    _tick()


def _monotonic() -> float:
    import time as _time

    return _time.monotonic()


# --- page helpers ------------------------------------------------------------------------
def guarded(render: Any) -> None:
    """Run a page body; a ledger that cannot be read becomes one actionable message."""
    try:
        with st.spinner("Reading the ledger…"):
            render()
    except loaders.SourceError as exc:  # its message says what to do (a missing ledger: how to fill one)
        st.error(str(exc), icon=":material/error:")


def has_runs(filters: q.Filters) -> bool:
    """Show the right empty state when there is nothing to draw; True when there is."""
    matching = first_row(loaders.load(q.time_bounds, filters))
    if matching.get("runs"):
        return True
    everything = first_row(loaders.load(q.time_bounds, q.NO_FILTERS))
    if not everything.get("runs"):
        st.info("**The ledger has no runs yet.** " + OTLP_HINT, icon=":material/inbox:")
    else:
        st.info(
            f"No runs match the filters ({plural(everything['runs'], 'run')} in the ledger, "
            f"{everything['first_run']:%Y-%m-%d %H:%M} to {everything['last_run']:%Y-%m-%d %H:%M} UTC). "
            "Widen the time range or reset the filters in the sidebar.",
            icon=":material/filter_alt_off:",
        )
    return False


def metric(where: Any, label: str, value: str, help: str, **kwargs: Any) -> None:
    """A headline number with its definition on hover. A ``delta`` is a note under it ("12 of 40
    attempts"), never a trend: no arrow, unless a page passes one for a figure that compares periods."""
    if "delta" in kwargs:
        kwargs.setdefault("delta_arrow", "off")
    where.metric(label, value, help=help, border=True, **kwargs)
