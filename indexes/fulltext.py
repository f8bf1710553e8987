"""Kùzu full-text search over every name and alias.

The index is built on the ``Label`` table, whose keys are the normalised names
*and* aliases of all nodes (``Names`` links each to its nodes), so one BM25
query finds an entity by any of its names. Kùzu bundles the ``fts`` extension,
so ``LOAD fts`` works offline, and it keeps the index up to date as later loads
``COPY`` new labels in: unlike the FAISS indexes, it never goes stale.
"""
from __future__ import annotations

from localkg.store.kg import KG

INDEX_NAME = "localkg_label_fts"


def load_extension(kg: KG) -> None:
    """Make the FTS functions available on this connection (idempotent, offline)."""
    kg.execute("LOAD fts")


def has_index(kg: KG) -> bool:
    """Whether ``index build`` has created the full-text index in this database."""
    result = kg.execute("CALL SHOW_INDEXES() RETURN index_name")
    return any(row[0] == INDEX_NAME for row in result.get_all())


def build_index(kg: KG) -> bool:
    """Create the full-text index over labels; False when it already exists."""
    load_extension(kg)
    if has_index(kg):
        return False
    kg.execute(f"CALL CREATE_FTS_INDEX('Label', '{INDEX_NAME}', ['id'])")
    return True


def search(kg: KG, text: str, k: int = 10) -> list[tuple[str, str, str, float]]:
    """Nodes whose labels share words with ``text``: (node id, node name, label, BM25 score), best first."""
    if not text.strip():
        return []
    rows = kg.execute(
        f"CALL QUERY_FTS_INDEX('Label', '{INDEX_NAME}', $text, top := $k) "
        "WITH node AS label, score MATCH (label)-[:Names]->(n:Node) "
        "RETURN n.id, n.name, label.id, score ORDER BY score DESC, n.id",
        {"text": text, "k": int(k)},
    ).get_all()
    return [(r[0], r[1] or "", r[2], float(r[3])) for r in rows]


def search_label_offsets(kg: KG, text: str, k: int = 10) -> list[tuple[int, float]]:
    """Labels that share words with ``text``, as (Kùzu offset of the ``Label`` row, BM25), best first.

    Returning the offset rather than ``node.id`` keeps Kùzu from hash-joining the hits with a
    scan of the whole ``Label`` table; ``label_table.LabelTable.label_at`` turns an offset into
    the label and its nodes.
    """
    if not text.strip():
        return []
    rows = kg.execute(
        f"CALL QUERY_FTS_INDEX('Label', '{INDEX_NAME}', $text, top := $k) "
        "RETURN offset(id(node)), score ORDER BY score DESC",
        {"text": text, "k": int(k)},
    ).get_all()
    return [(int(offset), float(score)) for offset, score in rows]
