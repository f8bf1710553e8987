"""The bulk path of delimited triple files: a block of well-formed lines parsed as Arrow columns.

A TSV, pipe-separated or quote-free CSV file is mostly lines that need none of what the line path
checks for: exactly three non-empty fields, no quoting, no NUL, valid UTF-8, no comment, no
header. Parsing those one Python call per line cost most of a ``load triples`` (FB15k-237: 272k
lines). So a block of lines is first tested as a whole with Arrow compute; when every line in it
is plain, its fields are split and trimmed as columns and the block becomes a
:class:`ColumnBatch` in one step. A block with any other line is handed back (None), and the
line path parses it, with its rejects, line numbers and header rule; so both paths load the
same file into the same store.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localkg.store.batch import ColumnBatch, column_batch, named_node_table

#: The characters Python's ``str.strip()`` removes beyond ASCII space, tab, CR and LF; a field that
#: starts or ends with one is left to the line path, whose ``strip`` the columns must agree with.
_OTHER_WHITESPACE = "\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_EDGE_WHITESPACE = f"^[{_OTHER_WHITESPACE}]|[{_OTHER_WHITESPACE}]$"


def plain_block(raw_lines: Sequence[bytes], separator: str, quotes_allowed: bool,
                names: dict[str, str]) -> ColumnBatch | None:
    """``raw_lines`` (each with its line end) as one batch, or None if any line needs the line path.

    ``separator``: the field separator; ``quotes_allowed``: False for CSV, whose quoted fields
    only the line path reads; ``names``: node names by id (``--names``), which make a node's name
    explicit, as the line path's ``_apply_names`` does. Every fact's ends become entities named by
    their ids (or by ``names``), in order of first mention, as the line path adds them.
    """
    data = b"".join(raw_lines)
    if b"\x00" in data or data.startswith(b"\xef\xbb\xbf") or (not quotes_allowed and b'"' in data):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    lines = pc.split_pattern(pa.array([text], pa.string()), "\n").flatten()
    if text.endswith("\n"):
        lines = lines.slice(0, len(lines) - 1)
    lines = pc.utf8_rtrim(lines, "\r")
    if not pc.all(pc.equal(pc.count_substring(lines, separator), 2)).as_py():
        return None
    if pc.any(pc.starts_with(pc.utf8_ltrim(lines, " \t"), "#")).as_py():
        return None
    fields = pc.utf8_trim(pc.split_pattern(lines, separator).flatten(), " \t\r")
    if (pc.any(pc.equal(pc.utf8_length(fields), 0)).as_py()
            or pc.any(pc.match_substring_regex(fields, _EDGE_WHITESPACE)).as_py()):
        return None
    heads, relations, tails = (fields.take(pa.array(np.arange(offset, len(fields), 3))) for offset in range(3))
    return column_batch(heads, relations, tails, {}, {}, node_rows=_named_nodes(heads, tails, names))


def _named_nodes(heads: pa.Array, tails: pa.Array, names: dict[str, str]) -> pa.Table:
    """Each fact's ends once, head and tail of each line in turn, named by ``names`` or their id."""
    ends = pa.concat_arrays([heads, tails])
    order = np.stack([np.arange(len(heads)), np.arange(len(heads)) + len(heads)], axis=1).reshape(-1)
    ids = pc.unique(ends.take(pa.array(order)))
    if not names:
        return named_node_table(ids, ids, pa.repeat(pa.scalar(False), len(ids)))
    given = pa.array([names.get(node_id) or None for node_id in ids.to_pylist()], pa.string())
    return named_node_table(ids, pc.coalesce(given, ids), pc.is_valid(given))
