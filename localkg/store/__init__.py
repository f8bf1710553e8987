"""The embedded Kùzu store: schema, query primitives and the bulk write path."""
from localkg.store.kg import KG, Subgraph
from localkg.store.model import Node, NodeRecord, Path, RelationCount, Stats, Step, Triple
from localkg.store.batch import ColumnBatch, FactBatch
from localkg.store.writer import GraphWriter, WriteCounts

__all__ = ["KG", "Subgraph", "Node", "NodeRecord", "Path", "RelationCount", "Stats", "Step", "Triple",
           "ColumnBatch", "FactBatch", "GraphWriter", "WriteCounts"]
