"""No 500 from any query or budget route (#26 item 5): every parameter of every named query, and the budget
and alert routes' bodies and query strings, drawn by hypothesis from hostile values (years 1 and 9999, counts
past BIGINT or negative, money past DECIMAL, NaN, text): the answer is a 2xx or a 4xx naming what is wrong.

Time parameters (#41 item 2), against a collector holding runs from 1970 to 2116 and two alerts: any
instant of the calendar, written any ISO 8601 way, as ``since`` and/or ``until`` (crossed or not), is a 200
counting exactly the runs (alerts) in the window; anything else is a 400 naming the range."""

from __future__ import annotations

import collections
import itertools
import json
import re
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.cli.serve import build_server
from collector.receiver import CollectorServer, ServerConfig
from collector.receiver.api import describe_queries
from ledger.budgets import Governor, ManualClock
from ledger.limits import MAX_TIME_NS
from tests.budgets.conftest import NOON_ISH
from tests.conftest import copy_ledger

from .conftest import otlp_json, post_otlp, request, run_spans

QUERIES = describe_queries()
NAMES = sorted(QUERIES)
HOSTILE_NUMBERS = st.sampled_from(
    ["-1", "0", "1", str(2**63), str(2**64), "-" + str(2**63), "1e40", "1e308", "NaN", "Infinity", "-0", "1.5", "0x10"]
)
HOSTILE_TIMES = st.sampled_from(
    ["0001-01-01T00:00:00", "9999-12-31T23:59:59", "9999-12-31", "0001-01-01", "2026-13-45", "-1", "now", "1e20"]
)
HOSTILE = st.one_of(HOSTILE_NUMBERS, HOSTILE_TIMES, st.text(max_size=40), st.integers().map(str))
EXAMPLES = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def query_requests(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(NAMES))
    declared = [p["name"] for p in QUERIES[name]["parameters"]]
    keys = draw(st.lists(st.sampled_from([*declared, "limit", "since", "until", "tenant"]), max_size=4))
    query = urllib.parse.urlencode([(k, draw(HOSTILE)) for k in keys])
    fmt = draw(st.sampled_from(["", "&format=json", "&format=arrow", "&format=%00"]))
    return f"/api/query/{name}?{query}{fmt}"


@EXAMPLES
@given(path=query_requests())
def test_no_named_query_answers_500(server, path):
    r = request(server.url + path)
    assert r.status < 500, (path, r.status, r.body[:300])
    if r.status >= 400:
        assert json.loads(r.body)["error"]  # a 4xx says what is wrong


FRESH = itertools.count()  # a new rule name each example: a taken name is a 409 before the amount is stored
BUDGET_FIELDS = {
    "limit": st.one_of(HOSTILE_NUMBERS, st.floats(), st.integers(), st.text(max_size=10)),
    "window": st.sampled_from(["day", "week", "month", "hour", "", "forever"]),
    "scope": st.sampled_from(["global", "tenant=acme", "tenant=", "planet=x", ""]),
    "soft_fraction": st.one_of(HOSTILE_NUMBERS, st.floats()),
    "timezone": st.sampled_from(["UTC", "Europe/Paris", "Mars/Olympus", ""]),
    "metric": st.sampled_from(["usd", "cost_anomaly", "nope"]),
}


@EXAMPLES
@given(
    body=st.fixed_dictionaries(
        {"limit": BUDGET_FIELDS["limit"]}, optional={k: v for k, v in BUDGET_FIELDS.items() if k != "limit"}
    ),
    alerts=st.lists(st.tuples(st.sampled_from(["limit", "since", "level", "budget"]), HOSTILE), max_size=3),
)
def test_no_budget_or_alert_route_answers_500(server, body, alerts):
    headers = {"Content-Type": "application/json"}
    raw = json.dumps(
        {"name": f"b{next(FRESH)}", "window": "day", "scope": "tenant=acme", **body}, allow_nan=True
    ).encode()
    for method, path, payload in [
        ("POST", "/api/budgets", raw),
        ("POST", "/api/budgets/check", raw),
        ("GET", "/api/alerts?" + urllib.parse.urlencode(alerts), None),
    ]:
        r = request(server.url + path, method, payload, headers)
        assert r.status < 500, (method, path, body, r.status, r.body[:300])


EDGES = {"int": ["-1", str(2**63), "1e40"], "datetime": ["0001-01-01T00:00:00", "9999-12-31T23:59:59"]}
TYPED = [(n, p["name"], p["type"]) for n in NAMES for p in QUERIES[n]["parameters"] if p["type"] in EDGES]


