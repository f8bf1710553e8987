"""A chunk of tab-separated N-Triples as columns of terms, split by Arrow's CSV reader.

Freebase writes ``<s>\\t<p>\\t<o>\\t.``: tab-separated values without quoting,
so Arrow's CSV reader splits a 16 MB chunk into term columns natively (about
1 µs per line on one core, where splitting and parsing each line in Python
cost 5–6 µs). The loader then runs its Python term functions once per
*distinct* term instead of once per line (``freebase.py``).

What the reader does not split the way :func:`~localkg.loaders.ntriples.split_triple`
would goes through ``split_triple`` itself, at its line:

* a line without exactly four tab-separated fields ending in ``.`` (other
  spacing, a tab inside a literal, a missing terminator, a truncated line);
* a whole chunk with invalid UTF-8 or a carriage return (which the reader would
  take for a line break) is split line by line
  (:func:`~localkg.loaders.parallel.split_lines`, which rejects the damaged lines).

So the terms, line numbers and rejects are those of the line-by-line split;
``tests/test_load_freebase.py`` checks that on a damaged generated dump.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv

from localkg.loaders.ntriples import BadLine, split_triple
from localkg.loaders.parallel import Chunk, ChunkResult, count_lines, split_lines

_FIELDS = ("subject", "predicate", "object", "end")


@dataclass
class TermRows:
    """The unparsed terms of a chunk's triples, one row per line, in line order."""

    numbers: np.ndarray
    subjects: pa.Array
    predicates: pa.Array
    objects: pa.Array
    texts: dict[int, str] = field(default_factory=dict)  # lines not split by the reader, by number

    def __len__(self) -> int:
        return len(self.numbers)

    def line(self, row: int) -> str:
        """The line of ``row`` as the dump wrote it."""
        number = int(self.numbers[row])
        if number in self.texts:
            return self.texts[number]
        return "\t".join((self.subjects[row].as_py(), self.predicates[row].as_py(), self.objects[row].as_py(), "."))


def split_rows(chunk: Chunk, result: ChunkResult) -> TermRows:
    """The terms of every line of ``chunk`` that splits into a triple; counts the chunk's lines into
    ``result`` and rejects those that do not split (blank, truncated, invalid UTF-8 …)."""
    if b"\r" not in chunk.data and _is_utf8(chunk.data):
        return _split_by_reader(chunk, result)
    split = _SplitOneByOne(result)
    for number, line in split_lines(chunk, result):
        split.add(number, line)
    return split.rows()


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _split_by_reader(chunk: Chunk, result: ChunkResult) -> TermRows:
    uneven: list[tuple[int, str]] = []

    def set_aside(row: csv.InvalidRow) -> str:
        uneven.append((row.number, row.text))
        return "skip"

    table = csv.read_csv(
        pa.py_buffer(chunk.data),
        read_options=csv.ReadOptions(column_names=_FIELDS, use_threads=False, block_size=len(chunk.data) + 1),
        parse_options=csv.ParseOptions(delimiter="\t", quote_char=False, escape_char=False, newlines_in_values=False,
                                       ignore_empty_lines=False, invalid_row_handler=set_aside),
        convert_options=csv.ConvertOptions(column_types={name: pa.string() for name in _FIELDS},
                                           strings_can_be_null=False, quoted_strings_can_be_null=False))
    count = count_lines(chunk.data)
    result.lines += count
    set_aside_numbers = np.array([number - 1 for number, _ in uneven], dtype=np.int64)
    numbers = np.setdiff1d(np.arange(count, dtype=np.int64), set_aside_numbers, assume_unique=True)
    assert len(numbers) == table.num_rows, "the CSV reader's rows do not match the chunk's lines"
    numbers += chunk.first_line
    ends = table.column("end")
    terminated = pc.equal(ends, ".").to_numpy(zero_copy_only=False)
    columns = [table.column(name).combine_chunks() for name in _FIELDS[:3]]
    if terminated.all() and not uneven:
        return TermRows(numbers, *columns)
    odd = _SplitOneByOne(result)
    unterminated = np.flatnonzero(~terminated)
    if len(unterminated):
        breaks = np.r_[-1, np.flatnonzero(np.frombuffer(chunk.data, dtype=np.uint8) == ord("\n")), len(chunk.data)]
        for row in unterminated.tolist():
            index = int(numbers[row]) - chunk.first_line
            odd.add(int(numbers[row]), chunk.data[breaks[index] + 1:breaks[index + 1]].decode("utf-8"))
    for number, text in uneven:
        odd.add(chunk.first_line + number - 1, text)
    keep = np.flatnonzero(terminated)
    odd_rows = odd.rows()
    merged_numbers = np.concatenate([numbers[keep], odd_rows.numbers])
    order = np.argsort(merged_numbers, kind="stable")
    merged = [pa.concat_arrays([column.take(keep), extra]).take(order)
              for column, extra in zip(columns, (odd_rows.subjects, odd_rows.predicates, odd_rows.objects))]
    return TermRows(merged_numbers[order], *merged, texts=odd_rows.texts)


class _SplitOneByOne:
    """Lines split by :func:`split_triple`, one at a time; damaged ones rejected into ``result``."""

    def __init__(self, result: ChunkResult):
        self.result = result
        self.numbers: list[int] = []
        self.terms: list[tuple[str, str, str]] = []
        self.texts: dict[int, str] = {}

    def add(self, number: int, line: str) -> None:
        if not line:  # as split_lines rejects a blank line
            self.result.reject(number, "blank line", "")
            return
        try:
            self.terms.append(split_triple(line))
        except BadLine as error:
            self.result.reject(number, str(error), line)
            return
        self.numbers.append(number)
        self.texts[number] = line

    def rows(self) -> TermRows:
        columns = [pa.array([row[i] for row in self.terms], pa.string()) for i in range(3)]
        return TermRows(np.array(self.numbers, dtype=np.int64), *columns, texts=self.texts)
