"""Fuzzing the line parsers of `load triples` (TSV, CSV, PSV, N-Triples, JSONL, and Turtle as a
document) with generated hostile input: byte order marks, quotes, escapes, separators inside
values, invalid UTF-8, NUL bytes, huge lines, truncated lines. Seeded (plain ``random``) and
bounded: a few hundred lines per format. Nothing may crash, and every line is either loaded
exactly (the fact an independent reading of the line gives, and no other) or rejected with its
line number."""
from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest

from localkg.errors import LoadError
from localkg.loaders.triples import literal_node_id, load_triples
from localkg.store import KG

LINES = 250
PIECES = ['"', "'", "\\", ",", "|", ";", "#", "é", "中", "😀", "\u200b", "\ufeff", "\x00", " ", "\x7f", "\\n",
          "\\t", "\\u0041", "<", ">", "{", "}", "[", "]", ":", "."]


def hostile(rng: random.Random, huge: bool = False) -> str:
    """A value built from letters and hostile pieces (sometimes 200k characters long)."""
    size = 200_000 if huge else rng.randint(1, 12)
    return "".join(rng.choice(PIECES) if rng.random() < 0.4 else rng.choice("abcxyz") for _ in range(size))


def delimited(rng: random.Random, separator: str) -> tuple[str, ...]:
    return tuple(hostile(rng).replace(separator, "").replace("\n", "") or "v" for _ in range(3))


def csv_line(values: tuple[str, ...]) -> str:
    return ",".join('"' + v.replace('"', '""') + '"' if any(c in v for c in ',"') or v != v.strip() else v
                    for v in values)


def nt_line(rng: random.Random) -> tuple[str, tuple[str, str, str]]:
    subject, predicate = (f"http://e.org/{rng.choice('abc')}{rng.randrange(50)}" for _ in range(2))
    if rng.random() < 0.5:
        target = f"http://e.org/{rng.randrange(50)}"
        return f"<{subject}> <{predicate}> <{target}> .", (subject, predicate, target)
    text = hostile(rng).replace("\x00", "")
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'<{subject}> <{predicate}> "{escaped}" .', (subject, predicate, literal_node_id(text))


def generated(fmt: str, rng: random.Random) -> list[tuple[bytes, tuple[str, str, str] | None]]:
    """The file's lines (without their line break), valid and damaged mixed, each with the fact
    it says (None: none), read independently of the loader."""
    lines = []
    for number in range(LINES):
        roll = rng.random()
        nt_fact = None
        if fmt == "nt":
            line, nt_fact = nt_line(rng)
        elif fmt == "jsonl":
            line = json.dumps(dict(zip(("head", "relation", "tail"), delimited(rng, "\n"))), ensure_ascii=rng.random() < 0.5)
        elif fmt == "csv":
            line = csv_line(delimited(rng, "\n"))
        else:
            line = ("\t" if fmt == "tsv" else "|").join(delimited(rng, "\t" if fmt == "tsv" else "|"))
        raw = line.encode("utf-8")
        if roll < 0.08:
            raw = raw[: rng.randrange(max(1, len(raw) - 3))]  # truncated
        elif roll < 0.14:
            at = rng.randrange(len(raw) + 1)
            raw = raw[:at] + rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80"]) + raw[at:]  # invalid UTF-8
        elif roll < 0.17:
            raw = b""  # blank
        elif roll < 0.19:
            raw = (("\t" if fmt == "tsv" else "|").join([hostile(rng, huge=True), "r", "t"])).encode()  # huge
        if number == 0:
            raw = "\ufeff".encode() + raw
        said = (nt_fact if raw.removeprefix("\ufeff".encode()) == line.encode() else None) if fmt == "nt" \
            else expected_fact(fmt, raw, number == 0)
        lines.append((raw, said))
    return lines