def test_every_count_and_time_parameter_at_its_edges_is_a_400_or_an_answer(server):
    assert TYPED  # the queries do declare counts and times
    for name, param, kind in TYPED:
        for value in EDGES[kind]:
            r = request(f"{server.url}/api/query/{name}?{param}={urllib.parse.quote(value)}")
            assert r.status in (200, 400), (name, param, value, r.status, r.body[:300])


# --- time parameters across the calendar (#41 item 2) ------------------------------------------------------

RUN_STARTS = [  # the door's first and last admitted span times (ledger.limits), and a day in 2026
    datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC),
    NOON_ISH - timedelta(hours=2),
    datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=MAX_TIME_NS // 1000) - timedelta(minutes=1),
]
TIMED = sorted(n for n in NAMES if {"since", "until"} <= {p["name"] for p in QUERIES[n]["parameters"]})
RANGE = ("0001-01-01", "9999-12-31")  # what every 400 for a time names


@pytest.fixture(scope="module")
def timed_server(tmp_path_factory: pytest.TempPathFactory, migrated_ledger: Path) -> Iterator[CollectorServer]:
    """Three runs at the ends of the door's range and between, and two alerts fired at NOON_ISH (warn, exceeded)."""
    db = copy_ledger(migrated_ledger, tmp_path_factory.mktemp("timed") / "ledger.duckdb")
    governor = Governor(clock=ManualClock(NOON_ISH))
    server = build_server(ServerConfig(port=0, db=db), governor=governor).start()
    try:
        budget = json.dumps({"name": "daily", "scope": "tenant=acme", "limit": "0.000001"}).encode()
        assert request(f"{server.url}/api/budgets", "POST", budget, {"Content-Type": "application/json"}).status == 201
        spans = [s for i, at in enumerate(RUN_STARTS) for s in run_spans(f"edge{i}", start=_ns(at))]
        assert post_otlp(server.url, otlp_json(spans)).status == 200  # the 2026 run passes the budget: 2 alerts
        assert server.writer.drained(120)
        yield server
    finally:
        server.stop()


def _ns(at: datetime) -> int:
    return (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1) * 1000


OFFSETS = st.one_of(
    st.none(),  # naive: UTC
    st.just(UTC),
    st.sampled_from([timedelta(hours=14), -timedelta(hours=12), timedelta(hours=23, minutes=59)]).map(timezone),
    st.timedeltas(-timedelta(hours=23, minutes=59), timedelta(hours=23, minutes=59)).map(timezone),
)
CALENDAR_EDGES = [datetime.min, datetime.max, datetime(1, 1, 1, 5), datetime(9999, 12, 31, 19)]
NS_EDGES = [datetime(1677, 9, 21, 0, 12, 43), datetime(1677, 9, 22), datetime(2262, 4, 11, 23, 47, 16, 854775)]
NS_EDGES += [datetime(2262, 4, 12), datetime(1970, 1, 1), datetime(2116, 2, 20)]
WALL = st.one_of(st.sampled_from(CALENDAR_EDGES + NS_EDGES), st.datetimes(datetime.min, datetime.max))


@st.composite
def instants(draw: st.DrawFn) -> tuple[str, datetime]:
    """(how a user might write it, the instant it means as an aware datetime) for any calendar instant."""
    wall = draw(WALL)
    tz = draw(OFFSETS)
    when = wall.replace(tzinfo=tz)
    form = draw(st.sampled_from(["iso", "space", "seconds", "minutes", "basic", "date"]))
    if form == "date":
        day = when.date()
        text = draw(st.sampled_from([day.isoformat(), day.isoformat().replace("-", "")]))
        return text, datetime.combine(day, time(), UTC)
    if form in ("seconds", "minutes"):
        when = when.replace(microsecond=0, second=0 if form == "minutes" else when.second)
        text = when.isoformat(timespec=form)
    elif form == "basic":
        when = when.replace(microsecond=0)
        text = when.replace(tzinfo=None).isoformat().replace("-", "").replace(":", "") + when.strftime("%z")
    else:
        text = when.isoformat(sep=" " if form == "space" else "T")
    if tz is UTC and draw(st.booleans()):
        text = text.replace("+00:00", "Z")
    return text, when if tz is not None else when.replace(tzinfo=UTC)


NOT_INSTANTS = st.one_of(
    st.sampled_from(["9999-12-31T24:00:00", "10000-01-01", "0000-12-31", "2026-13-45", "2026-02-30", "-1", "now+1h"]),
    st.sampled_from(["1e20", "2026-12-07T10:00+24:00", "infinity", "-infinity", "9999-12-31T23:59:60", "\x00"]),
    st.sampled_from(["5", "Mon", "24", "1y", "-24h", "now-", "24 h ago ago", "tomorrow", "1e3d"]),  # near-relative
    # "" means "not set"; a digit or a day word may make a relative time ("24h", "today"): drawn above
    st.text(min_size=1, max_size=30).filter(lambda t: not _is_instant(t) and not re.search(r"\d|now|day", t, re.I)),
)


