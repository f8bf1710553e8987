"""The one metric every reasoner is measured with (defined in docs/metrics.md).

Papers in this area each score differently (ToG's "exact match" is a two-way
substring test, some skip empty predictions), so numbers are not comparable
across them. Here there is one strict definition: normalised string equality
against each gold answer's aliases (``localkg.text.normalise_answer``, the form
the trained scorers' labels use too), Hits@1, Hit and set precision/recall/F1,
with an empty prediction counted as wrong, never skipped. ToG's loose match
is computed too, but only ever reported under its own name, ``em_loose``.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from localkg.text import gold_keys, normalise_answer


def loose_key(text: str) -> str:
    """ToG's comparison form: lower-cased with all whitespace (and ``_``) removed."""
    return "".join(text.replace("_", " ").casefold().split())


@dataclass(frozen=True)
class Prediction:
    """What the metric sees of a predicted answer: its node id (may be empty) and its name."""

    id: str
    name: str


@dataclass(frozen=True)
class QuestionScore:
    """The metric for one question."""

    hits_at_1: float
    hit: float
    precision: float
    recall: float
    f1: float
    em_loose: float

    def to_json(self) -> dict[str, float]:
        return {"hits@1": self.hits_at_1, "hit": self.hit, "precision": self.precision,
                "recall": self.recall, "f1": self.f1, "em_loose": self.em_loose}


def score_question(predictions: Sequence[Prediction], gold: Sequence[Sequence[str]]) -> QuestionScore:
    """Score ranked ``predictions`` against ``gold`` (each gold answer with its aliases).

    A prediction matches a gold answer when its normalised name or normalised id equals one
    of the answer's normalised aliases. Predictions are deduplicated (same normalised name and
    id) before precision is taken. An empty prediction list scores 0 everywhere.
    """
    answers = gold_keys(gold)
    distinct = list(dict.fromkeys((normalise_answer(p.name), normalise_answer(p.id)) for p in predictions))
    distinct = [keys for keys in distinct if any(keys)]
    if not distinct or not answers:
        return QuestionScore(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)

    def matches(keys: tuple[str, str], gold_answer: frozenset[str]) -> bool:
        return any(k and k in gold_answer for k in keys)

    correct = [any(matches(keys, g) for g in answers) for keys in distinct]
    found = [any(matches(keys, g) for keys in distinct) for g in answers]
    precision = sum(correct) / len(distinct)
    recall = sum(found) / len(answers)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return QuestionScore(
        hits_at_1=float(correct[0]),
        hit=float(any(correct)),
        precision=precision,
        recall=recall,
        f1=f1,
        em_loose=float(loose_match(predictions, gold)),
    )


def loose_match(predictions: Iterable[Prediction], gold: Sequence[Sequence[str]]) -> bool:
    """ToG-style "exact match": some prediction and some gold alias, compared without case or
    spaces, are equal or one contains the other. Lenient by design; reported only as
    ``em_loose``. Empty strings never match (an empty string is inside every string)."""
    aliases = [k for answer in gold for k in (loose_key(a) for a in answer) if k]
    for prediction in predictions:
        key = loose_key(prediction.name)
        if key and any(key == a or key in a or a in key for a in aliases):
            return True
    return False


METRIC_KEYS = ("hits@1", "hit", "precision", "recall", "f1", "em_loose")


def aggregate(scores: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Mean of each metric over questions, plus ``n``. Every question counts, answered or not."""
    rows = list(scores)
    summary: dict[str, float] = {"n": len(rows)}
    for key in METRIC_KEYS:
        summary[key] = sum(row[key] for row in rows) / len(rows) if rows else 0.0
    return summary


def distribution(values: Sequence[float]) -> dict[str, float]:
    """Mean, median and 95th percentile (nearest rank) of a cost."""
    if not values:
        return {"mean": 0.0, "p50": 0.0, "p95": 0.0, "total": 0.0}
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, -(-95 * len(ordered) // 100) - 1))
    return {"mean": statistics.fmean(ordered), "p50": statistics.median(ordered), "p95": ordered[rank],
            "total": float(sum(ordered))}
