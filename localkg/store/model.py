"""Plain value classes the store returns.

They are frozen dataclasses so results can be hashed, compared in tests and
serialised with ``dataclasses.asdict``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

ENTITY = "entity"
CVT = "cvt"
LITERAL = "literal"
NODE_KINDS = (ENTITY, CVT, LITERAL)

OUT = "out"
IN = "in"
BOTH = "both"
DIRECTIONS = (OUT, IN, BOTH)

#: One hop of a relation path: (relation id, direction walked: out = head→tail, in = tail→head).
Hop = tuple[str, str]
#: A relation path: its hops from the topic outwards. The one type every reasoner, the path
#: scorer and the datasets' gold paths use.
RelationPath = tuple[Hop, ...]


@dataclass(frozen=True)
class Node:
    """A node of the graph: a named entity, an unnamed mediator (CVT) or a literal."""

    id: str
    name: str
    kind: str = ENTITY

    @property
    def display(self) -> str:
        """The name, or a readable stand-in for unnamed nodes."""
        if self.name:
            return self.name
        return "(mediator)" if self.kind == CVT else self.id


@dataclass(frozen=True)
class NodeRecord:
    """Everything the store holds about one node."""

    id: str
    name: str
    kind: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    types: tuple[str, ...] = ()
    value: str = ""
    datatype: str = ""
    lang: str = ""


@dataclass(frozen=True)
class RelationCount:
    """A relation incident to a node, the direction it is seen from the node, and how many facts."""

    relation: str
    label: str
    direction: str
    count: int


@dataclass(frozen=True)
class Triple:
    """A fact with the names of its ends, in the graph's own orientation (head -> tail)."""

    head: Node
    relation: str
    tail: Node

    def __str__(self) -> str:
        return f"{self.head.display} —{self.relation}→ {self.tail.display}"


@dataclass(frozen=True)
class Step:
    """One traversed edge of a path: the fact, and whether it was walked head→tail."""

    triple: Triple
    forward: bool = True

    @property
    def source(self) -> Node:
        """The node this step leaves: the head when walked forward, else the tail."""
        return self.triple.head if self.forward else self.triple.tail

    @property
    def target(self) -> Node:
        """The node this step reaches."""
        return self.triple.tail if self.forward else self.triple.head

    @property
    def relation_text(self) -> str:
        """``rel`` walked forward, ``rel⁻¹`` walked backward."""
        return self.triple.relation if self.forward else f"{self.triple.relation}⁻¹"


@dataclass(frozen=True)
class Path:
    """A walk through the graph as a sequence of steps."""

    steps: tuple[Step, ...] = field(default_factory=tuple)

    @property
    def start(self) -> Node:
        """The node the walk starts from."""
        return self.steps[0].source

    @property
    def end(self) -> Node:
        """The node the walk ends at (the answer, in a reasoner's evidence)."""
        return self.steps[-1].target

    @property
    def relations(self) -> tuple[str, ...]:
        """Each step's relation, ``⁻¹`` marking one walked backward (``Step.relation_text``)."""
        return tuple(step.relation_text for step in self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __str__(self) -> str:
        if not self.steps:
            return ""
        parts = [self.start.display]
        for step in self.steps:
            parts.append(f"—{step.relation_text}→ {step.target.display}")
        return " ".join(parts)


@dataclass(frozen=True)
class Stats:
    """Counts of what the store holds."""

    entities: int
    cvts: int
    literals: int
    facts: int
    relations: int
    labels: int

    @property
    def nodes(self) -> int:
        """Entities, CVTs and literals together."""
        return self.entities + self.cvts + self.literals
