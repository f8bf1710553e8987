"""Hub flags: nodes with more than the manifest's ``hub_degree`` facts, and their relation summaries.

Degrees only grow on append, and a node becomes a hub at the close of the load that took it past
the threshold (:func:`flag_hubs`); from then on each staged batch appends to its summary
(``staging.py``), which ``KG.relations`` sums. Only hubs have a summary: any other node has at
most ``hub_degree`` facts, which ``KG.relations`` counts from its edges.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from localkg.store import schema
from localkg.store.crashpoints import crash_point
from localkg.store.model import IN, OUT

if TYPE_CHECKING:
    from localkg.store.kg import KG


def stored_hubs(kg: "KG") -> pa.Array:
    """The ids of the nodes flagged as hubs."""
    return pa.array([row[0] for row in kg.rows("MATCH (n:Node) WHERE n.hub RETURN n.id")], pa.string())


def sequence_ranges(kg: "KG", span: int) -> list[tuple[int, int]]:
    """The ranges ``[low, high)`` of ``span`` sequence numbers that cover every stored node, for
    passes over all nodes that must hold one range at a time."""
    top = kg.rows("MATCH (n:Node) RETURN max(n.seq)")[0][0]
    return [(low, low + span) for low in range(0, -1 if top is None else top + 1, span)]


def flag_hubs(kg: "KG", span: int) -> None:
    """Flag the nodes that now have more than ``hub_degree`` facts, and count their relation
    summary from their edges, a range of ``span`` sequence numbers at a time.

    A range's flags and summaries commit together, so ``KG.relations`` never reads the summary
    of a hub that has none; after a crash before a commit, the next load that changes the graph
    flags the node. Ranges keep each transaction's degree counts to the range's nodes (one
    count over every fact held a row per node of the table).
    """
    threshold = int(kg.manifest.get("hub_degree", schema.HUB_DEGREE))
    for low, high in sequence_ranges(kg, span):
        with kg.transaction():
            hubs = [row[0] for row in kg.rows(
                "MATCH (n:Node)-[f:Fact]-() WHERE n.seq >= $low AND n.seq < $high AND NOT n.hub "
                "WITH n, count(f) AS degree WHERE degree > $threshold SET n.hub = true RETURN n.id",
                {"low": low, "high": high, "threshold": threshold})]
            if hubs:
                _summarise_new_hubs(kg, hubs)
        crash_point("flagged hubs in a range")


def _summarise_new_hubs(kg: "KG", hubs: list[str]) -> None:
    """Count the relation summary of nodes just flagged as hubs from their edges."""
    # Databases written before summaries were kept for hubs only have rows for every node.
    kg.execute("MATCH (n:Node)-[h:HasRel]->() WHERE list_contains($ids, n.id) DELETE h", {"ids": hubs})
    for pattern, direction in (("-[f:Fact]->", OUT), ("<-[f:Fact]-", IN)):
        kg.execute(f"MATCH (n:Node){pattern}() WHERE list_contains($ids, n.id) "
                   "WITH n, f.rel AS rel, count(*) AS facts MATCH (r:Relation {id: rel}) "
                   "CREATE (n)-[:HasRel {dir: $dir, n: facts}]->(r)", {"ids": hubs, "dir": direction})
