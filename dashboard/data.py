"""The dashboard's reading settings: how long a figure is cached, and the app's own arguments.

The sources themselves are shared with the CLI: ``ledger.sources`` (the file,
``source_spec``) and ``collector.client.ServerSource`` (a running server),
built from a ``SourceSpec`` by ``collector.client.make_source``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CACHE_TTL_S", "parse_app_args"]

CACHE_TTL_S = 5


def parse_app_args(argv: Sequence[str]) -> argparse.Namespace:
    """Arguments after ``streamlit run dashboard/app.py --``; unknown ones are ignored."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--db", type=Path, default=None)
    p.add_argument("--server", default=None)
    args, _ = p.parse_known_args(list(argv))
    return args
