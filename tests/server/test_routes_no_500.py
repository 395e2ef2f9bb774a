"""No 500 from any query or budget route (#26 item 5): every parameter of every named query, and the budget
and alert routes' bodies and query strings, drawn by hypothesis from hostile values (years 1 and 9999, counts
past BIGINT or negative, money past DECIMAL, NaN, text): the answer is a 2xx or a 4xx naming what is wrong."""

from __future__ import annotations

import itertools
import json
import urllib.parse

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collector.receiver.api import describe_queries

from .conftest import request

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
