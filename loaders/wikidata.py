"""Wikidata dumps into a localkg database: the JSON dump and the truthy N-Triples dump.

The JSON dump has one entity per line, parsed in worker processes (``loaders/parallel.py``):
an item becomes a node (label in the requested languages as name, aliases, description,
``P31`` values as types), its truthy claims become facts (``ranks="all"`` keeps every rank),
and with ``qualifiers=True`` a qualified statement becomes a ``cvt`` statement node that
``KG.steps`` folds into one move, as Freebase's mediators. Every value type becomes a node
(time, quantity and coordinates as typed literals); a property fills the relation catalogue.
The truthy dump (``latest-truthy.nt.gz``) is N-Triples: ``wdt:`` predicates become facts,
label predicates attributes, and everything else is filtered by namespace.

docs/loading.md has the full mapping and how each line is counted.
"""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import orjson

from localkg.errors import LoadError
from localkg.loaders.ntriples import BadLine, Literal, parse_triple
from localkg.loaders.parallel import Chunk, ChunkResult, DumpFormat, lang_rank, split_lines
from localkg.loaders.rejects import NUL_REASON, batch_has_nul
from localkg.loaders.report import LoadReport
from localkg.loaders.sources import open_binary
from localkg.loaders.triples import literal_node_id
from localkg.store.model import CVT, LITERAL
from localkg.store.batch import FactBatch, NodeAttributes

ENTITY_IRI = "http://www.wikidata.org/entity/"
DIRECT = "http://www.wikidata.org/prop/direct/"
EARTH = "http://www.wikidata.org/entity/Q2"
INSTANCE_OF = "P31"
RANKS = ("truthy", "all")
FORMATS = ("auto", "json", "truthy-nt")
_ENTITY_PREFIX = {"item": "Q", "property": "P", "lexeme": "L"}
_TIME = re.compile(r"([+-]?)0*(\d+)-(\d\d)-(\d\d)T(\d\d:\d\d:\d\d)Z?")
_NO_RANK = 1 << 30
_SHORT_DATATYPES = (
    ("http://www.w3.org/2001/XMLSchema#", "xsd:"),
    ("http://www.opengis.net/ont/geosparql#", "geo:"),
    (ENTITY_IRI, "wd:"),
)
_NAME_PREDICATES = {"http://www.w3.org/2000/01/rdf-schema#label", "http://schema.org/name",
                    "http://www.w3.org/2004/02/skos/core#prefLabel"}
_ALIAS_PREDICATE = "http://www.w3.org/2004/02/skos/core#altLabel"
_DESCRIPTION_PREDICATE = "http://schema.org/description"


def wikidata_time(value: dict[str, Any]) -> tuple[str, str]:
    """(lexical form, datatype) of a Wikidata time value at its precision.

    >>> wikidata_time({"time": "+1952-03-11T00:00:00Z", "precision": 11})
    ('1952-03-11', 'xsd:date')
    >>> wikidata_time({"time": "+00000001952-03-00T00:00:00Z", "precision": 10})
    ('1952-03', 'xsd:gYearMonth')
    >>> wikidata_time({"time": "-0500-00-00T00:00:00Z", "precision": 7})
    ('-0500', 'xsd:gYear')
    """
    match = _TIME.fullmatch(str(value.get("time", "")))
    if match is None:
        raise ValueError("malformed time")
    sign, year, month, day, clock = match.groups()
    year = ("-" if sign == "-" else "") + year.rjust(4, "0")
    precision = int(value.get("precision", 11))
    if precision >= 12 and month != "00" and day != "00":
        return f"{year}-{month}-{day}T{clock}Z", "xsd:dateTime"
    if precision >= 11 and month != "00" and day != "00":
        return f"{year}-{month}-{day}", "xsd:date"
    if precision >= 10 and month != "00":
        return f"{year}-{month}", "xsd:gYearMonth"
    return year, "xsd:gYear"


def short_datatype(datatype: str) -> str:
    for long, short in _SHORT_DATATYPES:
        if datatype.startswith(long):
            return short + datatype[len(long):]
    return datatype


def _add_literal(batch: FactBatch, value: str, datatype: str = "", lang: str = "") -> str:
    node_id = literal_node_id(value, datatype, lang)
    if node_id not in batch.nodes:
        batch.nodes[node_id] = NodeAttributes(name=value, kind=LITERAL, value=value, datatype=datatype, lang=lang)
    return node_id


