"""Cost governance: budget and metric rules, evaluation as spans arrive, alerts, enforcement.

* :mod:`.rules` — what a rule is (scope, window, metric, limit, soft fraction).
* :mod:`.windows` — calendar and rolling windows from an injectable clock.
* :mod:`.evaluate` — SQL builders and evaluation of a rule over its window.
* :mod:`.relative` — baseline-relative rules: a candidate version against the baseline beside it.
* :mod:`.anomaly` — the cost-anomaly metric: a run against its own agent's recent p95.
* :mod:`.alerts` — the deduplicating alert state machine.
* :mod:`.delivery` — webhook delivery, one lane per target, every attempt recorded.
* :mod:`.breaker` — each webhook target's circuit breaker (live, and replayed from the attempts).
* :mod:`.targets` — where a webhook may POST (checked when a rule is added and at every delivery).
* :mod:`.governor` — the writer's hook: ``Governor.on_ingested`` and ``Governor.sweep``.
* :mod:`.gate` — the decision the harness asks for before each model call.
* :mod:`.service` — the budget operations as JSON-ready documents (CLI, server and dashboard share them).
* :mod:`.routes` — the server's budget routes, named once for the server and ``collector.client``.
"""

import lazy_loader

# The curated names are imported on first use (their list is the .pyi stub beside
# this file): importing a light submodule, or `turnledger --help`, does not pay for
# the heavy ones.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
