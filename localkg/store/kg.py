"""``KG``: the embedded knowledge graph and its query primitives.

Every primitive is one or two parameterised Cypher queries (text from users or
models only ever travels as a parameter) and returns the value classes of
``localkg.store.model``.

>>> from localkg.store.kg import KG
>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "db"
>>> kg = KG.create(path)
>>> kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich"),
...                 ("Top Hat", "starred_actors", "Ginger Rogers")])
>>> [r.relation for r in kg.relations("Top Hat")]
['directed_by', 'starred_actors']
>>> [n.name for n in kg.neighbors("Ginger Rogers", "starred_actors", "in")]
['Top Hat']
>>> str(kg.paths("Ginger Rogers", "Mark Sandrich", max_hops=2)[0])
'Ginger Rogers —starred_actors⁻¹→ Top Hat —directed_by→ Mark Sandrich'
>>> kg.close()
"""
from __future__ import annotations

import json
import re
import shlex
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path as FsPath
from typing import Any, Callable, Iterable, Iterator, Sequence

import kuzu

from localkg.errors import (
    DatabaseDamagedError,
    DatabaseExistsError,
    DatabaseFormatError,
    DatabaseLockedError,
    DatabaseNotFoundError,
    ReadOnlyQueryError,
    UnknownEntityError,
)
from localkg.store import schema, seal
from localkg.store.model import (
    BOTH,
    CVT,
    DIRECTIONS,
    IN,
    LITERAL,
    OUT,
    Node,
    NodeRecord,
    Path,
    RelationCount,
    Stats,
    Step,
    Triple,
)

