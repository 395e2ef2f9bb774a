"""Real parts for the telemetry tests: the harness, the OTel SDK, DuckDB files."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import copy_ledger
from tests.telemetry.helpers import Traced, make_traced


@pytest.fixture
def traced(tmp_path: Path, migrated_ledger: Path) -> Iterator[Callable[..., Traced]]:
    """``traced(capture="redacted")``: a synchronous provider writing memory and a ledger file."""
    made: list[Traced] = []

    def make(capture: str | None = "redacted", **ledger_kw: Any) -> Traced:
        db = copy_ledger(migrated_ledger, tmp_path / f"ledger{len(made)}.duckdb")
        made.append(make_traced(db, capture, **ledger_kw))
        return made[-1]

    yield make
    for t in made:
        t.close()
