"""Building and opening the indexes of a database: entity and relation vectors, full-text.

``build_entity_index`` is incremental and resumable by one mechanism: the index keeps
the id of every node it embedded (its rows), and a build embeds exactly the entities
whose ids are not there yet. After a new load that is only the new entities; after an
interruption it is whatever the last checkpoint had not saved. Checkpoints append a
rows part and rewrite the FAISS file every ``checkpoint_vectors`` vectors.

Nodes are read with ``KG.iter_nodes`` (insertion order); an entity contributes one vector
per distinct name or alias, and a chunk's repeated names are encoded once. A later load that
only adds an alias to an entity already embedded is not picked up; ``--rebuild`` re-embeds
everything. Entities get the static encoder distilled from the bundled model (a lookup per
token, for dump scale); relations, few and ranked by the reasoners, keep the full transformer.
Each index records its model in ``meta.json``, and ``embedder_for`` opens the same one to search.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
import numpy as np
from tqdm import tqdm

from localkg.errors import FullTextIndexError, IndexBuildError, IndexMismatchError, IndexMissingError
from localkg.indexes import fulltext
from localkg.indexes.embedding import DEFAULT_MODEL_NAME, Embedder, TextEncoder
from localkg.indexes.label_table import build_label_table
from localkg.indexes.static_embedding import STATIC_SUFFIX, StaticEmbedder
from localkg.indexes.vector_index import IndexMeta, VectorIndex, choose_index_type, training_size
from localkg.store import schema
from localkg.store.kg import KG
from localkg.store.keyset import hash_keys, sorted_distinct
from localkg.store.model import NodeRecord

ENTITIES = "entities"
RELATIONS = "relations"
WHAT = (ENTITIES, RELATIONS, "all")
ENCODE_CHUNK = 8192
STATIC = "static"
TRANSFORMER = "transformer"
ENCODERS = (STATIC, TRANSFORMER)
CHECKPOINT_VECTORS = 50_000


@dataclass
class BuildReport:
    """What one ``index build`` did for one kind of index."""

    kind: str
    index_type: str
    added: int
    total: int
    seconds: float
    model: str = ""
    new_entities: int = 0
    kept: int = 0
    up_to_date: bool = False
    resumed: bool = False
    warning: str = ""

    def to_json(self) -> dict:
        """The report as plain data (``index build --json``)."""
        return dict(self.__dict__)

    def describe(self) -> str:
        """One line for the command: what was embedded (only the new entities, after a load), and with what."""
        if self.up_to_date:
            state = "up to date"
        elif self.kind == ENTITIES:
            state = (f"embedded {self.added:,} names of {self.new_entities:,} new entities, kept {self.kept:,} "
                     "vectors" + (" (resumed)" if self.resumed else ""))
        else:
            state = f"embedded {self.added:,} relations"
        line = f"{state}; {self.total:,} vectors, {self.index_type}, model {self.model}, {self.seconds:.1f}s"
        return f"{line}; warning: {self.warning}" if self.warning else line


def index_directory(kg: KG, kind: str) -> Path:
    return kg.path / schema.INDEXES_DIR / kind


def fix_command(kg: KG, kind: str) -> str:
    """The command that brings ``kind``'s index up to date, for error messages."""
    return f"localkg index build --db {kg.path} --what {kind}"


def open_index(kg: KG, kind: str, model_name: str | None = None) -> VectorIndex:
    """The index of ``kind`` ready to serve; raises IndexMissingError, StaleIndexError or IndexMismatchError."""
    directory = index_directory(kg, kind)
    if not VectorIndex.exists(directory):
        raise IndexMissingError(f"no {kind} index for {kg.path}; build it with `{fix_command(kg, kind)}`")
    index = VectorIndex.load(directory)
    index.check_serves(kg.generation, model_name, fix_command(kg, kind))
    return index


def make_encoder(encoder: str, model_path: str | Path | None = None, device: str | None = None) -> TextEncoder:
    """The ``static`` encoder distilled from a model, or the ``transformer`` model itself."""
    if encoder not in ENCODERS:
        raise IndexBuildError(f"unknown encoder {encoder!r}; choose one of {', '.join(ENCODERS)}")
    return StaticEmbedder(model_path, device) if encoder == STATIC else Embedder(model_path, device)


def embedder_for(index: VectorIndex, model_path: str | Path | None = None) -> TextEncoder:
    """The encoder an index was built with: its recorded kind, from ``model_path`` or the recorded source."""
    source = model_path or (index.meta.model_path or None)
    return make_encoder(index.meta.extra.get("encoder", TRANSFORMER), source)


