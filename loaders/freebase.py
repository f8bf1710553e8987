"""The Freebase RDF dump (``freebase-rdf-latest.gz``) into a localkg database.

Tab-separated N-Triples, parsed in worker processes (``loaders/parallel.py``): ids lose the
``ns/`` namespace, ``type.object.name``/``common.topic.alias``/``common.topic.description``/
``type.object.type`` become node attributes, names of schema ids label relations, predicates
matched by the filter (``loaders/data/freebase_filter.txt``, data a user can change) are
counted and dropped, and every other line is a fact. A chunk is split into columns of terms
by Arrow (``rows.py``) and each distinct term parsed once (``object_terms.py``), so a filtered
line costs almost nothing; damage to a line's shape is always rejected.

A machine id still without a name at the end of the load becomes a ``cvt`` (mediator) node,
the KGQA literature's rule (ToG's "UnName_Entity"). docs/loading.md has the full mapping.
"""
from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from localkg.loaders.attributes import ROLES, attribute_nodes
from localkg.loaders.ntriples import BadLine, iri
from localkg.loaders.object_terms import ObjectTerms, literal_nodes
from localkg.loaders.parallel import Chunk, ChunkResult, DumpFormat
from localkg.loaders.report import LoadReport
from localkg.loaders.rows import split_rows
from localkg.store.crashpoints import crash_point
from localkg.store.model import CVT
from localkg.store.batch import FactBatch, column_batch, distinct_codes

NAMESPACE = "http://rdf.freebase.com/ns/"
PREFIXES = (
    ("http://www.w3.org/1999/02/22-rdf-syntax-ns#", "rdf:"),
    ("http://www.w3.org/2000/01/rdf-schema#", "rdfs:"),
    ("http://www.w3.org/2002/07/owl#", "owl:"),
    ("http://www.w3.org/2001/XMLSchema#", "xsd:"),
    ("http://rdf.freebase.com/key/", "key:"),
)
DEFAULT_FILTER = Path(__file__).with_name("data") / "freebase_filter.txt"
_FACT, _FILTERED, _BAD = len(ROLES), len(ROLES) + 1, len(ROLES) + 2  # predicate kinds after the attribute roles


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
class FreebaseFormat(DumpFormat):
    """How to read Freebase RDF lines (runs in worker processes; must stay picklable)."""

    langs: tuple[str, ...] = ("en",)
    filter: PredicateFilter = field(default_factory=PredicateFilter.read)
    name: str = "freebase"

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
        """The chunk's facts as columns, its attributes per subject, its schema names and counts
        (see the module docstring)."""
        result = ChunkResult(FactBatch())
        rows = split_rows(chunk, result)
        predicate_codes, predicate_terms = distinct_codes(rows.predicates)
        predicates = [self._predicate(term) for term in predicate_terms.to_pylist()]
        kinds = np.array([kind for _, kind in predicates], dtype=np.int64)[predicate_codes]
        for (pattern, kind), count in zip(predicates, np.bincount(predicate_codes, minlength=len(predicates)).tolist()):
            if kind == _FILTERED and count:
                result.filtered[pattern] += count
        for row in np.flatnonzero(kinds == _BAD).tolist():
            result.reject(int(rows.numbers[row]), predicates[predicate_codes[row]][0], rows.line(row))
        kept = np.flatnonzero(kinds < _FILTERED)
        kinds, predicate_codes = kinds[kept], predicate_codes[kept]
        subject_codes, subject_terms = distinct_codes(rows.subjects.take(kept))
        subjects = [_parsed(lambda term: freebase_id(iri(term)), term) for term in subject_terms.to_pylist()]
        object_codes, object_terms = distinct_codes(rows.objects.take(kept))
        objects = ObjectTerms.parse(object_terms, NAMESPACE, freebase_id, short_datatype)
        bad_subject = np.array([type(s) is BadLine for s in subjects], dtype=bool)[subject_codes]
        bad_object = np.zeros(len(object_terms), dtype=bool)
        bad_object[list(objects.bad)] = True
        bad_object = bad_object[object_codes]
        for position in np.flatnonzero(bad_subject | bad_object).tolist():
            reason = subjects[subject_codes[position]] if bad_subject[position] else objects.bad[object_codes[position]]
            row = int(kept[position])
            result.reject(int(rows.numbers[row]), str(reason), rows.line(row))
        good = ~(bad_subject | bad_object)
        subject_ids = pa.array([s if type(s) is str else "" for s in subjects], pa.string())
        facts = np.flatnonzero(good & (kinds == _FACT))
        heads = subject_ids.take(subject_codes[facts])
        relations = pa.array([predicate for predicate, _ in predicates], pa.string()).take(predicate_codes[facts])
        tails = objects.node_id.take(object_codes[facts])
        attributes = np.flatnonzero(good & (kinds < _FACT))
        codes = object_codes[attributes]
        described, schema_names = attribute_nodes(
            subject_ids.take(subject_codes[attributes]), kinds[attributes], objects.value.take(codes),
            objects.lang.take(codes), objects.literal[codes], self.langs, result)
        result.batch = column_batch(heads, relations, tails, {}, {},
                                    pa.concat_tables([described, literal_nodes(objects, object_codes[facts])]))
        result.rejects.sort(key=lambda reject: reject[0])
        result.state = {"schema_names": schema_names}
        return result

    def _predicate(self, term: str) -> tuple[str, int]:
        """A distinct predicate term as (text, kind): kind an index of :data:`ROLES` (an attribute)
        or ``_FACT`` with the predicate's id, ``_FILTERED`` with the filter pattern that drops it,
        or ``_BAD`` with the reason the term is damaged."""
        try:
            predicate = freebase_id(iri(term))
        except BadLine as error:
            return str(error), _BAD
        if predicate in ROLES:
            return predicate, ROLES.index(predicate)
        pattern = self.filter.match(predicate)
        return (predicate, _FACT) if pattern is None else (pattern, _FILTERED)

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
        return {"relations_labelled": labelled, "cvt_nodes_marked": mark_cvt_nodes(kg, writer.sequence_ranges())}


