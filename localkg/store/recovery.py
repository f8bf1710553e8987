"""What an interrupted or failed writer leaves in a store, and how it is settled.

A writer killed anywhere leaves some of: half-written batches (``*.part``), complete staged
batches, the record of a flush cut off before, between or after its steps, hash sets that count
fewer keys than the store holds, saved updates of stored nodes, and the manifest's
``unfinished_writer`` flag (the close's passes owed). :func:`write_state` reads all of it without
changing anything (``localkg check`` reports it); :func:`recover_staged` settles what must be
settled before anything new is staged (every writer runs it when it opens: ``KG.writer``); and
:func:`recover` settles everything, without writing anything new (``localkg check --repair``).
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from localkg.store import schema
from localkg.store.closing import finish_writes
from localkg.store.dedupe import KeySets, keys_agree, open_key_sets, rebuild_key_sets
from localkg.store.flush import database_counts, flush_marker, flush_record, flush_staged
from localkg.store.pool import buffer_pool_errors, update_span_for_pool
from localkg.store.staging import StagedWrite, expected_counts, staged_batches, staged_writes
from localkg.store.updates import has_pending_updates

if TYPE_CHECKING:
    from localkg.store.kg import KG


@dataclass(frozen=True)
class WriteState:
    """What writers left in a store: its complete staged batches (oldest first), the record of a
    flush that was cut off (or None), the rows each table holds (``flush.database_counts``), the
    keys the hash sets should count, and whether saved updates of stored nodes wait."""

    batches: list[Path]
    flush: dict | None
    held: dict[str, int]
    expected: dict[str, int]
    pending_updates: bool


def write_state(kg: "KG") -> WriteState:
    """What writers left in ``kg``, read without changing anything."""
    batches = staged_batches(kg.path)
    record = flush_record(kg.path)
    held = database_counts(kg)
    expected = record["expected"] if record is not None else expected_counts(held, batches)
    return WriteState(batches, record, held, expected, has_pending_updates(kg.path))


def recover_staged(kg: "KG", keys: KeySets) -> list[StagedWrite]:
    """Settle what an interrupted writer staged before a new writer stages anything: drop its
    half-written batches and settle its cut-off flush (:func:`settle_flush`), rebuild the hash
    sets ``keys`` when they disagree with the store and its staged batches, and flush those
    batches into the store. Returns the batches found staged, with the origins their writer gave
    them, so a load can count what it had staged itself.

    Raises what the flush raises (``flush.flush_staged``); the batches then stay staged."""
    found = staged_writes(kg.path)
    settle_flush(kg)
    state = write_state(kg)
    if not keys_agree(keys, state.expected):
        rebuild_key_sets(kg, keys, state.batches)
    if state.batches:
        flush_staged(kg, keys["nodes"], state.batches)
    return found


@buffer_pool_errors()
def recover(kg: "KG") -> list[StagedWrite]:
    """Settle everything interrupted or failed writers left in ``kg``, writing nothing new:
    :func:`recover_staged`, then the passes a writer owes when it closes (the pending updates of
    stored nodes, hub flags, the generation: ``closing.finish_writes``). Returns the batches found
    staged."""
    keys = open_key_sets(kg.path)
    found = recover_staged(kg, keys)
    finish_writes(kg, keys["nodes"], update_span_for_pool(kg.buffer_pool_bytes))
    shutil.rmtree(kg.path / schema.STAGING_DIR, ignore_errors=True)
    return found


def settle_flush(kg: "KG") -> None:
    """Drop half-written batches; after a crash inside a flush, drop its batches if all of its
    steps committed, forget it if none did, and keep its record if some did (the next flush then
    finishes it)."""
    staged = kg.path / schema.STAGED_DIR
    if not staged.is_dir():
        return
    for part in staged.glob("*.part"):  # half-written batches, and a marker's temporary file
        if part.is_dir():
            shutil.rmtree(part)
        else:
            part.unlink()
    record = flush_record(kg.path)
    if record is not None:
        counts = database_counts(kg)
        counts = {name: counts[name] for name in record["before"]}  # records of older writers count fewer tables
        if counts == record["before"]:
            flush_marker(kg.path).unlink()
        elif counts == record["expected"]:
            for name in record["batches"]:
                shutil.rmtree(staged / name, ignore_errors=True)
            flush_marker(kg.path).unlink()
