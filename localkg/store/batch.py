"""What one write takes: a :class:`FactBatch` built row by row, or its columns.

Loaders fill a :class:`FactBatch` (facts, node attributes, relation labels) one
fact at a time. The writer works on :class:`ColumnBatch`, the same content as
Arrow tables plus the 64-bit hash of every key (``keyset.py``), so that what
costs one Python call per row (building records, hashing keys, finding the
labels of names and aliases) happens where the batch is made: in the dump
loaders' worker processes, on every core. The writer's own work per row is then
NumPy and Arrow compute: deduplicating by hash, taking rows, grouping.

Several parts (one per parsed chunk) concatenate into one write
(:meth:`ColumnBatch.concat`); a node that several parts describe is merged as
:meth:`NodeAttributes.merge` would merge it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localkg.store import schema
from localkg.store.keyset import hash_keys
from localkg.store.model import ENTITY, LITERAL

SEP = "\x1f"
_STRINGS = ("name", "kind", "description", "value", "datatype", "lang")
_LISTS = ("aliases", "types")
NODE_SCHEMA = pa.schema([("id", pa.string()), ("name", pa.string()), ("kind", pa.string()),
                         ("aliases", pa.list_(pa.string())), ("description", pa.string()),
                         ("types", pa.list_(pa.string())), ("value", pa.string()), ("datatype", pa.string()),
                         ("lang", pa.string()), ("explicit", pa.bool_()), ("described", pa.bool_())])
FACT_SCHEMA = pa.schema([("from", pa.string()), ("to", pa.string()), ("rel", pa.string())])
NAME_SCHEMA = pa.schema([("from", pa.string()), ("to", pa.string()), ("how", pa.string())])


@dataclass
class NodeAttributes:
    """What a batch says about one node. ``explicit`` attributes overwrite stored ones."""

    name: str = ""
    kind: str = ENTITY
    aliases: list[str] = field(default_factory=list)
    description: str = ""
    types: list[str] = field(default_factory=list)
    value: str = ""
    datatype: str = ""
    lang: str = ""
    explicit: bool = False

    def merge(self, other: "NodeAttributes") -> None:
        self.name = other.name or self.name
        if other.explicit or other.kind != ENTITY:
            self.kind = other.kind
        self.aliases.extend(a for a in other.aliases if a not in self.aliases)
        self.description = other.description or self.description
        self.types.extend(t for t in other.types if t not in self.types)
        self.value = other.value or self.value
        self.datatype = other.datatype or self.datatype
        self.lang = other.lang or self.lang
        self.explicit = self.explicit or other.explicit

    @property
    def described(self) -> bool:
        """Whether this says anything beyond "the node exists" (merging a bare node changes nothing)."""
        return self is not _BARE and self != _BARE


_BARE = NodeAttributes()


@dataclass
class FactBatch:
    """Facts, node attributes and relation labels gathered by a loader for one write."""

    heads: list[str] = field(default_factory=list)
    relations: list[str] = field(default_factory=list)
    tails: list[str] = field(default_factory=list)
    nodes: dict[str, NodeAttributes] = field(default_factory=dict)
    relation_info: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.heads)

    def add_fact(self, head: str, relation: str, tail: str) -> None:
        """One fact ``head —relation→ tail`` by node ids; its ends become nodes when the batch is
        written, described or not."""
        self.heads.append(head)
        self.relations.append(relation)
        self.tails.append(tail)

    def add_node(self, node_id: str, attributes: NodeAttributes) -> None:
        """Describe a node; a second description of the same id in this batch is merged into the
        first (``NodeAttributes.merge``), so a loader may describe a node piece by piece."""
        existing = self.nodes.get(node_id)
        if existing is None:
            self.nodes[node_id] = attributes
        else:
            existing.merge(attributes)

    def add_entity(self, node_id: str, name: str = "", explicit: bool = False, **attributes: Any) -> None:
        """An entity (or, with ``kind="cvt"``, a mediator); ``explicit`` updates a stored node too."""
        self.add_node(node_id, NodeAttributes(name=name, explicit=explicit, **attributes))

    def add_literal(self, node_id: str, value: str, datatype: str = "", lang: str = "") -> None:
        """A literal node: ``value`` (also its name, so it reads as an answer), its datatype and language tag."""
        self.add_node(node_id, NodeAttributes(name=value, kind=LITERAL, value=value, datatype=datatype, lang=lang))

    def add_relation(self, relation_id: str, label: str = "", description: str = "") -> None:
        """A relation's label and description for the relation catalogue (a later one wins)."""
        self.relation_info[relation_id] = (label, description)

    def columns(self) -> "ColumnBatch":
        """This batch as columns with key hashes; every fact's ends become nodes."""
        return column_batch(*(pa.array(ids, pa.string()) for ids in (self.heads, self.relations, self.tails)),
                            self.nodes, self.relation_info)


