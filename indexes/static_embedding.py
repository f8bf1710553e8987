"""Static token embeddings distilled from a local sentence-transformers model: the entity encoder.

Entity names are short, and embedding tens of millions of them with a transformer takes days on
a few cores. Distillation (the model2vec recipe) runs every token of the model's vocabulary through
the model once, keeps the mean-pooled output as that token's vector, reduces it with PCA and weights
it by a Zipf estimate of the token's frequency (SIF); a name's vector is then the mean of its
tokens' vectors, a lookup and a sum. It is made from the local weights on first use and cached
per machine (``cache_root``), keyed by a hash of the weights: it depends on the model, not on any
store, so every store on the machine shares one. Nothing is downloaded.
model2vec itself is not used: its ``distill`` extra pins an older transformers than the one
sentence-transformers needs here; the recipe is a few lines over the installed libraries.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from itertools import chain
from pathlib import Path
from typing import Sequence

import numpy as np

from localkg.errors import ModelNotFoundError
from localkg.indexes.embedding import DEFAULT_MODEL_NAME, resolve_model_path

STATIC_SUFFIX = "-static"
PCA_DIMS = 256
SIF_COEFFICIENT = 1e-4
DISTILL_BATCH = 1024
VECTORS_FILE = "embeddings.npy"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "static.json"
WORD_CACHE_SIZE = 1_000_000


def cache_root() -> Path:
    """Where distilled models live: ``$LOCALKG_CACHE``, else ``$XDG_CACHE_HOME/localkg``, else ``~/.cache/localkg``."""
    if os.environ.get("LOCALKG_CACHE"):
        return Path(os.environ["LOCALKG_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "localkg"


def weights_fingerprint(source: Path) -> str:
    """A BLAKE2b hash of the source model's weights and vocabulary, so a changed model is distilled anew."""
    digest = hashlib.blake2b(digest_size=8)
    files = sorted(p for p in source.iterdir() if p.suffix in (".safetensors", ".bin") or p.name == TOKENIZER_FILE)
    if not files:
        raise ModelNotFoundError(f"{source} holds no model weights (*.safetensors or *.bin) to distill")
    for path in files:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 22):
                digest.update(block)
    return digest.hexdigest()


