"""``ScriptedLLM``: replays given outputs, to test how a reasoner reacts to what a model says.

It is not a stand-in for the model's behaviour (tests of the runtime use the
real GGUF); it lets a reasoner test say "if the model picks option 2, then
answers yes, the reasoner must …". Prompts, option shrinking and the call
records go through the same code as ``LLM`` (``base.py``); outputs are held to
the same contract (distinct picks, at most k, probabilities summing to 1).

A script is ``{step: [output, ...]}`` (each call of a step takes the next
output) or a callable ``script(step, prompt, options) -> output`` (options is
None for generate, yes_no and json). Outputs per helper:

* choose: a list of indices or option strings (or one of them);
* score_options: a list of floats, one per option (normalised), or an index/option string (all mass on it);
* yes_no: a bool, or a float P(yes);
* json: a dict;  generate: a str.

When a step's queue is empty: choose → [0], score_options → uniform,
yes_no → (False, 0.0), json → {}, generate → "".
"""
from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Mapping

from localkg.llm.base import LanguageModel, clamp_k, format_probabilities
from localkg.llm.calls import LLMCall

Script = Mapping[str, list[Any]] | Callable[[str, str, list[str] | None], Any]
_EMPTY = object()


class ScriptedLLM(LanguageModel):
    """Same interface as ``LLM``; answers come from ``script``. Tokens are counted as words."""

    def __init__(self, script: Script | None = None, n_ctx: int = 4096, name: str = "scripted"):
        self.n_ctx = n_ctx
        self.calls: list[LLMCall] = []
        self._name = name
        self._script: Callable[[str, str, list[str] | None], Any] | None = None
        self._queues: dict[str, deque[Any]] = {}
        if callable(script):
            self._script = script
        else:
            self._queues = {step: deque(outputs) for step, outputs in (script or {}).items()}

    @property
    def model_name(self) -> str:
        return self._name

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def remaining(self, step: str) -> int:
        """Outputs still queued for ``step`` (a test can assert the script was used up)."""
        return len(self._queues.get(step, ()))

    # ---------------------------------------------------------------------------- helpers
    def generate(self, prompt: str, *, step: str, max_tokens: int = 128, stop: list[str] | None = None) -> str:
        started = time.perf_counter()
        output = self._next(step, prompt, None)
        text = "" if output is _EMPTY else str(output)
        for marker in stop or []:
            text = text.split(marker, 1)[0]
        self._record(step, prompt, text, self.count_tokens(prompt), self.count_tokens(text), started)
        return text

    def choose(self, prompt: str, options: list[str], *, step: str, k: int = 1,
               allow_none: bool = False) -> list[int]:
        if not options:
            return []
        started = time.perf_counter()
        k = clamp_k(k, len(options))
        kept = self.fit_options(lambda some: self.choice_prompt(prompt, some, k, allow_none), options, reserve=8)
        text = self.choice_prompt(prompt, kept or options[:1], k, allow_none)
        output = self._next(step, text, kept)
        picks: list[int] = []
        for item in [0] if output is _EMPTY else (output if isinstance(output, (list, tuple)) else [output]):
            index = self._index(item, kept)
            if index not in picks:
                picks.append(index)
        if not picks and not allow_none:
            raise ValueError(f"scripted choose for step {step!r} picked nothing, but allow_none is False")
        picks = picks[:k]
        self._record(step, text, ", ".join(str(i + 1) for i in picks) or "none", self.count_tokens(text), len(picks),
                     started)
        return picks

    def score_options(self, prompt: str, options: list[str], *, step: str) -> list[float]:
        if not options:
            return []
        started = time.perf_counter()
        kept = self.fit_options(lambda some: self.choice_prompt(prompt, some), options, reserve=8) or options[:1]
        text = self.choice_prompt(prompt, kept)
        output = self._next(step, text, kept)
        if output is _EMPTY:
            weights = [1.0] * len(kept)
        elif isinstance(output, (list, tuple)):
            if len(output) != len(kept) or any(w < 0 for w in output) or sum(output) <= 0:
                raise ValueError(f"scripted score_options for step {step!r} needs {len(kept)} non-negative weights")
            weights = [float(w) for w in output]
        else:
            weights = [0.0] * len(kept)
            weights[self._index(output, kept)] = 1.0
        total = sum(weights)
        probabilities = [w / total for w in weights] + [0.0] * (len(options) - len(kept))
        self._record(step, text, format_probabilities(probabilities), self.count_tokens(text), 0, started)
        return probabilities

    def yes_no(self, prompt: str, *, step: str) -> tuple[bool, float]:
        started = time.perf_counter()
        text = self.yes_no_prompt(prompt)
        output = self._next(step, text, None)
        p_yes = 0.0 if output is _EMPTY else float(output)  # a bool is 1.0 or 0.0
        if not 0.0 <= p_yes <= 1.0:
            raise ValueError(f"scripted yes_no for step {step!r} must be a bool or a probability, not {output!r}")
        answer = p_yes >= 0.5
        self._record(step, text, f"{'yes' if answer else 'no'} p_yes={p_yes:.3f}", self.count_tokens(text), 0,
                     started)
        return answer, p_yes

    def json(self, prompt: str, schema: dict[str, Any], *, step: str, max_tokens: int = 256) -> dict[str, Any]:
        import json as jsonlib

        started = time.perf_counter()
        text = self.json_prompt(prompt)
        output = self._next(step, text, None)
        value = {} if output is _EMPTY else dict(output)
        rendered = jsonlib.dumps(value, ensure_ascii=False)
        self._record(step, text, rendered, self.count_tokens(text), self.count_tokens(rendered), started)
        return value

    # -------------------------------------------------------------------------- internals
    def _next(self, step: str, prompt: str, options: list[str] | None) -> Any:
        if self._script is not None:
            output = self._script(step, prompt, options)
            return _EMPTY if output is None else output
        queue = self._queues.get(step)
        return queue.popleft() if queue else _EMPTY

    @staticmethod
    def _index(item: Any, options: list[str]) -> int:
        if isinstance(item, str):
            if item not in options:
                raise ValueError(f"scripted option {item!r} is not among the options {options}")
            return options.index(item)
        index = int(item)
        if not 0 <= index < len(options):
            raise ValueError(f"scripted option index {index} is out of range for {len(options)} options")
        return index
