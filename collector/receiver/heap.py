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

_M_MMAP_THRESHOLD = -3  # <malloc.h>


@cache
def _glibc() -> Any:
    try:
        libc = ctypes.CDLL(None)
        libc.malloc_trim, libc.mallopt  # noqa: B018 (glibc's, absent from musl and macOS)
    except (OSError, AttributeError):
        return None
    return libc


def map_large_blocks() -> None:
    """Keep glibc's threshold at its initial 128 KiB: a large block is always mapped on its own and returned
    when freed. For a decode worker only: in the collector it took four maximum-size bodies' peak from
    ~390 to ~260 MiB, but there DuckDB allocates its 256 KiB blocks by the thousand, each would be mapped
    on its own, and its cost on ingest throughput is not measured yet."""
    libc = _glibc()
    if libc is not None:
        libc.mallopt(_M_MMAP_THRESHOLD, 128 * 1024)


def give_back() -> None:
    """Return the free pages of glibc's heaps to the system (``malloc_trim``: a few ms on a large heap)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
