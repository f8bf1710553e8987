"""What graph reasoners do the same way: list the moves out of an entity, follow them, put them into words.

A *move* is one relation in one direction, or, when it ends in unnamed mediator (CVT) nodes, the
relation into the mediator and one out of it (``person —spouse_s→ (marriage) —spouse→ person``),
so mediators are hopped through and never shown as answers. Both directions are offered.

* :func:`relation_filter` — relations never followed (ToG's ``abandon_rels``);
* :func:`candidate_moves`, :func:`follow` — the moves out of an entity, and the paths they take;
* :func:`rank_moves`, :func:`chain_words` — moves ranked by their relation chain's relevance;
* :func:`move_option`, :func:`triple_words`, :func:`path_words` — what the embedder and prompts see;
* :func:`ask_choice`, :func:`ask_scores`, :func:`ask_yes_no`, :func:`model_choice`,
  :func:`model_json` — model calls that fall back to the graph side's order when a prompt cannot
  fit the context (a model that cannot load stops the question);
  :func:`string_list`, :func:`split_answers`, :func:`bulleted` read and write the model's text.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

from localkg.errors import PromptTooLongError
from localkg.reasoners.base import skipped_call
from localkg.store.kg import KG
from localkg.store.model import CVT, IN, OUT, Node, Path, Step, Triple
from localkg.text import readable_relation

#: ToG's ``abandon_rels``: relations that carry schema or bookkeeping, never an answer.
DEFAULT_RELATION_FILTER = "type.object.type,type.object.name,common.*,freebase.*,*sameAs*"


def relation_filter(patterns: str | Iterable[str]) -> Callable[[str], bool]:
    """A predicate that keeps a relation unless it matches one of ``patterns``.

    Patterns are shell-style (``common.*``, ``*sameAs*``), given as a list or as one
    comma-separated string (so ``--set relation_filter=...`` can replace them).
    """
    if isinstance(patterns, str):
        patterns = patterns.split(",")
    compiled = [re.compile(fnmatch.translate(p.strip())) for p in patterns if p.strip()]
    return lambda relation: not any(pattern.match(relation) for pattern in compiled)


@dataclass(frozen=True)
class Move:
    """One relation (or two through a mediator) to follow from an entity.

    ``steps`` are (relation id, direction) pairs, ``out`` meaning along the fact;
    ``labels`` are the relations' labels; ``count`` how many facts the first step has.
    """

    steps: tuple[tuple[str, str], ...]
    labels: tuple[str, ...]
    count: int = 0

    @property
    def words(self) -> str:
        """The relation words, for the embedder: ``starred actors``, ``spouse s spouse``."""
        return " ".join(readable_relation(label) for label in self.labels)

    def reverse(self) -> "Move":
        """The same move walked back (ToG never offers the reverse of the relation just taken)."""
        return Move(tuple((relation, IN if direction == OUT else OUT) for relation, direction in reversed(self.steps)),
                    tuple(reversed(self.labels)))

    def __str__(self) -> str:
        return " → ".join(relation if direction == OUT else f"{relation}⁻¹" for relation, direction in self.steps)


def node_of(kg: KG, entity: str) -> Node:
    """The store's node for ``entity`` (raises ``UnknownEntityError`` when absent)."""
    record = kg.node(entity)
    return Node(record.id, record.name or record.value, record.kind)


