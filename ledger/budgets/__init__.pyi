from .alerts import AlertBook, AlertEvent, AlertState, transition
from .client import BudgetClient
from .delivery import Deliverer, DeliveryAttempt, webhook_body
from .evaluate import Evaluation, evaluate
from .gate import (
    CHECK_PATH,
    BudgetGate,
    CallScope,
    Decision,
    HttpSource,
    LedgerSource,
    check_request,
    current_trace_id,
    decide,
)
from .governor import Governor
from .projection import Projection, project
from .rules import METRICS, SCOPE_KINDS, WINDOWS, BudgetError, Rule, Scope, UnknownBudget, WebhookTarget
from .store import add_rule, get_rule, list_alerts, list_deliveries, list_rules, new_rule_id, remove_rule
from .windows import ManualClock, Window, system_clock, window_for

__all__ = [
    "CHECK_PATH",
    "METRICS",
    "SCOPE_KINDS",
    "WINDOWS",
    "AlertBook",
    "AlertEvent",
    "AlertState",
    "BudgetClient",
    "BudgetError",
    "BudgetGate",
    "CallScope",
    "Decision",
    "Deliverer",
    "DeliveryAttempt",
    "Evaluation",
    "Governor",
    "HttpSource",
    "LedgerSource",
    "ManualClock",
    "Projection",
    "Rule",
    "Scope",
    "UnknownBudget",
    "WebhookTarget",
    "Window",
    "add_rule",
    "check_request",
    "current_trace_id",
    "decide",
    "evaluate",
    "get_rule",
    "list_alerts",
    "list_deliveries",
    "list_rules",
    "new_rule_id",
    "project",
    "remove_rule",
    "system_clock",
    "transition",
    "webhook_body",
    "window_for",
]
