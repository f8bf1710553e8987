"""Question–answer pairs made from a store alone, for training the path scorer without QA pairs.

Topics are drawn per relation and direction, so every relation is asked about in both
directions however rare it is. From each topic a path of every length up to ``max_hops`` is
walked (its first hop the drawn relation), and a path becomes a question when its answer set is
as small as real questions' are; hubs and truncated frontiers are left out. Where a node is
reached from two named topics by different relations, their intersection is a two-topic
(conjunctive) question. The text is said with a few generic phrasings built only from what the
store holds (relation labels, entity names); nothing is written for one dataset, and no
question file is read. A question's answers are what its words say ("the others with the same
director as X" are not X), and each is labelled as a user's pair is, walking on from the topic
and not, so the store's own questions decide how its walks go when no pairs do.
"""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from tqdm import tqdm

from localkg.datasets.questions import Question
from localkg.path_scorer.supervision import Supervision, SupervisionLimits, answer_f1, label_question, labelled_paths
from localkg.path_scorer.walk import Hop, PathWalker, RelationPath
from localkg.store.kg import KG
from localkg.store.model import ENTITY, IN, OUT, Node
from localkg.text import gold_keys, readable_relation

SOURCE = "synthetic"
_TRIES = 4  # next hops tried per step of a walk
_MAX_REPEATS = 2


@dataclass(frozen=True)
class SyntheticLimits:
    """How many questions are drawn, and what a question may look like."""

    max_hops: int = 3
    topics_per_relation: int = 24
    max_answers: int = 20
    conjunctive_share: float = 0.15
    facts_read_per_relation: int = 2_000
    max_paths: int = 300  # candidates per topic, as the supervision of a user's question enumerates them
    max_walked: int = 200  # a walk stops at a frontier larger than this (it would only reach hubs' worth)
    seed: int = 0


# A path is said as a noun phrase grown hop by hop from the topic's name; a question asks for it.
# Every label gets the generic phrasings; a label shaped like a verb phrase ("directed by",
# "has genre", "in language") also gets the ones English grammar gives that shape.
_FORWARD = ("the {label} of {inner}", "{inner}'s {label}")
_BACKWARD = ("what has {inner} as {label}", "the things whose {label} is {inner}", "that which has {label} {inner}")
_SHAPED = (  # (label prefix, label suffix, forward phrasings, backward phrasings); {rest}: the label without them
    ("", " by", ("the one {inner} was {label}", "whoever {inner} was {label}"), ("the things {label} {inner}",)),
    ("has ", "", ("the {rest} {inner} has", "the {rest} that {inner} has"), ("the things that have {rest} {inner}",)),
    ("in ", "", ("the {rest} {inner} is in",), ("the things {label} {inner}",)),
)
_SHARED = {OUT: ("the others with the same {label} as {inner}", "the things that share {inner}'s {label}"),
           IN: ("the other {label} of the things {inner} is {label} of",
                "the others that are {label} of something {inner} is {label} of")}
_ASK = ("what is {phrase}?", "which are {phrase}?", "{phrase}?", "name {phrase}.", "tell me {phrase}")
_ASK_ENTITY = ("who is {phrase}?", "who are {phrase}?", "what are {phrase}?")  # answers that are things or people
_ASK_DATE = ("when is {phrase}?", "when was {phrase}?")  # answers that are all years or dates
_DATE = re.compile(r"^-?\d{1,4}(-\d\d(-\d\d)?)?(T.*)?$")
_CONJUNCTIVE = ("what has {a} and {b}?", "which is {a} and also {b}?")
_CONDITION_FORWARD = "{label} {name}"  # the answer's own fact, said as a condition on the answer
_CONDITION_BACKWARD = "is the {label} of {name}"


def phrasings(label: str, direction: str) -> tuple[str, ...]:
    """The noun-phrase templates (``{inner}``: the phrase so far) for one hop of ``label``."""
    found = _FORWARD if direction == OUT else _BACKWARD
    for prefix, suffix, forward, backward in _SHAPED:
        rest = label[len(prefix):len(label) - len(suffix)]
        if label.startswith(prefix) and label.endswith(suffix) and rest.strip():
            found += tuple(t.replace("{rest}", rest) for t in (forward if direction == OUT else backward))
    return found


def ask_templates(answers: Sequence[str]) -> tuple[str, ...]:
    """How a question may ask for ``answers`` (their names): the generic frames, and "when" for
    dates and years, "who"/"what are" for anything else."""
    dated = bool(answers) and all(_DATE.match(name.strip()) for name in answers)
    return _ASK + (_ASK_DATE if dated else _ASK_ENTITY)