def column_batch(heads: pa.Array, relations: pa.Array, tails: pa.Array, nodes: dict[str, NodeAttributes],
                 relation_info: dict[str, tuple[str, str]], node_rows: pa.Table | None = None) -> "ColumnBatch":
    """Facts given as columns and node descriptions as a :class:`ColumnBatch`: every fact's ends
    become nodes, bare ones after the described ones in order of first mention. ``node_rows``
    describes more nodes, already as rows (ids not among ``nodes``)."""
    node_table = _node_table(list(nodes), list(nodes.values()))
    if node_rows is not None:
        node_table = pa.concat_tables([node_table, node_rows])
    ends = pc.unique(pa.concat_arrays([heads, tails]))
    bare = ends.filter(pc.invert(pc.is_in(ends, value_set=node_table.column("id"))))
    if len(bare):
        node_table = pa.concat_tables([node_table, _bare_node_table(bare)])
    return ColumnBatch(
        facts=pa.table([heads, tails, relations], schema=FACT_SCHEMA),
        fact_hashes=hash_keys(pc.binary_join_element_wise(heads, relations, tails, SEP)),
        nodes=node_table,
        node_hashes=hash_keys(node_table.column("id")),
        **_name_columns(node_table),
        relation_info=dict(relation_info),
    )


@dataclass
class ColumnBatch:
    """A batch as Arrow tables, each key with its hash (see the module docstring).

    ``facts``: ``from``, ``to``, ``rel`` (``fact_hashes``); ``nodes``: one row per node
    description (``node_hashes``; the same id may come more than once); ``names``: one row per
    (normalised label, entity) link, ``how`` = name or alias (``name_hashes`` of the link,
    ``label_hashes`` of its label).
    """

    facts: pa.Table
    fact_hashes: np.ndarray
    nodes: pa.Table
    node_hashes: np.ndarray
    names: pa.Table
    name_hashes: np.ndarray
    label_hashes: np.ndarray
    relation_info: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.facts.num_rows

    @classmethod
    def concat(cls, parts: Sequence["ColumnBatch"]) -> "ColumnBatch":
        """One batch of ``parts`` in order (later relation labels win, as later facts do)."""
        if len(parts) == 1:
            return parts[0]
        info: dict[str, tuple[str, str]] = {}
        for part in parts:
            info.update(part.relation_info)
        return cls(
            facts=pa.concat_tables([p.facts for p in parts]),
            fact_hashes=np.concatenate([p.fact_hashes for p in parts]),
            nodes=pa.concat_tables([p.nodes for p in parts]),
            node_hashes=np.concatenate([p.node_hashes for p in parts]),
            names=pa.concat_tables([p.names for p in parts]),
            name_hashes=np.concatenate([p.name_hashes for p in parts]),
            label_hashes=np.concatenate([p.label_hashes for p in parts]),
            relation_info=info,
        )

    def distinct_nodes(self) -> tuple[pa.Table, np.ndarray]:
        """One row per node id, with its hash, in input order: the first described row of the node
        (literals and entities seen in several parts usually say the same thing each time), or,
        where two described rows differ (a subject split across chunks), :meth:`NodeAttributes.merge`
        of all its rows in input order, placed last.

        Input order matters: Kùzu stores nodes in the order they are copied, and a hash order
        scattered each subject's later updates over the whole table (an 8M-line Freebase load
        with a 256 MiB buffer pool then ran out of it applying alias updates)."""
        hashes, described = self.node_hashes, self.nodes.column("described").to_numpy(zero_copy_only=False)
        order = np.lexsort((np.arange(len(hashes)), ~described, hashes))  # by hash, described first, input order
        ordered = hashes[order]
        opens = np.r_[True, ordered[1:] != ordered[:-1]] if len(ordered) else np.zeros(0, dtype=bool)
        starts = np.flatnonzero(opens)
        chosen = order[starts]
        followers = np.flatnonzero(~opens & described[order])  # described rows after their group's first
        group_of = np.searchsorted(starts, followers, side="right") - 1
        differing = followers[_rows_differ(self.nodes, order[followers], chosen[group_of])]
        several = np.unique(np.searchsorted(starts, differing, side="right") - 1)
        single = np.ones(len(chosen), dtype=bool)
        single[several] = False
        rows = np.sort(chosen[single])  # in input order: nodes stored together stay together on disk
        if not len(several):
            return self.nodes.take(rows), hashes[rows]
        merged = _merge_groups(self.nodes, order, starts, several)
        return (pa.concat_tables([self.nodes.take(rows), merged]),
                np.concatenate([hashes[rows], hashes[chosen[several]]]))


