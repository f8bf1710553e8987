"""The distinct object terms of a chunk, parsed a column at a time.

Most objects of a dump are distinct (names, descriptions, dates), so parsing
each distinct term in Python still costs a call per line. Here the two common
shapes are recognised and taken apart by Arrow's regular-expression kernels:

* an IRI without escapes in the dump's namespace (``<http://rdf.freebase.com/ns/m.02mjmr>``),
  whose id is the IRI without the namespace;
* a literal without escapes or inner quotes, plain, with a language tag or with a
  datatype IRI without escapes (``"Paris"@fr``, ``"1961-08-04"^^<…#date>``), whose
  node id is its own spelling with the datatype shortened
  (:func:`~localkg.loaders.triples.literal_node_id`).

Every other term goes through :func:`~localkg.loaders.ntriples.term_value`,
which also names what is wrong with a damaged one. The patterns below accept
only terms on which ``term_value`` agrees (``tests/test_load_freebase.py``
checks the two on every term of a generated dump).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from localkg.loaders.ntriples import BadLine, Literal, term_value
from localkg.loaders.triples import literal_node_id
from localkg.store.batch import distinct_codes, literal_node_table

_PLAIN_IRI = r'^<[^<>" \\\x00]*>$'
_PLAIN_LITERAL = r'^"(?P<value>[^"\\\x00]*)"(?P<suffix>(?:@[A-Za-z]+(?:-[A-Za-z0-9]+)*|\^\^<[^<>" \\\x00]*>)?)$'


@dataclass
class ObjectTerms:
    """Parsed distinct object terms, aligned with the terms.

    ``node_id``: the id of the node the term names (an entity id, or a literal node id);
    ``value``: the literal's value, or the entity id; ``lang``/``datatype``: the literal's
    (datatype shortened for display); ``literal``: which terms are literals; ``bad``: the
    reason for each term that is not a valid object, by position.
    """

    node_id: pa.Array
    value: pa.Array
    lang: pa.Array
    datatype: pa.Array
    literal: np.ndarray
    bad: dict[int, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, terms: pa.Array, namespace: str, entity_id: Callable[[str], str],
              datatype_name: Callable[[str], str]) -> "ObjectTerms":
        """Parse ``terms``; an IRI in ``namespace`` loses it, other IRIs get ``entity_id(iri)``,
        and ``datatype_name`` shortens a datatype IRI for display."""
        in_namespace = pc.and_(pc.starts_with(terms, "<" + namespace), pc.match_substring_regex(terms, _PLAIN_IRI))
        in_namespace = in_namespace.to_numpy(zero_copy_only=False)
        parts = pc.extract_regex(terms, _PLAIN_LITERAL)
        plain_literal = parts.is_valid().to_numpy(zero_copy_only=False)
        iri_rows = np.flatnonzero(in_namespace)
        literal_rows = np.flatnonzero(plain_literal)
        other_rows = np.flatnonzero(~(in_namespace | plain_literal))

        entity_ids = pc.utf8_slice_codeunits(terms.take(iri_rows), len(namespace) + 1, -1)
        iri_part = _Part(entity_ids, entity_ids, *(pa.repeat(pa.scalar("", pa.string()), len(iri_rows)),) * 2)

        literal_parts = parts.filter(pa.array(plain_literal))
        values = literal_parts.field("value")
        suffix_codes, suffixes = distinct_codes(literal_parts.field("suffix"))
        described = [_suffix(suffix, datatype_name) for suffix in suffixes.to_pylist()]
        take = lambda column: pa.array([d[column] for d in described], pa.string()).take(suffix_codes)  # noqa: E731
        literal_part = _Part(pc.binary_join_element_wise('"', values, '"', take(0), ""), values, take(1), take(2))

        bad: dict[int, str] = {}
        other = [_parse_other(term, entity_id, datatype_name) for term in terms.take(other_rows).to_pylist()]
        for position, parsed in zip(other_rows.tolist(), other):
            if isinstance(parsed, BadLine):
                bad[position] = str(parsed)
        other_part = _Part(*(pa.array([p[i] if isinstance(p, tuple) else "" for p in other], pa.string())
                             for i in range(4)))
        other_literal = np.array([isinstance(p, tuple) and p[4] for p in other], dtype=bool)

        order = np.argsort(np.concatenate([iri_rows, literal_rows, other_rows]), kind="stable")
        parts_in_order = (iri_part, literal_part, other_part)
        columns = [pa.concat_arrays([getattr(p, name) for p in parts_in_order]).take(order)
                   for name in ("node_id", "value", "lang", "datatype")]
        literal = np.concatenate([np.zeros(len(iri_rows), bool), np.ones(len(literal_rows), bool),
                                  other_literal])[order]
        return cls(*columns, literal=literal, bad=bad)


def literal_nodes(objects: ObjectTerms, codes: np.ndarray) -> pa.Table:
    """The literal nodes that the terms at ``codes`` (positions in ``objects``) name, as node rows
    (:data:`~localkg.store.batch.NODE_SCHEMA`): one per node id, first mention first."""
    used, first = np.unique(codes, return_index=True)
    used = used[np.argsort(first)]
    used = used[objects.literal[used]]
    ids = objects.node_id.take(used)
    _, first_of_id = np.unique(distinct_codes(ids)[0], return_index=True)
    used = used[np.sort(first_of_id)]
    return literal_node_table(objects.node_id.take(used), objects.value.take(used),
                              objects.datatype.take(used), objects.lang.take(used))


@dataclass
class _Part:
    node_id: pa.Array
    value: pa.Array
    lang: pa.Array
    datatype: pa.Array


def _suffix(suffix: str, datatype_name: Callable[[str], str]) -> tuple[str, str, str]:
    """A plain literal's suffix as (what its node id ends with, lang, datatype for display)."""
    if suffix.startswith("@"):
        return suffix, suffix[1:], ""
    datatype = suffix[3:-1]
    id_suffix = literal_node_id("", datatype)[2:]
    return id_suffix, "", datatype_name(datatype) if datatype else ""


def _parse_other(term: str, entity_id: Callable[[str], str],
                 datatype_name: Callable[[str], str]) -> tuple[str, str, str, str, bool] | BadLine:
    """A term the patterns do not take: (node id, value, lang, datatype, is literal) or the damage."""
    try:
        value = term_value(term)
    except BadLine as error:
        return error
    if isinstance(value, Literal):
        return (literal_node_id(value.value, value.datatype, value.lang), value.value, value.lang,
                datatype_name(value.datatype) if value.datatype else "", True)
    node_id = entity_id(value)
    return node_id, node_id, "", "", False
