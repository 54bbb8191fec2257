"""An optional answer step: any OpenAI-compatible ``/v1/chat/completions`` endpoint."""

from __future__ import annotations

import os
from dataclasses import dataclass

import httpx

SYSTEM_PROMPT = (
    "You answer the user's question using the context below: passages from the "
    "documentation, messages from earlier conversations, and the current "
    "conversation. Cite passages by their [tag]. If the context does not hold the "
    "answer, say so."
)


@dataclass
class LLM:
    url: str  # e.g. http://127.0.0.1:8000/v1 (a full .../chat/completions URL also works)
    model: str
    api_key: str | None = None
    timeout: float = 120.0
    max_tokens: int = 512

    def endpoint(self) -> str:
        url = self.url.rstrip("/")
        if url.endswith("/chat/completions"):
            return url
        if not url.endswith("/v1"):
            url += "/v1"
        return url + "/chat/completions"

    def messages(self, question: str, context: str) -> list[dict]:
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": f"Context:\n{context}\n\nQuestion: {question}"},
        ]

    def answer(self, question: str, context: str) -> str:
        key = self.api_key or os.environ.get("OPENAI_API_KEY")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        body = {
            "model": self.model,
            "messages": self.messages(question, context),
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        response = httpx.post(
            self.endpoint(), json=body, headers=headers, timeout=self.timeout
        )
        response.raise_for_status()
        return response.json()["choices"][0]["message"]["content"].strip()