def mark_cvt_nodes(kg: Any, ranges: list[tuple[int, int]]) -> int:
    """Every ``m.``/``g.`` entity without a name becomes a CVT node; returns how many changed.

    One pass over the nodes, a range of sequence numbers at a time (the writer's ranges for
    updates, sized to the buffer pool), each range its own transaction followed by a checkpoint:
    Kùzu then reads only the range's node groups and holds only their changes. Batches of the
    first so many matches rescanned the whole table each time, and held changes spread over all
    of it.
    """
    marked = 0
    for low, high in ranges:
        marked += int(kg.execute(
            "MATCH (n:Node) WHERE n.seq >= $low AND n.seq < $high AND n.kind = 'entity' "
            "AND (n.name IS NULL OR n.name = '') AND (starts_with(n.id, 'm.') OR starts_with(n.id, 'g.')) "
            "SET n.kind = $cvt RETURN count(*)", {"low": low, "high": high, "cvt": CVT}).get_all()[0][0])
        kg.execute("CHECKPOINT")
        crash_point("marked cvt nodes in a range")
    return marked


def _parsed(parse: Any, term: str) -> Any:
    """``parse(term)``, or the :class:`BadLine` it raised."""
    try:
        return parse(term)
    except BadLine as error:
        return error


def freebase_format(langs: Sequence[str] = ("en",), filter_path: str | Path | None = None) -> FreebaseFormat:
    """The format of a Freebase load with these options (also what ``load freebase --plan`` samples with)."""
    return FreebaseFormat(langs=tuple(lang.strip().lower() for lang in langs if lang.strip()),
                          filter=PredicateFilter.read(filter_path))


def load_freebase(kg: Any, paths: Sequence[str | Path], *, langs: Sequence[str] = ("en",),
                  filter_path: str | Path | None = None, resume: bool = False, workers: int | None = None,
                  max_rejects: int | None = None, progress: bool = True, chunk_bytes: int | None = None,
                  batch_bytes: int | None = None) -> LoadReport:
    """Load Freebase RDF dump files into ``kg``; returns a :class:`~localkg.loaders.report.LoadReport`.

    ``langs`` orders the name languages (first preferred); ``filter_path`` replaces the default
    predicate filter; ``resume`` continues an interrupted load of the same files and options.
    """
    from localkg.loaders.parallel import load_dump

    fmt = freebase_format(langs, filter_path)
    return load_dump(kg, paths, fmt, resume=resume, workers=workers, max_rejects=max_rejects, progress=progress,
                     chunk_bytes=chunk_bytes, batch_bytes=batch_bytes)
