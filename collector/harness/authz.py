"""The authorization gate, consulted before any tool runs.

An allow-list, not a deny-list: a tool nobody has thought about yet is
denied, so the gate fails closed. A denial never raises; it goes back to the
model as an ``is_error`` result, like any other failure it can react to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AllowList", "Authorizer", "Decision"]


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""
    gated: bool = False  # the call needed an approval (it changes data); an allowed one is recorded
    by: str = ""  # who decided: a person for a human gate, else the policy's name


_POLICY = "allow-list"

Authorizer = Callable[[str, Mapping[str, Any], "str | None"], Decision]


class AllowList:
    """``read_only`` tools are always allowed; ``write`` tools need a tenant and
    an explicit ``confirmed: true`` in the call; everything else is denied."""

    def __init__(self, read_only: Iterable[str], write: Iterable[str] = (), confirm_arg: str = "confirmed") -> None:
        self.read_only = frozenset(read_only)
        self.write = frozenset(write)
        self.confirm_arg = confirm_arg

    def __call__(self, tool: str, args: Mapping[str, Any], tenant: str | None) -> Decision:
        if tool in self.read_only:
            return Decision(True)
        if tool in self.write:
            if not tenant:
                return Decision(False, f"{tool} changes data and this run has no tenant", True, _POLICY)
            if args.get(self.confirm_arg) is not True:
                reason = f"{tool} changes data; call it with {self.confirm_arg}=true once confirmed"
                return Decision(False, reason, True, _POLICY)
            return Decision(True, f"{tool} changes data; confirmed with {self.confirm_arg}=true", True, _POLICY)
        return Decision(False, f"{tool} is not on this agent's allow-list", by=_POLICY)