@dataclass
class WikidataJsonFormat(DumpFormat):
    """How to read the Wikidata JSON dump (runs in worker processes; picklable)."""

    langs: tuple[str, ...] = ("en",)
    ranks: str = "truthy"
    qualifiers: bool = False
    name: str = "wikidata"

    def options(self) -> dict[str, Any]:
        return {"format": "json", "langs": list(self.langs), "ranks": self.ranks, "qualifiers": self.qualifiers}

    def parse(self, chunk: Chunk) -> ChunkResult:
        result = ChunkResult(FactBatch())
        for number, line in split_lines(chunk, result, decode=False):
            line = line.strip()
            if line in (b"[", b"]"):
                result.skipped["array bracket"] += 1
                continue
            if line.endswith(b","):
                line = line[:-1]
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as error:
                result.reject(number, _json_reason(line, error), line)
                continue
            if not isinstance(record, dict):
                result.reject(number, "not a JSON object", line)
                continue
            entities = record["entities"].values() if isinstance(record.get("entities"), dict) else [record]
            if b"\\u0000" in line and self._loads_nul(entities):
                result.reject(number, NUL_REASON, line)
                continue
            for entity in entities:
                try:
                    self._entity(entity, result)
                except (KeyError, TypeError, AttributeError, ValueError) as error:
                    result.reject(number, f"malformed entity ({type(error).__name__}: {error})", line)
        return result

    def _loads_nul(self, entities: Any) -> bool:
        """Whether the line's entities would store a NUL character (written ``\\u0000`` in JSON), read
        into a scratch batch: only what the load keeps counts (a NUL in a label in another
        language, say, does not)."""
        scratch = ChunkResult(FactBatch())
        for entity in entities:
            try:
                self._entity(entity, scratch)
            except (KeyError, TypeError, AttributeError, ValueError):
                pass  # rejected as malformed by the real pass
        return batch_has_nul(scratch.batch)

    def _entity(self, entity: dict[str, Any], result: ChunkResult) -> None:
        kind = entity.get("type")
        if kind == "item":
            self._item(entity, result)
        elif kind == "property":
            self._property(entity, result)
        elif "missing" in entity or kind is None:
            result.filtered["missing entity"] += 1
        else:
            result.filtered[f"{kind} entity"] += 1

    def _terms(self, entity: dict[str, Any], result: ChunkResult) -> tuple[str, list[str], str]:
        name, name_rank, aliases = "", _NO_RANK, []
        for lang, label in (entity.get("labels") or {}).items():
            rank = lang_rank(self.langs, lang)
            if rank is None or not label.get("value"):
                continue
            if rank < name_rank:
                if name:
                    aliases.append(name)
                name, name_rank = label["value"], rank
            else:
                aliases.append(label["value"])
        for lang, values in (entity.get("aliases") or {}).items():
            if lang_rank(self.langs, lang) is not None:
                aliases.extend(value["value"] for value in values if value.get("value"))
        description, description_rank = "", _NO_RANK
        for lang, text in (entity.get("descriptions") or {}).items():
            rank = lang_rank(self.langs, lang)
            if rank is not None and rank < description_rank and text.get("value"):
                description, description_rank = text["value"], rank
        result.attributes += bool(name) + len(aliases) + bool(description)
        return name, list(dict.fromkeys(aliases)), description

    def _property(self, entity: dict[str, Any], result: ChunkResult) -> None:
        name, _, description = self._terms(entity, result)
        result.batch.add_relation(entity["id"], name, description)
        result.details["properties"] += 1

    def _item(self, entity: dict[str, Any], result: ChunkResult) -> None:
        item = entity["id"]
        name, aliases, description = self._terms(entity, result)
        types: list[str] = []
        for prop, statements in (entity.get("claims") or {}).items():
            for statement in self._select(statements, result):
                self._statement(item, prop, statement, result, types)
        result.batch.nodes[item] = NodeAttributes(name=name, aliases=aliases, description=description,
                                                  types=list(dict.fromkeys(types)), explicit=True)
        result.details["items"] += 1

    def _select(self, statements: list[dict[str, Any]], result: ChunkResult) -> list[dict[str, Any]]:
        if self.ranks == "all":
            return statements
        preferred = [s for s in statements if s.get("rank") == "preferred"]
        chosen = preferred or [s for s in statements if s.get("rank", "normal") == "normal"]
        for statement in statements:
            if statement.get("rank") == "deprecated":
                result.filtered["deprecated rank"] += 1
            elif preferred and statement.get("rank") != "preferred":
                result.filtered["normal rank beside a preferred one"] += 1
        return chosen

    def _statement(self, item: str, prop: str, statement: dict[str, Any], result: ChunkResult,
                   types: list[str]) -> None:
        batch = result.batch
        value = self._value(statement["mainsnak"], result)
        if value is None:
            return
        result.details["statements"] += 1
        if prop == INSTANCE_OF and not value.startswith('"'):
            types.append(value)
        qualifiers = statement.get("qualifiers") if self.qualifiers else None
        if not qualifiers:
            batch.add_fact(item, prop, value)
            return
        node = statement["id"]
        batch.nodes[node] = NodeAttributes(kind=CVT)
        batch.add_fact(item, prop, node)
        batch.add_fact(node, prop, value)
        result.details["statement_nodes"] += 1
        for qualifier, snaks in qualifiers.items():
            for snak in snaks:
                qualifier_value = self._value(snak, result, "qualifier ")
                if qualifier_value is not None:
                    batch.add_fact(node, qualifier, qualifier_value)
                    result.details["qualifiers"] += 1

    def _value(self, snak: dict[str, Any], result: ChunkResult, role: str = "") -> str | None:
        """The node id of a snak's value (adding literal nodes to the batch); None when skipped."""
        snaktype = snak.get("snaktype", "value")
        if snaktype != "value":
            result.skipped[role + snaktype] += 1
            return None
        datavalue = snak.get("datavalue") or {}
        kind, value = datavalue.get("type"), datavalue.get("value")
        batch = result.batch
        try:
            if kind == "wikibase-entityid":
                return value.get("id") or _ENTITY_PREFIX[value["entity-type"]] + str(value["numeric-id"])
            if kind == "string":
                return _add_literal(batch, str(value))
            if kind == "monolingualtext":
                return _add_literal(batch, value["text"], lang=value["language"])
            if kind == "time":
                return _add_literal(batch, *wikidata_time(value))
            if kind == "quantity":
                amount = str(value["amount"])
                unit = str(value.get("unit", "1"))
                return _add_literal(batch, amount[1:] if amount.startswith("+") else amount,
                                    "xsd:decimal" if unit == "1" else short_datatype(unit))
            if kind == "globecoordinate":
                point = f"Point({value['longitude']} {value['latitude']})"
                globe = value.get("globe") or EARTH
                return _add_literal(batch, point if globe == EARTH else f"<{globe}> {point}", "geo:wktLiteral")
        except (KeyError, TypeError, AttributeError, ValueError):
            result.skipped[f"{role}malformed {kind} value"] += 1
            return None
        result.skipped[f"{role}unsupported value type {kind}"] += 1
        return None


