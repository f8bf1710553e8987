"""Which questions a run asks: a seeded sample for evaluation, and the training questions that
leave that sample out, so a model is never trained on the questions it is evaluated on."""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from localkg.datasets.questions import Question, read_questions


def select_questions(questions: Sequence[Question], sample: int | None, seed: int,
                     limit: int | None) -> list[Question]:
    """A seeded sample of ``sample`` questions in the order drawn, then the first ``limit``."""
    chosen = list(questions)
    if sample is not None and sample < len(chosen):
        picked = random.Random(seed).sample(range(len(chosen)), sample)
        chosen = [chosen[i] for i in picked]
    if limit is not None:
        chosen = chosen[:limit]
    return chosen


@dataclass
class TrainingSet:
    """Which questions of which files to train on; ``exclude_sample`` leaves out exactly the
    questions ``localkg eval --sample N --seed S`` would ask, so evaluation stays unseen."""

    files: list[str]
    format: str = "auto"
    sample: int | None = None
    exclude_sample: int | None = None
    exclude_seed: int = 0

    def describe(self, counts: list[int]) -> str:
        """What a checkpoint records it was trained on, given how many questions each file gave."""
        parts = [f"{n} of {Path(f).parent.name}/{Path(f).name}" for f, n in zip(self.files, counts)]
        excluded = (f", excluding the eval sample --sample {self.exclude_sample} --seed {self.exclude_seed}"
                    if self.exclude_sample else "")
        return "trained on " + ", ".join(parts) + excluded


def select_training_questions(selection: TrainingSet, seed: int) -> tuple[list[Any], list[int]]:
    """The questions of every file after the exclusion and the per-file sample, and their counts."""
    chosen, counts = [], []
    for path in selection.files:
        questions = read_questions(path, selection.format)
        if selection.exclude_sample:
            held_out = {q.id for q in select_questions(questions, selection.exclude_sample, selection.exclude_seed,
                                                       None)}
            questions = [q for q in questions if q.id not in held_out]
        questions = select_questions(questions, selection.sample, seed, None)
        chosen.extend(questions)
        counts.append(len(questions))
    return chosen, counts
