"""Version markers in a real headless browser: the spend, success and latency charts mark when a version first appeared.

A ledger where prompt v6 on service 1.4 serves for two days, then prompt v7 on service 1.5 takes
over; the dashboard is started as `turnledger dashboard` starts it (``test_browser``'s fixtures,
on this module's own ledger).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from collector.demo.samples import MS, T0, Trace
from ledger import conventions as c
from ledger.ingest import ingest
from ledger.store import open_ledger

from .test_browser import _check, _dashboard, _open, _settle, _shoot, browser_page  # noqa: F401  (fixtures)

HOUR = 3_600_000 * MS
CHANGE_AT_HOUR = 48


def _rollout_db(path: Path) -> Path:
    spans = []
    for hour in range(0, 96, 2):
        old = hour < CHANGE_AT_HOUR
        prompt, service = ("v6", "1.4") if old else ("v7", "1.5")
        t = Trace(f"marker-{hour}", start=T0 + hour * HOUR, root_attrs={c.PROMPT_VERSION: prompt})
        t.chat("claude-haiku-4-5", (2_000 if old else 3_000, 0, 0, 200), finish="end_turn")
        done = t.finish("completed") if hour % 6 else t.finish("error", status="ERROR")
        spans += [dataclasses.replace(s, resource={**s.resource, c.SERVICE_VERSION: service}) for s in done]
    con = open_ledger(path)
    ingest(con, spans)
    con.close()
    return path


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """This module's dashboard (``browser_page`` opens it), on the rollout ledger."""
    with _dashboard(_rollout_db(tmp_path_factory.mktemp("markers") / "rollout.duckdb")) as url:
        yield url


def _markers(page: Any) -> dict[str, list[str]]:
    """Each drawn chart's title -> the texts of its annotations."""
    found: dict[str, list[str]] = page.evaluate(
        """Object.fromEntries([...document.querySelectorAll('.js-plotly-plot')].map(p => [
            p.querySelector('.gtitle')?.textContent ?? '',
            [...p.querySelectorAll('.annotation-text')].map(t => t.textContent)]))"""
    )
    return found


def test_the_charts_mark_where_each_version_first_appeared(base_url, browser_page) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    page, seen = browser_page
    page.goto(base_url)
    _settle(page, "Where the money goes", charts=1)
    spend = next(notes for title, notes in _markers(page).items() if title.startswith("Spend per"))
    # One rule for the two versions deployed together; the first versions are where the data starts.
    assert spend == ["prompt v7 · service 1.5"]
    _shoot(page, "versions-1-overview")

    _open(page, "Compare versions")
    _settle(page, "Success rate per", "Run duration p95 per", charts=3)
    markers = _markers(page)
    for chart in ("Success rate per", "Run duration p95 per"):
        notes = next(n for title, n in markers.items() if title.startswith(chart))
        assert notes == ["prompt v7 · service 1.5"], chart
    # Each marker is a rule across the plot, not only a label.
    rules = page.evaluate("document.querySelectorAll('.js-plotly-plot .shapelayer path').length")
    assert rules >= 2
    _check(page, charts=len(markers))
    _shoot(page, "versions-2-compare")
    assert not seen["errors"], seen["errors"]
