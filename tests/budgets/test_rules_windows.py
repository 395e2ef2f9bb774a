"""Rules, thresholds, windows and projections: pure functions, exact money."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from ledger.budgets import BudgetError, ManualClock, Rule, Scope, WebhookTarget, project, window_for
from ledger.budgets.rules import level_for, parse_money


def rule(**kw) -> Rule:
    base = {"id": "b_test", "name": "acme-daily", "scope": Scope("tenant", "acme"), "window": "day", "limit": "1.00"}
    return Rule(**{**base, **kw})


def test_seed_worked_example_082_of_100_is_warn():
    # Seed 000 ex. 3: .65 + .025 + .125 + .02 = $0.82 against $1.00 -> warn.
    spent = Decimal("0.65") + Decimal("0.025") + Decimal("0.125") + Decimal("0.02")
    assert spent == Decimal("0.82")
    r = rule()
    assert r.soft_fraction == 0.8 and r.soft_threshold == Decimal("0.80")
    assert level_for(r, Decimal("0.79")) == "ok"
    assert level_for(r, spent) == "warn"
    assert level_for(r, Decimal("0.80")) == "warn"  # inclusive, as `spent >= 0.8 * limit`
    assert level_for(r, Decimal("1.00")) == "exceeded"  # inclusive, as `spent >= limit`


def test_floor_metric_is_exceeded_below_its_limit_and_has_no_warn_band_by_default():
    r = rule(metric="cache_hit_rate", limit="0.7", window="rolling_day")
    assert r.soft_threshold is None
    assert level_for(r, Decimal("0.745")) == "ok"
    assert level_for(r, Decimal("0.69")) == "exceeded"
    assert level_for(r, None) == "ok"  # no tokens: no data, not an alert
    warned = rule(metric="cache_hit_rate", limit="0.7", soft_fraction=0.875, window="rolling_day")
    assert level_for(warned, Decimal("0.75")) == "warn"  # below 0.7 / 0.875 = 0.8


@pytest.mark.parametrize(
    ("text", "kind", "value"),
    [
        ("global", "global", None),
        ("tenant=acme", "tenant", "acme"),
        ("call-site=summarizer", "call_site", "summarizer"),
    ],
)
def test_scope_parse(text, kind, value):
    assert Scope.parse(text) == Scope(kind, value)
    assert str(Scope.parse(text)) == ("global" if kind == "global" else f"{kind}={value}")


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"window": "fortnight"}, "'fortnight'"),
        ({"metric": "vibes"}, "'vibes'"),
        ({"limit": "-1"}, "'-1'"),
        ({"limit": "lots"}, "'lots'"),
        ({"timezone": "Mars/Olympus"}, "'Mars/Olympus'"),
        ({"soft_fraction": 1.5}, "1.5"),
        ({"metric": "loop_trip_rate", "limit": "2"}, "between 0 and 1"),
        ({"name": "has space"}, "'has space'"),
    ],
)
def test_invalid_rules_name_the_bad_value(kw, message):
    with pytest.raises(BudgetError, match=message):
        rule(**kw)


def test_bad_scopes_and_targets_name_the_bad_value():
    with pytest.raises(BudgetError, match="'team'"):
        Scope.parse("team=x")
    with pytest.raises(BudgetError, match="needs a value"):
        Scope("tenant", "")
    with pytest.raises(BudgetError, match="'ftp://x'"):
        WebhookTarget("ftp://x")


def test_money_is_exact():
    assert parse_money(0.1) == Decimal("0.1")
    assert parse_money("$1.25") == Decimal("1.25")


def test_a_run_scope_is_its_own_window():
    assert rule(scope=Scope("run", "ab" * 16), window="day").window == "run"


def test_webhook_label_hides_the_secret_path():
    slack = WebhookTarget.parse("slack:https://hooks.slack.com/services/T000/B000/s3cr3t")
    assert slack.format == "slack"
    assert "s3cr3t" not in slack.label and slack.label.startswith("slack:https://hooks.slack.com/services/…#")
    other = WebhookTarget("https://hooks.slack.com/services/T000/B000/other", "slack")
    assert other.label != slack.label


# --- windows ---------------------------------------------------------------------------------
def test_calendar_day_in_utc_and_in_a_time_zone():
    now = datetime(2026, 9, 21, 22, 30, tzinfo=UTC)
    w = window_for(rule(), now)
    assert (w.start, w.end) == (datetime(2026, 9, 21, tzinfo=UTC), datetime(2026, 9, 22, tzinfo=UTC))
    assert w.key == "day:2026-09-21@UTC"
    # 22:30 UTC is already 00:30 on the 22nd in Paris (UTC+2 in September).
    paris = window_for(rule(timezone="Europe/Paris"), now)
    assert paris.key == "day:2026-09-22@Europe/Paris"
    assert paris.start == datetime(2026, 9, 21, 22, tzinfo=UTC)
    assert paris.end == datetime(2026, 9, 22, 22, tzinfo=UTC)


def test_a_dst_day_is_23_hours_long():
    w = window_for(rule(timezone="Europe/Paris"), datetime(2026, 3, 29, 12, tzinfo=UTC))
    assert w.end - w.start == timedelta(hours=23)


def test_month_windows_roll_over_the_year():
    w = window_for(rule(window="month"), datetime(2026, 12, 31, 23, 59, tzinfo=UTC))
    assert (w.start, w.end) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))
    assert w.key == "month:2026-12@UTC"


def test_rolling_windows_trail_now_and_keep_one_key():
    now = datetime(2026, 9, 21, 14, tzinfo=UTC)
    w = window_for(rule(window="rolling_hour"), now)
    assert w.start == now - timedelta(hours=1) and w.end is None and w.rolling
    assert window_for(rule(window="rolling_hour"), now + timedelta(hours=5)).key == w.key


def test_per_run_windows_need_the_run():
    with pytest.raises(BudgetError, match="trace id"):
        window_for(rule(window="run"), datetime(2026, 9, 21, tzinfo=UTC))
    assert window_for(rule(window="run"), datetime(2026, 9, 21, tzinfo=UTC), "ab" * 16).key == "run:" + "ab" * 16


def test_manual_clock_moves_only_when_told():
    c = ManualClock(datetime(2026, 9, 21, tzinfo=UTC))
    assert c() == c()
    assert c.advance(timedelta(days=1)) == datetime(2026, 9, 22, tzinfo=UTC) == c()
    with pytest.raises(BudgetError, match="naive"):
        ManualClock(datetime(2026, 9, 21))


# --- projection ------------------------------------------------------------------------------
def test_projection_at_the_current_rate():
    now = datetime(2026, 9, 21, 12, tzinfo=UTC)
    end = datetime(2026, 9, 22, tzinfo=UTC)
    p = project(Decimal("0.50"), Decimal("1.00"), Decimal("0.25"), timedelta(hours=1), now, end)
    assert p.rate_usd_per_hour == Decimal("0.25") and p.remaining_usd == Decimal("0.50")
    assert p.runs_out_at == datetime(2026, 9, 21, 14, tzinfo=UTC) and p.within_window
    assert "runs out at 2026-09-21 14:00 UTC" in p.describe()
    slow = project(Decimal("0.50"), Decimal("1.00"), Decimal("0.01"), timedelta(hours=1), now, end)
    assert not slow.within_window and "past the end of this window" in slow.describe()
    idle = project(Decimal("0.50"), Decimal("1.00"), Decimal(0), timedelta(hours=1), now, end)
    assert idle.runs_out_at is None
    spent = project(Decimal("1.20"), Decimal("1.00"), Decimal("0.2"), timedelta(hours=1), now, end)
    assert spent.remaining_usd == 0 and spent.runs_out_at == now
    assert project(Decimal(0), Decimal(1), Decimal(0), timedelta(0), now, end) is None


def test_a_payloads_projected_rate_is_to_the_micro_dollar_not_28_digits():
    now = datetime(2026, 9, 21, 12, tzinfo=UTC)
    thirds = project(Decimal("0.50"), Decimal("1.00"), Decimal("1"), timedelta(hours=3), now)
    assert thirds is not None and thirds.to_dict()["rate_usd_per_hour"] == "0.333333"