def _json_reason(line: bytes, error: Exception) -> str:
    if b"\x00" in line:
        return NUL_REASON
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid UTF-8"
    return "truncated line" if "end of data" in str(error) else "invalid JSON"


@dataclass
class WikidataTruthyFormat(DumpFormat):
    """How to read Wikidata's truthy N-Triples dump (runs in worker processes; picklable)."""

    langs: tuple[str, ...] = ("en",)
    name: str = "wikidata"

    def options(self) -> dict[str, Any]:
        return {"format": "truthy-nt", "langs": list(self.langs)}

    def parse(self, chunk: Chunk) -> ChunkResult:
        result = ChunkResult(FactBatch())
        batch = result.batch
        terms: dict[str, dict[str, Any]] = defaultdict(lambda: {"name": "", "rank": _NO_RANK, "aliases": [],
                                                                "description": "", "drank": _NO_RANK})
        for number, line in split_lines(chunk, result):
            try:
                s, p, o = parse_triple(line)
            except BadLine as error:
                result.reject(number, str(error), line)
                continue
            if not s.startswith(ENTITY_IRI):
                result.filtered["subject outside wd:"] += 1
                continue
            subject = s[len(ENTITY_IRI):]
            if p.startswith(DIRECT):
                self._fact(subject, p[len(DIRECT):], o, result)
            elif isinstance(o, Literal) and p in _NAME_PREDICATES | {_ALIAS_PREDICATE, _DESCRIPTION_PREDICATE}:
                self._term(terms[subject], p, o, result)
            else:
                result.filtered[_namespace(p)] += 1
        for subject, found in terms.items():
            if subject.startswith("P") and subject[1:].isdigit():
                batch.add_relation(subject, found["name"], found["description"])
            else:
                batch.nodes[subject] = NodeAttributes(name=found["name"], aliases=list(dict.fromkeys(found["aliases"])),
                                                      description=found["description"], explicit=True)
        return result

    def _fact(self, subject: str, prop: str, value: str | Literal, result: ChunkResult) -> None:
        if isinstance(value, Literal):
            tail = _add_literal(result.batch, value.value, short_datatype(value.datatype), value.lang)
        elif value.startswith(ENTITY_IRI):
            tail = value[len(ENTITY_IRI):]
        elif value.startswith("_:") or "/.well-known/genid/" in value:
            result.skipped["somevalue"] += 1
            return
        else:
            tail = value
        result.batch.add_fact(subject, prop, tail)

    def _term(self, found: dict[str, Any], predicate: str, value: Literal, result: ChunkResult) -> None:
        rank = lang_rank(self.langs, value.lang) if value.lang else None
        if rank is None:
            result.filtered["label in another language"] += 1
            return
        result.attributes += 1
        if predicate == _ALIAS_PREDICATE:
            found["aliases"].append(value.value)
        elif predicate == _DESCRIPTION_PREDICATE:
            if rank < found["drank"]:
                found["description"], found["drank"] = value.value, rank
        elif rank < found["rank"]:
            if found["name"] and found["name"] != value.value:
                found["aliases"].append(found["name"])
            found["name"], found["rank"] = value.value, rank
        elif value.value != found["name"]:
            found["aliases"].append(value.value)


