"""The collector server: OTLP/HTTP ingest from any OpenTelemetry-instrumented agent, and the query API.

``CollectorServer`` is the one writer of the ledger file; ``collector.client`` reads
through it. ``turnledger serve`` / ``turnledger up`` run it (``collector.cli.serve``).
"""

import lazy_loader

# The curated names are imported on first use (their list is the .pyi stub beside
# this file): importing a light submodule, or `turnledger --help`, does not pay for
# the heavy ones.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
