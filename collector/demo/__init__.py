"""Demo data: a scripted LLM, scenarios and workloads that drive the real harness, and the sample traces."""

__all__: list[str] = []