def candidate_moves(kg: KG, entity: str, *, keep: Callable[[str], bool] = lambda relation: True,
                    exclude: Iterable[Move] = (), hop_cvt: bool = True, cvt_sample: int = 3) -> list[Move]:
    """The moves out of ``entity`` in both directions, most frequent first.

    Reads the per-node relation summary (a hub answers as fast as a leaf). A relation that
    leads to mediators is replaced by the moves through them: the relations of up to
    ``cvt_sample`` of its mediators, except the way back. ``keep`` drops filtered relations;
    ``exclude`` drops given moves (the reverse of the move that led here).
    """
    excluded = {move.steps for move in exclude}
    moves: dict[tuple[tuple[str, str], ...], Move] = {}
    for count in kg.relations(entity):
        if not keep(count.relation):
            continue
        first = (count.relation, count.direction)
        mediators = [node for node in kg.neighbors(entity, count.relation, count.direction, limit=cvt_sample)
                     if node.kind == CVT] if hop_cvt else []
        if not mediators:
            moves.setdefault((first,), Move((first,), (count.label,), count.count))
            continue
        back = (count.relation, IN if count.direction == OUT else OUT)
        for mediator in mediators:
            for onward in kg.relations(mediator.id):
                second = (onward.relation, onward.direction)
                if second != back and keep(onward.relation):
                    moves.setdefault((first, second), Move((first, second), (count.label, onward.label), count.count))
    return [move for steps, move in moves.items() if steps not in excluded]


def follow(kg: KG, source: Node, move: Move, limit: int | None = None) -> list[Path]:
    """The paths ``move`` takes from ``source``: one step, or two through a mediator.

    At most ``limit`` paths; literal ends are kept (dates and numbers can be answers);
    a two-step move never ends where it started.
    """
    paths = [Path(())]
    for relation, direction in move.steps:
        extended: list[Path] = []
        for path in paths:
            here = path.end if path.steps else source
            for node in kg.neighbors(here.id, relation, direction, limit=limit):
                triple = Triple(here, relation, node) if direction == OUT else Triple(node, relation, here)
                extended.append(Path(path.steps + (Step(triple, direction == OUT),)))
                if limit is not None and len(extended) >= limit:
                    break
            if limit is not None and len(extended) >= limit:
                break
        paths = extended
    return [path for path in paths if path.steps and (len(path) == 1 or path.end.id != source.id)]


def chain_words(moves: Sequence[Move]) -> str:
    """The relation words of a chain of moves. A move that walks the previous one back reads
    ``same ...``: ``directed by same directed by`` matches "films that share the director of X"
    (0.81 against 0.64 for ``directed by``) but not "who directed X" (0.69 against 0.82), where
    the bare repetition ``directed by directed by`` would beat the single hop for both."""
    words: list[str] = []
    for position, move in enumerate(moves):
        walks_back = position > 0 and move.steps == moves[position - 1].reverse().steps
        words.append(f"same {move.words}" if walks_back else move.words)
    return " ".join(words)


def rank_moves(scorer: Any, query: str, moves: Sequence[Move], taken: Sequence[Move] = ()) -> list[tuple[Move, float]]:
    """``moves`` with their relevance to ``query``, best first (ties keep the given order).

    ``taken`` are the moves that led here: a move is scored as the whole relation chain
    (``directed by in language`` matches "languages of the films directed by X" where
    ``in language`` alone matches any language question).
    """
    if not moves:
        return []
    scores = scorer.score(query, [chain_words((*taken, move)) for move in moves])
    order = sorted(range(len(moves)), key=lambda i: -float(scores[i]))
    return [(moves[i], float(scores[i])) for i in order]


def move_option(source: Node, move: Move) -> str:
    """A move as a model sees it, in graph orientation so the relation reads the way its facts do:
    ``Top Hat → directed by → ?``, ``? → starred actors → Ginger Rogers``,
    ``Barack Obama → spouse s → (mediator); (mediator) → spouse → ?``."""
    names = [source.display] + ["(mediator)"] * (len(move.steps) - 1) + ["?"]
    clauses = []
    for position, ((_relation, direction), label) in enumerate(zip(move.steps, move.labels)):
        here, there, words = names[position], names[position + 1], readable_relation(label)
        clauses.append(f"{here} → {words} → {there}" if direction == OUT else f"{there} → {words} → {here}")
    return "; ".join(clauses)


def triple_words(triple: Triple) -> str:
    """A fact as words: ``Top Hat directed by Mark Sandrich``."""
    return f"{triple.head.display} {readable_relation(triple.relation)} {triple.tail.display}"


def path_words(path: Path) -> str:
    """A path's facts as words, one clause per fact: ``Top Hat starred actors Ginger Rogers; ...``."""
    return "; ".join(triple_words(step.triple) for step in path.steps)