class Verbaliser:
    """Phrases a path from a topic as a question, with the store's relation labels."""

    def __init__(self, kg: KG, rng: random.Random):
        self.labels = {relation: readable_relation(label) for relation, label, _d, _n in kg.relation_catalogue()}
        self.rng = rng

    def chain(self, topic_name: str, path: RelationPath, answers: Sequence[str] = ()) -> str:
        phrase, hop = topic_name, 0
        while hop < len(path):
            relation, direction = path[hop]
            label = self.labels.get(relation, readable_relation(relation))
            if hop + 1 < len(path) and path[hop + 1] == (relation, IN if direction == OUT else OUT):
                # a relation walked there and back: the others that share its value ("the same director as X")
                phrase = self.rng.choice(_SHARED[direction]).format(label=label, inner=phrase)
                hop += 2
                continue
            phrase = self.rng.choice(phrasings(label, direction)).format(label=label, inner=phrase)
            hop += 1
        return self.rng.choice(ask_templates(answers)).format(phrase=phrase)

    def conjunction(self, first: tuple[str, Hop], second: tuple[str, Hop]) -> str:
        conditions = []
        for name, (relation, direction) in (first, second):
            label = self.labels.get(relation, readable_relation(relation))
            # the answer is the head of an "in" hop walked from the topic: it has the relation
            conditions.append((_CONDITION_FORWARD if direction == IN else _CONDITION_BACKWARD)
                              .format(label=label, name=name))
        return self.rng.choice(_CONJUNCTIVE).format(a=conditions[0], b=conditions[1])


def synthetic_walks(kg: KG, limits: SyntheticLimits = SyntheticLimits(), progress: bool = False,
                    walker: PathWalker | None = None) -> list[tuple[Question, Supervision | None, Supervision | None]]:
    """Questions with answers drawn from the store ``kg`` (see the module docstring), each with its
    candidate paths labelled twice, as a user's pairs are: walking on from the topic after the first
    hop and not (``supervision.label_question``; the trainer keeps the walk the questions favour). A
    label is the F1 of what a path reaches, so ties (another path to the same answers) are
    positives too. A question's answers are what its words say: "the others with the same director
    as X" are not X, so what is asked of them is not asked of X either (a chain whose first hop is
    walked there and back does not go on from the topic)."""
    rng = random.Random(limits.seed)
    walker = walker or PathWalker(kg)
    verbaliser = Verbaliser(kg, rng)
    made: list[tuple[Question, Supervision | None, Supervision | None]] = []
    seeds = [(relation, direction) for relation, _label, _d, facts in kg.relation_catalogue() if facts
             for direction in (OUT, IN)]
    for relation, direction in tqdm(seeds, desc="questions from the store", unit="relation", disable=not progress):
        for topic in _topics(kg, relation, direction, limits, rng):
            walker.forget_paths()
            made.extend(_chains(walker, verbaliser, topic, (relation, direction), limits, rng))
            if rng.random() < limits.conjunctive_share:
                pair = _conjunctive(walker, verbaliser, topic, (relation, direction), limits, rng)
                if pair is not None:
                    made.append(pair)
    for number, (question, _through, _avoiding) in enumerate(made):
        question.id = f"{SOURCE}-{number}"
    return made


def _topics(kg: KG, relation: str, direction: str, limits: SyntheticLimits, rng: random.Random) -> list[Node]:
    """Up to ``topics_per_relation`` named entities from which ``relation`` is walked ``direction``."""
    end = "a" if direction == OUT else "b"
    rows = kg.execute(
        f"MATCH (a:Node)-[f:Fact]->(b:Node) WHERE f.rel = $rel AND {end}.kind = $entity AND {end}.name <> '' "
        f"AND NOT {end}.hub RETURN DISTINCT {end}.id, {end}.name LIMIT $limit",
        {"rel": relation, "entity": ENTITY, "limit": limits.facts_read_per_relation}).get_all()
    rows.sort()  # the store returns them in no fixed order: sorted, the seed alone decides the draw
    rng.shuffle(rows)
    return [Node(node_id, name, ENTITY) for node_id, name in rows[:limits.topics_per_relation]]


