"""What the real and the scripted model share: the call record, prompt rendering, and ``fit_options``.

Keeping these in one place means a reasoner tested with ``ScriptedLLM`` sees
exactly the prompts, option shrinking and bookkeeping it will see with the
real model; only where the answers come from differs.
"""
from __future__ import annotations

import time
from abc import ABC, abstractmethod
from typing import Any, Callable

from localkg import prompts
from localkg.llm.calls import LLMCall

PROMPTS = "llm"


class LanguageModel(ABC):
    """The interface reasoners program against (see ``localkg.llm.LLM`` for the semantics)."""

    n_ctx: int
    calls: list[LLMCall]

    @property
    @abstractmethod
    def model_name(self) -> str: ...

    @abstractmethod
    def count_tokens(self, text: str) -> int: ...

    @abstractmethod
    def generate(self, prompt: str, *, step: str, max_tokens: int = 128, stop: list[str] | None = None) -> str: ...

    @abstractmethod
    def choose(self, prompt: str, options: list[str], *, step: str, k: int = 1,
               allow_none: bool = False) -> list[int]: ...

    @abstractmethod
    def score_options(self, prompt: str, options: list[str], *, step: str) -> list[float]: ...

    @abstractmethod
    def yes_no(self, prompt: str, *, step: str) -> tuple[bool, float]: ...

    @abstractmethod
    def json(self, prompt: str, schema: dict[str, Any], *, step: str, max_tokens: int = 256) -> dict[str, Any]: ...

    # ------------------------------------------------------------------ shared mechanics
    def prompt_size(self, text: str) -> int:
        """Tokens ``text`` occupies in the context once framed (the real model adds a chat template)."""
        return self.count_tokens(text)

    def fit_options(self, render: Callable[[list[str]], str], options: list[str], reserve: int = 256) -> list[str]:
        """The longest best-first prefix of ``options`` whose rendered prompt fits ``n_ctx - reserve`` tokens.

        ``options`` must be ordered best first: the lowest-ranked are dropped.
        Returns ``[]`` when not even one option fits (the prompt without
        options is then too long; the caller decides what that means).
        """
        budget = self.n_ctx - reserve
        options = list(options)
        if self.prompt_size(render(options)) <= budget:
            return options
        low, high = 0, len(options) - 1  # the answer is the largest fitting count in [low, high]
        while low < high:
            middle = (low + high + 1) // 2
            if self.prompt_size(render(options[:middle])) <= budget:
                low = middle
            else:
                high = middle - 1
        return options[:low]

    def choice_prompt(self, prompt: str, options: list[str], k: int = 1, allow_none: bool = False) -> str:
        """The exact text ``choose`` (and, with k=1, ``score_options``) sends: the prompt, the numbered
        options and the answer instruction. Use it as ``render`` in :meth:`fit_options`."""
        listed = "\n".join(prompts.render(PROMPTS, "option", number=i, text=" ".join(str(text).split()))
                           for i, text in enumerate(options, start=1))
        instruction = (prompts.render(PROMPTS, "pick_one") if k == 1
                       else prompts.render(PROMPTS, "pick_many", k=k))
        if allow_none:
            instruction += prompts.render(PROMPTS, "none_allowed")
        return prompts.render(PROMPTS, "choose", prompt=prompt, options=listed, instruction=instruction)

    def yes_no_prompt(self, prompt: str) -> str:
        return prompts.render(PROMPTS, "yes_no", prompt=prompt)

    def json_prompt(self, prompt: str) -> str:
        return prompts.render(PROMPTS, "json", prompt=prompt)

    def _record(self, step: str, prompt: str, output: str, prompt_tokens: int, completion_tokens: int,
                started: float, cached: bool = False) -> None:
        self.calls.append(LLMCall(step=step, prompt=prompt, output=output, prompt_tokens=int(prompt_tokens),
                                  completion_tokens=int(completion_tokens),
                                  seconds=time.perf_counter() - started, cached=cached))


def clamp_k(k: int, n: int) -> int:
    return max(1, min(int(k), n))


def format_probabilities(probabilities: list[float]) -> str:
    """The ``output`` recorded for a scoring call: ``"1=0.620 2=0.310 3=0.070"``."""
    return " ".join(f"{i}={p:.3f}" for i, p in enumerate(probabilities, start=1))