def ask_choice(llm: Any, prompt: str, options: list[str], *, step: str, k: int = 1, allow_none: bool = False,
               notes: list[str]) -> list[int] | None:
    """The model's picks among ``options`` (ranked best first by the graph side), or None when the
    call was skipped (a prompt that cannot fit): the caller then keeps the graph side's order."""
    try:
        return llm.choose(prompt, options, step=step, k=k, allow_none=allow_none)
    except PromptTooLongError as error:
        notes.append(skipped_call(error, "kept the graph-side order"))
        return None


def ask_scores(llm: Any, prompt: str, options: list[str], *, step: str, notes: list[str]) -> list[float] | None:
    """The model's probabilities for ``options``, or None when the call was skipped (a prompt that cannot fit)."""
    try:
        return llm.score_options(prompt, options, step=step)
    except PromptTooLongError as error:
        notes.append(skipped_call(error, "kept the graph-side scores"))
        return None


def ask_yes_no(llm: Any, prompt: str, *, step: str, notes: list[str]) -> tuple[bool, float]:
    """``llm.yes_no`` that reads a skipped call (a prompt that cannot fit) as "no" and says so."""
    try:
        return llm.yes_no(prompt, step=step)
    except PromptTooLongError as error:
        notes.append(skipped_call(error, "read as no"))
        return False, 0.0


#: Who orders a reasoner's final answers (fog, dtkg): ``graph``, the graph-side scores, or
#: ``model``, the LLM's pick as the papers have it. With the bundled 270M model the pick was
#: wrong about twice as often as the graph's order (docs/reasoners.md has the measurements).
AnswerSource = Literal["graph", "model"]


def split_answers(text: str, limit: int = 10) -> list[str]:
    """Names from a free-text answer line: split on ``|`` (the prompts ask for it), trimmed of
    quotes and a trailing full stop, deduplicated, at most ``limit``."""
    names = []
    for part in text.split("\n", 1)[0].split("|"):
        name = part.strip().strip("\"'`").rstrip(".").strip()
        if name and name not in names:
            names.append(name)
    return names[:limit]


def model_choice(llm: Any, prompt: str, options: list[str], *, step: str, k: int,
                 notes: list[str]) -> list[int] | None:
    """The model's picks among ``options`` (ranked best first by the graph side), or None when its
    output is unusable: it picked nothing, or the call was skipped (a prompt that cannot fit). The caller
    then keeps the graph-side order; a reasoner never stops on the model's output.

    Unlike :func:`ask_choice` the model may answer "none": these methods ask it to choose as
    few as possible, and "none" is then a usable way of saying the embedding order should stand."""
    try:
        picks = llm.choose(prompt, options, step=step, k=k, allow_none=True)
    except PromptTooLongError as error:
        notes.append(skipped_call(error, "kept the embedding order"))
        return None
    if not picks:
        notes.append(f"{step}: the model picked nothing; kept the embedding order")
        return None
    return picks


def model_json(llm: Any, prompt: str, schema: dict[str, Any], *, step: str, max_tokens: int,
               notes: list[str]) -> dict[str, Any]:
    """``llm.json`` that reads a skipped call as ``{}`` (every caller has a fallback for missing keys)."""
    try:
        value = llm.json(prompt, schema, step=step, max_tokens=max_tokens)
    except PromptTooLongError as error:
        notes.append(skipped_call(error))
        return {}
    return value if isinstance(value, dict) else {}


def string_list(value: Any, limit: int) -> list[str]:
    """Non-empty stripped strings from a model's JSON list (anything else is dropped)."""
    if not isinstance(value, list):
        return []
    items = [" ".join(item.split()) for item in value if isinstance(item, str)]
    return [item for item in dict.fromkeys(items) if item][:limit]


def bulleted(lines: Sequence[str], empty: str = "(none yet)") -> str:
    return "\n".join(f"- {line}" for line in lines) if lines else f"- {empty}"
