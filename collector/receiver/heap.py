"""Giving freed memory back to the system (glibc), so that what one large body cost is not kept.

glibc keeps freed memory in its heaps for reuse, and after freeing a block of 128 KiB or more (served
from a mapping of its own, returned at once) it raises that threshold to the block's size, up to 32 MiB:
from then on the multi-MiB buffers of a large OTLP body (inflated bytes, pickles, Arrow IPC) come from
its heap and stay resident once freed. After a 60 MiB-inflated body an idle decode worker kept ~120 MiB,
the collector ~100 MiB per body committed (#41 item 7). Nothing happens on another C library.
"""

from __future__ import annotations

import ctypes
from functools import cache
from typing import Any

__all__ = ["give_back", "map_large_blocks"]

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # <malloc.h>


@cache
def _glibc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim, libc.mallopt  # noqa: B018 (glibc's, absent from musl and macOS)
    except (OSError, AttributeError):
        return None
    return libc


LARGE_BLOCK = 4 << 20
"""glibc's mapping threshold as this module sets it: a block of 4 MiB or more (a large body's inflated
bytes, its rows' Arrow buffers and pickles) is mapped on its own and returned when freed, while the
buffers of ordinary requests (512 spans with content: ~2.4 MiB of protobuf) are still reused from the
heap, without the page faults of a fresh mapping each time. DuckDB allocates with its own allocator
(jemalloc), which this leaves alone."""


def map_large_blocks(threshold: int = LARGE_BLOCK) -> None:
    """Keep glibc's mapping threshold at ``threshold`` (it stops rising by itself): a block that large is
    always mapped on its own and returned when freed. In the collector it took four maximum-size bodies'
    peak from ~320 to ~210 MiB over idle (with the writer's checkpoint after a large commit; #41 item 7)."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, threshold)
        # Set by hand, the mapping threshold no longer raises the trim threshold with it (glibc keeps it
        # at twice the first): at its default of 128 KiB the heap's top was given back and faulted in
        # again around every ordinary request's buffers (~13% more CPU per span with content, #41 item 7).
        libc.mallopt(_M_TRIM_THRESHOLD, 2 * threshold)


def give_back() -> None:
    """Return the free pages of glibc's heaps to the system (``malloc_trim``: a few ms on a large heap)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
