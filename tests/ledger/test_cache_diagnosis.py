"""Each call's cache verdict: cached, written, broken by the first changed block, or why no cache was used.

The reasons a call with a ``cache_control`` breakpoint caches nothing come from
the price book's ``[cache_minimum]`` (the shortest prefix a model caches) and
the captured payload; the same words reach the CLI, the turns table and the diff.
"""

from __future__ import annotations

import pytest

from ledger.cache_diagnosis import cached_prefix_tokens, diagnose, has_breakpoint
from ledger.errors import PriceFileError
from ledger.pricing import PriceBook
from ledger.turn_diff import change_summary, compact_json

BOOK = PriceBook.default()


def test_the_price_book_knows_each_models_minimum_cacheable_prefix(tmp_path):
    assert BOOK.cache_minimum("claude-opus-5") == 512  # the design sources' figures
    assert BOOK.cache_minimum("claude-sonnet-5") == 1024
    assert BOOK.cache_minimum("claude-haiku-4-5-20251001") == 4096  # a dated name uses its model's entry
    assert BOOK.cache_minimum("claude-opus-4-1-20250805") == 1024  # the longest listed name it extends
    assert BOOK.cache_minimum("claude-opus-4-5") == 4096
    assert BOOK.cache_minimum("gpt-4o") is None and BOOK.cache_minimum(None) is None
    user = tmp_path / "prices.toml"
    user.write_text('[cache_minimum]\n"claude-opus-5" = 1024\n"my-model" = 64\n')
    mine = PriceBook.default(user)
    assert (mine.cache_minimum("claude-opus-5"), mine.cache_minimum("my-model")) == (1024, 64)
    assert mine.cache_minimum("claude-sonnet-5") == 1024  # the shipped entries stay under the user's
    user.write_text('[cache_minimum]\n"my-model" = "lots"\n')
    with pytest.raises(PriceFileError, match="my-model"):
        PriceBook.default(user)


SYSTEM = "You are a support agent. " * 8


def request(*, marked: bool = True, top_level: bool = False, question: str = "where is my order?") -> dict:  # type: ignore[type-arg]
    system = [{"type": "text", "text": SYSTEM, **({"cache_control": {"type": "ephemeral"}} if marked else {})}]
    payload = {"model": "claude-opus-5", "system": system, "messages": [{"role": "user", "content": question}]}
    return {**payload, "cache_control": {"type": "ephemeral"}} if top_level else payload


def turn(n: int, *, uncached: int, read: int = 0, write: int = 0, model: str = "claude-opus-5") -> dict:  # type: ignore[type-arg]
    return {"turn": n, "call_site": "agent", "model": model, "uncached_input_tokens": uncached,
            "cache_read_tokens": read, "cache_write_tokens": write}  # fmt: skip


def test_the_prefix_up_to_the_breakpoint_is_the_inputs_share_of_the_characters():
    payload = request()
    system, message = compact_json(payload["system"][0]), compact_json(payload["messages"][0])
    assert cached_prefix_tokens(payload, 400) == round(400 * len(system) / (len(system) + len(message)))
    assert cached_prefix_tokens(request(top_level=True), 400) == 400  # automatic caching: the whole request
    assert has_breakpoint(request()) and has_breakpoint(request(marked=False, top_level=True))
    assert not has_breakpoint(request(marked=False))


def test_a_call_below_the_models_minimum_says_so_with_both_sizes():
    payloads = {1: request(), 2: request(question="and my refund?")}
    (first, second) = diagnose([turn(1, uncached=300), turn(2, uncached=310)], payloads.get, BOOK.cache_minimum)
    prefix = cached_prefix_tokens(payloads[1], 300)
    assert first.status == "below minimum" and prefix < 512
    assert first.note == (
        f"prefix below the model's minimum: ≈{prefix:,} tokens up to the breakpoint, claude-opus-5 caches 512 or more"
    )
    assert second.status == "below minimum"