def distill(source: Path, target: Path, device: str = "cpu") -> None:
    """Write the static model of ``source`` to ``target`` (through a temporary folder, then a rename)."""
    import torch
    from tokenizers import Tokenizer
    from transformers import AutoModel

    if not (source / TOKENIZER_FILE).is_file():
        raise ModelNotFoundError(f"{source} has no {TOKENIZER_FILE}; a static model needs a fast tokenizer")
    tokenizer = Tokenizer.from_file(str(source / TOKENIZER_FILE))
    tokenizer.no_padding()
    model = AutoModel.from_pretrained(str(source), local_files_only=True).to(device).eval()
    size = tokenizer.get_vocab_size()
    first, last = _special_ids(tokenizer)
    pooled = []
    with torch.inference_mode():
        for start in range(0, size, DISTILL_BATCH):
            ids = torch.arange(start, min(size, start + DISTILL_BATCH), device=device)
            batch = torch.stack([torch.full_like(ids, first), ids, torch.full_like(ids, last)], dim=1)
            hidden = model(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            pooled.append(hidden.mean(dim=1).float().cpu().numpy())
    vectors = _pca(np.concatenate(pooled), PCA_DIMS) * _sif_weights(size)[:, None]
    staging = target.with_name(target.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    np.save(staging / VECTORS_FILE, vectors.astype(np.float32))
    shutil.copyfile(source / TOKENIZER_FILE, staging / TOKENIZER_FILE)
    (staging / META_FILE).write_text(json.dumps({"source": str(source), "pca_dims": vectors.shape[1],
                                                 "sif_coefficient": SIF_COEFFICIENT}, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(staging, target)


def _special_ids(tokenizer) -> tuple[int, int]:
    """The ids that open and close a sequence ([CLS]/[SEP] for BERT-style models)."""
    encoded = tokenizer.encode("x", add_special_tokens=True).ids
    plain = tokenizer.encode("x", add_special_tokens=False).ids
    if len(encoded) < len(plain) + 2:
        raise ModelNotFoundError("the tokenizer adds no start and end tokens; cannot distill it")
    return encoded[0], encoded[-1]


def _pca(vectors: np.ndarray, dims: int) -> np.ndarray:
    """Centre and project on the top ``dims`` principal axes, each axis signed so its largest loading is positive
    (so the result does not depend on the SVD's arbitrary signs)."""
    centred = vectors - vectors.mean(axis=0)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    axes = axes[:min(dims, axes.shape[0])]
    signs = np.sign(axes[np.arange(len(axes)), np.abs(axes).argmax(axis=1)])
    return centred @ (axes * signs[:, None]).T


def _sif_weights(size: int) -> np.ndarray:
    """Smooth inverse frequency, with token frequency estimated from vocabulary rank (Zipf): rare tokens weigh more."""
    rank = np.arange(1, size + 1, dtype=np.float64)
    probability = (1 / rank) / (1 / rank).sum()
    return SIF_COEFFICIENT / (SIF_COEFFICIENT + probability)


class StaticEmbedder:
    """Encodes texts as the normalised mean of their tokens' distilled vectors (numpy; no device needed).

    ``model_name`` is the source's name plus ``-static``, what an index records; ``model_path`` is the
    source model directory (the static model is found from it in the cache, or distilled).
    """

    def __init__(self, model_path: str | Path | None = None, device: str | None = None):
        from tokenizers import Tokenizer

        self.model_path = resolve_model_path(model_path)
        source_name = DEFAULT_MODEL_NAME if model_path is None else self.model_path.name
        self.model_name = source_name + STATIC_SUFFIX
        self.device = "cpu"
        self.fingerprint = weights_fingerprint(self.model_path)
        self.directory = cache_root() / "models" / f"{self.model_name}-{self.fingerprint}"
        self.distilled = not (self.directory / VECTORS_FILE).is_file()
        if self.distilled:
            distill(self.model_path, self.directory, device or "cpu")
        self._vectors = np.load(self.directory / VECTORS_FILE, mmap_mode="r")
        self._tokenizer = Tokenizer.from_file(str(self.directory / TOKENIZER_FILE))
        self._tokenizer.no_padding()
        self._tokenizer.no_truncation()
        self._words: dict[str, list[int]] = {}
        self.dim = int(self._vectors.shape[1])

    def encode(self, texts: Sequence[str], batch_size: int = 4096, progress: bool = False) -> np.ndarray:
        """Embed ``texts`` as an (n, dim) float32 array of unit vectors (a text with no tokens: zeros)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            out[start:start + batch_size] = self._encode_batch(list(texts[start:start + batch_size]))
        return out

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        token_ids = self._token_ids(texts)
        lengths = np.fromiter(map(len, token_ids), dtype=np.int64, count=len(token_ids))
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        present = lengths > 0
        if not present.any():
            return vectors
        ids = np.fromiter(chain.from_iterable(token_ids), dtype=np.int64, count=int(lengths.sum()))
        starts = np.concatenate([[0], np.cumsum(lengths[present])[:-1]])
        sums = np.add.reduceat(self._vectors[ids], starts, axis=0)
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        vectors[present] = sums / np.maximum(norms, 1e-12)
        return vectors

    def _token_ids(self, texts: list[str]) -> list[list[int]]:
        """Each text's token ids, tokenizing each distinct whitespace-separated word once.

        The tokenizer splits at whitespace before anything else, so the ids of a text are its
        words' ids in order; names repeat words far more than whole names, and tokenizing is most
        of the cost. The cache is emptied when it reaches :data:`WORD_CACHE_SIZE` words.
        """
        words = [text.split() for text in texts]
        unknown = list({word for split in words for word in split if word not in self._words})
        if len(self._words) + len(unknown) > WORD_CACHE_SIZE:
            self._words.clear()
            unknown = list({word for split in words for word in split})
        for word, encoding in zip(unknown, self._tokenizer.encode_batch(unknown, add_special_tokens=False)):
            self._words[word] = encoding.ids
        cache = self._words
        return [[token for word in split for token in cache[word]] for split in words]