def entity_encoder_of(kg: KG, model_path: str | Path | None) -> TextEncoder | None:
    """The encoder to search ``kg``'s entity index with, its source model at ``model_path``; None without an index."""
    directory = index_directory(kg, ENTITIES)
    return embedder_for(VectorIndex.load(directory), model_path) if VectorIndex.exists(directory) else None


def build_indexes(kg: KG, what: str = "all", embedder: TextEncoder | None = None, index_type: str = "auto",
                  rebuild: bool = False, progress: bool = True, checkpoint_vectors: int = CHECKPOINT_VECTORS,
                  entity_embedder: TextEncoder | None = None) -> list[BuildReport]:
    """Bring the requested indexes up to date (and the full-text index and label table with the entity one).

    ``embedder`` encodes relations, and entities too unless ``entity_embedder`` is given; by default
    relations get the bundled transformer and entities its static distillation.
    """
    if what not in WHAT:
        raise IndexBuildError(f"--what must be one of {', '.join(WHAT)}, not {what!r}")
    reports = []
    if what in (ENTITIES, "all"):
        try:
            fulltext.build_index(kg)
            warning = ""
        except FullTextIndexError as error:  # only users' own Cypher reads it: the linker has its own
            warning = f"{error}; linking does not need it"
        build_label_table(kg, rebuild)
        encoder = entity_embedder or embedder or StaticEmbedder()
        report = build_entity_index(kg, encoder, index_type, rebuild, progress, checkpoint_vectors)
        reports.append(replace(report, warning=warning))
    if what in (RELATIONS, "all"):
        reports.append(build_relation_index(kg, embedder or Embedder(), rebuild, progress))
    return reports


def entity_texts(record: NodeRecord) -> list[str]:
    """The distinct names and aliases of an entity (case and spacing variants once)."""
    texts: dict[str, str] = {}
    for text in (record.name, *record.aliases):
        key = schema.normalise_label(text or "")
        if key and key not in texts:
            texts[key] = text.strip()
    return list(texts.values())


def build_entity_index(kg: KG, embedder: TextEncoder, index_type: str = "auto", rebuild: bool = False,
                       progress: bool = True, checkpoint_vectors: int = CHECKPOINT_VECTORS) -> BuildReport:
    """Embed the names and aliases of every entity not yet in the entity index."""
    started = time.perf_counter()
    generation = kg.generation
    expected = kg.stats().entities
    index, resumed = _open_for_update(kg, ENTITIES, embedder, index_type, rebuild, expected)
    kept = index.meta.count
    if index.meta.complete and index.meta.generation == generation:
        return BuildReport(ENTITIES, index.meta.index_type, 0, kept, time.perf_counter() - started,
                           model=index.meta.model, kept=kept, up_to_date=True)
    embedded = sorted_distinct(hash_keys(index.ids))
    batch = _EmbeddingBatch(index, embedder, generation, checkpoint_vectors)
    bar = tqdm(total=expected, unit="entity", desc=f"entity index ({embedder.model_name})", disable=not progress)
    new_entities = 0
    for records in kg.iter_nodes(("entity",), batch=20_000):
        new = ~np.isin(hash_keys(r.id for r in records), embedded)
        for record, is_new in zip(records, new):
            if is_new:
                new_entities += 1
                for text in entity_texts(record):
                    batch.append(record.id, text)
        batch.flush(partial=True)
        bar.update(len(records))
    bar.close()
    batch.flush(partial=False)
    index.save(generation, complete=True)
    return BuildReport(ENTITIES, index.meta.index_type, batch.added, index.meta.count,
                       time.perf_counter() - started, model=index.meta.model, new_entities=new_entities,
                       kept=kept, resumed=resumed)


def relation_texts(label: str, description: str) -> str:
    """What a relation's vector is made from: its label, and its description when there is one."""
    return f"{label}: {description}" if description else label


def build_relation_index(kg: KG, embedder: TextEncoder, rebuild: bool = False, progress: bool = True) -> BuildReport:
    """Embed every relation's label (and description); small, so always rebuilt whole when stale."""
    started = time.perf_counter()
    generation = kg.generation
    directory = index_directory(kg, RELATIONS)
    if not rebuild and VectorIndex.exists(directory):
        current = VectorIndex.load(directory)
        if current.meta.complete and current.meta.generation == generation and current.meta.model == embedder.model_name:
            return BuildReport(RELATIONS, current.meta.index_type, 0, current.meta.count,
                               time.perf_counter() - started, model=current.meta.model, kept=current.meta.count,
                               up_to_date=True)
    catalogue = kg.relation_catalogue()
    index = VectorIndex.create(directory, _meta(RELATIONS, embedder, "flat"), len(catalogue))
    texts = [relation_texts(label, description) for _, label, description, _ in catalogue]
    index.add(embedder.encode(texts, progress=progress), [rid for rid, *_ in catalogue], texts)
    index.save(generation, complete=True)
    return BuildReport(RELATIONS, "flat", len(texts), index.meta.count, time.perf_counter() - started,
                       model=embedder.model_name)