def _chains(walker: PathWalker, verbaliser: Verbaliser, topic: Node, first: Hop, limits: SyntheticLimits,
            rng: random.Random) -> Iterator[tuple[Question, Supervision | None, Supervision | None]]:
    """One question per path length from ``topic``: a random walk whose first hop is ``first``,
    each next hop drawn from the ones that lead on (a few tries for an answer set of the right
    size). Each question's candidates are every path from the topic up to ``max_hops``, as for a
    user's question, so that a longer or shorter path than asked is a negative."""
    chosen: list[RelationPath] = []
    path: RelationPath = (first,)
    while True:
        if _answerable(walker, topic.id, path, limits):
            chosen.append(path)
        if len(path) == limits.max_hops or len(walker.frontier(topic.id, path).nodes) > limits.max_walked:
            break
        hops = [hop for hop in walker.extensions(topic.id, path) if _repeats(path, hop) < _MAX_REPEATS]
        if not hops:
            break
        tries = rng.sample(hops, min(_TRIES, len(hops)))
        path = next((path + (hop,) for hop in tries if _answerable(walker, topic.id, path + (hop,), limits)),
                    path + (tries[0],))
    if not chosen:
        return
    candidates = list(dict.fromkeys(walker.enumerate(topic.id, limits.max_hops, limits.max_paths) + chosen))
    reached = {through: [walker.ends(topic.id, candidate, through_topic=through).values() for candidate in candidates]
               for through in (True, False)}
    for path in chosen:
        ends = list(walker.ends(topic.id, path, through_topic=not _shares_with_topic(path)).values())
        question = _question(verbaliser.chain(topic.name, path, [node.name for node in ends]), [topic], ends, path)
        gold = gold_keys(question.answers)
        through, avoiding = (labelled_paths([(topic.id, candidates)],
                                            [[answer_f1(found, gold) for found in reached[walk]]])
                             for walk in (True, False))
        if through is not None or avoiding is not None:
            yield question, through, avoiding


def _shares_with_topic(path: RelationPath) -> bool:
    """Whether the chain starts with a relation walked there and back: "the others with the same
    L as X", said so by :data:`_SHARED`, which leaves X out."""
    return len(path) > 1 and path[1] == (path[0][0], IN if path[0][1] == OUT else OUT)


def _repeats(path: RelationPath, hop: Hop) -> int:
    """How often ``hop``'s relation is already in ``path``: a chain says each relation at most twice
    ("films that share a director with X"), never back and forth again."""
    return sum(relation == hop[0] for relation, _direction in path)


def _answerable(walker: PathWalker, topic: str, path: RelationPath, limits: SyntheticLimits) -> bool:
    through = not _shares_with_topic(path)
    frontier = walker.frontier(topic, path, through)
    ends = walker.ends(topic, path, through_topic=through)
    return not frontier.truncated and 0 < len(ends) <= limits.max_answers and topic not in ends


def _conjunctive(walker: PathWalker, verbaliser: Verbaliser, topic: Node, first: Hop, limits: SyntheticLimits,
                 rng: random.Random) -> tuple[Question, Supervision | None, Supervision | None] | None:
    """A question whose answers ``first`` reaches from ``topic`` and another hop from a second
    named topic reaches too, fewer than either reaches alone."""
    own = walker.ends(topic.id, (first,))
    if len(own) < 2:
        return None
    for answer in rng.sample(sorted(own), min(_TRIES, len(own))):  # sorted: the same draw every run
        second_hops = sorted(hop for hop in walker.extensions(answer, ()) if hop[0] != first[0])
        rng.shuffle(second_hops)
        for relation, direction in second_hops[:_TRIES]:
            others = sorted((node for node in walker.ends(answer, ((relation, direction),)).values()
                             if node.kind == ENTITY and node.name and node.id != topic.id), key=lambda node: node.id)
            if not others:
                continue
            second = rng.choice(others)
            back = (relation, IN if direction == OUT else OUT)  # walked from the second topic to the answer
            theirs = walker.ends(second.id, (back,))
            shared = {node_id: node for node_id, node in own.items() if node_id in theirs}
            if 0 < len(shared) < min(len(own), len(theirs)) and len(shared) <= limits.max_answers:
                text = verbaliser.conjunction((topic.name, first), (second.name, back))
                question = _question(text, [topic, second], shared.values(), (first, back))
                # candidates of every length, as for a user's question: a longer leg is a negative
                through, avoiding = (label_question(walker, [topic.id, second.id], question.answers,
                                                    SupervisionLimits(max_hops=limits.max_hops,
                                                                      max_paths=limits.max_paths), walk)
                                     for walk in (True, False))
                return (question, through, avoiding) if through is not None or avoiding is not None else None
    return None


def _question(text: str, topics: Sequence[Node], answers, path: RelationPath) -> Question:
    return Question(id="", text=text, answers=[[node.display, node.id] for node in answers],
                    topic_entities=[topic.id for topic in topics], hop=len(path) if len(topics) == 1 else 1,
                    qtype=SOURCE, meta={"topic_names": [topic.name for topic in topics],
                                        "path": [list(hop) for hop in path]})


def write_questions(path: str | Path, questions: Sequence[Question]) -> None:
    """The questions as JSONL that ``localkg train paths --questions`` reads back (edit them freely)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for question in questions:
            handle.write(json.dumps({"id": question.id, "question": question.text, "answers": question.answers,
                                     "topic_entities": question.topic_entities, "hop": question.hop,
                                     "qtype": question.qtype}, ensure_ascii=False) + "\n")
