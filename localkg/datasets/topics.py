"""A question's gold topic entities as store ids: what evaluation and training start from."""
from __future__ import annotations

from localkg.datasets.questions import Question
from localkg.store.kg import KG


def resolve_topics(kg: KG, question: Question) -> list[str]:
    """Store ids of the dataset's gold topic entities: each by id when the store has it, else
    the first node named like it (the dataset's name for it, then the reference itself)."""
    names = question.meta.get("topic_names") or []
    resolved: list[str] = []
    for position, reference in enumerate(question.topic_entities or []):
        if kg.has_node(reference):
            resolved.append(reference)
            continue
        for label in (names[position] if position < len(names) else None, reference):
            hits = kg.find(label) if label else []
            if hits:
                resolved.append(hits[0].id)
                break
    return list(dict.fromkeys(resolved))
