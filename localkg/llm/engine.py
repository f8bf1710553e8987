"""One loaded GGUF model, shared by every ``LLM`` in the process, and the three things we ask of it.

* ``complete``: free text through llama-cpp-python's ``create_completion``.
* ``constrained``: grammar-constrained greedy decoding with llama.cpp's own grammar sampler,
  checking the model's top 64 tokens first and widening only when none fits: the token
  llama.cpp would pick, without testing all 262k of Gemma 3's vocabulary every step.
* ``next_logprobs``: the next-token distribution after a token sequence (``scoring.py``).

Every prompt is evaluated canonically, in ``CHUNK``-token batches aligned at position 0, so
an answer never depends on the calls before it (llama.cpp's CPU kernels give batch-dependent
numbers); a lock serialises calls, since a llama context is not thread-safe. docs/llm.md
("Determinism and the KV cache") has the measurements behind both choices.
"""
from __future__ import annotations

import ctypes
import logging
import threading
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import numpy as np

from localkg.errors import ModelLoadError
from localkg.llm.scoring import log_softmax

FIRST_CANDIDATES = 64
CHUNK = 512  # a multiple of 4, so every full chunk takes the same kernels

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])
_GGML_LOG_ERROR = 4  # ggml's levels: 1 debug, 2 info, 3 warn, 4 error, 5 continuation

logger = logging.getLogger("localkg.llm.llama_cpp")


@dataclass(frozen=True)
class EngineKey:
    path: str
    n_ctx: int
    n_gpu_layers: int
    n_threads: int | None


