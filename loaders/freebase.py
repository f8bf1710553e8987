"""The Freebase RDF dump (``freebase-rdf-latest.gz``) into a localkg database.

The dump is tab-separated N-Triples, ``<s>\\t<p>\\t<o>\\t.``, 3.1 billion
lines. Lines are parsed in worker processes (``loaders/parallel.py``) and
mapped like this:

* ids lose the ``http://rdf.freebase.com/ns/`` namespace (``m.02mjmr``,
  ``people.person.place_of_birth``); rdf/rdfs/owl/xsd IRIs get their usual
  prefixes; excerpts whose namespace was stripped (``</m.0abc>``) read the same;
* ``type.object.name`` in the requested languages becomes the node's name
  (first language first; a regional variant such as ``en-GB`` stands in when
  the plain tag is missing; names in the other requested languages become
  aliases), ``common.topic.alias`` aliases, ``common.topic.description`` the
  description and ``type.object.type`` the types: node attributes, not edges;
* names of schema objects (ids that are not ``m.``/``g.`` machine ids) label
  relations: ``people.person.place_of_birth`` → "Place of birth"; relations
  the schema does not name get ``relation_label`` ("place of birth");
* predicates matched by the filter (``loaders/data/freebase_filter.txt`` by
  default; a file, so users change it without touching code) are dropped and
  counted by the pattern that matched;
* every other line is a fact; typed literals become literal nodes whose id is
  their N-Triples spelling (``"1961-08-04"^^xsd:date``).

A line is split into its three terms first and its predicate looked up (once
per distinct predicate); a filtered line is counted and dropped without
parsing its subject and object, which makes the third of the dump that is
bookkeeping nearly free. So damage inside a filtered line's terms counts as
filtered, not rejected; damage to the line's shape (truncated, no final dot,
invalid UTF-8, blank) is always rejected.

CVT (mediator) nodes are machine ids that never get a name. A name may come
after the edges that mention a node, and in another chunk, so this is decided
once at the end of the load: every ``m.``/``g.`` entity without a name
becomes kind ``cvt``, in batches of one Cypher update. That is the rule of the
KGQA literature (ToG calls them "UnName_Entity"); it also marks the few real
entities that have no name in the requested languages, which reasoners then
treat as mediators to hop through.
"""
from __future__ import annotations

import fnmatch
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from localkg.loaders.ntriples import BadLine, Literal, iri, split_triple, term_value
from localkg.loaders.parallel import Chunk, ChunkResult, DumpFormat, lang_rank, split_lines
from localkg.loaders.triples import literal_node_id
from localkg.store.model import CVT, LITERAL
from localkg.store.batch import FactBatch, NodeAttributes

NAMESPACE = "http://rdf.freebase.com/ns/"
PREFIXES = (
    ("http://www.w3.org/1999/02/22-rdf-syntax-ns#", "rdf:"),
    ("http://www.w3.org/2000/01/rdf-schema#", "rdfs:"),
    ("http://www.w3.org/2002/07/owl#", "owl:"),
    ("http://www.w3.org/2001/XMLSchema#", "xsd:"),
    ("http://rdf.freebase.com/key/", "key:"),
)
NAME = "type.object.name"
ALIAS = "common.topic.alias"
DESCRIPTION = "common.topic.description"
TYPE = "type.object.type"
MACHINE_ID_PREFIXES = ("m.", "g.")
DEFAULT_FILTER = Path(__file__).with_name("data") / "freebase_filter.txt"
CVT_UPDATE_BATCH = 500_000


def freebase_id(iri: str) -> str:
    """The short id of a Freebase IRI.

    >>> freebase_id("http://rdf.freebase.com/ns/m.02mjmr")
    'm.02mjmr'
    >>> freebase_id("http://www.w3.org/2002/07/owl#sameAs")
    'owl:sameAs'
    >>> freebase_id("/m.0x0kvj8")
    'm.0x0kvj8'
    """
    if iri.startswith(NAMESPACE):
        return iri[len(NAMESPACE):]
    if iri[:1] == "/":
        return iri[1:]
    for long, short in PREFIXES:
        if iri.startswith(long):
            return short + iri[len(long):]
    return iri


@lru_cache(maxsize=4096)
def short_datatype(datatype: str) -> str:
    """A datatype IRI with its usual prefix (cached: a dump has a handful, on every literal).

    >>> short_datatype("http://www.w3.org/2001/XMLSchema#date")
    'xsd:date'
    """
    for long, short in PREFIXES:
        if datatype.startswith(long):
            return short + datatype[len(long):]
    return datatype


