"""The embedded Kùzu store: schema, query primitives and the bulk write path."""
from localkg.store.kg import KG, Subgraph
from localkg.store.model import Node, NodeRecord, Path, RelationCount, Stats, Step, Triple
from localkg.store.writer import FactBatch, GraphWriter, WriteCounts

__all__ = ["KG", "Subgraph", "Node", "NodeRecord", "Path", "RelationCount", "Stats", "Step", "Triple",
           "FactBatch", "GraphWriter", "WriteCounts"]
