"""The harness's side of the fleet budget gate: the run's trace id, and the check through a server.

The decision itself is :func:`ledger.budgets.gate.decide`; the harness asks it
on an embedded ledger (``BudgetGate(LedgerSource(con))``) or through a running
``turnledger serve`` (``BudgetGate(HttpSource(server_url))``).

:class:`HttpSource` fails open by default (a budget server that is down must not
stop every agent); pass ``fail_open=False`` to refuse instead.
"""

from __future__ import annotations

from opentelemetry import trace as otel_trace

from collector.client import ServerClient
from ledger.budgets.gate import CallScope, Decision
from ledger.budgets.routes import CHECK_PATH
from ledger.errors import TurnledgerError

__all__ = ["HttpSource", "current_trace_id"]


def current_trace_id() -> str | None:
    """The trace id of the OpenTelemetry span current on this thread, as 32 hex digits.

    Under the harness's telemetry that is the run's root span, i.e. the trace
    id its charges carry in the ledger; None outside any (valid) span.
    """
    ctx = otel_trace.get_current_span().get_span_context()
    return format(ctx.trace_id, "032x") if ctx.is_valid else None


class HttpSource:
    """Decides through a running server's ``POST /v1/budgets/check`` (a short timeout: it is on every call)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 2.0, fail_open: bool = True) -> None:
        self.client = ServerClient(url, token, timeout=timeout)
        self.url = self.client.base_url + CHECK_PATH
        self.fail_open = fail_open

    def decide(self, scope: CallScope) -> Decision:
        try:
            return Decision.from_dict(self.client.check(scope))
        except (TurnledgerError, ValueError, KeyError, TypeError) as exc:
            verdict = "allowed (fail-open)" if self.fail_open else "refused (fail-closed)"
            detail = f"budget check at {self.url} unavailable ({exc}); {verdict}"
            return Decision(self.fail_open, None, detail, unavailable=True)
