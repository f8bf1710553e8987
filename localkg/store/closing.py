"""What a writer owes when it closes: the pending updates of stored nodes, and, once it changed the
graph, new hub flags and the next generation.

A flush raises the manifest's ``unfinished_writer`` flag (``flush.UNFINISHED``) before its first
commit and :func:`finish_writes` lowers it with the generation bump, so the passes a killed writer
owed are done by the next writer's close, or by ``recovery.recover``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from localkg.store.flush import UNFINISHED
from localkg.store.hubs import flag_hubs
from localkg.store.keyset import KeySet
from localkg.store.updates import apply_pending_updates

if TYPE_CHECKING:
    from localkg.store.kg import KG


def finish_writes(kg: "KG", node_keys: KeySet, update_span: int) -> None:
    """Apply the pending updates of stored nodes; if a flush changed the graph since the last
    close, flag the new hubs and bump the generation (indexes then see that they are stale).
    Both passes go ``update_span`` sequence numbers at a time."""
    apply_pending_updates(kg, node_keys, update_span)
    if kg.manifest.get(UNFINISHED):
        flag_hubs(kg, update_span)
        kg.update_manifest(generation=kg.generation + 1, **{UNFINISHED: False})
