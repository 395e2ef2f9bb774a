"""turnledger's collector: telemetry in and out, one folder per role.

* :mod:`collector.receiver` — the OTLP receiver, the query API and the ledger's one writer.
* :mod:`collector.harness` — the production agent loop, its guards, LLM clients and telemetry.
* :mod:`collector.demo` — demo data: scripted LLM, scenarios, ``simulate`` and the sample traces.
* :mod:`collector.client` — the one client of the receiver's API (dashboard, CLI, budget gate).
* :mod:`collector.otlp` — the OTLP codec (JSON, protobuf, files) shared by all of them.
* :mod:`collector.cli` — the ``turnledger`` command.
"""

__all__: list[str] = []
