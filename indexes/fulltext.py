"""Kùzu full-text search over every name and alias.

The index is built on the ``Label`` table, whose keys are the normalised names
*and* aliases of all nodes (``Names`` links each to its nodes), so one BM25
query finds an entity by any of its names. Kùzu bundles the ``fts`` extension,
so ``LOAD fts`` works offline, and it keeps the index up to date as later loads
``COPY`` new labels in: unlike the FAISS indexes, it never goes stale.
"""
from __future__ import annotations

from localkg.errors import FullTextIndexError
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
    """Create the full-text index over labels; False when it already exists.

    Raises :class:`FullTextIndexError` when Kùzu cannot: a buffer pool too small for the labels
    (``--buffer-pool-mb``), or the half-made tables such a failure leaves, which Kùzu 0.11.3
    neither drops nor lets a new index replace.
    """
    load_extension(kg)
    if has_index(kg):
        return False
    try:
        kg.execute(f"CALL CREATE_FTS_INDEX('Label', '{INDEX_NAME}', ['id'])")
    except RuntimeError as error:
        reason = str(error).splitlines()[0]
        hint = ("an earlier build that ran out of buffer pool left half-made tables, which Kùzu 0.11.3 "
                "cannot drop" if "already exists" in reason else
                f"the buffer pool ({kg.buffer_pool_bytes >> 20} MiB) is too small; rerun with a larger "
                "--buffer-pool-mb")
        raise FullTextIndexError(f"Kùzu's full-text index over labels was not created: {reason} ({hint})") from None
    return True


def search_label_offsets(kg: KG, text: str, k: int = 10) -> list[tuple[int, float]]:
    """Labels that share words with ``text``, as (Kùzu offset of the ``Label`` row, BM25), best first.

    Returning the offset rather than ``node.id`` keeps Kùzu from hash-joining the hits with a
    scan of the whole ``Label`` table. The linker runs its own BM25 on the label table
    (``LabelTable.search``, faster); this query is the reference that tests and
    ``bench/linking.py`` compare it with.
    """
    if not text.strip():
        return []
    rows = kg.execute(
        f"CALL QUERY_FTS_INDEX('Label', '{INDEX_NAME}', $text, top := $k) "
        "RETURN offset(id(node)), score ORDER BY score DESC",
        {"text": text, "k": int(k)},
    ).get_all()
    return [(int(offset), float(score)) for offset, score in rows]
