"""turnledger's Streamlit dashboard: thin pages over ``ledger.queries``."""

__all__: list[str] = []