def _node_table(ids: list[str], records: Sequence[NodeAttributes]) -> pa.Table:
    columns: dict[str, Any] = {"id": ids}
    for name in (*_STRINGS, *_LISTS):
        columns[name] = [getattr(r, name) for r in records]
    columns["explicit"] = [r.explicit for r in records]
    columns["described"] = [r.described for r in records]
    return pa.table(columns, schema=NODE_SCHEMA)


def literal_node_table(ids: pa.Array, values: pa.Array, datatypes: pa.Array, langs: pa.Array) -> pa.Table:
    """Rows for literal nodes (what ``_node_table`` makes of :meth:`FactBatch.add_literal`'s records)."""
    return _constant_node_table(ids, {"name": values, "kind": LITERAL, "value": values, "datatype": datatypes,
                                      "lang": langs, "described": True})


def entity_node_table(ids: pa.Array, names: pa.Array, aliases: pa.Array, descriptions: pa.Array,
                      types: pa.Array) -> pa.Table:
    """Rows for described entities (what ``_node_table`` makes of explicit :class:`NodeAttributes`)."""
    return _constant_node_table(ids, {"name": names, "aliases": aliases, "description": descriptions, "types": types,
                                      "explicit": True, "described": True})


def named_node_table(ids: pa.Array, names: pa.Array, explicit: pa.Array) -> pa.Table:
    """Rows for entities known by a name alone (what ``_node_table`` makes of
    :meth:`FactBatch.add_entity` with a name and nothing else)."""
    return _constant_node_table(ids, {"name": names, "explicit": explicit, "described": True})


def _bare_node_table(ids: pa.Array) -> pa.Table:
    """Rows for nodes a batch only mentions (what ``_node_table`` makes of :data:`_BARE`)."""
    return _constant_node_table(ids, {"described": False})


def _constant_node_table(ids: pa.Array, columns: dict[str, Any]) -> pa.Table:
    """Node rows with the given columns (arrays, or one value for every row); the others as in a
    :class:`NodeAttributes` left at its defaults."""
    count = len(ids)
    table: dict[str, Any] = {"id": ids}
    for column in NODE_SCHEMA.names[1:]:
        given = columns.get(column, getattr(_BARE, column))
        kind = NODE_SCHEMA.field(column).type
        if isinstance(given, (pa.Array, pa.ChunkedArray)):
            table[column] = given
        elif isinstance(given, list):
            table[column] = pa.array([given] * count, kind)
        else:
            table[column] = pa.repeat(pa.scalar(given, kind), count)
    return pa.table(table, schema=NODE_SCHEMA)


def _name_columns(nodes: pa.Table) -> dict[str, Any]:
    """The (label, entity) links of the entities' names and aliases, a name before an alias."""
    named = pc.and_(pc.equal(nodes.column("kind"), ENTITY),
                    pc.or_(pc.not_equal(nodes.column("name"), ""), pc.greater(pc.list_value_length(nodes.column("aliases")), 0)))
    named = nodes.filter(named)
    links: dict[tuple[str, str], str] = {}
    for node_id, name, aliases in zip(*(named.column(c).to_pylist() for c in ("id", "name", "aliases"))):
        if name:
            links.setdefault((schema.normalise_label(name), node_id), "name")
        for alias in aliases or ():
            links.setdefault((schema.normalise_label(alias), node_id), "alias")
    links = {link: how for link, how in links.items() if link[0]}
    labels = [label for label, _ in links]
    return {
        "names": pa.table([labels, [node for _, node in links], list(links.values())], schema=NAME_SCHEMA),
        "name_hashes": hash_keys(label + SEP + node for label, node in links),
        "label_hashes": hash_keys(labels),
    }


