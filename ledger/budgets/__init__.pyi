from .alerts import AlertBook, AlertEvent, AlertState, transition
from .delivery import Deliverer, DeliveryAttempt, webhook_body
from .evaluate import Evaluation, evaluate
from .gate import BudgetGate, CallScope, Decision, LedgerSource, check_request, decide
from .governor import Governor
from .projection import Projection, project
from .relative import TEMPLATES, Relative, Version
from .routes import CHECK_PATH
from .rules import METRICS, SCOPE_KINDS, WINDOWS, BudgetError, Rule, Scope, UnknownBudget, WebhookTarget, covers
from .store import add_rule, get_rule, list_alerts, list_deliveries, list_rules, new_rule_id, remove_rule, update_rule
from .targets import ForbiddenTarget, TargetPolicy
from .windows import ManualClock, Window, system_clock, window_for

__all__ = [
    "CHECK_PATH",
    "METRICS",
    "SCOPE_KINDS",
    "TEMPLATES",
    "WINDOWS",
    "AlertBook",
    "AlertEvent",
    "AlertState",
    "BudgetError",
    "BudgetGate",
    "CallScope",
    "Decision",
    "Deliverer",
    "DeliveryAttempt",
    "Evaluation",
    "ForbiddenTarget",
    "Governor",
    "LedgerSource",
    "ManualClock",
    "Projection",
    "Relative",
    "Rule",
    "Scope",
    "TargetPolicy",
    "UnknownBudget",
    "Version",
    "WebhookTarget",
    "Window",
    "add_rule",
    "check_request",
    "covers",
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
    "update_rule",
    "webhook_body",
    "window_for",
]