def _meta(kind: str, embedder: TextEncoder, index_type: str) -> IndexMeta:
    """What the index records of its encoder: name, kind, and the source model's path unless bundled."""
    encoder = STATIC if isinstance(embedder, StaticEmbedder) else TRANSFORMER
    extra = {"encoder": encoder, **({"weights": embedder.fingerprint} if encoder == STATIC else {})}
    bundled = embedder.model_name in (DEFAULT_MODEL_NAME, DEFAULT_MODEL_NAME + STATIC_SUFFIX)
    return IndexMeta(kind=kind, model=embedder.model_name, model_path="" if bundled else str(embedder.model_path),
                     dim=embedder.dim, index_type=index_type, extra=extra)


def _open_for_update(kg: KG, kind: str, embedder: TextEncoder, index_type: str, rebuild: bool,
                     expected: int) -> tuple[VectorIndex, bool]:
    """The saved index to extend, or a new one; refuses to mix models or silently change type."""
    directory = index_directory(kg, kind)
    if rebuild or not VectorIndex.exists(directory):
        chosen = choose_index_type(expected, index_type)
        return VectorIndex.create(directory, _meta(kind, embedder, chosen), expected), False
    index = VectorIndex.load(directory)
    if index.meta.model != embedder.model_name:
        raise IndexMismatchError(f"the {kind} index was built with {index.meta.model!r}, not "
                                 f"{embedder.model_name!r}; pass --rebuild to re-embed with the new model")
    if index_type not in ("auto", index.meta.index_type):
        choose_index_type(0, index_type)  # an unknown type is reported as such
        raise IndexBuildError(f"the {kind} index is {index.meta.index_type}; pass --rebuild to make it {index_type}")
    return index, not index.meta.complete


class _EmbeddingBatch:
    """Texts waiting to be embedded and added, trained on first (IVF-PQ), saved every so often."""

    def __init__(self, index: VectorIndex, embedder: TextEncoder, generation: int, checkpoint_vectors: int):
        self.index, self.embedder = index, embedder
        self.generation, self.checkpoint_vectors = generation, checkpoint_vectors
        self.ids: list[str] = []
        self.texts: list[str] = []
        self.untrained: list[tuple[np.ndarray, list[str], list[str]]] = []
        self.added = 0
        self.since_checkpoint = 0

    def append(self, node_id: str, text: str) -> None:
        self.ids.append(node_id)
        self.texts.append(text)

    def flush(self, partial: bool) -> None:
        """Embed queued texts in chunks, each distinct text once; with ``partial`` keep a remainder
        smaller than a chunk."""
        while len(self.ids) >= ENCODE_CHUNK or (not partial and self.ids):
            ids, texts = self.ids[:ENCODE_CHUNK], self.texts[:ENCODE_CHUNK]
            del self.ids[:ENCODE_CHUNK], self.texts[:ENCODE_CHUNK]
            distinct = {text: row for row, text in enumerate(dict.fromkeys(texts))}
            vectors = self.embedder.encode(list(distinct))
            self._add(vectors[[distinct[text] for text in texts]], ids, texts)
        if not partial and self.untrained:
            self._train(final=True)

    def _add(self, vectors: np.ndarray, ids: list[str], texts: list[str]) -> None:
        if not self.index.index.is_trained:
            self.untrained.append((vectors, ids, texts))
            self._train(final=False)
            return
        self.index.add(vectors, ids, texts)
        self.added += len(ids)
        self.since_checkpoint += len(ids)
        if self.since_checkpoint >= self.checkpoint_vectors:
            self.index.save(self.generation, complete=False)
            self.since_checkpoint = 0

    def _train(self, final: bool) -> None:
        """Train on the gathered vectors once there are enough (or at the end, if enough at all)."""
        gathered = sum(len(v) for v, _, _ in self.untrained)
        needed = training_size(self.index.index)
        if gathered < needed and not final:
            return
        minimum = 256 * 4  # PQ needs 256 points per centroid set; fewer fails or degrades badly
        if gathered < minimum:
            raise IndexBuildError(f"{self.index.meta.index_type} needs at least {minimum} vectors to train, "
                                  f"this graph has {gathered}; use --index-type flat")
        self.index.index.train(np.concatenate([v for v, _, _ in self.untrained])[:max(needed, minimum)])
        waiting, self.untrained = self.untrained, []
        for vectors, ids, texts in waiting:
            self._add(vectors, ids, texts)