def _rows_differ(nodes: pa.Table, rows: np.ndarray, others: np.ndarray) -> np.ndarray:
    """For each pair (``rows[i]``, ``others[i]``): whether the two node rows say different things."""
    if not len(rows):
        return np.zeros(0, dtype=bool)
    left, right = nodes.take(rows), nodes.take(others)
    differs = np.zeros(len(rows), dtype=bool)
    for name in (*_STRINGS, "explicit"):
        differs |= pc.not_equal(left.column(name), right.column(name)).to_numpy(zero_copy_only=False)
    for name in _LISTS:
        joined = [pc.binary_join(table.column(name), SEP) for table in (left, right)]
        differs |= pc.not_equal(*joined).to_numpy(zero_copy_only=False)
    return differs


def _merge_groups(nodes: pa.Table, order: np.ndarray, starts: np.ndarray, several: np.ndarray) -> pa.Table:
    """One row per node group in ``several`` (positions among ``starts``): the merge of the group's
    rows in input order."""
    ends = np.r_[starts[1:], len(order)]
    groups = [np.sort(order[starts[g]:ends[g]]) for g in several]
    records = nodes.take(np.concatenate(groups)).to_pylist()
    merged_ids, merged, at = [], [], 0
    for rows in groups:
        group = records[at:at + len(rows)]
        at += len(rows)
        first = _record(group[0])
        for record in group[1:]:
            first.merge(_record(record))
        merged_ids.append(group[0]["id"])
        merged.append(first)
    return _node_table(merged_ids, merged)


def _record(row: dict[str, Any]) -> NodeAttributes:
    return NodeAttributes(**{k: v for k, v in row.items() if k not in ("id", "described")})


def distinct_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, pa.Array]:
    """Each value's index among the column's distinct values, and those values, first seen first.

    >>> codes, values = distinct_codes(pa.array(["b", "a", "b"]))
    >>> codes.tolist(), values.to_pylist()
    ([0, 1, 0], ['b', 'a'])
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    encoded = pc.dictionary_encode(column)
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), encoded.dictionary


def merge_rows_by_id(rows: pa.Table, scalars: Sequence[str], lists: Sequence[str]) -> pa.Table:
    """One row per ``id`` of ``rows``, first seen first: each of ``scalars`` (string columns) its
    last non-empty value over the id's rows in order ("" if none), each of ``lists`` the values of
    its rows' lists in order, each once. This is :meth:`NodeAttributes.merge` of many rows at once.

    >>> rows = pa.table({"id": ["a", "b", "a", "a"], "name": ["A", "", "Z", ""],
    ...                  "types": [["t"], None, ["u", "t"], ["v"]]})
    >>> merge_rows_by_id(rows, ["name"], ["types"]).to_pylist()
    [{'id': 'a', 'name': 'Z', 'types': ['t', 'u', 'v']}, {'id': 'b', 'name': '', 'types': []}]
    """
    group, ids = distinct_codes(rows.column("id"))
    groups = len(ids)
    merged: dict[str, pa.Array] = {"id": ids}
    for name in scalars:
        values = rows.column(name).combine_chunks()
        present = np.flatnonzero(pc.fill_null(pc.not_equal(values, ""), False).to_numpy(zero_copy_only=False))
        backwards = present[::-1]
        found, first = np.unique(group[backwards], return_index=True)
        last = np.full(groups, -1, dtype=np.int64)
        last[found] = backwards[first]
        merged[name] = pc.fill_null(values.take(pa.array(last, mask=last < 0)), "")
    for name in lists:
        values = rows.column(name).combine_chunks()
        parents = pc.list_parent_indices(values).to_numpy(zero_copy_only=False)
        merged[name] = lists_by_group(group[parents], pc.list_flatten(values), groups)
    return pa.table(merged)


def lists_by_group(group: np.ndarray, values: pa.Array, groups: int) -> pa.ListArray:
    """For each of ``groups`` groups, the ``values`` whose ``group`` it is, in order, each once."""
    codes, _ = distinct_codes(values)
    _, first = np.unique(group * (int(codes.max(initial=0)) + 1) + codes, return_index=True)
    rows = np.sort(first)
    rows = rows[np.argsort(group[rows], kind="stable")]
    offsets = np.r_[0, np.cumsum(np.bincount(group[rows], minlength=groups))].astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values.take(rows))


def list_lengths(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Lengths of a list column's values (0 for empty or null)."""
    return pc.fill_null(pc.list_value_length(column), 0).to_numpy()