@dataclass(frozen=True)
class PredicateFilter:
    """Predicates to drop: exact ids and prefixes (patterns ending in ``*``), read from a file."""

    patterns: tuple[str, ...] = ()

    @classmethod
    def read(cls, path: str | Path | None = None) -> "PredicateFilter":
        """Read a filter file; ``None`` reads the default one."""
        from localkg.errors import LoadError

        path = Path(path) if path is not None else DEFAULT_FILTER
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise LoadError(f"cannot read the filter file {path}: {error.strerror or error}") from None
        patterns = []
        for line in text.splitlines():
            entry = line.split(" #", 1)[0].split("\t#", 1)[0].strip()
            if entry and not entry.startswith("#"):
                patterns.append(entry)
        return cls(tuple(patterns))

    def match(self, predicate: str) -> str | None:
        """The pattern that drops ``predicate``, or None to keep it."""
        for pattern in self.patterns:
            if pattern == predicate or (pattern.endswith("*") and fnmatch.fnmatchcase(predicate, pattern)):
                return pattern
        return None


@dataclass
class _Attributes:
    """What one chunk says about one subject; names and descriptions ranked by language."""

    name: str = ""
    name_rank: int = 1 << 30
    description: str = ""
    description_rank: int = 1 << 30
    aliases: list[str] = field(default_factory=list)
    types: list[str] = field(default_factory=list)

    def offer_name(self, value: str, rank: int) -> None:
        if rank < self.name_rank:
            if self.name:
                self.aliases.append(self.name)
            self.name, self.name_rank = value, rank
        elif value != self.name:
            self.aliases.append(value)

    def offer_description(self, value: str, rank: int) -> None:
        if rank < self.description_rank:
            self.description, self.description_rank = value, rank


@dataclass
class FreebaseFormat(DumpFormat):
    """How to read Freebase RDF lines (runs in worker processes; must stay picklable)."""

    langs: tuple[str, ...] = ("en",)
    filter: PredicateFilter = field(default_factory=PredicateFilter.read)
    name: str = "freebase"
    _lang_ranks: dict[str, int | None] = field(default_factory=dict, repr=False, compare=False)

    def options(self) -> dict[str, Any]:
        return {"format": "freebase", "langs": list(self.langs), "filter": list(self.filter.patterns)}

    def cut(self, data: bytearray, limit: int) -> int:
        """End a chunk between two subjects, so one entity's lines (its names) are parsed together."""
        end = data.rfind(b"\n", 0, limit) + 1
        if end == 0:
            return 0
        start = data.rfind(b"\n", 0, end - 1) + 1
        tab = data.find(b"\t", start, end)
        if tab <= start:
            return end
        subject = bytes(data[start:tab + 1])
        if len(data) >= end + len(subject) and not data.startswith(subject, end):
            return end  # the next line begins another subject
        floor = limit // 2
        while start > floor:
            previous = data.rfind(b"\n", 0, start - 1) + 1
            if not data.startswith(subject, previous):
                return start
            start = previous
        return end

    def parse(self, chunk: Chunk) -> ChunkResult:
        result = ChunkResult(FactBatch())
        batch = result.batch
        heads, relations, tails = batch.heads, batch.relations, batch.tails
        subjects: dict[str, _Attributes] = defaultdict(_Attributes)
        schema_names: dict[str, tuple[str, int]] = {}
        literals: dict[str, Literal] = {}
        predicates: dict[str, tuple[str, str | None]] = {}
        filtered = result.filtered
        last_term, last_subject = "", ""
        for number, line in split_lines(chunk, result):
            try:
                subject_term, predicate_term, object_term = split_triple(line)
                known = predicates.get(predicate_term)
                if known is None:
                    predicate = freebase_id(iri(predicate_term))
                    known = predicates[predicate_term] = (predicate, self._role(predicate))
                predicate, role = known
                if role is not None and role[0] == "!":
                    filtered[role[1:]] += 1
                    continue
                if subject_term != last_term:
                    last_term, last_subject = subject_term, freebase_id(iri(subject_term))
                value = term_value(object_term)
            except BadLine as error:
                result.reject(number, str(error), line)
                continue
            if role is None:
                heads.append(last_subject)
                relations.append(predicate)
                tails.append(freebase_id(value) if type(value) is str else _literal_id(value, literals))
            else:
                self._attribute(role, last_subject, value, subjects, schema_names, result)
        for subject, attributes in subjects.items():
            batch.nodes[subject] = NodeAttributes(name=attributes.name, aliases=attributes.aliases,
                                                  description=attributes.description, types=attributes.types,
                                                  explicit=True)
        for node_id, value in literals.items():
            batch.nodes[node_id] = NodeAttributes(name=value.value, kind=LITERAL, value=value.value,
                                                  datatype=short_datatype(value.datatype), lang=value.lang)
        result.state = {"schema_names": schema_names}
        return result

    def _role(self, predicate: str) -> str | None:
        if predicate in (NAME, ALIAS, DESCRIPTION, TYPE):
            return predicate
        pattern = self.filter.match(predicate)
        return None if pattern is None else "!" + pattern

    def _attribute(self, role: str, subject: str, value: str | Literal, subjects: dict[str, _Attributes],
                   schema_names: dict[str, tuple[str, int]], result: ChunkResult) -> None:
        is_entity = subject.startswith(MACHINE_ID_PREFIXES)
        if role == TYPE:
            if not is_entity:
                result.filtered["schema object attribute"] += 1
                return
            subjects[subject].types.append(freebase_id(value) if isinstance(value, str) else value.value)
            result.attributes += 1
            return
        if not isinstance(value, Literal):
            result.filtered[f"{role} that is not a literal"] += 1
            return
        rank = self._lang_ranks.get(value.lang, -1)
        if rank == -1:
            rank = self._lang_ranks[value.lang] = (lang_rank(self.langs, value.lang) if value.lang
                                                   else len(self.langs) * 2)
        if rank is None:
            result.filtered[f"{role} in another language"] += 1
            return
        result.attributes += 1
        if not is_entity:
            if role == NAME and rank < schema_names.get(subject, ("", 1 << 30))[1]:
                schema_names[subject] = (value.value, rank)
            elif role != NAME:
                result.attributes -= 1
                result.filtered["schema object attribute"] += 1
            return
        attributes = subjects[subject]
        if role == NAME:
            attributes.offer_name(value.value, rank)
        elif role == ALIAS:
            attributes.aliases.append(value.value)
        else:
            attributes.offer_description(value.value, rank)

    # ---------------------------------------------------------------- main process
    def absorb(self, result: ChunkResult, state: dict[str, Any]) -> bool:
        """Keep the best-ranked schema names (they label relations at the end); True if they changed."""
        known = state.setdefault("schema_names", {})
        changed = False
        for schema_id, (label, rank) in result.state.get("schema_names", {}).items():
            if schema_id not in known or rank < known[schema_id][1]:
                known[schema_id] = [label, rank]
                changed = True
        return changed

    def finish(self, kg: Any, writer: Any, state: dict[str, Any]) -> dict[str, int]:
        """Label relations from the schema names, then mark unnamed machine ids as CVT nodes."""
        names = state.get("schema_names", {})
        labelled = 0
        if names:
            batch = FactBatch()
            for (relation_id,) in kg.execute("MATCH (r:Relation) RETURN r.id").get_all():
                if relation_id in names:
                    batch.add_relation(relation_id, names[relation_id][0])
                    labelled += 1
            if batch.relation_info:
                writer.write(batch)
        return {"relations_labelled": labelled, "cvt_nodes_marked": mark_cvt_nodes(kg)}


