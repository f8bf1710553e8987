"""Human labels for relation ids, used when a source gives none.

Reasoners show relations to a language model and rank them by embedding
similarity to a question, so ``people.person.place_of_birth`` must read as
"place of birth".
"""
from __future__ import annotations

import re

_URI_PREFIX = re.compile(r"^<?https?://[^>]*?[/#](?=[^/#>]+>?$)")


def relation_label(relation_id: str) -> str:
    """A readable label for a relation id from any of the common KG spellings.

    >>> relation_label("people.person.place_of_birth")
    'place of birth'
    >>> relation_label("/film/film/genre")
    'genre'
    >>> relation_label("/award/award_nominee/award_nominations./award/award_nomination/award")
    'award nominations / award'
    >>> relation_label("<http://rdf.freebase.com/ns/people.person.spouse_s>")
    'spouse s'
    >>> relation_label("__people__ethnicity__languages_spoken")
    'languages spoken'
    >>> relation_label("directed_by")
    'directed by'
    """
    text = _URI_PREFIX.sub("", relation_id.strip()).strip("<>")
    parts = [part for part in text.split("./") if part] if "./" in text else [text]
    return " / ".join(_last_segment(part) for part in parts)


def _last_segment(text: str) -> str:
    if "__" in text:
        text = text.rsplit("__", 1)[-1] or text
    text = text.rstrip("/").rsplit("/", 1)[-1]
    if "." in text and " " not in text:
        text = text.rsplit(".", 1)[-1]
    return " ".join(text.replace("_", " ").split()) or text
