"""Password guessing on the dashboard login is throttled per client and in total (#41 item 6).

The throttle runs on an injected clock: attempts are counted per minute of that clock,
never against the wall. The attacker tries as fast as the issue measured (11 a second).
"""

from __future__ import annotations

import logging
from collections import Counter

from dashboard.login_throttle import GLOBAL_PER_MINUTE, LoginThrottle

RATE = 11  # guesses a second, what one websocket managed before


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def attack(throttle: LoginThrottle, clock: Clock, attempts: int, clients=lambda i: "203.0.113.7") -> Counter[int]:
    """``attempts`` wrong passwords at RATE a second; how many were checked in each minute."""
    start, checked = clock.now, Counter[int]()
    for i in range(attempts):
        clock.now = start + i / RATE
        client = clients(i)
        if throttle.wait(client) == 0:
            throttle.failed(client)
            checked[int((clock.now - start) // 60)] += 1
    return checked


def test_fifty_wrong_logins_in_a_row_from_one_client_are_throttled():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    checked = attack(throttle, clock, 50)
    # 5 free, then one after 1 s and one after 2 s more: 7 of the 50 (4.5 s) were checked.
    assert checked == {0: 7}
    assert throttle.stats()["wrong_passwords"] == 7 and throttle.stats()["refused_attempts"] == 43


def test_a_sustained_attack_from_one_client_gets_10_guesses_the_first_minute_then_1_a_minute():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    checked = attack(throttle, clock, RATE * 60 * 10)  # ten minutes at 11 a second: 6,600 tries
    assert checked[0] == 10  # the README's figure
    assert all(checked[m] == 1 for m in range(2, 10)), checked
    assert sum(checked.values()) <= 10 + 9


def test_new_websockets_and_addresses_do_not_escape_the_global_limit():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    # Every try from a new address (a new websocket each time counts as nothing new either).
    checked = attack(throttle, clock, RATE * 60 * 5, clients=lambda i: f"198.51.100.{i % 250}/{i}")
    assert all(0 < n <= GLOBAL_PER_MINUTE for n in checked.values()), checked
    assert sum(checked.values()) <= GLOBAL_PER_MINUTE * 5
    stats = throttle.stats()
    assert stats["everyone_waits_s"] > 0 and stats["wrong_last_minute"] == GLOBAL_PER_MINUTE


def test_the_right_password_resets_a_client_and_a_quiet_client_is_forgotten():
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    for _ in range(6):
        throttle.failed("a")
    assert throttle.wait("a") == 2.0 and throttle.wait("b") == 0  # another client is not held back
    clock.now += 2
    throttle.succeeded("a")
    assert throttle.wait("a") == 0
    for _ in range(7):
        throttle.failed("a")
    clock.now += 900
    assert throttle.wait("a") == 0 and throttle.stats()["clients_waiting"] == 0


def test_wrong_guesses_and_refusals_are_logged_without_a_line_per_refusal(caplog):
    clock = Clock()
    throttle = LoginThrottle(clock=clock)
    with caplog.at_level(logging.WARNING, logger="dashboard.login_throttle"):
        attack(throttle, clock, 50)
    lines = [r.getMessage() for r in caplog.records]
    assert sum("wrong password from 203.0.113.7" in line for line in lines) == 7
    refusals = [line for line in lines if "refused" in line]
    assert 0 < len(refusals) <= 5  # 43 refusals in 4.5 s: at most one line a second
    assert any("(7 in a row; next try in 4 s)" in line for line in lines)
