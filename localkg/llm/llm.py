"""``LLM``: a local GGUF model behind the helpers reasoners share, every call recorded.

Structured steps cannot produce unparseable output: ``choose`` and ``json``
decode under a GBNF grammar whose language is bounded (see ``grammars.py``),
``score_options`` and ``yes_no`` read label probabilities instead of
generating (see ``scoring.py``). Decoding is greedy (temperature 0) with a
fixed seed, so the same call gives the same answer.

Context: every call needs its prompt plus its output budget to fit ``n_ctx``.
``choose`` and ``score_options`` shrink their option list themselves
(options are taken as ranked best first, the lowest-ranked are dropped, and
the indices returned still refer to the caller's list). ``generate``,
``yes_no`` and ``json`` raise ``PromptTooLongError`` instead of cutting text
silently; callers shrink what they put in the prompt with ``fit_options``.
"""
from __future__ import annotations

import json as jsonlib
import os
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Callable

from localkg.errors import PromptTooLongError, UnsupportedSchemaError
from localkg.llm.base import LanguageModel, clamp_k, format_probabilities
from localkg.llm.cache import ResponseCache, call_key, model_identity
from localkg.llm.calls import LLMCall
from localkg.llm.engine import Engine, shared_engine
from localkg.llm.framing import PROMPT_STYLE_ENV, Framing, choose_framing
from localkg.llm.grammars import bounded_json_grammar, choice_grammar, choice_max_bytes, parse_choice
from localkg.llm.model_files import resolve_model_path
from localkg.llm.scoring import label_logprobs, normalise

DEFAULT_N_CTX = 4096

YES = ("yes", "Yes")
NO = ("no", "No")