def skipped(raw: bytes, first: bool) -> bool:
    """Blank lines and comments are skipped, not read as facts."""
    try:
        line = raw.decode("utf-8")
        line = line.removeprefix("\ufeff") if first else line
    except UnicodeDecodeError:
        return False
    return not line.strip() or line.lstrip().startswith("#")


def expected_fact(fmt: str, raw: bytes, first: bool) -> tuple[str, str, str] | None:
    """The fact a line says, read independently of the loader (None: the line says none); a byte
    order mark is the file's only on its first line, elsewhere part of a value."""
    try:
        line = raw.decode("utf-8")
        line = (line.removeprefix("\ufeff") if first else line).rstrip("\r\n")
    except UnicodeDecodeError:
        return None
    if not line.strip() or line.lstrip().startswith("#"):
        return None
    if fmt in ("tsv", "psv"):
        fields = [f.strip() for f in line.split("\t" if fmt == "tsv" else "|")]
    elif fmt == "csv":
        try:
            rows = list(csv.reader([line], strict=True))
        except csv.Error:
            return None
        fields = [f.strip() for f in rows[0]] if rows else []
        if line.count('"') % 2:
            return None
    elif fmt == "jsonl":
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        fields = [record.get(key) for key in ("head", "relation", "tail")]
        if not all(isinstance(f, str) for f in fields):
            return None
        fields = [f.strip() for f in fields]
    else:
        return None  # N-Triples: the generator knows what each line says
    if len(fields) != 3 or not all(fields):
        return None
    return fields[0], fields[1], fields[2]


@pytest.mark.parametrize("fmt", ["tsv", "csv", "psv", "jsonl", "nt"])
def test_every_hostile_line_is_loaded_exactly_or_rejected_with_its_number(tmp_path: Path, fmt: str) -> None:
    lines = generated(fmt, random.Random(f"fuzz-{fmt}"))
    path = tmp_path / f"fuzz.{fmt}"
    path.write_bytes(b"\n".join(raw for raw, _ in lines) + b"\n")
    with KG.create(tmp_path / "db") as kg:
        report = load_triples(kg, [path], format=fmt, progress=False)
        stored = set(map(tuple, kg.execute("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id").get_all()))
    rejected = {}
    if report.rejected:
        with open(tmp_path / "db" / "rejects.tsv", encoding="utf-8") as handle:
            next(handle)
            for row in handle:
                rejected[int(row.split("\t")[1])] = row.split("\t")[2]
    assert report.lines_read == len(lines)
    assert report.lines_read == (report.facts_loaded + report.duplicates + report.attributes + report.skipped
                                 + report.rejected)
    assert len(rejected) == report.rejected and set(rejected) <= set(range(1, len(lines) + 1))
    said = {number: fact for number, (_, fact) in enumerate(lines, 1)}
    for number, (raw, fact) in enumerate(lines, 1):
        if number in rejected or skipped(raw, number == 1):
            continue
        assert fact is not None and fact in stored, (number, raw[:200], fact)
    assert stored <= {fact for number, fact in said.items() if fact is not None and number not in rejected}


def test_a_turtle_document_of_hostile_literals_loads_exactly_up_to_its_damage(tmp_path: Path) -> None:
    """Turtle is parsed as a document: every statement before a syntax error is loaded, none after."""
    rng = random.Random("fuzz-ttl")
    statements = [nt_line(rng) for _ in range(LINES)]
    damage = LINES // 2
    text = "\ufeff@prefix e: <http://e.org/> .\n" + "".join(
        (line if number != damage else line[: len(line) // 2]) + "\n" for number, (line, _) in enumerate(statements))
    path = tmp_path / "fuzz.ttl"
    path.write_text(text, encoding="utf-8")
    with KG.create(tmp_path / "db") as kg:
        with pytest.raises(LoadError, match="Turtle syntax error"):
            load_triples(kg, [path], progress=False)
        stored = set(map(tuple, kg.execute("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id").get_all()))
    assert stored == {fact for line, fact in statements[:damage]}
