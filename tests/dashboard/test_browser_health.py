"""The Health page in a real headless browser: the sample ledger's figures, charts labelled, no exception.

Uses ``test_browser``'s server and browser fixtures (its own instance for this module).
"""

from __future__ import annotations

from dashboard.ui import pct
from ledger import queries as q
from ledger.wording import duration

from .test_browser import _check, _open, _settle, _shoot, _shown, base_url, browser_page  # noqa: F401  (fixtures)


def test_health_page_renders_the_sample_figures(base_url, browser_page, extended_db, rows):  # noqa: F811
    page, seen = browser_page
    run = rows(extended_db, q.run_latency()).to_dict("records")[0]
    errors = rows(extended_db, q.error_rates()).to_dict("records")[0]
    tools = rows(extended_db, q.tool_health())
    page.goto(base_url)
    _settle(page, "Where the money goes")
    _open(page, "Health")
    _settle(
        page,
        "Latency percentiles (nearest rank)",
        "Failed model-call attempts by cause",
        duration(run["p99_ms"]),
        pct(errors["error_rate"]),
        charts=2,
    )
    for text in ("What was timed", "Milliseconds (log scale)", "Failed attempts", "retry outcome"):
        _shown(page, text)  # every axis says what it shows
    assert page.locator("[data-testid='stMetric']").count() == 6  # the six headline figures, two rows
    # Tables are drawn on a canvas: count them (latency per model, error causes, tools).
    assert page.locator("[data-testid='stDataFrame']").count() == 3
    assert page.get_by_text("Tools", exact=True).count() == 1 and not tools.empty
    _check(page, charts=2)
    _shoot(page, "7-health")
    assert not seen["errors"], seen["errors"]