class LLM(LanguageModel):
    """A GGUF model through llama-cpp-python. Loading is lazy and shared: every ``LLM`` with the same
    model file, ``n_ctx``, GPU layers and threads uses one loaded model (``calls`` stay per object).
    With a ``cache`` (``cache.py``), a call asked before is answered from it."""

    def __init__(self, model_path: str | os.PathLike[str] | None = None, n_ctx: int = DEFAULT_N_CTX,
                 n_gpu_layers: int = 0, n_threads: int | None = None, seed: int = 0,
                 prompt_style: str | None = None, cache: ResponseCache | None = None):
        self._requested_path = model_path
        self.n_ctx = int(n_ctx)
        self.n_gpu_layers = int(n_gpu_layers)
        self.n_threads = n_threads
        self.seed = int(seed)
        self._requested_style = prompt_style
        self.cache = cache
        self.calls: list[LLMCall] = []

    # ---------------------------------------------------------------------------- loading
    @cached_property
    def model_path(self) -> Path:
        """The GGUF file (assembling the bundled model on first use)."""
        return resolve_model_path(self._requested_path)

    @property
    def model_name(self) -> str:
        """The model file's name: what evaluation runs record as the model."""
        return self.model_path.name

    @cached_property
    def engine(self) -> Engine:
        return shared_engine(self.model_path, self.n_ctx, self.n_gpu_layers, self.n_threads)

    @cached_property
    def framing(self) -> Framing:
        engine = self.engine
        eos = engine.llama.token_eos()
        return choose_framing(engine.metadata, self._requested_style, engine.bos_text,
                              engine.llama._model.token_get_text(eos) if eos != -1 else "")

    @property
    def prompt_style(self) -> str:
        """``completion`` (base models) or ``chat`` (the GGUF's own template); see ``framing.py``."""
        return self.framing.style

    # ----------------------------------------------------------------------------- tokens
    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as a prompt (with BOS): what llama.cpp reports as ``prompt_tokens``."""
        return len(self.engine.tokenize(text))

    def prompt_size(self, text: str) -> int:
        """Tokens of ``text`` framed in the model's prompt style: what it takes of the context window."""
        return len(self.engine.tokenize(self.framing.frame(text)))

    def _prompt_tokens(self, step: str, text: str, output_budget: int) -> list[int]:
        tokens = self.engine.tokenize(self.framing.frame(text))
        if len(tokens) + output_budget > self.n_ctx:
            raise PromptTooLongError(
                f"step {step!r}: the prompt has {len(tokens)} tokens and its answer may need {output_budget}, "
                f"but the context holds {self.n_ctx}; shrink the prompt (LLM.fit_options) or raise --n-ctx")
        return tokens

    # ---------------------------------------------------------------------------- helpers
    def generate(self, prompt: str, *, step: str, max_tokens: int = 128, stop: list[str] | None = None) -> str:
        """Free text, at most ``max_tokens`` tokens, cut at the first ``stop`` string."""
        started = time.perf_counter()
        tokens = self._prompt_tokens(step, prompt, max_tokens)

        def run() -> dict[str, Any]:
            text, usage = self.engine.complete(tokens, max_tokens=max_tokens, stop=stop, seed=self.seed)
            return _answer(text, text, usage["prompt_tokens"], usage["completion_tokens"])

        return self._ask(step, "generate", prompt, {"max_tokens": max_tokens, "stop": stop}, started, run)

    def choose(self, prompt: str, options: list[str], *, step: str, k: int = 1,
               allow_none: bool = False) -> list[int]:
        """Up to ``k`` distinct option indices, best first as the model ranks them; ``[]`` only when
        ``allow_none`` and the model answers "none". Options must be ranked best first: when the
        prompt is too long the lowest-ranked are dropped before asking."""
        if not options:
            return []
        started = time.perf_counter()
        k = clamp_k(k, len(options))
        budget = choice_max_bytes(len(options), k, allow_none)
        kept = self._fit_or_raise(step, lambda some: self.choice_prompt(prompt, some, k, allow_none), options, budget)
        k = clamp_k(k, len(kept))
        text = self.choice_prompt(prompt, kept, k, allow_none)
        tokens = self._prompt_tokens(step, text, budget)

        def run() -> dict[str, Any]:
            output, generated = self.engine.constrained(tokens, choice_grammar(len(kept), k, allow_none),
                                                        max_tokens=budget)
            return _answer(output, output, len(tokens), generated)

        output = self._ask(step, "choose", text, {"options": len(kept), "k": k, "allow_none": allow_none},
                           started, run)
        return parse_choice(output, len(kept), k)

    def score_options(self, prompt: str, options: list[str], *, step: str) -> list[float]:
        """A probability per option (summing to 1): the model's next-token probabilities of the
        option numbers after the ``choose`` prompt. Dropped options (prompt too long) get 0."""
        if not options:
            return []
        started = time.perf_counter()
        budget = choice_max_bytes(len(options))
        kept = self._fit_or_raise(step, lambda some: self.choice_prompt(prompt, some), options, budget)
        text = self.choice_prompt(prompt, kept)
        tokens = self._prompt_tokens(step, text, budget)

        def run() -> dict[str, Any]:
            labels = [(f" {number}", f"{number}") for number in range(1, len(kept) + 1)]
            probabilities = self._label_probabilities(text, labels)
            return _answer(probabilities, format_probabilities(probabilities), len(tokens), 0)

        probabilities = self._ask(step, "score_options", text, {"options": len(kept)}, started, run)
        return probabilities + [0.0] * (len(options) - len(kept))

    def yes_no(self, prompt: str, *, step: str) -> tuple[bool, float]:
        """The answer and P(yes), from the probabilities of "yes" and "no" as the next word."""
        started = time.perf_counter()
        text = self.yes_no_prompt(prompt)
        tokens = self._prompt_tokens(step, text, 1)

        def run() -> dict[str, Any]:
            p_yes, _ = self._label_probabilities(text, [_spellings(YES), _spellings(NO)])
            return _answer(p_yes, f"{'yes' if p_yes >= 0.5 else 'no'} p_yes={p_yes:.3f}", len(tokens), 0)

        p_yes = self._ask(step, "yes_no", text, {}, started, run)
        return p_yes >= 0.5, p_yes

    def json(self, prompt: str, schema: dict[str, Any], *, step: str, max_tokens: int = 256) -> dict[str, Any]:
        """An object following ``schema`` (always parses). Strings and arrays without bounds get
        bounds sized so the longest possible object fits ``max_tokens``; see ``grammars.py``."""
        if schema.get("type") != "object":
            raise UnsupportedSchemaError("json() needs a schema of type 'object' at the top")
        started = time.perf_counter()
        bounded = bounded_json_grammar(schema, max_tokens)
        text = self.json_prompt(prompt)
        tokens = self._prompt_tokens(step, text, bounded.max_tokens)

        def run() -> dict[str, Any]:
            output, generated = self.engine.constrained(tokens, bounded.grammar, max_tokens=bounded.max_tokens)
            return _answer(output, output, len(tokens), generated)

        return jsonlib.loads(self._ask(step, "json", text, {"grammar": bounded.grammar}, started, run))

    # -------------------------------------------------------------------------- internals
    @cached_property
    def _answers_depend_on(self) -> tuple[list[Any], dict[str, Any]]:
        """The model file's identity and the settings every answer depends on, for cache keys;
        read once, as the framing is."""
        style = self._requested_style or os.environ.get(PROMPT_STYLE_ENV)  # None: auto, set by the model file
        return model_identity(self.model_path), {"n_gpu_layers": self.n_gpu_layers, "seed": self.seed,
                                                 "prompt_style": style}

    def _ask(self, step: str, kind: str, text: str, parameters: dict[str, Any], started: float,
             run: Callable[[], dict[str, Any]]) -> Any:
        """``run()``'s answer, or the cached answer of the same call; recorded either way.
        The prompt tokens were counted (and checked against ``n_ctx``) before: a hit is no
        licence for a prompt that no longer fits."""
        key = None
        if self.cache is not None:
            model, settings = self._answers_depend_on
            key = call_key(model, settings, kind, text, parameters)
            answer = self.cache.get(key)
            if answer is not None:
                self._record(step, text, answer["output"], answer["prompt_tokens"], answer["completion_tokens"],
                             started, cached=True)
                return answer["value"]
        answer = run()
        if key is not None:
            self.cache.put(key, answer)
        self._record(step, text, answer["output"], answer["prompt_tokens"], answer["completion_tokens"], started)
        return answer["value"]

    def _fit_or_raise(self, step: str, render: Any, options: list[str], budget: int) -> list[str]:
        kept = self.fit_options(render, options, reserve=budget)
        if not kept:
            raise PromptTooLongError(f"step {step!r}: the prompt is too long for {self.n_ctx} tokens "
                                     f"even with a single option; shorten it or raise --n-ctx")
        return kept

    def _label_probabilities(self, text: str, classes: list[tuple[str, ...]]) -> list[float]:
        """P(class) for classes of label spellings, renormalised over the classes."""
        framed = self.framing.frame(text)
        sequences: list[list[int]] = []
        owners: list[int] = []
        for owner, spellings in enumerate(classes):
            seen: set[tuple[int, ...]] = set()
            for spelling in spellings:
                sequence = self.engine.tokenize(framed + spelling)
                if tuple(sequence) not in seen:
                    seen.add(tuple(sequence))
                    sequences.append(sequence)
                    owners.append(owner)
        logprobs = label_logprobs(self.engine.next_logprobs, sequences)
        mass = [0.0] * len(classes)
        for owner, probability in zip(owners, normalise(logprobs)):
            mass[owner] += probability
        total = sum(mass)
        return [m / total for m in mass]


def _answer(value: Any, output: str, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """What a call returns and records, as the cache stores it."""
    return {"value": value, "output": output, "prompt_tokens": int(prompt_tokens),
            "completion_tokens": int(completion_tokens)}


def _spellings(words: tuple[str, ...]) -> tuple[str, ...]:
    """A word as the next token may spell it: with or without the leading space."""
    return tuple(f"{space}{word}" for word in words for space in (" ", ""))
