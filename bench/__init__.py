"""SagittaDB benchmark harness: ``python -m bench --help`` (see bench/README.md)."""

__all__ = ["datasets", "engines", "report", "scenarios"]
