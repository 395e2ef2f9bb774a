"""The turnledger dashboard: thin Streamlit pages over ``ledger.queries``.

Start it with ``turnledger dashboard`` (or ``turnledger up``). Pages live in
``dashboard/views/``; ``data`` chooses where numbers come from (the server's
query API or the ledger file), ``loaders`` caches them, ``charts`` draws them
and ``analysis`` holds the pure logic (payload diff, cache-break flags...).
"""

__all__: list[str] = []
