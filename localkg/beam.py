"""The one beam search over relation paths, shared by the reasoners' path ranking and the trained
path scorer.

Both grow paths from a topic hop by hop, score every one-hop extension of the kept paths
together (one encoder or model batch per depth), and keep the ``width`` best that still reach
something. What an extension is, how it is scored and how it is walked differ between them
(an embedding of relation labels over sampled entity walks, a trained model over executed
relation sets), so those come in as functions; the search itself knows no graph.
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence, TypeVar

Kept = TypeVar("Kept")
Candidate = TypeVar("Candidate")


def beam_search(start: Kept, extend: Callable[[list[Kept]], list[Candidate]],
                score: Callable[[list[Candidate]], Sequence[float]], advance: Callable[[Candidate, float], Kept | None],
                *, depth: int, width: int) -> Iterator[tuple[list[Candidate], Sequence[float], list[Kept]]]:
    """Per depth up to ``depth``: every extension of the kept paths, their scores, and the paths kept.

    ``extend`` proposes the one-hop extensions of the kept paths (``[start]`` at first), ``score``
    scores them in one call, and ``advance`` walks an extension, given its score, into a path kept for the next
    depth, or gives ``None`` for one that reaches nothing. Extensions are advanced best first
    (ties in proposal order) until ``width`` are kept, so only those are walked. The search stops
    early when nothing is proposed or nothing kept.
    """
    layer = [start]
    for _depth in range(int(depth)):
        candidates = extend(layer)
        if not candidates:
            return
        scores = score(candidates)
        kept: list[Kept] = []
        for index in sorted(range(len(candidates)), key=lambda i: -float(scores[i])):
            if len(kept) == width:
                break
            walked = advance(candidates[index], float(scores[index]))
            if walked is not None:
                kept.append(walked)
        yield candidates, scores, kept
        if not kept:
            return
        layer = kept
