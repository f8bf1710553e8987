"""Where in a question an entity may be named.

Three kinds of spans, from most to least telling:

* **marked**: the question marks its topic, ``what movies did [Ginger Rogers] act in``
  (MetaQA's convention); then only the marks are used;
* **quoted** (``"..."``) and **capitalised** runs (``Ginger Rogers``, ``The Lord of the Rings``,
  small connector words allowed inside);
* every **n-gram** of up to :data:`MAX_NGRAM` words that is not only function words, for
  lower-case questions (``who directed the departed``).

Each span carries a prior ``weight`` in [0, 1] that the linker multiplies into the
score of what the span matches, so a long capitalised name beats a stray word that
happens to be a tag or a one-word film title.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

MAX_NGRAM = 8
MARKED = "marked"
QUOTED = "quoted"
CAPITALISED = "capitalised"
NGRAM = "ngram"

_MARK = re.compile(r"\[([^\[\]]+)\]")
_QUOTE = re.compile(r"\"([^\"]+)\"|“([^”]+)”|(?<!\w)'([^']+)'(?!\w)")
_TOKEN = re.compile(r"[^\W_]+(?:[-'’.&][^\W_]+)*\.*|[^\w\s]", re.UNICODE)

QUESTION_WORDS = frozenset(
    "what which who whom whose when where why how is are was were do does did can could "
    "would should will shall may might name list tell give show".split())
FUNCTION_WORDS = QUESTION_WORDS | frozenset(
    "a an the of in on at to for from by with about as and or but not no nor "
    "this that these those it its he she they them his her their i me my you your we our us "
    "be been being has have had there here than then so if also any some all "
    "movie movies film films".split())
CONNECTORS = frozenset("of the and de la le du von van der den da di del y & in on for a".split())


@dataclass(frozen=True)
class Mention:
    """A span of the question that may name an entity, with a prior weight and how it was found."""

    text: str
    how: str
    weight: float
    start: int = 0
    end: int = 0


def marked_mentions(question: str) -> list[Mention]:
    """The bracketed spans of a question, e.g. ``[Ginger Rogers]``."""
    return [Mention(m.group(1).strip(), MARKED, 1.0, m.start(1), m.end(1))
            for m in _MARK.finditer(question) if m.group(1).strip()]


def strip_marks(question: str) -> str:
    """The question without MetaQA-style brackets: ``[Ginger Rogers]`` becomes ``Ginger Rogers``."""
    return _MARK.sub(lambda m: m.group(1), question)


def detect_mentions(question: str, max_ngram: int = MAX_NGRAM) -> list[Mention]:
    """Candidate spans, best evidence first: marks if any, else quoted, capitalised and n-gram spans.

    The same text found two ways keeps its best weight.
    """
    marked = marked_mentions(question)
    if marked:
        return marked
    tokens = [(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(question)]
    found: dict[str, Mention] = {}

    def keep(mention: Mention) -> None:
        # "Don E." and "What If..." keep their dots; "United States." may be a sentence end
        for text in dict.fromkeys((mention.text, mention.text.rstrip("."))):
            key = text.casefold()
            if key and (key not in found or found[key].weight < mention.weight):
                found[key] = Mention(text, mention.how, mention.weight, mention.start, mention.end)

    for match in _QUOTE.finditer(question):
        text = next(g for g in match.groups() if g is not None).strip()
        keep(Mention(text, QUOTED, 0.95, match.start(), match.end()))
    for start, end in _capitalised_runs(tokens):
        text = question[tokens[start][1]:tokens[end - 1][2]]
        keep(Mention(text, CAPITALISED, 0.9, tokens[start][1], tokens[end - 1][2]))
    words = [i for i, (text, _, _) in enumerate(tokens) if _is_word(text)]
    for a in range(len(tokens)):
        for b in range(a + 1, min(len(tokens), a + max_ngram) + 1):
            span = tokens[a:b]
            if not _is_word(span[0][0]) or not _is_word(span[-1][0]):
                continue
            lowered = [t[0].casefold().rstrip(".") for t in span if _is_word(t[0])]
            if all(w in FUNCTION_WORDS for w in lowered):
                continue
            text = question[span[0][1]:span[-1][2]]
            keep(Mention(text, NGRAM, _ngram_weight(lowered, len(words)), span[0][1], span[-1][2]))
    return sorted(found.values(), key=lambda m: (-m.weight, m.start))


def _is_word(token: str) -> bool:
    return bool(token) and (token[0].isalnum())


def _capitalised_runs(tokens: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    """Maximal runs of capitalised words (or numbers), small connector words allowed inside."""
    runs, start = [], None
    for i, (text, _, _) in enumerate(tokens):
        capital = text[:1].isupper() or (text[:1].isdigit() and start is not None)
        if capital and not (i == 0 and text.casefold() in QUESTION_WORDS):
            if start is None:
                start = i
            continue
        if start is not None and text.casefold() in CONNECTORS and _capital_follows(tokens, i + 1):
            continue
        if start is not None:
            runs.append((start, i))
            start = None
    if start is not None:
        runs.append((start, len(tokens)))
    return runs


def _capital_follows(tokens: list[tuple[str, int, int]], i: int) -> bool:
    """Whether the connector words from ``i`` on lead to a capitalised word ("of the Rings")."""
    while i < len(tokens) and tokens[i][0].casefold() in CONNECTORS:
        i += 1
    return i < len(tokens) and tokens[i][0][:1].isupper()


def _ngram_weight(words: list[str], question_words: int) -> float:
    """Prior of an uncapitalised span: longer spans and fewer function words are likelier names."""
    content = sum(1 for w in words if w not in FUNCTION_WORDS)
    coverage = len(words) / max(1, question_words)
    return round(min(0.85, 0.45 + 0.08 * content + 0.03 * (len(words) - content) + 0.1 * coverage), 4)
