"""The bulk path of delimited triple files (loaders/delimited_columns.py): a block of plain lines
becomes the same batch the line path makes of it, and every other block goes to the line path."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from localkg.loaders.delimited_columns import _OTHER_WHITESPACE, plain_block
from localkg.loaders.triples import _apply_names, _PlainLines, load_triples
from localkg.store import KG
from localkg.store.batch import ColumnBatch, FactBatch

PLAIN = ["m.01\tfilm.director\tm.02\n", " Blade Runner \t directed by\tRidley Scott\r\n",
         "m.02\tfilm.director\tm.01\n", "Zürich\tlocated in\tSchweiz\n", "m.01\tfilm.director\tm.02"]


def line_path(lines: list[str], fmt: str, names: dict[str, str]) -> ColumnBatch:
    """What the line path makes of ``lines``: each parsed, then the names applied."""
    parse, batch = _PlainLines(fmt), FactBatch()
    for line in lines:
        batch.add_fact(*parse(line.rstrip("\r\n"), batch))
    _apply_names(batch, names)
    return batch.columns()


@pytest.mark.parametrize("fmt, separator", [("tsv", "\t"), ("psv", "|"), ("csv", ",")])
@pytest.mark.parametrize("names", [{}, {"m.01": "Blade Runner", "Schweiz": "Switzerland"}])
def test_a_plain_block_is_the_batch_the_line_path_makes(fmt: str, separator: str, names: dict[str, str]) -> None:
    lines = [line.replace("\t", separator) for line in PLAIN]
    columns = plain_block([line.encode() for line in lines], separator, fmt != "csv", names)
    expected = line_path(lines, fmt, names)
    assert columns is not None
    assert columns.facts.equals(expected.facts) and columns.nodes.equals(expected.nodes)
    assert columns.names.equals(expected.names)
    for hashes in ("fact_hashes", "node_hashes", "name_hashes", "label_hashes"):
        assert np.array_equal(getattr(columns, hashes), getattr(expected, hashes)), hashes


@pytest.mark.parametrize("odd", [
    "\n",                              # a blank line
    "# a comment\twith\ttabs\n",       # a comment
    "a\tb\n",                          # two fields
    "a\tb\tc\td\n",                    # four
    "a\t\tc\n",                        # an empty field
    "a\tb\tc\x00\n",                   # a NUL
    "a\tb\t\x1cc\n",                   # whitespace that str.strip() removes and Arrow's trim keeps
])
def test_a_block_with_any_other_line_goes_to_the_line_path(odd: str) -> None:
    assert plain_block([b"x\tr\ty\n", odd.encode(), b"y\tr\tz\n"], "\t", True, {}) is None


def test_bytes_a_line_path_must_judge_go_to_it() -> None:
    assert plain_block([b"x\tr\ty\n", b"a\tb\t\xff\n"], "\t", True, {}) is None  # invalid UTF-8
    assert plain_block(["\ufeffx\tr\ty\n".encode()], "\t", True, {}) is None      # a byte order mark
    assert plain_block([b'x,"r",y\n'], ",", False, {}) is None                    # a quoted CSV field


def test_the_edge_whitespace_is_what_str_strip_removes_beyond_ascii() -> None:
    beyond_ascii = {chr(c) for c in range(sys.maxunicode + 1) if chr(c).isspace()} - set(" \t\r\n")
    first, last = _OTHER_WHITESPACE.split("-")[0][-1], _OTHER_WHITESPACE.split("-")[1][0]
    listed = set(_OTHER_WHITESPACE.replace(f"{first}-{last}", "")) | {chr(c) for c in range(ord(first), ord(last) + 1)}
    assert listed == beyond_ascii


def test_a_file_mixing_plain_and_odd_blocks_loads_every_line_once(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 3 lines: the header's, a plain one, one with a reject and a comment, a plain one
    again. Facts, rejects with their line numbers and the line accounting are the line path's."""
    import localkg.loaders.triples as triples

    as_columns: list[int] = []

    def counted(raw_lines, *arguments, **options):
        batch = plain_block(raw_lines, *arguments, **options)
        as_columns.append(batch is not None)
        return batch

    monkeypatch.setattr(triples, "plain_block", counted)
    path = tmp_path / "kg.tsv"
    path.write_text("head\trelation\ttail\na\tr\tb\nb\tr\tc\n"
                    "c\tr\td\nd\tr\te\ne\tr\tf\n"
                    "bad line\n# note\nf\tr\tg\n"
                    "g\tr\th\nh\tr\ti\n", encoding="utf-8")
    with KG.create(tmp_path / "db") as kg:
        report = load_triples(kg, [path], batch_lines=3, progress=False)
        stored = set(map(tuple, kg.execute("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id").get_all()))
        named = dict(kg.execute("MATCH (n:Node) RETURN n.id, n.name").get_all())
    assert stored == {(a, "r", b) for a, b in zip("abcdefgh", "bcdefghi")}
    assert named["a"] == "a" and len(named) == 9
    assert (report.lines_read, report.facts_loaded, report.rejected, report.skipped) == (11, 8, 1, 2)
    assert report.skipped_by_reason == {"header": 1, "blank line or comment": 1}
    rejects = (tmp_path / "db" / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [row.split("\t")[1] for row in rejects] == ["7"]
    assert as_columns == [True, False, True]  # the header's block never reaches the columns
