"""The Kùzu schema of a localkg database, and the layout of its directory.

A localkg database is a directory::

    DB/
      graph.kuzu        the Kùzu database (nodes, facts, relation catalogue)
      manifest.json     format version, load generation (indexes compare it), the loads' sources
      seal.json         size, time and CRC-32 of graph.kuzu as the last clean close left it (seal.py)
      keys/             hash sets used to deduplicate appends (dedupe.py, keyset.py)
      staged/           written batches waiting for the next flush into Kùzu (staging.py, flush.py)
      staging/          a writer's transient files for ``COPY`` and ``LOAD FROM`` (copying.py)
      pending/          updates of stored nodes waiting for the end of the load (updates.py)
      rebuild/          while `localkg check --repair` rebuilds graph.kuzu (check.py)
      checkpoints/      where an interrupted dump load resumes (loaders/checkpoint.py)
      rejects.tsv       malformed input lines, with file, line number and reason
      indexes/          FAISS indexes over entity and relation embeddings

Why each table looks as it does (one ``Fact`` table with the relation as a
property, hub summaries in ``HasRel``, ``seq`` ranges) is in docs/architecture.md.
"""
from __future__ import annotations

FORMAT_VERSION = 3
HUB_DEGREE = 10_000
GRAPH_FILE = "graph.kuzu"
MANIFEST_FILE = "manifest.json"
SEAL_FILE = "seal.json"
KEYS_DIR = "keys"
REJECTS_FILE = "rejects.tsv"
INDEXES_DIR = "indexes"
STAGING_DIR = "staging"
STAGED_DIR = "staged"
PENDING_DIR = "pending"
REBUILD_DIR = "rebuild"
CHECKPOINTS_DIR = "checkpoints"

DDL = (
    "CREATE NODE TABLE Node(id STRING, name STRING, kind STRING, aliases STRING[], "
    "description STRING, types STRING[], value STRING, datatype STRING, lang STRING, hub BOOLEAN DEFAULT false, "
    "seq INT64, PRIMARY KEY(id))",
    "CREATE NODE TABLE Relation(id STRING, label STRING, description STRING, facts INT64, PRIMARY KEY(id))",
    "CREATE NODE TABLE Label(id STRING, PRIMARY KEY(id))",
    "CREATE REL TABLE Fact(FROM Node TO Node, rel STRING)",
    "CREATE REL TABLE HasRel(FROM Node TO Relation, dir STRING, n INT64) WITH (storage_direction = 'fwd')",
    "CREATE REL TABLE Names(FROM Label TO Node, how STRING) WITH (storage_direction = 'fwd')",
)

# Format 1 -> 2: nodes with more than the manifest's ``hub_degree`` facts are flagged, so path
# search does not enumerate walks through super-nodes (a hub with a million edges).
# Format 2 -> 3: every node has a load sequence number ``seq`` (staging.py), so that updates of stored
# nodes can be confined to a range of them; the nodes already stored are numbered by their offset.
MIGRATIONS = {1: ("ALTER TABLE Node ADD hub BOOLEAN DEFAULT false",),
              2: ("ALTER TABLE Node ADD seq INT64 DEFAULT -1", "MATCH (n:Node) SET n.seq = offset(id(n))")}


def normalise_label(text: str) -> str:
    """The key under which a name or alias is found: case-folded, whitespace collapsed.

    >>> normalise_label("  Ginger   ROGERS ")
    'ginger rogers'
    """
    return " ".join(text.casefold().split())
