"""``Filters`` owns its query-string form: ``from_params(to_params(f)) == f`` for any filters."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.queries import NO_FILTERS, Filters

# Bounded so that converting an offset to UTC stays inside datetime's range.
_NAIVE = st.datetimes(min_value=datetime(1900, 1, 2), max_value=datetime(9998, 12, 30))
_OFFSETS = st.builds(
    timezone, st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59))
)
_TIMES = st.none() | _NAIVE | _NAIVE.flatmap(lambda d: _OFFSETS.map(lambda tz: d.replace(tzinfo=tz)))
_TEXT = st.none() | st.text()
# Every field of Filters, drawn by its kind: times (naive or with an offset) or text.
FILTERS = st.builds(
    Filters, **{f.name: _TIMES if f.name in ("since", "until") else _TEXT for f in dataclasses.fields(Filters)}
)


@given(FILTERS)
def test_from_params_inverts_to_params(f):
    params = f.to_params()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in params.items())
    assert Filters.from_params(params) == f


@given(FILTERS)
def test_unset_fields_are_absent(f):
    assert set(f.to_params()) == {k for k, v in vars(f).items() if v is not None}


def test_times_are_iso_8601_in_the_ledgers_utc():
    assert NO_FILTERS.to_params() == {}
    assert Filters(since=datetime(2026, 9, 21, 14)).to_params() == {"since": "2026-09-21T14:00:00"}
    aware = Filters(until=datetime(2026, 9, 21, 16, tzinfo=timezone(timedelta(hours=2))))
    assert aware == Filters(until=datetime(2026, 9, 21, 14)) and aware.to_params() == {"until": "2026-09-21T14:00:00"}
    assert Filters.from_params({"since": "2026-09-21T14:00:00Z"}).since == datetime(2026, 9, 21, 14)
    assert Filters.from_params({"since": "2026-09-21 14:00"}).since == datetime(2026, 9, 21, 14)
    assert Filters(since=datetime(2026, 9, 21, 14, tzinfo=UTC)).since.tzinfo is None  # type: ignore[union-attr]


def test_a_bad_time_or_an_unknown_key_names_itself():
    with pytest.raises(InputError, match="since='the day before'"):
        Filters.from_params({"since": "the day before"})
    with pytest.raises(InputError, match="'colour'"):
        Filters.from_params({"colour": "red"})