NO_LIMIT = 2**62
# From this many sources KG.reach joins them with the facts instead of filtering nodes by them
# (measured crossover 100-250 sources on the MetaQA store and on a 1M-entity Freebase dump).
JOIN_FROM_SOURCES = 200
_LITERALS = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`|//[^\n]*|/\*.*?\*/", re.S)
_EXTENSIONS = re.compile(r"\b(INSTALL|LOAD\s+EXTENSION)\b", re.I)


@dataclass
class QueryLog:
    """What the store did for a caller: one entry per primitive call (for reasoner traces)."""

    entries: list[dict[str, Any]] = field(default_factory=list)

    def record(self, primitive: str, arguments: dict[str, Any], rows: int, seconds: float) -> None:
        self.entries.append({"primitive": primitive, "arguments": arguments, "rows": rows, "seconds": seconds})


@dataclass(frozen=True)
class Subgraph:
    """Facts within some hops of seed nodes, with each node's BFS distance from the seeds."""

    triples: tuple[Triple, ...]
    distance: dict[str, int]


def open_database(path: FsPath, read_only: bool, buffer_pool_bytes: int) -> kuzu.Database:
    """Kùzu's database of the store at ``path``, once its file is known to be safe to open.

    Raises :class:`DatabaseDamagedError` for a damaged ``graph.kuzu`` (``seal.verify``); a
    read-write open drops the seal, which the close writes again.
    """
    seal.verify(path, read_only)
    if not read_only:
        seal.unseal(path)
    return _open_database(path, read_only, buffer_pool_bytes)


def _open_database(path: FsPath, read_only: bool, buffer_pool_bytes: int) -> kuzu.Database:
    try:
        return kuzu.Database(str(path / schema.GRAPH_FILE), read_only=read_only, buffer_pool_size=buffer_pool_bytes)
    except RuntimeError as error:
        if "lock" in str(error).lower():
            raise DatabaseLockedError(
                f"{path} is open in another process; Kùzu allows one process that writes, or any number "
                "that only read. Close the other process and try again."
            ) from None
        raise DatabaseDamagedError(f"{path / schema.GRAPH_FILE} cannot be opened ({_first_line(error)}); "
                                   "the store is damaged: load it again into a new --db") from None


def _first_line(error: BaseException) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def read_manifest(path: FsPath) -> dict[str, Any]:
    """The manifest of the store at ``path``; :class:`DatabaseDamagedError` when it is unreadable."""
    target = FsPath(path) / schema.MANIFEST_FILE
    try:
        manifest = json.loads(target.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatabaseDamagedError(f"{target} is damaged ({_first_line(error)}); "
                                   "`localkg check --db DB --repair` writes it again") from None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("generation", 0), int):
        raise DatabaseDamagedError(f"{target} is damaged (not a manifest); "
                                   "`localkg check --db DB --repair` writes it again")
    return manifest


class KG:
    """A localkg database: open one with :meth:`open` or make one with :meth:`create`."""

    def __init__(self, path: FsPath, database: kuzu.Database, read_only: bool, buffer_pool_bytes: int):
        self.path = FsPath(path)
        self.read_only = read_only
        self.buffer_pool_bytes = buffer_pool_bytes
        self._database = database
        self._connection = kuzu.Connection(database)
        self.log: QueryLog | None = None

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def create(cls, path: str | FsPath, buffer_pool_bytes: int = 1 << 30) -> "KG":
        """Create an empty database directory at ``path``."""
        path = FsPath(path)
        if (path / schema.GRAPH_FILE).exists():
            raise DatabaseExistsError(f"{path} already holds a localkg database")
        if path.exists() and not path.is_dir():
            raise DatabaseNotFoundError(f"{path} is a file, not a database directory; name a directory for --db")
        path.mkdir(parents=True, exist_ok=True)
        kg = cls(path, _open_database(path, False, buffer_pool_bytes), read_only=False,
                 buffer_pool_bytes=buffer_pool_bytes)
        for statement in schema.DDL:
            kg._connection.execute(statement)
        kg._write_manifest({"format": schema.FORMAT_VERSION, "generation": 0, "hub_degree": schema.HUB_DEGREE})
        return kg

    @classmethod
    def open(cls, path: str | FsPath, read_only: bool = False, create: bool = False,
             buffer_pool_bytes: int = 1 << 30) -> "KG":
        """Open the database at ``path`` (``create=True`` makes it when missing)."""
        path = FsPath(path)
        if path.exists() and not path.is_dir():
            raise DatabaseNotFoundError(f"{path} is a file, not a database directory; name a directory for --db")
        if not (path / schema.GRAPH_FILE).exists():
            if create:
                return cls.create(path, buffer_pool_bytes)
            raise DatabaseNotFoundError(f"no localkg database at {path} (create one with `localkg load`)")
        kg = cls(path, open_database(path, read_only, buffer_pool_bytes), read_only=read_only,
                 buffer_pool_bytes=buffer_pool_bytes)
        kg._migrate()
        return kg

    def _migrate(self) -> None:
        """Bring a database written by an older localkg up to the current format."""
        version = int(self.manifest.get("format", 1))
        if version == schema.FORMAT_VERSION:
            return
        if self.read_only:
            self.close()
            raise DatabaseFormatError(f"{self.path} has database format {version}; open it once read-write "
                                      f"to upgrade it to format {schema.FORMAT_VERSION}")
        for old in range(version, schema.FORMAT_VERSION):
            for statement in schema.MIGRATIONS[old]:
                self._connection.execute(statement)
        self.update_manifest(format=schema.FORMAT_VERSION, hub_degree=self.manifest.get("hub_degree", schema.HUB_DEGREE))

    def close(self) -> None:
        """Release the database so another process can open it (a writer seals the file it leaves)."""
        self._connection.close()
        self._database.close()
        if not self.read_only:
            seal.seal(self.path)

    def reopen(self) -> None:
        """Close and open the database again, with the same mode and buffer pool.

        Why: after a committed ``COPY`` Kùzu 0.11.3 keeps memory until the database closes, so a
        load that flushes many times would hold more at every flush; the writer reopens after each
        (docs/architecture.md, the write path; the figures are in docs/benchmarks.md, "What a
        flush holds").
        The store stays unsealed in between: only the final :meth:`close` seals it.
        """
        self._connection.close()
        self._database.close()
        self._database = _open_database(self.path, self.read_only, self.buffer_pool_bytes)
        self._connection = kuzu.Connection(self._database)

    def __enter__(self) -> "KG":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ manifest
    @property
    def manifest(self) -> dict[str, Any]:
        """The manifest: format version, load generation, key-sync counts."""
        return read_manifest(self.path)

    def _write_manifest(self, manifest: dict[str, Any]) -> None:
        target = self.path / schema.MANIFEST_FILE
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True))
        tmp.replace(target)

    def update_manifest(self, **changes: Any) -> None:
        """Merge ``changes`` into the manifest and write it whole, atomically (a crash leaves the old
        manifest or the new one, never half of one)."""
        manifest = self.manifest
        manifest.update(changes)
        self._write_manifest(manifest)

    def record_source(self, command: str, files: Sequence[str | FsPath], *options: str) -> None:
        """Note the load command that read ``files`` (with its ``options``) in the manifest, so
        that a damaged store can name its way back."""
        line = shlex.join(["localkg", "load", command, *(str(FsPath(f).resolve()) for f in files), *options])
        sources = list(self.manifest.get("sources", []))
        if line not in sources:
            self.update_manifest(sources=sources + [line])

    @property
    def generation(self) -> int:
        """Incremented by every load that changed the graph; indexes record the one they saw."""
        return int(self.manifest.get("generation", 0))

    # ------------------------------------------------------------------ execution
    def rows(self, query: str, parameters: dict[str, Any] | None = None) -> list[list[Any]]:
        """Every row of a Cypher statement, unlogged: the store's own queries and its writer's
        bookkeeping, which a reasoner's trace should not count."""
        return self.execute(query, parameters).get_all()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One Kùzu transaction around the block: committed when it ends, rolled back when it raises.

        Kùzu rolls a transaction back itself when a statement fails (then ``ROLLBACK`` would
        raise "No active transaction" and hide the real error), so rolling back is attempted
        only while a transaction is still open.
        """
        connection = self._connection
        connection.execute("BEGIN TRANSACTION")
        try:
            yield
        except BaseException:
            try:
                connection.execute("ROLLBACK")
            except RuntimeError as rollback_error:
                if "No active transaction" not in str(rollback_error):
                    raise
            raise
        connection.execute("COMMIT")

    def _logged(self, primitive: str, arguments: dict[str, Any], run: Callable[[], list]) -> list:
        started = time.perf_counter()
        result = run()
        if self.log is not None:
            self.log.record(primitive, arguments, len(result), time.perf_counter() - started)
        return result

    def execute(self, query: str, parameters: dict[str, Any] | None = None) -> kuzu.QueryResult:
        """Run any Cypher statement (for loaders and power users)."""
        return self._connection.execute(query, parameters or {})

    def query(self, cypher: str, parameters: dict[str, Any] | None = None) -> tuple[list[str], list[list[Any]]]:
        """Run a Cypher query; return (column names, rows).

        On a store opened read-only (as ``localkg query`` opens it) Kùzu refuses every write, and
        that refusal becomes :class:`ReadOnlyQueryError`. Extension statements (``INSTALL``,
        ``LOAD EXTENSION``) are refused before they run, outside string literals: they fetch or
        load code, and localkg never goes online.
        """
        if _EXTENSIONS.search(_LITERALS.sub("''", cypher)):
            raise ReadOnlyQueryError("`localkg query` does not install or load Kùzu extensions")
        try:
            result = self._connection.execute(cypher, parameters or {})
        except RuntimeError as error:
            if "read-only database" in str(error):
                raise ReadOnlyQueryError("`localkg query` runs read-only queries; this one would change the "
                                         "database") from None
            raise
        return result.get_column_names(), result.get_all()

    # ------------------------------------------------------------------ primitives
    def node(self, entity: str) -> NodeRecord:
        """Everything stored about one node; raises :class:`UnknownEntityError` if absent."""
        rows = self._logged("node", {"entity": entity}, lambda: self.rows(
            "MATCH (n:Node {id: $id}) RETURN n.id, n.name, n.kind, n.aliases, n.description, n.types, "
            "n.value, n.datatype, n.lang",
            {"id": entity},
        ))
        if not rows:
            raise UnknownEntityError(f"no node with id {entity!r}")
        row = rows[0]
        return NodeRecord(row[0], row[1] or "", row[2], tuple(row[3] or ()), row[4] or "", tuple(row[5] or ()),
                          row[6] or "", row[7] or "", row[8] or "")

    def has_node(self, entity: str) -> bool:
        """Whether the store holds a node with id ``entity``: the check :meth:`node` makes before it raises."""
        return bool(self._logged("has_node", {"entity": entity},
                                 lambda: self.rows("MATCH (n:Node {id: $id}) RETURN n.id", {"id": entity})))

    def name(self, entity: str) -> str:
        """The display name: the name, a literal's value, or "(mediator)" for an unnamed CVT.

        >>> # kg.name("m.0abc")  -> 'Barack Obama'
        """
        record = self.node(entity)
        return Node(record.id, record.name or record.value, record.kind).display

    def relations(self, entity: str, direction: str = BOTH) -> list[RelationCount]:
        """Distinct relations at ``entity`` with the direction seen from it and the fact count.

        A hub's come from its relation summary, so a hub with a million edges answers as fast as
        a leaf; any other node's are counted from its at most ``hub_degree`` edges. Most
        frequent first.
        """
        _check_direction(direction)

        def run() -> list:
            hub = self.rows("MATCH (n:Node {id: $id}) RETURN n.hub", {"id": entity})
            if not hub:
                raise UnknownEntityError(f"no node with id {entity!r}")
            if hub[0][0]:
                return self.rows(_SUMMARY_RELATIONS, {"id": entity, "dir": direction})
            return self.rows(_EDGE_RELATIONS[direction], {"id": entity})

        rows = self._logged("relations", {"entity": entity, "direction": direction}, run)
        # A hub's summary rows are appended per load, so one (relation, direction) may have several;
        # summing here is ~10x cheaper than Kùzu's hash aggregate for a handful of rows.
        counts: dict[tuple[str, str, str], int] = {}
        for relation, label, row_direction, n in rows:
            key = (relation, label or relation, row_direction)
            counts[key] = counts.get(key, 0) + int(n)
        ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0][0], item[0][2]))
        return [RelationCount(relation, label, row_direction, n) for (relation, label, row_direction), n in ordered]

    def neighbors(self, entity: str, relation: str, direction: str = OUT, limit: int | None = None) -> list[Node]:
        """Nodes reached from ``entity`` over ``relation`` (``out``: entity is the head)."""
        _check_direction(direction)
        limit = NO_LIMIT if limit is None else int(limit)
        queries = []
        if direction in (OUT, BOTH):
            queries.append("MATCH (a:Node {id: $id})-[f:Fact]->(b:Node) WHERE f.rel = $rel "
                           "HINT (a JOIN f) JOIN b RETURN b.id, b.name, b.kind, b.value LIMIT $limit")
        if direction in (IN, BOTH):
            queries.append("MATCH (a:Node {id: $id})<-[f:Fact]-(b:Node) WHERE f.rel = $rel "
                           "HINT (a JOIN f) JOIN b RETURN b.id, b.name, b.kind, b.value LIMIT $limit")

        def run() -> list:
            rows: list = []
            for query in queries:
                rows.extend(self.rows(query, {"id": entity, "rel": relation, "limit": limit - len(rows)}))
                if len(rows) >= limit:
                    break
            return rows

        rows = self._logged("neighbors", {"entity": entity, "relation": relation, "direction": direction}, run)
        return [_node(r[0], r[1], r[2], r[3]) for r in rows]

    def reach(self, sources: Sequence[str], relation: str | None, direction: str = OUT,
              limit: int | None = None) -> list[tuple[str, str, Node]]:
        """(source id, relation, node reached) for every fact walked ``direction`` (``out`` or
        ``in``) from any of ``sources`` over ``relation`` (every relation when None), at most
        ``limit`` rows.

        One query for a whole set of nodes (``neighbors`` asks per node and relation): relation
        paths are executed set by set, so a frontier of hundreds of films costs one round trip
        per hop. Kùzu 0.11 seeks no index for a set of keys, so the query takes one of two
        plans: a filter ``a.id IN $ids`` costs a pass over the nodes per source, a join with
        ``UNWIND $ids`` one pass over the facts whatever the number of sources. Both grow with
        the store, their ratio does not, so one crossover (:data:`JOIN_FROM_SOURCES`) serves a
        small store and a large one alike.
        """
        if direction not in (OUT, IN):
            raise ValueError(f"direction must be {OUT} or {IN}, not {direction!r}")
        ids = list(dict.fromkeys(sources))
        arrow = "-[f:Fact]->" if direction == OUT else "<-[f:Fact]-"
        only_relation = "" if relation is None else " AND f.rel = $rel"
        if len(ids) < JOIN_FROM_SOURCES:
            match = f"MATCH (a:Node){arrow}(b:Node) WHERE a.id IN $ids{only_relation}"
        else:
            match = f"UNWIND $ids AS source MATCH (a:Node){arrow}(b:Node) WHERE a.id = source{only_relation}"
        parameters: dict[str, Any] = {"ids": ids, "limit": NO_LIMIT if limit is None else int(limit)}
        if relation is not None:
            parameters["rel"] = relation
        query = f"{match} RETURN a.id, f.rel, b.id, b.name, b.kind, b.value LIMIT $limit"
        rows = self._logged("reach", {"sources": len(ids), "relation": relation, "direction": direction},
                            lambda: self.rows(query, parameters))
        return [(r[0], r[1], _node(r[2], r[3], r[4], r[5])) for r in rows]

    def triples(self, entity: str, limit: int | None = None, relation_filter: Iterable[str] = ()) -> list[Triple]:
        """Facts incident to ``entity`` in both directions, with names, in graph orientation."""
        limit = NO_LIMIT if limit is None else int(limit)
        excluded = sorted(set(relation_filter))
        params = {"id": entity, "limit": limit, "excluded": excluded}

        def run() -> list:
            out_rows = self.rows(
                "MATCH (a:Node {id: $id})-[f:Fact]->(b:Node) WHERE NOT list_contains($excluded, f.rel) "
                "RETURN a.id, a.name, a.kind, a.value, f.rel, b.id, b.name, b.kind, b.value LIMIT $limit", params)
            in_rows = self.rows(
                "MATCH (a:Node {id: $id})<-[f:Fact]-(b:Node) WHERE NOT list_contains($excluded, f.rel) "
                "RETURN b.id, b.name, b.kind, b.value, f.rel, a.id, a.name, a.kind, a.value LIMIT $limit",
                {**params, "limit": max(0, limit - len(out_rows))})
            return out_rows + in_rows

        rows = self._logged("triples", {"entity": entity}, run)
        return [Triple(_node(*r[0:4]), r[4], _node(*r[5:9])) for r in rows]

    def find(self, label: str) -> list[Node]:
        """Nodes whose name or alias is ``label`` (case and spacing ignored), or whose id is ``label``."""
        rows = self._logged("find", {"label": label}, lambda: self.rows(
            "MATCH (l:Label {id: $key})-[:Names]->(n:Node) RETURN DISTINCT n.id, n.name, n.kind, n.value",
            {"key": schema.normalise_label(label)}))
        nodes = [_node(*r) for r in rows]
        if not any(n.id == label for n in nodes):
            by_id = self.rows("MATCH (n:Node {id: $id}) RETURN n.id, n.name, n.kind, n.value", {"id": label})
            nodes = [_node(*r) for r in by_id] + nodes
        return nodes

    def steps(self, entity: str, hop_cvt: bool = True, limit: int | None = None,
              relation_filter: Iterable[str] = ()) -> list[Path]:
        """One-step moves from ``entity``: single facts, and with ``hop_cvt`` two-fact moves through
        an unnamed mediator, so ``person —spouse_s→ (marriage) —spouse→ person`` is one move.

        A fact that ends in a CVT is replaced by the moves through it.
        """
        excluded = set(relation_filter)
        moves: list[Path] = []
        for triple in self.triples(entity, limit=limit, relation_filter=excluded):
            step = Step(triple, forward=triple.head.id == entity)
            if hop_cvt and step.target.kind == CVT:
                for onward in self.triples(step.target.id, limit=limit, relation_filter=excluded):
                    second = Step(onward, forward=onward.head.id == step.target.id)
                    if second.target.id != entity:
                        moves.append(Path((step, second)))
            else:
                moves.append(Path((step,)))
        return moves

    def paths(self, source: str, target: str, max_hops: int = 3, limit: int = 100,
              through_hubs: bool = False) -> list[Path]:
        """Relation paths between two nodes of at most ``max_hops`` facts, walked in either direction.

        Shortest first; no node is visited twice. Walks do not pass *through* hub nodes (more
        than the manifest's ``hub_degree`` facts) unless ``through_hubs``: a path via a node with
        a million edges is rarely an explanation and enumerating them is what makes path search
        slow. Hubs can still be the source or the target. ``max_hops`` is validated as an
        integer (Kùzu takes recursion bounds only as literals).
        """
        hops = int(max_hops)
        if not 1 <= hops <= 6:
            raise ValueError("max_hops must be between 1 and 6")
        intermediate = "" if through_hubs else " (r, n | WHERE NOT n.hub)"
        query = (f"MATCH p = (a:Node {{id: $s}})-[f:Fact* ACYCLIC 1..{hops}{intermediate}]-(b:Node {{id: $t}}) "
                 "RETURN rels(p), nodes(p) ORDER BY length(p) LIMIT $limit")
        rows = self._logged("paths", {"source": source, "target": target, "max_hops": hops},
                            lambda: self.rows(query, {"s": source, "t": target, "limit": int(limit)}))
        return [_path_from_row(rels, nodes) for rels, nodes in rows]

    def subgraph(self, seeds: Sequence[str], hops: int = 2, relation_filter: Callable[[str], bool] | Iterable[str] | None = None,
                 max_per_node: int = 200) -> Subgraph:
        """Facts within ``hops`` of ``seeds`` (breadth first, both directions).

        ``relation_filter`` keeps a relation when it is a callable returning True, or drops the
        relations it lists when it is a collection. ``max_per_node`` caps what one node
        contributes, so a hub does not swamp the result.
        """
        if relation_filter is None:
            keep: Callable[[str], bool] = lambda rel: True
        elif callable(relation_filter):
            keep = relation_filter
        else:
            dropped = set(relation_filter)
            keep = lambda rel: rel not in dropped
        distance = {seed: 0 for seed in seeds}
        frontier = list(dict.fromkeys(seeds))
        found: dict[tuple[str, str, str], Triple] = {}
        for depth in range(1, int(hops) + 1):
            next_frontier: list[str] = []
            for entity in frontier:
                for triple in self.triples(entity, limit=max_per_node):
                    if not keep(triple.relation):
                        continue
                    found.setdefault((triple.head.id, triple.relation, triple.tail.id), triple)
                    for end in (triple.head.id, triple.tail.id):
                        if end not in distance:
                            distance[end] = depth
                            next_frontier.append(end)
            frontier = next_frontier
        return Subgraph(tuple(found.values()), distance)

    def stats(self) -> Stats:
        """Counts of entities, CVTs, literals, facts, relations and labels."""
        def run() -> list:
            return [self.rows(query) for query in _STATS]

        kind_rows, [[facts]], [[relations]], [[labels]] = self._logged("stats", {}, run)
        kinds = dict(kind_rows)
        return Stats(int(kinds.get("entity", 0)), int(kinds.get(CVT, 0)), int(kinds.get(LITERAL, 0)),
                     int(facts), int(relations), int(labels))

    def relation_catalogue(self) -> list[tuple[str, str, str, int]]:
        """Every relation as (id, label, description, fact count), most used first."""
        rows = self._logged("relation_catalogue", {}, lambda: self.rows(
            "MATCH (r:Relation) RETURN r.id, r.label, r.description, r.facts ORDER BY r.facts DESC, r.id"))
        return [(r[0], r[1] or r[0], r[2] or "", int(r[3] or 0)) for r in rows]

    def iter_nodes(self, kinds: Sequence[str] = ("entity",), batch: int = 50_000) -> Iterable[list[NodeRecord]]:
        """All nodes of the given kinds, in batches, in insertion order (for index building)."""
        skip = 0
        while True:
            rows = self._logged("iter_nodes", {"kinds": list(kinds), "skip": skip}, lambda: self.rows(
                "MATCH (n:Node) WHERE list_contains($kinds, n.kind) RETURN n.id, n.name, n.kind, n.aliases, "
                "n.description, n.types, n.value, n.datatype, n.lang SKIP $skip LIMIT $limit",
                {"kinds": list(kinds), "skip": skip, "limit": batch}))
            if not rows:
                return
            yield [NodeRecord(r[0], r[1] or "", r[2], tuple(r[3] or ()), r[4] or "", tuple(r[5] or ()),
                              r[6] or "", r[7] or "", r[8] or "") for r in rows]
            skip += len(rows)

    # ------------------------------------------------------------------ writing
    def writer(self, flush_rows: int | None = None) -> "GraphWriter":
        """A bulk writer that appends and deduplicates (see ``localkg.store.writer``), once it has
        settled what an interrupted writer left (``GraphWriter.recover``); writes reach the
        database when ``flush_rows`` nodes and facts have gathered (by default as many as this
        database's buffer pool holds in one flush) and when it closes."""
        from localkg.store.pool import flush_rows_for_pool
        from localkg.store.writer import GraphWriter

        writer = GraphWriter(self, flush_rows_for_pool(self.buffer_pool_bytes) if flush_rows is None else flush_rows)
        writer.recover()
        return writer

    def add_triples(self, triples: Iterable[tuple[str, str, str]]) -> None:
        """Add name-only triples (the simple path; loaders use :meth:`writer` for bulk)."""
        from localkg.store.batch import FactBatch

        with self.writer() as writer:
            batch = FactBatch()
            for head, relation, tail in triples:
                batch.add_fact(head, relation, tail)
                batch.add_entity(head, name=head)
                batch.add_entity(tail, name=tail)
            writer.write(batch)


_SUMMARY_RELATIONS = (
    "MATCH (n:Node {id: $id})-[h:HasRel]->(r:Relation) WHERE $dir = 'both' OR h.dir = $dir "
    # Without the hint Kùzu starts from the small Relation table and walks every node's
    # summary rows backwards (4x slower on a 50k-edge hub).
    "HINT (n JOIN h) JOIN r RETURN r.id, r.label, h.dir, h.n")
_EDGE_RELATIONS = {  # the parts of a non-hub's relation count, by direction
    OUT: "MATCH (n:Node {id: $id})-[f:Fact]->() WITH f.rel AS rel, count(*) AS n "
         "MATCH (r:Relation {id: rel}) RETURN rel, r.label, 'out', n",
    IN: "MATCH (n:Node {id: $id})<-[f:Fact]-() WITH f.rel AS rel, count(*) AS n "
        "MATCH (r:Relation {id: rel}) RETURN rel, r.label, 'in', n",
}
_EDGE_RELATIONS[BOTH] = f"{_EDGE_RELATIONS[OUT]} UNION ALL {_EDGE_RELATIONS[IN]}"
_STATS = ("MATCH (n:Node) RETURN n.kind, count(*)", "MATCH ()-[f:Fact]->() RETURN count(*)",
          "MATCH (r:Relation) RETURN count(*)", "MATCH (l:Label) RETURN count(*)")


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")


def _node(node_id: str, name: str | None, kind: str | None, value: str | None = None) -> Node:
    kind = kind or "entity"
    return Node(node_id, name or (value or "" if kind == LITERAL else ""), kind)


def _node_from_struct(struct: dict[str, Any]) -> Node:
    return _node(struct["id"], struct.get("name"), struct.get("kind"), struct.get("value"))


def _path_from_row(rels: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> Path:
    by_internal = {(n["_id"]["table"], n["_id"]["offset"]): _node_from_struct(n) for n in nodes}
    steps = []
    for position, rel in enumerate(rels):
        here = nodes[position]["_id"]
        src = (rel["_src"]["table"], rel["_src"]["offset"])
        dst = (rel["_dst"]["table"], rel["_dst"]["offset"])
        triple = Triple(by_internal[src], rel["rel"], by_internal[dst])
        steps.append(Step(triple, forward=src == (here["table"], here["offset"])))
    return Path(tuple(steps))
