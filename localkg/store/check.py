"""``localkg check``: verify a store, and repair what an interrupted or failed load left.

A store is sound when Kùzu's primary-key index finds every node, label and relation by its id
(kuzu 0.11.3 could lose keys from it on appends, ``copying.keyed_pieces``), its manifest reads,
no flush or update of stored nodes was left half done, and the writer's hash sets count what
the database and the staged batches hold. :func:`check_store` reports each problem in one line
and changes nothing. :func:`repair_store` rebuilds ``graph.kuzu`` from its own tables when the
index disagrees with them (every table exported, then copied into empty tables, which Kùzu
indexes whole), rewrites a damaged manifest, and recovers the rest (``recovery.recover``): it
finishes or drops an interrupted flush, rebuilds the hash sets and applies the pending updates.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import kuzu

from localkg.errors import DatabaseDamagedError
from localkg.store import schema
from localkg.store import seal
from localkg.store.copying import path_literal
from localkg.store.dedupe import KEYSETS, key_set_sizes, outdated_key_sets
from localkg.store.kg import KG, open_database, read_manifest
from localkg.store.recovery import recover, write_state
from localkg.store.staging import staged_batches
from localkg.store.updates import has_pending_updates

KEYED_TABLES = ("Node", "Label", "Relation")
DEFAULT_SAMPLE = 5_000
_REPORTED = 20  # missing keys a full check names at most
_EXPORTS = (  # table, query returning its columns in COPY order (a relationship: from, to, properties)
    ("Node", "MATCH (n:Node) RETURN n.id, n.name, n.kind, n.aliases, n.description, n.types, n.value, "
             "n.datatype, n.lang, n.hub, n.seq ORDER BY offset(id(n))"),
    ("Relation", "MATCH (r:Relation) RETURN r.id, r.label, r.description, r.facts ORDER BY offset(id(r))"),
    ("Label", "MATCH (l:Label) RETURN l.id ORDER BY offset(id(l))"),
    ("Fact", "MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, b.id, f.rel"),
    ("HasRel", "MATCH (n:Node)-[h:HasRel]->(r:Relation) RETURN n.id, r.id, h.dir, h.n"),
    ("Names", "MATCH (l:Label)-[x:Names]->(n:Node) RETURN l.id, n.id, x.how"),
)


def check_store(path: str | Path, sample: int = DEFAULT_SAMPLE, full: bool = False) -> list[str]:
    """The problems of the store at ``path``, one line each (none: the store is sound).

    Without ``full``, ``sample`` ids per keyed table are looked up by primary key, one query each
    (spread evenly over the table, its last rows included; 0: every id), and the store is only
    read. With ``full``, ``graph.kuzu`` is compared with its seal byte for byte (CRC-32), and every
    id is looked up the way a ``COPY`` of facts does, in one statement per table into a scratch
    relationship table that is dropped again: the store is opened for writing, but changes nothing
    that stays. A damaged ``graph.kuzu`` is one problem naming the way back (``seal.way_back``).
    """
    path = Path(path)
    try:
        read_manifest(path)
    except DatabaseDamagedError as error:
        problems = [str(error)]
    else:
        problems = []
    if full and (path / schema.GRAPH_FILE).exists():  # the whole file against its seal, before Kùzu reads it
        damaged = seal.damage(path, read_only=False, content=True)
        if damaged is not None:
            return problems + [damaged]
    try:
        kg = KG(path, kuzu_database(path, read_only=not full), read_only=not full, buffer_pool_bytes=256 << 20)
    except DatabaseDamagedError as error:
        return problems + [str(error)]
    with kg:
        for table in KEYED_TABLES:
            missing, looked_up = unindexed_keys(kg, table) if full else unindexed_keys_in_sample(kg, table, sample)
            if missing:
                problems.append(f"{table}: {len(missing):,}{'+' if len(missing) >= _REPORTED else ''} of "
                                f"{looked_up:,} ids looked up are in the table but not found by its primary key "
                                f"(e.g. {missing[0]!r}): the index disagrees with the table; `--repair` rebuilds it")
        problems += _state_problems(kg)
    return problems


def kuzu_database(path: Path, read_only: bool, buffer_pool_bytes: int = 256 << 20) -> kuzu.Database:
    """Kùzu's database of the store at ``path`` (a clear error when it is missing or damaged)."""
    if not (path / schema.GRAPH_FILE).exists():
        raise DatabaseDamagedError(f"no {schema.GRAPH_FILE} in {path}: not a localkg store")
    return open_database(path, read_only, buffer_pool_bytes)


