"""Custom knowledge graphs from triple files: TSV, CSV, pipe-separated, N-Triples, Turtle, JSONL.

``load_triples`` streams files through the store's :class:`GraphWriter` in batches, with a
progress bar. Malformed lines go to the rejects file with their line number and reason, and
the :class:`LoadReport` accounts for every line::

    lines_read = facts_loaded + duplicates + attributes + skipped + rejected

RDF is parsed by pyoxigraph (N-Triples line by line, Turtle as a document) and its label and
``rdf:type`` predicates become node attributes rather than facts. Node ids are the file's own
strings. docs/loading.md has each format's rules.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import time
from pathlib import Path
from typing import Callable, Iterator, Sequence

import orjson
from tqdm import tqdm

from localkg.errors import LoadError
from localkg.loaders.checkpoint import load_key
from localkg.loaders.delimited_columns import plain_block
from localkg.loaders.rejects import NUL_REASON, RejectLog, has_nul
from localkg.loaders.report import LoadReport
from localkg.loaders.sources import iter_lines, iter_lines_with_position, open_binary
from localkg.store.kg import KG
from localkg.store.batch import ColumnBatch, FactBatch

FORMATS = ("auto", "tsv", "csv", "psv", "nt", "ttl", "jsonl")
DELIMITERS = {"tsv": "\t", "psv": "|", "csv": ","}  # the formats a block of plain lines may take as columns
BATCH_LINES = 100_000
BOM = "\ufeff"  # a UTF-8 byte order mark, dropped from the start of a file

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
NAME_PREDICATES = {
    "http://www.w3.org/2000/01/rdf-schema#label",
    "http://schema.org/name",
    "https://schema.org/name",
    "http://www.w3.org/2004/02/skos/core#prefLabel",
    "http://xmlns.com/foaf/0.1/name",
}
ALIAS_PREDICATES = {"http://www.w3.org/2004/02/skos/core#altLabel"}
DESCRIPTION_PREDICATES = {
    "http://www.w3.org/2000/01/rdf-schema#comment",
    "http://schema.org/description",
    "https://schema.org/description",
    "http://purl.org/dc/terms/description",
}
XSD = "http://www.w3.org/2001/XMLSchema#"


# ---------------------------------------------------------------- parsing
class Rejected(Exception):
    """A line that cannot be used; the message is the reason."""


class Header(Exception):
    """The first line of a delimited file names its columns."""


def detect_format(path: Path) -> str:
    """Guess the format from the name, then from the first data line."""
    name = path.name.lower()
    for suffix in (".gz", ".bz2"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    for ext, fmt in ((".nt", "nt"), (".ttl", "ttl"), (".jsonl", "jsonl"), (".csv", "csv"), (".psv", "psv"),
                     (".tsv", "tsv")):
        if name.endswith(ext):
            return fmt
    with open_binary(path) as handle:
        for raw in handle:
            line = raw.decode("utf-8", "replace").strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("{"):
                return "jsonl"
            if line.startswith("@prefix") or line.startswith("PREFIX"):
                return "ttl"
            if line.startswith("<") and line.endswith("."):
                return "nt"
            if line.count("\t") >= 2:
                return "tsv"
            if line.count("|") == 2:
                return "psv"
            if line.count(",") >= 2:
                return "csv"
            break
    raise LoadError(f"cannot tell the format of {path}; pass --format ({', '.join(FORMATS[1:])})")


def _split(line: str, separator: str) -> tuple[str, str, str]:
    parts = line.split(separator)
    if len(parts) != 3:
        raise Rejected(f"expected 3 fields separated by {separator!r}, found {len(parts)}")
    head, relation, tail = (part.strip() for part in parts)
    if not head or not relation or not tail:
        raise Rejected("empty field")
    return head, relation, tail


def _parse_csv(line: str) -> tuple[str, str, str]:
    """One CSV record per line: a quoted field cannot span lines (the file is read line by line, so
    a line that opens a quote it does not close, or a quote inside an unquoted field, which is
    where the rest of such a field lands, is rejected rather than loaded corrupted)."""
    try:
        rows = list(csv.reader([line], strict=True))
    except csv.Error as error:
        raise Rejected(f"malformed CSV ({error}; a quoted field cannot span lines)") from None
    if rows and any('"' in field for field in rows[0]) and line.count('"') % 2:
        raise Rejected("a quote inside an unquoted CSV field (a quoted field cannot span lines)")
    if not rows or len(rows[0]) != 3:
        raise Rejected(f"expected 3 CSV fields, found {len(rows[0]) if rows else 0}")
    head, relation, tail = (field.strip() for field in rows[0])
    if not head or not relation or not tail:
        raise Rejected("empty field")
    return head, relation, tail


def _parse_jsonl(line: str) -> tuple[str, str, str]:
    try:
        record = orjson.loads(line)
    except orjson.JSONDecodeError as error:
        raise Rejected(f"invalid JSON: {error}") from None
    if not isinstance(record, dict):
        raise Rejected("expected a JSON object")
    values = [record.get(key) for key in ("head", "relation", "tail")]
    if not all(isinstance(value, str) and value.strip() for value in values):
        raise Rejected("needs non-empty string fields head, relation and tail")
    if has_nul(*values):  # written \u0000
        raise Rejected(NUL_REASON)
    return values[0].strip(), values[1].strip(), values[2].strip()


def _is_header(fields: tuple[str, str, str]) -> bool:
    return tuple(f.lower() for f in fields) in {("head", "relation", "tail"), ("subject", "predicate", "object"),
                                                  ("h", "r", "t"), ("source", "relation", "target")}


# ---------------------------------------------------------------- RDF terms
class _RdfMapper:
    """Turns pyoxigraph triples into facts and node attributes of a batch."""

    def __init__(self, source: Path):
        self.blank_prefix = "_:" + hashlib.blake2b(str(source.resolve()).encode(), digest_size=4).hexdigest() + ":"

    def node_id(self, term) -> str:
        import pyoxigraph

        if isinstance(term, pyoxigraph.BlankNode):
            return self.blank_prefix + term.value
        return term.value

    def add(self, triple, batch: FactBatch) -> tuple[str, str, str] | None:
        """Add ``triple`` to ``batch``; return the fact, or None when it became an attribute."""
        import pyoxigraph

        subject = self.node_id(triple.subject)
        predicate = triple.predicate.value
        obj = triple.object
        if has_nul(subject, predicate, obj.value):  # pyoxigraph refuses it in IRIs, not in literals
            raise Rejected(NUL_REASON)
        if isinstance(obj, pyoxigraph.Literal):
            if predicate in NAME_PREDICATES:
                batch.add_entity(subject, name=obj.value, explicit=True, kind="entity")
                return None
            if predicate in ALIAS_PREDICATES:
                batch.add_entity(subject, aliases=[obj.value], explicit=True)
                return None
            if predicate in DESCRIPTION_PREDICATES:
                batch.add_entity(subject, description=obj.value, explicit=True)
                return None
            literal_id = literal_node_id(obj.value, obj.datatype.value if obj.datatype else "", obj.language or "")
            batch.add_literal(literal_id, obj.value, _short_datatype(obj.datatype.value if obj.datatype else ""),
                              obj.language or "")
            tail = literal_id
        elif predicate == RDF_TYPE:
            batch.add_entity(subject, types=[obj.value], explicit=True)
            return None
        else:
            tail = self.node_id(obj)
            self._declare(obj, tail, batch)
        self._declare(triple.subject, subject, batch)
        return subject, predicate, tail

    @staticmethod
    def _declare(term, node_id: str, batch: FactBatch) -> None:
        import pyoxigraph

        if isinstance(term, pyoxigraph.BlankNode):
            batch.add_entity(node_id, kind="cvt")
        elif node_id not in batch.nodes:
            batch.add_entity(node_id, name=_local_name(node_id))


def _local_name(iri: str) -> str:
    tail = iri.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1]
    return tail.replace("_", " ") or iri


def _short_datatype(datatype: str) -> str:
    if datatype.startswith(XSD):
        return "xsd:" + datatype[len(XSD):]
    return datatype


def literal_node_id(value: str, datatype: str = "", lang: str = "") -> str:
    """The id of a literal node: its N-Triples spelling, with ``xsd:`` abbreviated.

    >>> literal_node_id("1961-08-04", "http://www.w3.org/2001/XMLSchema#date")
    '"1961-08-04"^^xsd:date'
    >>> literal_node_id("Paris", lang="fr")
    '"Paris"@fr'
    """
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    if lang:
        return f'"{escaped}"@{lang}'
    short = _short_datatype(datatype)
    if short and short != "xsd:string":
        return f'"{escaped}"^^{short}'
    return f'"{escaped}"'


# ---------------------------------------------------------------- loading
def load_triples(kg: KG, paths: Sequence[str | Path], format: str = "auto", names: str | Path | None = None,
                 max_rejects: int | None = None, batch_lines: int = BATCH_LINES, progress: bool = True) -> LoadReport:
    """Load triple files into ``kg`` (appending, deduplicating) and return what happened.

    Raises :class:`LoadError` for an unreadable or truncated file and
    :class:`TooManyRejectsError` at reject ``max_rejects + 1``; the batches written before either
    are kept (not the one that holds the line), and loading the same files again adds only what
    is missing. Writes that an interrupted load of the same files staged count as this load's
    (``LoadReport.add_recovered``).
    """
    if format not in FORMATS:
        raise LoadError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    started = time.perf_counter()
    report = LoadReport(format, [str(path) for path in paths])
    for path in map(Path, paths):
        if not path.exists():
            raise LoadError(f"cannot read {path}: no such file")
    name_map = read_names(Path(names)) if names else {}
    rejects = RejectLog(kg.path, max_rejects)
    try:
        with kg.writer() as writer:
            key = _load_key(paths, format, names)
            report.add_recovered(writer.recovered, key)
            for index, path in enumerate(map(Path, paths)):
                fmt = detect_format(path) if format == "auto" else format
                batches = (_turtle_batches(path, batch_lines, report, rejects) if fmt == "ttl"
                           else _line_batches(path, fmt, batch_lines, report, rejects, name_map))
                bar = tqdm(total=path.stat().st_size, unit="B", unit_scale=True, desc=path.name,
                           disable=not progress, leave=False)
                with bar:
                    for batch, position, last_line in batches:
                        if isinstance(batch, FactBatch):  # columns come with their names
                            _apply_names(batch, name_map)
                        report.add_written(writer.write(batch, {"load": key, "through": [index, last_line]}))
                        report.chunks += 1
                        rejects.written_through(report.facts_loaded, str(path), last_line)
                        bar.update(max(0, position - bar.n))
        report.complete = True
    finally:
        rejects.close()
        report.rejected = rejects.total
        report.rejected_by_reason = dict(rejects.by_reason)
        report.rejects_file = str(rejects.path) if rejects.total else ""
        report.seconds = round(time.perf_counter() - started, 3)
    return report


def _load_key(paths: Sequence[str | Path], format: str, names: str | Path | None) -> str:
    """What makes two triple loads the same load: the files (as they are now) and the options."""
    files = [[str(path.resolve()), path.stat().st_size, path.stat().st_mtime_ns] for path in map(Path, paths)]
    return load_key({"files": files, "format": format, "names": str(Path(names).resolve()) if names else ""})


def read_names(path: Path) -> dict[str, str]:
    """An ``id<TAB>name`` file (FB15k-237's entity2text.txt) as a dict."""
    names: dict[str, str] = {}
    for number, raw in iter_lines(path):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            continue
        node_id, _, name = line.partition("\t")
        if not name:
            raise LoadError(f"{path}:{number}: a names file has lines `id<TAB>name`")
        if has_nul(line):
            raise LoadError(f"{path}:{number}: a NUL character in the names file; remove it and load again")
        names[node_id] = name.strip()
    return names


def _apply_names(batch: FactBatch, name_map: dict[str, str]) -> None:
    if not name_map:
        return
    for node_id, attributes in batch.nodes.items():
        name = name_map.get(node_id)
        if name:
            attributes.name = name
            attributes.explicit = True


def _line_parser(fmt: str, path: Path) -> Callable[[str, FactBatch], tuple[str, str, str] | None]:
    """A function that parses one stripped line into the batch and returns its fact (None: attribute)."""
    if fmt == "nt":
        import pyoxigraph

        mapper = _RdfMapper(path)

        def parse_nt(line: str, batch: FactBatch) -> tuple[str, str, str] | None:
            try:
                triples = list(pyoxigraph.parse(line.encode("utf-8"), format=pyoxigraph.RdfFormat.N_TRIPLES))
            except SyntaxError as error:
                raise Rejected(f"invalid N-Triples: {_without_line(str(error).splitlines()[0])}") from None
            if len(triples) != 1:
                raise Rejected("expected one triple on the line")
            return mapper.add(triples[0], batch)

        return parse_nt
    return _PlainLines(fmt)


class _PlainLines:
    """The parser of the non-RDF formats: three fields a line, the file's first data line skipped
    when it names the columns (``_is_header``); ``seen_data`` says whether that line has passed."""

    SPLITTERS: dict[str, Callable[[str], tuple[str, str, str]]] = {
        "tsv": lambda line: _split(line, "\t"),
        "psv": lambda line: _split(line, "|"),
        "csv": _parse_csv,
        "jsonl": _parse_jsonl,
    }

    def __init__(self, fmt: str):
        self.split = self.SPLITTERS[fmt]
        self.separator = DELIMITERS.get(fmt)
        self.seen_data = False

    def __call__(self, line: str, batch: FactBatch) -> tuple[str, str, str] | None:
        head, relation, tail = self.split(line)
        if not self.seen_data and _is_header((head, relation, tail)):
            raise Header
        self.seen_data = True
        for node_id in (head, tail):
            if node_id not in batch.nodes:
                batch.add_entity(node_id, name=node_id)
        return head, relation, tail

    def columns(self, raw_lines: list[bytes], names: dict[str, str]) -> ColumnBatch | None:
        """The block as columns when every line in it is plain (``delimited_columns``), else None."""
        if self.separator is None:
            return None
        if not self.seen_data and _is_header(tuple(field.strip() for field in raw_lines[0].decode(
                "utf-8", "replace").split(self.separator))):
            return None
        batch = plain_block(raw_lines, self.separator, quotes_allowed=self.separator != ",", names=names)
        self.seen_data = self.seen_data or batch is not None
        return batch


def _without_line(message: str) -> str:
    """pyoxigraph's message for a one-line parse, without its position "line 1" (the reject's own
    line number says where).

    >>> _without_line("Parser error at line 1 between columns 1 and 4: No scheme (line 1)")
    'Parser error between columns 1 and 4: No scheme'
    """
    return re.sub(r" \(line 1\)$", "", message).replace(" at line 1 between", " between")


def _line_batches(path: Path, fmt: str, batch_lines: int, report: LoadReport, rejects: RejectLog,
                  names: dict[str, str]) -> Iterator[tuple[FactBatch | ColumnBatch, int, int]]:
    """The file's lines parsed into batches of ``batch_lines`` lines, each with the bytes of the
    file (compressed, for a compressed file) read by its end and its last line's number. A block
    of plain delimited lines becomes columns at once (``delimited_columns``, names applied), any
    other block is parsed line by line. A damaged file (a truncated ``.gz``) ends with its last
    batch, every complete line before the damage in it, then :class:`LoadError` saying so."""
    parse = _line_parser(fmt, path)
    lines = iter_lines_with_position(path)
    position, number_read, damage = 0, 0, None
    while damage is None:
        block: list[tuple[int, bytes]] = []
        try:
            for number, raw, position in lines:
                block.append((number, raw))
                if len(block) == batch_lines:
                    break
        except LoadError as error:
            damage = error
        if not block and damage is None:
            break
        number_read = block[-1][0] if block else number_read
        columns = parse.columns([raw for _, raw in block], names) if isinstance(parse, _PlainLines) and block else None
        if columns is not None:
            report.lines_read += len(block)
            batch: FactBatch | ColumnBatch = columns
        else:
            batch = _parse_lines(path, block, parse, report, rejects)
        end = position if damage is not None or len(block) == batch_lines else path.stat().st_size
        if len(batch) or (isinstance(batch, FactBatch) and batch.nodes) or damage is not None:
            yield batch, end, number_read
        if len(block) < batch_lines:
            break
    if damage is not None:
        raise LoadError(f"{damage}; the {number_read:,} lines read before it were loaded") from None


def _parse_lines(path: Path, block: list[tuple[int, bytes]],
                 parse: Callable[[str, FactBatch], tuple[str, str, str] | None], report: LoadReport,
                 rejects: RejectLog) -> FactBatch:
    """A block of lines parsed one by one: rejects with their line numbers, skips counted."""
    batch = FactBatch()
    for number, raw in block:
        report.lines_read += 1
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            rejects.reject(str(path), number, "invalid UTF-8", raw)
            continue
        line = line.rstrip("\r\n")
        if number == 1:
            line = line.removeprefix(BOM)
        if not line.strip() or line.lstrip().startswith("#"):
            _skip(report, "blank line or comment")
            continue
        if has_nul(line):  # raw; the parsers check what their escapes make (JSON, N-Triples)
            rejects.reject(str(path), number, NUL_REASON, raw)
            continue
        try:
            fact = parse(line, batch)
        except Rejected as reason:
            rejects.reject(str(path), number, str(reason), raw)
            continue
        except Header:
            _skip(report, "header")
            continue
        if fact is None:
            report.attributes += 1
        else:
            batch.add_fact(*fact)
    return batch


def _skip(report: LoadReport, reason: str) -> None:
    report.skipped += 1
    report.skipped_by_reason[reason] = report.skipped_by_reason.get(reason, 0) + 1


def _turtle_batches(path: Path, batch_lines: int, report: LoadReport,
                    rejects: RejectLog) -> Iterator[tuple[FactBatch, int, int]]:
    """A Turtle document's statements in batches, as :func:`_line_batches` gives lines; the
    statement's number stands for its line (pyoxigraph gives no positions), as in ``lines_read``."""
    import pyoxigraph

    mapper = _RdfMapper(path)
    batch, statements = FactBatch(), 0
    try:
        with open_binary(path) as handle:
            reader = io.BufferedReader(handle)
            if reader.peek(3)[:3] == BOM.encode():
                reader.read(3)
            for triple in pyoxigraph.parse(reader, format=pyoxigraph.RdfFormat.TURTLE,
                                           base_iri=path.resolve().as_uri()):
                statements += 1
                report.lines_read += 1  # statements: a Turtle statement may span lines
                try:
                    fact = mapper.add(triple, batch)
                except Rejected as reason:
                    rejects.reject(str(path), statements, str(reason), str(triple))
                else:
                    if fact is None:
                        report.attributes += 1
                    else:
                        batch.add_fact(*fact)
                if statements % batch_lines == 0:
                    yield batch, 0, statements
                    batch = FactBatch()
    except SyntaxError as error:
        yield batch, 0, statements
        raise LoadError(f"{path}: Turtle syntax error: {str(error).splitlines()[0]} "
                        f"(the {statements:,} statements before it were loaded)") from None
    yield batch, path.stat().st_size, statements