def test_no_breakpoint_and_an_unexplained_miss_are_told_apart():
    rows = [turn(1, uncached=3_000), turn(2, uncached=3_000, model="unlisted-model"), turn(3, uncached=3_000)]
    payloads = {1: request(marked=False), 2: request(), 3: None}
    checks = diagnose(rows, payloads.get, BOOK.cache_minimum)
    assert [c.status for c in checks] == ["no breakpoint", "not cached", "not cached"]
    assert checks[0].note == "the request marks no cache_control breakpoint, so nothing can be cached"
    assert "yet nothing was read or written" in checks[1].note and "minimum" not in checks[1].note  # unknown floor
    assert "no payload captured" in checks[2].note
    # Above the minimum with a breakpoint, a miss is not blamed on the minimum.
    (big,) = diagnose([turn(1, uncached=3_000)], {1: request()}.get, BOOK.cache_minimum)
    assert big.status == "not cached" and "(its minimum is 512)" in big.note


def test_a_break_is_named_by_its_first_changed_block_and_a_healthy_run_reads_back():
    before, after = request(), request()
    after["system"] = [{**after["system"][0], "text": SYSTEM + "Current time: 14:25."}]
    rows = [turn(1, uncached=20, write=6_000), turn(2, uncached=10, read=6_000, write=300), turn(3, uncached=6_320)]
    checks = diagnose(rows, {1: before, 2: before, 3: after}.get, BOOK.cache_minimum)
    assert [c.status for c in checks] == ["written", "cached", "broken"]
    assert checks[2].note.startswith("broken by system[0].text: text differs from character 200; turn 2 cached")
    assert checks[1].note == "read back 6,000 of 6,000 cached tokens, wrote 300"


def test_a_kept_prefix_is_cacheable_only_when_the_call_could_cache():
    a, b = request(), request()
    b["messages"] = [*a["messages"], {"role": "assistant", "content": "ok"}, {"role": "user", "content": "go on"}]
    change, kept = change_summary(1, 2, a, b)
    assert change is None and kept.endswith("appended 2 message(s); cacheable.")
    note = "prefix below the model's minimum: ≈250 tokens up to the breakpoint, claude-opus-5 caches 512 or more"
    change, below = change_summary(1, 2, a, b, note)
    assert change is None and "cacheable" not in below and below.endswith(f"yet nothing was cached: {note}.")


@pytest.mark.parametrize(
    ("gap_s", "write_1h", "why"),
    [
        (372, 0, "cache expired: 6 min 12 s after turn 1 used it, past its 5 min TTL"),
        (120, 0, "prefix changed or cache evicted early: 2 min after turn 1 used it, within its 5 min TTL"),
        (1_200, 6_000, "prefix changed or cache evicted early: 20 min after turn 1 used it, within its 1 h TTL"),
        (4_830, 6_000, "cache expired: 1 h 20 min after turn 1 used it, past its 1 h TTL"),
    ],
)
def test_a_lost_prefix_is_told_expired_or_changed_by_the_gap_against_the_ttl(gap_s, write_1h, why):
    from datetime import datetime, timedelta

    from ledger.cache_diagnosis import check_cache

    t0 = datetime(2026, 9, 21, 12, 0, 0)
    first = {**turn(1, uncached=20, write=6_000 - write_1h), "cache_write_1h_tokens": write_1h, "start_time": t0}
    second = {**turn(2, uncached=6_020), "start_time": t0 + timedelta(seconds=gap_s)}
    broken = check_cache([first, second])[1]
    assert broken.status == "broken"
    assert broken.note == f"turn 1 cached 6,000 tokens but only 0 were read back: 6,000 re-billed ({why})"


def test_a_lost_prefix_without_times_could_be_either():
    from ledger.cache_diagnosis import check_cache

    broken = check_cache([turn(1, uncached=20, write=6_000), turn(2, uncached=6_020)])[1]
    assert broken.note.endswith("6,000 re-billed (prefix changed or cache expired)")
