"""How text is read across the layers: the one form answers are compared in (the metric, the
trained scorers' labels), the words a relation id stands for, and a question without its topic
entities' names. Below every package that compares answers or ranks text by similarity."""
from __future__ import annotations

import functools
import re
import unicodedata
from typing import Iterable, Sequence

_ARTICLES = re.compile(r"\b(a|an|the)\b")
#: The ASCII characters Unicode calls punctuation (category P*), for ``str.translate`` to delete:
#: most answers are ASCII, and a per-character category lookup was most of a supervision's time.
_ASCII_PUNCTUATION = {code: None for code in range(128) if unicodedata.category(chr(code)).startswith("P")}


@functools.lru_cache(maxsize=1 << 16)  # supervision compares the same nodes' names over and over
def normalise_answer(text: str) -> str:
    """The form answers are compared in (docs/metrics.md), by the metric and by the labels the
    trained scorers learn from, so that training counts as right what the metric does.

    NFKC, ``_`` read as a space (PathQuestion and WC2014 write names as ``united_kingdom``),
    lower-cased, punctuation deleted, the articles *a*, *an*, *the* dropped as words,
    whitespace collapsed. When dropping articles would leave nothing (an answer that is
    just "The"), they are kept.

    >>> normalise_answer("  The_United  Kingdom. ")
    'united kingdom'
    >>> normalise_answer("Suddenly, Last Summer")
    'suddenly last summer'
    """
    text = without_punctuation(unicodedata.normalize("NFKC", text).replace("_", " ").casefold())
    without_articles = " ".join(_ARTICLES.sub(" ", text).split())
    return without_articles or " ".join(text.split())


def without_punctuation(text: str) -> str:
    """``text`` without the characters Unicode calls punctuation (category P*); an ASCII text by
    one table lookup per character.

    >>> without_punctuation("Rock & Roll, $5!")
    'Rock  Roll $5'
    """
    if text.isascii():
        return text.translate(_ASCII_PUNCTUATION)
    return "".join(ch for ch in text if not unicodedata.category(ch).startswith("P"))


def gold_keys(answers: Sequence[Sequence[str]]) -> list[frozenset[str]]:
    """Each gold answer as the normalised strings that count for it (its name, aliases, id). An
    empty string never matches, so it is dropped, and an answer left with none is left out.

    >>> gold_keys([["The Birds", "birds"], ["?"]])
    [frozenset({'birds'})]
    """
    keys = [frozenset(key for key in map(normalise_answer, aliases) if key) for aliases in answers]
    return [answer for answer in keys if answer]


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