def unindexed_keys_in_sample(kg: KG, table: str, sample: int) -> tuple[list[str], int]:
    """Ids of a sample of ``table`` that a scan returns and a primary-key lookup does not find,
    and how many were looked up."""
    rows = kg.rows(f"MATCH (x:{table}) RETURN count(*)")[0][0]
    if not rows:
        return [], 0
    step = 1 if sample <= 0 or rows <= sample else rows // (sample // 2)
    tail = 0 if step == 1 else rows - sample // 2  # the last rows: the latest appends
    ids = [row[0] for row in kg.rows(
        f"MATCH (x:{table}) WHERE offset(id(x)) % $step = 0 OR offset(id(x)) >= $tail RETURN x.id",
        {"step": step, "tail": tail})]
    return [key for key in ids if not kg.rows(f"MATCH (x:{table}) WHERE x.id = $id RETURN count(*)",
                                              {"id": key})[0][0]], len(ids)


def unindexed_keys(kg: KG, table: str) -> tuple[list[str], int]:
    """Ids of ``table`` (at most :data:`_REPORTED`) that its primary-key index does not find, and
    how many were looked up: every id is copied as a relationship from and to itself into a
    scratch table, whose ``COPY`` looks each end up by key and names the first it cannot find."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    probe, file = f"_Probe{table}", kg.path / schema.REBUILD_DIR / f"probe-{table}.parquet"
    kg.execute(f"DROP TABLE IF EXISTS {probe}")
    ids = [row[0] for row in kg.rows(f"MATCH (x:{table}) RETURN x.id")]
    if not ids:
        return [], 0
    kg.execute(f"CREATE REL TABLE {probe}(FROM {table} TO {table})")
    file.parent.mkdir(exist_ok=True)
    missing: list[str] = []
    remaining = ids
    while len(missing) < _REPORTED:
        pq.write_table(pa.table({"from": remaining, "to": remaining}), file)
        try:
            kg.execute(f"COPY {probe} FROM {path_literal(file)}")
            break
        except RuntimeError as error:
            found = re.search(r"Unable to find primary key value (.*)\.$", str(error).strip())
            if found is None:
                raise
            missing.append(found.group(1))
            remaining = [key for key in remaining if key != found.group(1)]
            kg.reopen()  # Kùzu rolled the copy back; a second rollback on one connection aborts it
    kg.execute(f"DROP TABLE {probe}")
    shutil.rmtree(file.parent)
    return missing, len(ids)


def _state_problems(kg: KG) -> list[str]:
    """An interrupted flush or update pass, and hash sets that disagree with the database."""
    problems = []
    state = write_state(kg)
    record = state.flush
    if record is not None:
        held = {name: state.held[name] for name in record["before"]}
        if held == record["expected"]:
            problems.append("a flush committed but its staged batches were not dropped; `--repair` drops them")
        else:
            problems.append(f"a flush of {len(record['batches'])} staged batches was interrupted "
                            f"(the database holds {_differences(held, record)}); `--repair` finishes it")
    elif state.batches:
        problems.append(f"{len(state.batches)} staged batches wait for a flush (an interrupted load); "
                        "`--repair` flushes them, or run the load again with --resume")
    if state.pending_updates:
        problems.append("updates of stored nodes saved by a flush were not applied; `--repair` applies them")
    keys = key_set_sizes(kg.path)
    wrong = [f"{name} {keys[name]:,} (should be {state.expected[name]:,})" for name in KEYSETS
             if keys[name] != state.expected[name]]
    if wrong:
        problems.append(f"the deduplication hash sets disagree with the store: {', '.join(wrong)}; "
                        "`--repair` rebuilds them")
    outdated = outdated_key_sets(kg.path)
    if outdated:
        problems.append(f"the deduplication hash sets {', '.join(outdated)} were hashed by an earlier localkg; "
                        "`--repair` or the next load rebuilds them")
    facts = kg.rows("MATCH (r:Relation) RETURN sum(r.facts)")[0][0] or 0
    if facts != state.held["facts"]:
        problems.append(f"the relation catalogue counts {facts:,} facts, the store holds {state.held['facts']:,}")
    return problems


def _differences(held: dict[str, int], record: dict) -> str:
    return ", ".join(f"{held[name]:,} of {record['expected'][name]:,} {name}" for name in held
                     if held[name] != record["expected"][name])


def repair_store(path: str | Path, buffer_pool_bytes: int = 1 << 30) -> list[str]:
    """Repair what :func:`check_store` finds (checking every key); return what was done, one line each."""
    path = Path(path)
    done = []
    try:
        read_manifest(path)
    except DatabaseDamagedError:
        _write_manifest(path)
        done.append(f"wrote {schema.MANIFEST_FILE} again")
    if any(problem.split(":", 1)[0] in KEYED_TABLES for problem in check_store(path, full=True)):
        rebuild_graph(path, buffer_pool_bytes)
        done.append(f"rebuilt {schema.GRAPH_FILE} from its tables (its primary-key index had lost keys)")
    unfinished = bool(staged_batches(path)) or has_pending_updates(path)
    with KG.open(path, buffer_pool_bytes=buffer_pool_bytes) as kg:
        recover(kg)
    if unfinished:
        done.append("finished the interrupted load's flush and updates of stored nodes")
    return done


def _write_manifest(path: Path) -> None:
    """A manifest for a store whose manifest is damaged: generation 1 makes every index stale."""
    manifest = {"format": schema.FORMAT_VERSION, "generation": 1, "hub_degree": schema.HUB_DEGREE}
    (path / schema.MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def rebuild_graph(path: Path, buffer_pool_bytes: int = 1 << 30) -> None:
    """Replace ``graph.kuzu`` by a copy of its own tables, copied into empty tables.

    Kùzu builds a primary-key index whole when it copies into an empty table, so the copy's
    index agrees with its table. The exported tables wait in ``DB/rebuild/`` and the new database
    replaces the old one only once complete (one rename), so a crash here loses nothing.
    """
    work = path / schema.REBUILD_DIR
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    old = kuzu_database(path, read_only=True, buffer_pool_bytes=buffer_pool_bytes)
    connection = kuzu.Connection(old)
    files = {}
    for table, query in _EXPORTS:
        files[table] = work / f"{table}.parquet"
        connection.execute(f"COPY ({query}) TO {path_literal(files[table])}")
    connection.close()
    old.close()
    target = work / schema.GRAPH_FILE
    new = kuzu.Database(str(target), buffer_pool_size=buffer_pool_bytes)
    connection = kuzu.Connection(new)
    for statement in schema.DDL:
        connection.execute(statement)
    for table, file in files.items():
        if _has_rows(file):
            connection.execute(f"COPY {table} FROM {path_literal(file)}")
    connection.close()
    new.close()
    seal.unseal(path)
    target.replace(path / schema.GRAPH_FILE)
    seal.seal(path)
    shutil.rmtree(work)


def _has_rows(file: Path) -> bool:
    import pyarrow.parquet as pq

    return pq.read_metadata(file).num_rows > 0

