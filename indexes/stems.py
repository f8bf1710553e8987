"""Content-word stems, for the lexical half of relevance scoring.

A deliberately small suffix stripper (no dictionary, no dependency): it only has
to make "director", "directed", "directs" and "directed_by" meet at "direct", and
"released" meet "release year" at "releas". Relation ids are split on the
punctuation they use (``film.film.directed_by``, ``/film/film/genre``).
"""
from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+")
_SUFFIXES = ("ations", "ation", "ings", "ing", "ions", "ion", "ers", "ors", "er", "or", "ies", "ed", "en", "es", "s")
FUNCTION_WORDS = frozenset(
    "a an the of in on at to for from by with about as and or but not no is are was were be been being "
    "do does did has have had what which who whom whose when where why how this that these those it its "
    "he she they his her their there than then so if also any some all can could would should will "
    "name list tell give show film films movie movies type object common topic".split())


def stem(word: str) -> str:
    """``directed`` → ``direct``, ``actors`` → ``act``, ``starred`` → ``star``, ``release`` → ``releas``."""
    word = word.casefold()
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    if word.endswith("e") and len(word) > 4:
        word = word[:-1]
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


def content_words(text: str) -> list[str]:
    """The words of ``text`` that are not function words, casefolded, in order."""
    return [word for word in (w.casefold() for w in _WORD.findall(text)) if word not in FUNCTION_WORDS]


def content_stems(text: str) -> frozenset[str]:
    """The stems of the words of ``text`` that are not function words."""
    return frozenset(stem(word) for word in content_words(text))