@dataclass
class Engine:
    """A llama.cpp model and context, loaded once per :class:`EngineKey`."""

    key: EngineKey
    llama: Any
    lock: threading.RLock = field(default_factory=threading.RLock)
    _prompt_length: int = 0  # the cache holds a canonically evaluated prompt of this length

    @classmethod
    def load(cls, key: EngineKey, seed: int = 0) -> "Engine":
        from llama_cpp import Llama

        _route_llama_logs()
        try:
            llama = Llama(model_path=key.path, n_ctx=key.n_ctx, n_gpu_layers=key.n_gpu_layers,
                          n_threads=key.n_threads, n_threads_batch=key.n_threads, seed=seed,
                          n_batch=CHUNK, n_ubatch=CHUNK, logits_all=False, verbose=False)
        except ValueError as error:  # llama-cpp-python's "Failed to load model from file" or "... llama_context"
            raise ModelLoadError(f"llama.cpp could not load {key.path}: {error} (a damaged file, a model llama.cpp "
                                 f"cannot run, or a {key.n_ctx}-token context too large for memory); pass another "
                                 "GGUF with --model, or a smaller --n-ctx") from None
        return cls(key=key, llama=llama)

    # ------------------------------------------------------------------------------ tokens
    @property
    def n_ctx(self) -> int:
        return self.llama.n_ctx()

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self.llama.metadata)

    def tokenize(self, text: str) -> list[int]:
        """Tokens as ``create_completion`` makes them from a string: BOS (when the model wants
        one) and special tokens parsed, so chat-template markers become single tokens."""
        with self.lock:
            return self.llama.tokenize(text.encode("utf-8"), add_bos=self._adds_bos, special=True)

    def detokenize(self, tokens: list[int], prev_tokens: list[int] | None = None) -> str:
        return self.llama.detokenize(tokens, prev_tokens=prev_tokens).decode("utf-8", errors="replace")

    @cached_property
    def _adds_bos(self) -> bool:
        return bool(self.llama._model.add_bos_token()) and self.llama.token_bos() != -1

    @cached_property
    def bos_text(self) -> str:
        """The BOS token's text (``<bos>``), which chat templates write and we must not double."""
        bos = self.llama.token_bos()
        return self.llama._model.token_get_text(bos) if self._adds_bos else ""

    @cached_property
    def end_tokens(self) -> np.ndarray:
        """Every end-of-generation token of the vocabulary (EOS, end-of-turn, …)."""
        import llama_cpp

        vocab = self.llama._model.vocab
        return np.array([t for t in range(self.llama.n_vocab()) if llama_cpp.llama_vocab_is_eog(vocab, t)],
                        dtype=np.int32)

    # ------------------------------------------------------------------------ generation
    def complete(self, prompt_tokens: list[int], *, max_tokens: int, stop: list[str] | None,
                 seed: int) -> tuple[str, dict[str, int]]:
        """Greedy free text; returns the text and llama-cpp's ``usage``. The cache is cleared first so
        llama-cpp evaluates the prompt canonically (its own prefix reuse is not chunk-aligned)."""
        with self.lock:
            self.llama.reset()
            response = self.llama.create_completion(prompt_tokens, max_tokens=max_tokens, temperature=0.0,
                                                    seed=seed, stop=stop or [])
            self._prompt_length = len(prompt_tokens)
        return response["choices"][0]["text"], dict(response["usage"])

    def constrained(self, prompt_tokens: list[int], grammar: str, *, max_tokens: int) -> tuple[str, int]:
        """Greedy decoding under a GBNF grammar; returns the text and the number of tokens generated."""
        import llama_cpp

        prompt = list(prompt_tokens)
        with self.lock:
            sampler = llama_cpp.llama_sampler_init_grammar(self.llama._model.vocab, grammar.encode("utf-8"),
                                                           b"root")
            if not sampler:
                raise ValueError(f"llama.cpp rejected the grammar:\n{grammar}")
            try:
                generated: list[int] = []
                logits = self._evaluate(prompt, len(prompt))
                for _ in range(max_tokens):
                    token = self._pick(sampler, logits)
                    if token is None or token in self._end_set:
                        break
                    llama_cpp.llama_sampler_accept(sampler, token)
                    generated.append(token)
                    logits = self._evaluate(prompt + generated, len(prompt))
            finally:
                llama_cpp.llama_sampler_free(sampler)
        return self.detokenize(generated, prev_tokens=prompt), len(generated)

    def next_logprobs(self, tokens: list[int], prompt_length: int) -> np.ndarray:
        """Log-probabilities of every next token after ``tokens``, whose first ``prompt_length``
        tokens are the prompt (evaluated canonically) and the rest answer tokens."""
        with self.lock:
            return log_softmax(self._evaluate(tokens, prompt_length))

    # ------------------------------------------------------------------------- internals
    @cached_property
    def _end_set(self) -> frozenset[int]:
        return frozenset(int(t) for t in self.end_tokens)

    def _evaluate(self, tokens: list[int], prompt_length: int) -> np.ndarray:
        """Bring the context to ``tokens`` canonically, reusing what the cache holds of it, and return
        the logits after the last token."""
        import llama_cpp

        llama = self.llama
        if not tokens or not 0 < prompt_length <= len(tokens):
            raise ValueError("nothing to evaluate, or a prompt length outside the tokens")
        limit = min(llama.n_tokens, len(tokens) - 1)  # evaluate at least one token to get fresh logits
        differs = llama.input_ids[:limit] != np.asarray(tokens[:limit], dtype=llama.input_ids.dtype)
        keep = int(np.argmax(differs)) if differs.any() else limit
        if not (self._prompt_length == prompt_length and keep >= prompt_length):
            # another prompt: keep only whole chunks both prompts computed as whole chunks
            keep = min(keep, self._prompt_length, prompt_length) // CHUNK * CHUNK
        if keep == 0 or not llama._ctx.kv_cache_seq_rm(-1, keep, -1):
            llama.reset()
            keep = 0
        llama.n_tokens = keep
        while keep < prompt_length:
            end = min((keep // CHUNK + 1) * CHUNK, prompt_length)
            llama.eval(tokens[keep:end])
            keep = end
        for position in range(keep, len(tokens)):
            llama.eval(tokens[position:position + 1])
        self._prompt_length = prompt_length
        pointer = llama_cpp.llama_get_logits_ith(llama.ctx, -1)
        return np.ctypeslib.as_array(pointer, shape=(llama.n_vocab(),)).copy()

    def _pick(self, sampler: Any, logits: np.ndarray) -> int | None:
        """The highest-logit token the grammar accepts (None when it accepts nothing)."""
        top = np.argpartition(logits, -FIRST_CANDIDATES)[-FIRST_CANDIDATES:]
        threshold = logits[top].min()
        best = self._best_accepted(sampler, logits, np.union1d(top, self.end_tokens))
        if best is not None and logits[best] >= threshold:
            return best  # a top token fits: nothing outside the top can beat it
        if best is not None:
            # Only an end token fits among the top: the grammar may stop here. Any token that
            # beats it has a higher logit, so check exactly those.
            above = np.flatnonzero(logits > logits[best])
            better = self._best_accepted(sampler, logits, above)
            return better if better is not None else best
        return self._best_accepted(sampler, logits, np.arange(len(logits)))

    def _best_accepted(self, sampler: Any, logits: np.ndarray, ids: np.ndarray) -> int | None:
        import llama_cpp

        if len(ids) == 0:
            return None
        candidates = np.empty(len(ids), dtype=_TOKEN_DATA)
        candidates["id"] = ids
        candidates["logit"] = logits[ids]
        candidates["p"] = 0.0
        array = llama_cpp.llama_token_data_array(
            data=candidates.ctypes.data_as(llama_cpp.llama_token_data_p), size=len(ids), selected=-1,
            sorted=False)
        llama_cpp.llama_sampler_apply(sampler, ctypes.byref(array))
        kept = np.isfinite(candidates["logit"])
        if not kept.any():
            return None
        survivors = candidates[kept]
        return int(survivors["id"][np.argmax(survivors["logit"])])


@cache
def _route_llama_logs() -> Any:
    """Send llama.cpp's log to Python logging: errors as errors, the rest as debug.

    ``verbose=False`` is not enough: llama-cpp-python 0.3.x maps ggml's log levels with an old
    table (it reads ggml's WARN as ERROR), so load-time warnings reach stderr anyway. The
    callback is kept alive by the cache (ctypes would free it otherwise).
    """
    import llama_cpp

    previous = [logging.DEBUG]

    @llama_cpp.llama_log_callback
    def forward(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
        if level != 5:
            previous[0] = logging.ERROR if level == _GGML_LOG_ERROR else logging.DEBUG
        logger.log(previous[0], text.decode("utf-8", errors="replace").rstrip("\n"))

    llama_cpp.llama_log_set(forward, ctypes.c_void_p(0))
    return forward


_ENGINES: dict[EngineKey, Engine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(path: Path, n_ctx: int, n_gpu_layers: int, n_threads: int | None) -> Engine:
    """The process-wide engine for these settings, loaded on first request."""
    key = EngineKey(str(Path(path).resolve()), int(n_ctx), int(n_gpu_layers), n_threads)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = _ENGINES[key] = Engine.load(key)
        return engine
