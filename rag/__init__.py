"""A RAG retrieval pipeline over SagittaDB, offline: ``python -m rag --help``.

Three context sources per question, each its own collection: ``documents`` (Python's
own documentation, chunked), ``messages`` (past conversations) and ``buffer`` (the
current conversation). Embeddings: all-MiniLM-L6-v2 as int8 ONNX on onnxruntime, from
PyPI packages (no model hub, no PyTorch). An OpenAI-compatible LLM is optional.
"""

from .pipeline import SOURCES, Pipeline, Retrieval, open_database

__all__ = ["SOURCES", "Pipeline", "Retrieval", "open_database"]
