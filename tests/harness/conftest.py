"""Shared fixtures: an injected sleep that records instead of waiting, a seeded
runtime, and an in-memory observer."""

from __future__ import annotations

import pytest

from collector.harness import InMemoryObserver, Runtime


class Sleeps(list):
    """Stands in for time.sleep: records every requested wait, never waits."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def runtime(sleeps: Sleeps) -> Runtime:
    return Runtime.seeded(7, sleep=sleeps)


@pytest.fixture
def obs() -> InMemoryObserver:
    return InMemoryObserver()
