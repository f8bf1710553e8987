"""Probabilities of answer labels from the model's next-token distributions.

``score_options`` and ``yes_no`` do not generate: they read how likely the
model finds each label (``" 3"``, ``" yes"``) as the continuation of the
prompt. A label may span several tokens ("12" can be "1" then "2"), so the
labels' token sequences form a trie; the model is evaluated once at the
shared prompt and once at every trie node that has children, and a label's
log-probability is the sum along its path. When one label is a prefix of
another ("1" and "12"), the shorter one gets the mass of *not* continuing with
any of the longer ones' next tokens.

This needs only the last position's logits (no ``logits_all``, which would
keep n_ctx × vocabulary floats), and each evaluation after the first reuses
the prompt in the KV cache, so scoring n options costs one prompt evaluation
plus a handful of one-token steps.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

NextLogprobs = Callable[[list[int], int], np.ndarray]


def label_logprobs(next_logprobs: NextLogprobs, sequences: Sequence[list[int]]) -> list[float]:
    """Log-probability of each full token sequence's tail after the sequences' common prefix.

    ``sequences[i]`` is the tokenised prompt followed by label i; ``next_logprobs(tokens, n)``
    returns the log-softmax of the next-token logits after ``tokens``, of which the first ``n``
    are the shared prompt.
    """
    if not sequences:
        return []
    prefix = _common_prefix_length(sequences)
    prefix = min(prefix, min(len(s) for s in sequences) - 1)  # every label keeps at least one token
    if prefix < 1:
        raise ValueError("labels must follow a non-empty shared prompt")
    result = [0.0] * len(sequences)
    _walk(lambda tokens: next_logprobs(tokens, prefix), list(sequences[0][:prefix]),
          [(i, list(s[prefix:])) for i, s in enumerate(sequences)], 0.0, result)
    return result


def _walk(next_logprobs: Callable[[list[int]], np.ndarray], context: list[int], tails: list[tuple[int, list[int]]],
          base: float, result: list[float]) -> None:
    ended = [i for i, tail in tails if not tail]
    going = [(i, tail) for i, tail in tails if tail]
    if not going:
        for i in ended:
            result[i] = base
        return
    logprobs = next_logprobs(context)
    children: dict[int, list[tuple[int, list[int]]]] = {}
    for i, tail in going:
        children.setdefault(tail[0], []).append((i, tail[1:]))
    if ended:
        continuing = float(np.exp(logprobs[list(children)]).sum())
        stop = math.log(max(1.0 - continuing, 1e-12))
        for i in ended:
            result[i] = base + stop
    for token, group in children.items():
        _walk(next_logprobs, context + [token], group, base + float(logprobs[token]), result)


def _common_prefix_length(sequences: Sequence[list[int]]) -> int:
    first = sequences[0]
    length = len(first)
    for other in sequences[1:]:
        n = 0
        for a, b in zip(first, other):
            if a != b:
                break
            n += 1
        length = min(length, n)
    return length


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - float(np.max(logits))
    return shifted - math.log(float(np.exp(shifted).sum()))


def normalise(logprobs: Sequence[float]) -> list[float]:
    """Probabilities proportional to ``exp(logprobs)``, summing to 1."""
    if not logprobs:
        return []
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]