def mark_cvt_nodes(kg: Any) -> int:
    """Every ``m.``/``g.`` entity without a name becomes a CVT node; returns how many changed.

    Batched with ``LIMIT`` so one transaction never holds more than a bounded number of updates.
    """
    marked = 0
    while True:
        rows = kg.execute(
            "MATCH (n:Node) WHERE n.kind = 'entity' AND (n.name IS NULL OR n.name = '') "
            "AND (starts_with(n.id, 'm.') OR starts_with(n.id, 'g.')) "
            f"WITH n LIMIT {int(CVT_UPDATE_BATCH)} SET n.kind = '{CVT}' RETURN count(*)").get_all()
        changed = int(rows[0][0]) if rows else 0
        marked += changed
        if changed < CVT_UPDATE_BATCH:
            return marked


def _literal_id(literal: Literal, literals: dict[str, Literal]) -> str:
    node_id = literal_node_id(literal.value, literal.datatype, literal.lang)
    literals[node_id] = literal
    return node_id


def load_freebase(kg: Any, paths: Sequence[str | Path], *, langs: Sequence[str] = ("en",),
                  filter_path: str | Path | None = None, resume: bool = False, workers: int | None = None,
                  max_rejects: int | None = None, progress: bool = True, chunk_bytes: int | None = None,
                  batch_bytes: int | None = None):
    """Load Freebase RDF dump files into ``kg``; returns a :class:`~localkg.loaders.parallel.LoadReport`.

    ``langs`` orders the name languages (first preferred); ``filter_path`` replaces the default
    predicate filter; ``resume`` continues an interrupted load of the same files and options.
    """
    from localkg.loaders.parallel import load_dump

    fmt = FreebaseFormat(langs=tuple(lang.strip().lower() for lang in langs if lang.strip()),
                         filter=PredicateFilter.read(filter_path))
    return load_dump(kg, paths, fmt, resume=resume, workers=workers, max_rejects=max_rejects, progress=progress,
                     chunk_bytes=chunk_bytes, batch_bytes=batch_bytes)
