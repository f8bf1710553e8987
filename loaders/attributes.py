"""A chunk's Freebase attribute lines (names, aliases, descriptions, types) as node rows.

About a third of a Freebase dump is ``type.object.name``, ``common.topic.alias``,
``common.topic.description`` and ``type.object.type`` lines. They become
attributes of their subject, decided here a column at a time:

* an entity's name is its name in the most wanted language (``lang_rank``;
  the first line wins a tie), its description likewise;
* its aliases are its ``common.topic.alias`` values and its names in the
  other wanted languages, in line order, each once and never its own name;
* its types are its ``type.object.type`` objects, in line order, each once;
* a schema object (an id that is not an ``m.``/``g.`` machine id) keeps only
  its best name, which labels the relation of the same id; its other
  attributes are counted as filtered;
* a name, alias or description that is not a literal, or in a language not
  asked for, is counted as filtered.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localkg.loaders.parallel import ChunkResult, lang_rank
from localkg.store.batch import distinct_codes, entity_node_table, lists_by_group

NAME = "type.object.name"
ALIAS = "common.topic.alias"
DESCRIPTION = "common.topic.description"
TYPE = "type.object.type"
ROLES = (NAME, ALIAS, DESCRIPTION, TYPE)
MACHINE_ID_PREFIXES = ("m.", "g.")


def attribute_nodes(subjects: pa.Array, roles: np.ndarray, values: pa.Array, langs: pa.Array,
                    literal: np.ndarray, wanted: Sequence[str], result: ChunkResult,
                    ) -> tuple[pa.Table, dict[str, tuple[str, int]]]:
    """Node rows for the entities that attribute lines describe (first mention first), and the
    best name of each schema object with its rank; counts attributes and filtered lines into
    ``result``. One entry per attribute line: ``roles`` index :data:`ROLES`; ``values`` are entity
    ids where ``literal`` is False."""
    entity = np.zeros(len(roles), dtype=bool)
    for prefix in MACHINE_ID_PREFIXES:
        entity |= pc.starts_with(subjects, prefix).to_numpy(zero_copy_only=False)
    is_type = roles == ROLES.index(TYPE)
    rank = _ranks(langs, wanted)
    described = ~is_type & literal & (rank >= 0)
    _count(result.filtered, "schema object attribute", is_type & ~entity)
    for code, role in enumerate(ROLES[:3]):
        _count(result.filtered, f"{role} that is not a literal", (roles == code) & ~literal)
        _count(result.filtered, f"{role} in another language", (roles == code) & literal & (rank < 0))
    schema_name = described & ~entity & (roles == ROLES.index(NAME))
    _count(result.filtered, "schema object attribute", described & ~entity & ~schema_name)
    used = entity & (is_type | described)
    result.attributes += int(used.sum() + schema_name.sum())
    return _entity_rows(subjects, roles, values, rank, used), _schema_names(subjects, values, rank, schema_name)


def _ranks(langs: pa.Array, wanted: Sequence[str]) -> np.ndarray:
    """Each line's language rank (0 best; a literal without a tag after every wanted one; -1 not wanted)."""
    codes, distinct = distinct_codes(langs)
    ranks = [(lang_rank(wanted, lang) if lang else len(wanted) * 2) for lang in distinct.to_pylist()]
    return np.array([-1 if r is None else r for r in ranks], dtype=np.int64)[codes]


def _count(counter: dict, reason: str, mask: np.ndarray) -> None:
    count = int(mask.sum())
    if count:
        counter[reason] += count


def _schema_names(subjects: pa.Array, values: pa.Array, rank: np.ndarray,
                  mask: np.ndarray) -> dict[str, tuple[str, int]]:
    names: dict[str, tuple[str, int]] = {}
    rows = np.flatnonzero(mask)
    for subject, value, r in zip(subjects.take(rows).to_pylist(), values.take(rows).to_pylist(), rank[rows].tolist()):
        if subject not in names or r < names[subject][1]:
            names[subject] = (value, r)
    return names


def _entity_rows(subjects: pa.Array, roles: np.ndarray, values: pa.Array, rank: np.ndarray,
                 used: np.ndarray) -> pa.Table:
    rows = np.flatnonzero(used)
    group, ids = distinct_codes(subjects.take(rows))
    role, rank, values = roles[rows], rank[rows], values.take(rows)
    value_code, _ = distinct_codes(values)
    order = np.arange(len(rows))
    names = _best(len(ids), group, role == ROLES.index(NAME), rank, order)
    descriptions = _best(len(ids), group, role == ROLES.index(DESCRIPTION), rank, order)
    name_code = np.full(len(ids), -1, dtype=np.int64)
    named = names >= 0
    name_code[named] = value_code[names[named]]
    alias = ((role == ROLES.index(NAME)) | (role == ROLES.index(ALIAS))) & (value_code != name_code[group])
    return entity_node_table(
        ids,
        names=_strings(values, names),
        aliases=_lists(len(ids), group, values, alias),
        descriptions=_strings(values, descriptions),
        types=_lists(len(ids), group, values, role == ROLES.index(TYPE)))


def _best(groups: int, group: np.ndarray, mask: np.ndarray, rank: np.ndarray, order: np.ndarray) -> np.ndarray:
    """For each group, the line of ``mask`` with the lowest rank (the first of a tie), or -1."""
    rows = np.flatnonzero(mask)
    best = np.full(groups, -1, dtype=np.int64)
    if len(rows):
        ordered = rows[np.lexsort((order[rows], rank[rows], group[rows]))]
        first = np.r_[True, group[ordered][1:] != group[ordered][:-1]]
        best[group[ordered][first]] = ordered[first]
    return best


def _strings(values: pa.Array, rows: np.ndarray) -> pa.Array:
    """``values`` at ``rows``; "" where a row is -1."""
    return pc.fill_null(values.take(pa.array(rows, mask=rows < 0)), "")


def _lists(groups: int, group: np.ndarray, values: pa.Array, mask: np.ndarray) -> pa.Array:
    """Per group, the values of its ``mask`` lines in line order, each once."""
    rows = np.flatnonzero(mask)
    return lists_by_group(group[rows], values.take(rows), groups)
