"""KGQA question files: readers into one :class:`Question` shape, the seeded selection of
questions, and topic entity resolution. Below both evaluation and training."""
from localkg.datasets.questions import Question, detect_format, read_questions
from localkg.datasets.selection import TrainingSet, select_questions, select_training_questions
from localkg.datasets.topics import resolve_topics

__all__ = ["Question", "TrainingSet", "detect_format", "read_questions", "resolve_topics", "select_questions",
           "select_training_questions"]