def _namespace(iri: str) -> str:
    cut = max(iri.rfind("#"), iri.rfind("/"))
    return iri[:cut + 1] if cut > 0 else iri


def detect_format(path: Path) -> str:
    """``json`` when the file starts with ``[`` or ``{``, ``truthy-nt`` when with ``<``."""
    with open_binary(path) as handle:
        try:
            head = handle.read(4096).lstrip()
        except (EOFError, OSError, ValueError):
            head = b""
    if head[:1] in (b"[", b"{"):
        return "json"
    if head[:1] == b"<":
        return "truthy-nt"
    raise LoadError(f"cannot tell whether {path} is the JSON or the truthy N-Triples dump; pass --format")


def load_wikidata(kg: Any, paths: Sequence[str | Path], *, langs: Sequence[str] = ("en",), ranks: str = "truthy",
                  qualifiers: bool = False, format: str = "auto", resume: bool = False, workers: int | None = None,
                  max_rejects: int | None = None, progress: bool = True, chunk_bytes: int | None = None,
                  batch_bytes: int | None = None) -> LoadReport:
    """Load Wikidata dump files into ``kg``; returns a :class:`~localkg.loaders.report.LoadReport`."""
    from localkg.loaders.parallel import load_dump

    fmt = wikidata_format(paths, langs, ranks, qualifiers, format)
    return load_dump(kg, paths, fmt, resume=resume, workers=workers, max_rejects=max_rejects, progress=progress,
                     chunk_bytes=chunk_bytes, batch_bytes=batch_bytes)


def wikidata_format(paths: Sequence[str | Path], langs: Sequence[str] = ("en",), ranks: str = "truthy",
                    qualifiers: bool = False, format: str = "auto") -> DumpFormat:
    """The format of a Wikidata load of ``paths`` with these options, ``auto`` detected from the files
    (also what ``load wikidata --plan`` samples with)."""
    if ranks not in RANKS:
        raise LoadError(f"--ranks must be one of {', '.join(RANKS)}, not {ranks!r}")
    if format not in FORMATS:
        raise LoadError(f"--format must be one of {', '.join(FORMATS)}, not {format!r}")
    paths = [Path(p) for p in paths]
    for path in paths:
        if not path.is_file():
            raise LoadError(f"cannot read {path}: no such file")
    if format == "auto":
        found = {detect_format(path) for path in paths}
        if len(found) > 1:
            raise LoadError("the files mix JSON and N-Triples dumps; load them separately")
        format = found.pop()
    wanted = tuple(lang.strip().lower() for lang in langs if lang.strip())
    fmt: DumpFormat
    if format == "json":
        fmt = WikidataJsonFormat(langs=wanted, ranks=ranks, qualifiers=qualifiers)
    else:
        if qualifiers or ranks != "truthy":
            raise LoadError("the truthy N-Triples dump has neither qualifiers nor ranks; "
                            "use the JSON dump for --qualifiers or --ranks all")
        fmt = WikidataTruthyFormat(langs=wanted)
    return fmt
