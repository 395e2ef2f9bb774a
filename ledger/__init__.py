"""turnledger's ledger: the DuckDB store and everything computed from it.

The curated API; submodules hold the rest: ``ledger.ingest.ingest`` appends spans
(not re-exported here, so ``ledger.ingest`` stays the module), ``ledger.queries``
builds every named query.
"""

import lazy_loader

# The curated names are imported on first use (their list is the .pyi stub beside
# this file): importing a light submodule, or `turnledger --help`, does not pay for
# the heavy ones.
__getattr__, __dir__, __all__ = lazy_loader.attach_stub(__name__, __file__)
