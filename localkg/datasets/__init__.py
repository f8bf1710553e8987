"""KGQA question files: readers into one :class:`Question` shape, the seeded selection of
questions, topic entity resolution and the gold relation paths datasets name. Below both
evaluation and training."""
from localkg.datasets.gold_paths import gold_relation_paths
from localkg.datasets.questions import Question, detect_format, read_questions
from localkg.datasets.selection import TrainingSet, select_questions, select_training_questions
from localkg.datasets.topics import resolve_topics

__all__ = ["Question", "TrainingSet", "detect_format", "gold_relation_paths", "read_questions", "resolve_topics",
           "select_questions", "select_training_questions"]
