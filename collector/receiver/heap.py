"""Giving freed memory back to the system (glibc), so that what one large body cost is not kept.

glibc serves a block of 128 KiB or more from a mapping of its own (returned to the system on free),
but after freeing such a block it raises that threshold to the block's size, up to 32 MiB: from then on
the multi-MiB buffers of a large OTLP body (inflated bytes, pickles, Arrow IPC) come from its heap and
stay resident once freed. A decode worker kept ~120 MiB of a 60 MiB-inflated body's while idle (#41 item 7).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import cast

__all__ = ["give_back", "map_large_blocks"]

_M_MMAP_THRESHOLD = -3  # <malloc.h>
_trim: Callable[[int], int] | None = None


def map_large_blocks() -> None:
    """Keep glibc's threshold at its initial 128 KiB: large blocks always mapped, returned when freed.
    Nothing on a C library without ``mallopt`` (musl, macOS)."""
    global _trim
    try:
        libc = ctypes.CDLL(None)
        trim, mallopt = libc.malloc_trim, libc.mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 128 * 1024)
    _trim = cast(Callable[[int], int], trim)


def give_back() -> None:
    """Return the free pages of glibc's heaps to the system (after ``map_large_blocks``)."""
    if _trim is not None:
        _trim(0)
