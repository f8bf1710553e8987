"""Relation paths from a topic entity, walked set by set.

A relation path is a sequence of (relation, direction) hops. It is executed as
sets: the frontier after each hop is every node the hop reaches from the whole
previous frontier. Expanding a prefix fetches every fact out of and into its
frontier with one query per direction (``KG.reach``) and files the rows under
each hop, so all the extensions of a prefix cost two round trips. When a
frontier has more facts than ``expand_rows`` (a hub), the next hops come from
the relation summaries of a few frontier nodes instead, each walked with its
own capped query. Every frontier is cached, so a question's candidates share
their work, and each node remembers one node it was reached from, which gives
every end node a real evidence path. Walks may or may not go on from the topic
after their first hop ("the films of X's writer": with X or without it), which
a store's training questions decide.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

from localkg.store.kg import KG
from localkg.store.model import IN, OUT, Hop, Node, Path, RelationPath, Step, Triple


def path_text(path: RelationPath) -> str:
    """``starred_actors⁻¹ / directed_by`` (the notation of ``Step.relation_text``)."""
    return " / ".join(relation if direction == OUT else f"{relation}⁻¹" for relation, direction in path)


@dataclass
class Frontier:
    """The nodes a path prefix reaches, each with one node of the previous frontier it came from."""

    nodes: dict[str, Node]
    parents: dict[str, str]
    truncated: bool = False


class PathWalker:
    """Executes relation paths from topic entities of one store, caching every prefix.

    ``max_frontier`` caps the nodes kept per hop (a truncated frontier says so);
    ``expand_rows`` caps the facts one expansion reads; ``relation_sample`` is how many
    frontier nodes' relation summaries propose the next hops beyond that cap; ``keep`` drops
    relations no path may use (schema and bookkeeping relations).
    """

    def __init__(self, kg: KG, max_frontier: int = 5000, expand_rows: int = 50_000, relation_sample: int = 3,
                 keep: Callable[[str], bool] = lambda relation: True, cached_facts: int = 2_000_000):
        self.kg = kg
        self.max_frontier = int(max_frontier)
        self.expand_rows = int(expand_rows)
        self.relation_sample = int(relation_sample)
        self.keep = keep
        self.cached_facts = int(cached_facts)
        self._frontiers: dict[tuple[str, RelationPath], Frontier] = {}
        self._extensions: dict[tuple[str, RelationPath], list[Hop]] = {}
        self._avoiding: dict[tuple[str, RelationPath], Frontier] = {}
        self._facts: dict[str, list[tuple[Hop, Node]]] = {}
        self._facts_held = 0

    def forget_paths(self) -> None:
        """Drop the executed paths (kept per topic until now) but keep the facts read: a walker
        that serves many questions reads each node's facts once."""
        self._frontiers.clear()
        self._extensions.clear()
        self._avoiding.clear()

    def frontier(self, topic: str, path: RelationPath, through_topic: bool = True) -> Frontier:
        """What ``path`` reaches from ``topic`` (the empty path reaches the topic itself; a hop
        the prefix's frontier does not have reaches nothing). Without ``through_topic`` no walk
        goes on from the topic after its first hop: "the films of X's writer" then reaches the
        writer's other films, and the third hop starts from them only."""
        if not through_topic and len(path) > 1:
            return self._frontier_avoiding(topic, path)
        key = (topic, path)
        if key not in self._frontiers:
            if path:
                self.extensions(topic, path[:-1])
                self._frontiers.setdefault(key, Frontier({}, {}))
            else:
                record = self.kg.node(topic)
                self._frontiers[key] = Frontier({topic: Node(record.id, record.name or record.value, record.kind)}, {})
        return self._frontiers[key]

    def _frontier_avoiding(self, topic: str, path: RelationPath) -> Frontier:
        """``path``'s frontier when walks may not go on from the topic: the same frontier unless
        the prefix's frontier differs or holds the topic; else every hop from the prefix's other
        nodes is walked at once (one grouping of their cached facts serves all its extensions)."""
        key = (topic, path)
        if key not in self._avoiding:
            prefix = path[:-1]
            before = self.frontier(topic, prefix, through_topic=False)
            if topic not in before.nodes and before is self.frontier(topic, prefix):
                return self.frontier(topic, path)
            sources = [node for node in before.nodes if node != topic]
            for hop, reached in _by_hop(sources, self._read_facts(sources)).items():
                self._avoiding[(topic, prefix + (hop,))] = self._frontier_of(reached, before.truncated)
            self._avoiding.setdefault(key, Frontier({}, {}))
        return self._avoiding[key]

    def ends(self, topic: str, path: RelationPath, keep_topic: bool = False,
             through_topic: bool = True) -> dict[str, Node]:
        """The end nodes of ``path``; the topic comes first with ``keep_topic``, else it is left
        out unless it is all the path reaches.

        Datasets differ: "films that share a director with X" reaches X too, and MetaQA's gold
        answers never hold the topic; PathQuestion's "the mother of X's son" is X. Which one a
        store's questions mean is learned in training (``Supervision.topic_is_answer``).
        """
        nodes = self.frontier(topic, path, through_topic).nodes
        if keep_topic and topic in nodes:
            return {topic: nodes[topic], **nodes}
        others = {node_id: node for node_id, node in nodes.items() if node_id != topic}
        return others or dict(nodes)

    def extensions(self, topic: str, path: RelationPath) -> list[Hop]:
        """The hops that lead on from ``path``'s frontier, most facts first (ties by name, so the order
        does not depend on the order the store returns rows in); executes them all."""
        if (topic, path) not in self._extensions:
            self.expand(topic, [path])
        return self._extensions[(topic, path)]

    def expand(self, topic: str, prefixes: list[RelationPath]) -> list[RelationPath]:
        """Every one-hop extension of every prefix (all executed), in order.

        The facts of the prefixes' frontier nodes not read before are read together, one query
        per direction (prefixes of one question share most of their nodes, and questions share
        nodes too). A read of more than ``expand_rows`` facts is replaced, per direction, by the
        sampled relations of :meth:`_sampled_rows`.
        """
        todo = [prefix for prefix in dict.fromkeys(prefixes) if (topic, prefix) not in self._extensions]
        sources = list(dict.fromkeys(node for prefix in todo for node in self.frontier(topic, prefix).nodes))
        facts = self._read_facts(sources)
        for prefix in todo:
            before = self.frontier(topic, prefix)
            grouped = _by_hop(before.nodes, facts)
            for hop, reached in grouped.items():
                self._frontiers[(topic, prefix + (hop,))] = self._frontier_of(reached, before.truncated)
            self._extensions[(topic, prefix)] = sorted(grouped, key=lambda hop: (-len(grouped[hop]), hop))
        return [prefix + (hop,) for prefix in prefixes for hop in self._extensions[(topic, prefix)]]

    def _read_facts(self, sources: list[str]) -> dict[str, list[tuple[Hop, Node]]]:
        """Each source's kept facts as (hop, node reached), from the cache or the store."""
        missing = [source for source in sources if source not in self._facts]
        read: dict[str, list[tuple[Hop, Node]]] = {source: [] for source in missing}
        complete = True
        for direction in (OUT, IN):
            rows = self.kg.reach(missing, None, direction, limit=self.expand_rows + 1) if missing else []
            if len(rows) > self.expand_rows:
                rows, complete = self._sampled_rows(missing, direction), False
            for source, relation, node in rows:
                if self.keep(relation):
                    read[source].append(((relation, direction), node))
        if complete:
            if self._facts_held > self.cached_facts:
                self._facts.clear()
                self._facts_held = 0
            self._facts.update(read)
            self._facts_held += sum(len(rows) for rows in read.values())
        return {**{source: self._facts[source] for source in sources if source in self._facts}, **read}

    def _sampled_rows(self, sources: list[str], direction: str) -> list[tuple[str, str, Node]]:
        """Too many facts for one read: the relations of a few sources, each walked with a cap."""
        relations = dict.fromkeys(count.relation for source in sources[:self.relation_sample]
                                  for count in self.kg.relations(source, direction))
        rows = []
        for relation in relations:
            rows.extend(self.kg.reach(sources, relation, direction, limit=self.max_frontier))
        return rows

    def _frontier_of(self, rows: list[tuple[str, Node]], truncated: bool) -> Frontier:
        nodes: dict[str, Node] = {}
        parents: dict[str, str] = {}
        for source, node in rows:
            if node.id not in nodes:
                if len(nodes) >= self.max_frontier:
                    truncated = True
                    break
                nodes[node.id] = node
                parents[node.id] = source
        return Frontier(nodes, parents, truncated)

    def enumerate(self, topic: str, max_hops: int, max_paths: int = 400) -> list[RelationPath]:
        """Every relation path of 1..``max_hops`` hops from ``topic`` that reaches some node
        other than the topic, breadth first, at most ``max_paths``."""
        found: list[RelationPath] = []
        layer: list[RelationPath] = [()]
        for _depth in range(int(max_hops)):
            layer = self.expand(topic, layer)
            found.extend(path for path in layer if self.ends(topic, path))
            if len(found) >= max_paths:
                return found[:max_paths]
        return found

    def evidence(self, topic: str, path: RelationPath, end: str, through_topic: bool = True) -> Path:
        """The walk ``path`` took from ``topic`` to ``end`` (one of them), as a real store path."""
        steps: list[Step] = []
        here = end
        for depth in range(len(path), 0, -1):
            frontier = self.frontier(topic, path[:depth], through_topic)
            parent_id = frontier.parents[here]
            parent = self.frontier(topic, path[:depth - 1], through_topic).nodes[parent_id]
            node = frontier.nodes[here]
            relation, direction = path[depth - 1]
            triple = Triple(parent, relation, node) if direction == OUT else Triple(node, relation, parent)
            steps.append(Step(triple, forward=direction == OUT))
            here = parent_id
        return Path(tuple(reversed(steps)))


def _by_hop(sources: Iterable[str], facts: dict[str, list[tuple[Hop, Node]]]) -> dict[Hop, list[tuple[str, Node]]]:
    """The sources' facts grouped by hop, as (source, node reached): one next frontier per hop."""
    grouped: dict[Hop, list[tuple[str, Node]]] = {}
    for source in sources:
        for hop, node in facts.get(source, ()):
            grouped.setdefault(hop, []).append((source, node))
    return grouped
