"""The Quality and Review pages in a real headless browser (Debian chromium, Playwright): the figures
drawn, and a run tagged in the UI landing in the ledger's review queue."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from ledger.quality import review
from ledger.store import open_ledger

from .test_browser import ARGS, CHROMIUM, HANG_MS, _check, _dashboard, _pick, _settle, _shoot, _shown, pytestmark  # noqa: F401
from .test_quality_pages import judged_ledger


@pytest.fixture
def quality_dashboard(tmp_path: Path) -> Iterator[tuple[str, Path, str]]:
    db, trace, _ = judged_ledger(tmp_path / "quality.duckdb")
    with _dashboard(db) as url:
        yield url, db, trace


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(viewport={"width": 1500, "height": 1000})
        errors: list[str] = []
        page = context.new_page()
        page.on("pageerror", lambda e: errors.append(str(e)))
        yield page
        assert not errors, errors
        context.close()
        browser.close()


def test_quality_page_draws_success_and_scores_and_the_review_page_tags_a_run(quality_dashboard, page):
    url, db, trace = quality_dashboard
    page.goto(f"{url}/quality")
    _settle(page, "Task success", "Safety violations", "Evaluation scores", charts=2)
    _check(page, charts=2)
    _shown(page, "100.0%")  # both runs completed
    _shoot(page, "quality")

    page.goto(f"{url}/review")
    _settle(page, "Tag a run", "Items shown")
    _pick(page, "Run (trace id)", trace)
    tags = page.get_by_role("combobox", name="Tags", exact=True)
    tags.click()
    page.keyboard.type("hallucination")
    page.get_by_role("option", name="hallucination", exact=True).wait_for()
    page.keyboard.press("Enter")
    page.keyboard.press("Escape")
    page.get_by_label("Note", exact=True).fill("invented a shipping date")
    page.get_by_role("button", name="Save tags").click()
    tagged = page.get_by_test_id("stMetric").filter(has_text="Tagged").get_by_test_id("stMetricValue")
    expect(tagged).to_have_text("1", timeout=HANG_MS)  # the page read the item back, tagged
    _settle(page, "Tag a run")
    _check(page, charts=0)
    _shoot(page, "review")
    con = open_ledger(db, read_only=True)
    try:
        (item,) = review.items(con)
    finally:
        con.close()
    assert (item["trace_id"], item["tags"], item["note"]) == (trace, ["hallucination"], "invented a shipping date")
