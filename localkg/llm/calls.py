"""The record of one LLM call, so that every reasoner step can be audited and costed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LLMCall:
    """One call: which reasoner step made it, what went in and out, what it cost.

    ``prompt`` is the caller's prompt with the runtime's format instructions
    (the text the model saw, without a chat template's wrapper); token counts
    come from llama.cpp's own ``usage`` when it generated, and from its
    tokenizer when the call only read next-token probabilities (then
    ``completion_tokens`` is 0: nothing was generated).
    """

    step: str
    prompt: str
    output: str
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "prompt": self.prompt,
            "output": self.output,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 4),
            "cached": self.cached,
        }
