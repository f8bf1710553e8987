"""How relation ids and questions read to an embedder: words a relation id stands for, and a
question without its topic entities' names. Below every package that ranks text by similarity."""
from __future__ import annotations

import re
from typing import Iterable


def readable_relation(relation: str) -> str:
    """Relation id → words for the embedder: ``film.film.directed_by`` → ``film directed by``,
    ``__film__cinematographer__film`` → ``film cinematographer film``, ``in_language`` →
    ``in language`` (a dotted Freebase id keeps its last two parts: type and property)."""
    if "." in relation and " " not in relation:
        relation = ".".join(relation.split(".")[-2:])
    return " ".join(re.split(r"[._/:#]+|__", relation)).replace("_", " ").strip() or relation


def without_mentions(question: str, names: Iterable[str]) -> str:
    """The question with the topic entities' names taken out: every candidate shares them, so for
    similarity ranking they only add noise (measured in docs/reasoners.md, ``rank_moves``)."""
    text = question
    for name in names:
        if name:
            text = re.sub(re.escape(name), " ", text, flags=re.I)
    return " ".join(text.split()) or question