@st.composite
def relative_instants(draw: st.DrawFn) -> tuple[str, datetime]:
    """(a time relative to now as a user writes it, the instant it means now): whole days back, so the
    server's clock a second later means the same runs (none starts within seconds of a day's turn)."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    word = draw(st.sampled_from(["today", "yesterday", "days"]))
    if word != "days":
        return word, today - timedelta(days=word == "yesterday")
    days = draw(st.integers(0, 20_000) | st.sampled_from([1, 7, 30, 80, 365, 2_000_000]))
    forms = [f"{days}d", f"{days} days ago", f"now-{days}d", f"{days}D"] + [f"{days * 24}h"] * (days * 24 < 10**7)
    text = draw(st.sampled_from(forms))
    try:
        return text, datetime.now(UTC) - timedelta(days=days)
    except OverflowError:
        return text, datetime.min.replace(tzinfo=UTC)


def _is_instant(text: str) -> bool:
    try:
        datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return False
    return True


def _inside(at: datetime, since: datetime | None, until: datetime | None) -> bool:
    return (since is None or since <= at) and (until is None or at < until)


def _get(server: CollectorServer, path: str, params: dict[str, str]) -> tuple[int, object]:
    r = request(f"{server.url}{path}?{urllib.parse.urlencode(params)}")
    assert r.status in (200, 400), (path, params, r.status, r.body[:300])
    body = json.loads(r.body)
    if r.status == 400:
        assert all(edge in body["error"] for edge in RANGE), (path, params, body)  # names the range
    return r.status, body


def test_every_time_parameter_across_the_calendar_is_an_exact_answer_or_a_400_naming_the_range(timed_server):
    assert len(TIMED) >= 40  # the queries do take since and until
    seen: collections.Counter[tuple[str, int]] = collections.Counter()

    @EXAMPLES
    @given(
        name=st.sampled_from(TIMED),
        since=st.none() | instants(),
        until=st.none() | instants(),
        alerts_since=instants(),
    )
    def one(name, since, until, alerts_since):
        params = {k: v[0] for k, v in (("since", since), ("until", until)) if v is not None}
        status, _ = _get(timed_server, f"/api/query/{name}", {**params, "format": "json"})
        assert status == 200, (name, params)  # every instant of the calendar is a valid bound
        seen[("query", status)] += 1
        _, bounds = _get(timed_server, "/api/query/time_bounds", {**params, "format": "json"})
        window = (since[1] if since else None, until[1] if until else None)
        assert bounds[0]["runs"] == sum(_inside(at, *window) for at in RUN_STARTS), (params, bounds)  # crossed: 0
        status, alerts = _get(timed_server, "/api/alerts", {"since": alerts_since[0]})
        assert status == 200 and len(alerts) == (2 if alerts_since[1] <= NOON_ISH else 0), (alerts_since, alerts)
        seen[("alerts", status)] += 1
        seen["crossed" if window[0] and window[1] and window[0] > window[1] else "uncrossed", 0] += 1

    one()

    @EXAMPLES
    @given(name=st.sampled_from(TIMED), key=st.sampled_from(["since", "until"]), bad=NOT_INSTANTS, other=instants())
    def refused(name, key, bad, other):
        other_key = "until" if key == "since" else "since"
        status, _ = _get(timed_server, f"/api/query/{name}", {key: bad, other_key: other[0], "format": "json"})
        assert status == 400, (name, key, bad)
        status, _ = _get(timed_server, "/api/alerts", {"since": bad})
        assert status == 400, bad
        seen[("refused", status)] += 2

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(name=st.sampled_from(TIMED), since=relative_instants(), until=st.none() | relative_instants())
    def relative(name, since, until):
        params = {"since": since[0], **({"until": until[0]} if until else {})}
        status, _ = _get(timed_server, f"/api/query/{name}", {**params, "format": "json"})
        assert status == 200, (name, params)
        _, bounds = _get(timed_server, "/api/query/time_bounds", {**params, "format": "json"})
        window = (since[1], until[1] if until else None)
        assert bounds[0]["runs"] == sum(_inside(at, *window) for at in RUN_STARTS), (params, bounds)
        seen[("relative", status)] += 1

    relative()
    refused()
    print(dict(seen))  # with -s: how many requests of each kind answered what
    assert seen["crossed", 0] and seen["uncrossed", 0]
