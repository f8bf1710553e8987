"""The gold relation paths a dataset names for its questions: what FoG's triple labels are walked
along, and what the path scorer's supervision is checked against."""
from __future__ import annotations

from localkg.datasets.metaqa import metaqa_relation_path
from localkg.datasets.questions import Question
from localkg.store.model import OUT, Hop


def gold_relation_paths(question: Question) -> list[list[Hop]] | None:
    """The dataset's own gold path from each of ``question``'s topic entities, in their order, as
    (relation, direction walked) steps; None when the dataset names none.

    PathQuestion and WC2014 write a path from its topic, head to tail, so each step is walked
    out; a conjunctive WC2014 question has a one-hop path per topic, any other question one path,
    from its first topic. MetaQA names no path, but its question type implies one
    (:func:`localkg.datasets.metaqa.metaqa_relation_path`).
    """
    relations = question.meta.get("relation_path")
    if relations:
        if question.qtype == "conjunction":
            return [[(relation, OUT)] for relation in relations]
        return [[(relation, OUT) for relation in relations]]
    if question.qtype and "_to_" in question.qtype:
        return [metaqa_relation_path(question.qtype)]
    return None
