"""The dashboard's browser tests, on a lake: the same ledger (samples plus the hostile and extra
scenarios) ingested into a DuckLake, a Streamlit dashboard reading it directly (read-only), and
the same pages, numbers and charts checked in Debian chromium.

The tests are tests/dashboard/test_browser.py's own (imported here, so they run once on the file
there and once on the lake here); the fixtures they take are given a lake instead of a file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from collector.otlp import read_file
from ledger.ingest import ingest
from ledger.store import open_ledger
from tests.dashboard import test_browser as on_file
from tests.dashboard.conftest import SAMPLES, rows
from tests.dashboard.scenarios import EXTRA

from .postgres import PostgresServer

pytestmark = on_file.pytestmark
browser_page = on_file.browser_page
# In the order test_browser.py runs them (the later ones start from the page the earlier left).
test_every_page_renders_its_numbers_and_charts = on_file.test_every_page_renders_its_numbers_and_charts
test_untrusted_content_is_shown_as_text_never_run_or_fetched = (
    on_file.test_untrusted_content_is_shown_as_text_never_run_or_fetched
)
test_the_overview_opens_from_its_own_url = on_file.test_the_overview_opens_from_its_own_url
test_a_copied_link_reopens_the_filtered_view_in_a_new_browser_context = (
    on_file.test_a_copied_link_reopens_the_filtered_view_in_a_new_browser_context
)
test_a_filter_that_matches_nothing_shows_the_message = on_file.test_a_filter_that_matches_nothing_shows_the_message
__all__ = ["rows"]


@pytest.fixture(scope="module")
def extended_db(postgres: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/dashboard's extended ledger, as a lake (a Path of the target, as the tests pass a file's)."""
    target = f"ducklake:postgres:{postgres.create_database('lake_browser')}"
    con = open_ledger(target, data_path=str(tmp_path_factory.mktemp("lake-browser")))
    try:
        for file in sorted(SAMPLES.glob("*.json")):
            ingest(con, read_file(file))
        for scenario in EXTRA.values():
            ingest(con, scenario())
    finally:
        con.close()
    return Path(target)


@pytest.fixture(scope="module")
def base_url(extended_db: Path) -> Iterator[str]:
    with on_file._dashboard(extended_db) as url:
        yield url
