"""A FAISS index persisted in a database's ``indexes/`` folder, with what each vector stands for.

Layout of one index (``DB/indexes/entities/`` or ``DB/indexes/relations/``)::

    meta.json            kind, model, dim, count, graph generation, index type, complete
    index.faiss          the FAISS index (row i of FAISS is vector i)
    rows-00000.parquet   per vector, in order: the node (or relation) id and the text embedded
    rows-00001.parquet   ... one part per checkpoint, so saving progress appends instead of rewriting

Vectors are unit length and every index uses inner product, so scores are cosines. The index
types (``flat``, ``hnsw``, ``ivfpq``) and their memory per vector are in docs/indexes.md.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from localkg.errors import IndexBuildError, IndexMismatchError, IndexMissingError, StaleIndexError

FORMAT_VERSION = 1
INDEX_TYPES = ("auto", "flat", "hnsw", "ivfpq")
FLAT_LIMIT = 200_000
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 80
HNSW_EF_SEARCH = 64
IVF_NPROBE = 16
IVF_TRAINING_PER_LIST = 64
META_FILE = "meta.json"
INDEX_FILE = "index.faiss"


def choose_index_type(expected_vectors: int, requested: str = "auto") -> str:
    """``requested`` unless it is ``auto``: then exact below :data:`FLAT_LIMIT` vectors, else IVF-PQ."""
    if requested not in INDEX_TYPES:
        raise IndexBuildError(f"unknown index type {requested!r}; choose one of {', '.join(INDEX_TYPES)}")
    if requested != "auto":
        return requested
    return "flat" if expected_vectors < FLAT_LIMIT else "ivfpq"


def pq_subquantizers(dim: int) -> int:
    """Sub-vectors for product quantization: about 8 dimensions each (48 for d = 384)."""
    for m in range(max(1, dim // 8), 0, -1):
        if dim % m == 0:
            return m
    return 1


def ivf_lists(expected_vectors: int) -> int:
    """Inverted lists for IVF: √n rounded to a power of two (1,024 for 1M vectors).

    FAISS suggests 4-16·√n lists for the fastest search, but k-means training costs
    lists × training vectors × d: 4,000 lists trained on 100,000 vectors had not finished after
    50 minutes on a loaded 2-core machine, 1,024 lists on 65,536 vectors take minutes. With
    ``nprobe`` 16 a search then reads 1.6% of the codes (16,000 of 1M), about a millisecond.
    """
    root = math.sqrt(max(1, expected_vectors))
    return int(min(65_536, 2 ** max(0, round(math.log2(root)))))


def bytes_per_vector(index_type: str, dim: int) -> int:
    """Memory one vector takes in the FAISS index (excluding the id and text rows)."""
    if index_type == "flat":
        return 4 * dim
    if index_type == "hnsw":
        return 4 * dim + 2 * HNSW_M * 4
    if index_type == "ivfpq":
        return pq_subquantizers(dim) + 8
    raise IndexBuildError(f"unknown index type {index_type!r}")


def new_faiss_index(index_type: str, dim: int, expected_vectors: int) -> faiss.Index:
    """An empty index of ``index_type`` for unit vectors (inner product = cosine)."""
    if index_type == "flat":
        return faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, HNSW_M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = HNSW_EF_CONSTRUCTION
        index.hnsw.efSearch = HNSW_EF_SEARCH
        return index
    if index_type == "ivfpq":
        # "np": no polysemous training, which costs 20x the rest of training and serves only Hamming search
        index = faiss.index_factory(dim, f"IVF{ivf_lists(expected_vectors)},PQ{pq_subquantizers(dim)}np",
                                    faiss.METRIC_INNER_PRODUCT)
        faiss.extract_index_ivf(index).nprobe = IVF_NPROBE
        return index
    raise IndexBuildError(f"unknown index type {index_type!r}")


def training_size(index: faiss.Index) -> int:
    """How many vectors to gather before training (0 when the index needs no training).

    :data:`IVF_TRAINING_PER_LIST` per list (FAISS warns below 39 and samples at most 256), and
    at least the 256 × 10 that PQ's 256-centroid codebooks need; more only slows training.
    """
    if index.is_trained:
        return 0
    ivf = faiss.extract_index_ivf(index)
    return int(max(IVF_TRAINING_PER_LIST * ivf.nlist, 256 * 10))


@dataclass
class IndexMeta:
    """What ``meta.json`` records about one index."""

    kind: str
    model: str
    model_path: str
    dim: int
    index_type: str
    count: int = 0
    generation: int = 0
    complete: bool = False
    parts: int = 0
    bytes_per_vector: int = 0
    format: int = FORMAT_VERSION
    extra: dict[str, Any] = field(default_factory=dict)


class VectorIndex:
    """A FAISS index and, per vector, the id and text it was made from."""

    def __init__(self, directory: Path, meta: IndexMeta, index: faiss.Index, ids: pa.Array, texts: pa.Array):
        self.directory = Path(directory)
        self.meta = meta
        self.index = index
        self.ids = ids
        self.texts = texts
        self._unsaved_ids: list[str] = []
        self._unsaved_texts: list[str] = []

    # ---------------------------------------------------------------- making and opening
    @classmethod
    def create(cls, directory: Path, meta: IndexMeta, expected_vectors: int) -> "VectorIndex":
        """A new, empty index (anything in ``directory`` is replaced on the first save)."""
        index = new_faiss_index(meta.index_type, meta.dim, expected_vectors)
        meta.bytes_per_vector = bytes_per_vector(meta.index_type, meta.dim)
        return cls(directory, meta, index, pa.array([], pa.string()), pa.array([], pa.string()))

    @classmethod
    def exists(cls, directory: Path) -> bool:
        """Whether ``directory`` holds a saved index (its meta file), finished or interrupted."""
        return (Path(directory) / META_FILE).is_file()

    @classmethod
    def load(cls, directory: Path) -> "VectorIndex":
        """Open a saved index, also an interrupted one (``meta.complete`` is False then).

        Saving writes the rows part, then the FAISS file, then ``meta.json``; a crash in
        between leaves a part the FAISS file does not cover, which is ignored here and
        overwritten by the next save (parts are numbered in order).
        """
        directory = Path(directory)
        if not cls.exists(directory):
            raise IndexMissingError(f"no index in {directory}")
        raw = json.loads((directory / META_FILE).read_text())
        meta = IndexMeta(**{k: v for k, v in raw.items() if k in IndexMeta.__dataclass_fields__})
        index = faiss.read_index(str(directory / INDEX_FILE))
        id_chunks, text_chunks, total = [], [], 0
        for part in sorted(directory.glob("rows-*.parquet")):
            if total == index.ntotal:
                break
            table = pq.read_table(part)
            id_chunks.append(table.column("id"))
            text_chunks.append(table.column("text"))
            total += table.num_rows
        if total != index.ntotal:
            raise IndexMissingError(f"the index in {directory} is damaged ({index.ntotal} vectors, {total} rows); "
                                    "rebuild it with `localkg index build --rebuild`")
        meta.count, meta.parts = total, len(id_chunks)
        return cls(directory, meta, index, _concat(id_chunks), _concat(text_chunks))

    # ---------------------------------------------------------------- writing
    def add(self, vectors: np.ndarray, ids: list[str], texts: list[str]) -> None:
        """Append vectors (the index must be trained) with the id and text of each."""
        if len(vectors) == 0:
            return
        self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._unsaved_ids.extend(ids)
        self._unsaved_texts.extend(texts)

    def save(self, generation: int, complete: bool) -> None:
        """Write what was added since the last save: a new rows part, the FAISS file, then the meta."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.meta.parts == 0:
            for stale in self.directory.glob("rows-*.parquet"):
                stale.unlink()
        if self._unsaved_ids:
            new_ids, new_texts = pa.array(self._unsaved_ids, pa.string()), pa.array(self._unsaved_texts, pa.string())
            pq.write_table(pa.table({"id": new_ids, "text": new_texts}),
                           self.directory / f"rows-{self.meta.parts:05d}.parquet")
            self.ids = _concat([self.ids, new_ids])
            self.texts = _concat([self.texts, new_texts])
            self.meta.parts += 1
            self._unsaved_ids.clear()
            self._unsaved_texts.clear()
        _atomic_write(self.directory / INDEX_FILE, lambda tmp: faiss.write_index(self.index, str(tmp)))
        self.meta.count = int(self.index.ntotal)
        self.meta.generation = int(generation)
        self.meta.complete = complete
        _atomic_write(self.directory / META_FILE,
                      lambda tmp: tmp.write_text(json.dumps(asdict(self.meta), indent=2, sort_keys=True)))

    # ---------------------------------------------------------------- serving
    def check_serves(self, generation: int, model_name: str | None, fix_command: str) -> None:
        """Refuse to answer from an unfinished index, a stale one, or one of another model."""
        if not self.meta.complete:
            raise IndexMissingError(f"the {self.meta.kind} index in {self.directory} was interrupted before it "
                                    f"finished; resume it with `{fix_command}`")
        if generation > self.meta.generation:
            raise StaleIndexError(
                f"the {self.meta.kind} index was built at graph generation {self.meta.generation} but the graph "
                f"is at generation {generation} (data was loaded since); update it with `{fix_command}`")
        if model_name is not None and model_name != self.meta.model:
            raise IndexMismatchError(f"the {self.meta.kind} index was built with embedding model "
                                     f"{self.meta.model!r}, not {model_name!r}; search it with that model "
                                     f"or rebuild it with `{fix_command} --rebuild`")

    def search(self, queries: np.ndarray, k: int) -> list[list[tuple[str, str, float]]]:
        """For each query vector, up to ``k`` (id, text, score) triples, best first."""
        if self.index.ntotal == 0 or len(queries) == 0:
            return [[] for _ in range(len(queries))]
        scores, rows = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), min(k, self.index.ntotal))
        flat_rows, flat_scores = rows.ravel(), scores.ravel()
        valid = flat_rows >= 0
        taken = pa.array(np.where(valid, flat_rows, 0))
        ids = self.ids.take(taken).to_pylist()
        texts = self.texts.take(taken).to_pylist()
        width = rows.shape[1]
        return [[(ids[j], texts[j], float(flat_scores[j])) for j in range(q * width, (q + 1) * width) if valid[j]]
                for q in range(len(queries))]

def _concat(arrays: list) -> pa.Array:
    chunks = [chunk for array in arrays for chunk in (array.chunks if isinstance(array, pa.ChunkedArray) else [array])]
    if not chunks:
        return pa.array([], pa.string())
    return pa.concat_arrays(chunks)


def _atomic_write(target: Path, write: Any) -> None:
    """Write through a temporary file and rename, so a crash never leaves half a file."""
    tmp = target.with_name(target.name + ".tmp")
    write(tmp)
    os.replace(tmp, target)
