"""A sentence-transformers BERT model with mean pooling, run on torch alone.

The bundled all-MiniLM-L6-v2 is such a model (BERT layers, the mean of the token outputs,
normalised). Through sentence-transformers every process that embeds a question first imports
it, and with it transformers' model zoo, scikit-learn and SciPy, none of which this encoding
uses; that import was most of a cold ``localkg ask``. Here the same forward pass is a few
tensor operations over the model's safetensors weights, with its fast tokenizer, and gives
sentence-transformers' vectors to float rounding (tests/test_embedding.py compares them).
:func:`readable` says whether a directory is such a model; ``Embedder`` loads any other through
sentence-transformers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file
from tokenizers import Tokenizer
from tqdm import tqdm

#: The sentence-transformers modules of a model this encoder runs (``Normalize`` optional: the
#: vectors are normalised anyway).
TRANSFORMER, POOLING, NORMALIZE = ("sentence_transformers.models.Transformer", "sentence_transformers.models.Pooling",
                                   "sentence_transformers.models.Normalize")
WEIGHTS, TOKENIZER = "model.safetensors", "tokenizer.json"


@dataclass(frozen=True)
class BertLayout:
    """Where a readable model's parts are, and how it reads text."""

    transformer: Path  # the folder with config.json, the weights and the tokenizer
    max_length: int  # tokens per text, [CLS] and [SEP] included; the rest is cut, as sentence-transformers does
    lowercase: bool  # sentence-transformers' do_lower_case (the tokenizer may lowercase on its own too)


def readable(model_path: Path) -> BertLayout | None:
    """The layout of ``model_path`` when it is a BERT model with mean pooling whose weights are
    safetensors and whose tokenizer is a ``tokenizer.json``; None for anything else."""
    try:
        modules = json.loads((model_path / "modules.json").read_text())
        kinds = [module["type"] for module in modules]
        if kinds[:2] != [TRANSFORMER, POOLING] or set(kinds[2:]) - {NORMALIZE}:
            return None
        transformer, pooling = (model_path / module["path"] for module in modules[:2])
        config = json.loads((transformer / "config.json").read_text())
        reading = json.loads((transformer / "sentence_bert_config.json").read_text())
        modes = json.loads((pooling / "config.json").read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    mean_only = modes.get("pooling_mode_mean_tokens") and not any(
        value for key, value in modes.items() if key.startswith("pooling_mode_") and key != "pooling_mode_mean_tokens")
    if config.get("model_type") != "bert" or not mean_only or not (transformer / WEIGHTS).is_file() \
            or not (transformer / TOKENIZER).is_file():
        return None
    max_length = min(int(reading.get("max_seq_length") or 512), int(config["max_position_embeddings"]))
    return BertLayout(transformer, max_length, bool(reading.get("do_lower_case", False)))


class BertEncoder:
    """Unit vectors of texts from a :func:`readable` model (see the module docstring)."""

    def __init__(self, layout: BertLayout, device: str):
        config = json.loads((layout.transformer / "config.json").read_text())
        self.dim = int(config["hidden_size"])
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._lowercase = layout.lowercase
        self._tokenizer = Tokenizer.from_file(str(layout.transformer / TOKENIZER))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(layout.max_length)
        weights = load_file(str(layout.transformer / WEIGHTS), device=device)
        self._weights = {name.removeprefix("bert."): tensor for name, tensor in weights.items()}
        self._device = device

    def encode(self, texts: Sequence[str], batch_size: int, progress: bool = False) -> np.ndarray:
        """An (n, dim) float32 array; texts of similar length are batched together (longest first,
        as sentence-transformers does), so padding costs little. ``progress`` shows a bar of batches."""
        encodings = self._tokenizer.encode_batch([self._prepared(text) for text in texts])
        order = sorted(range(len(texts)), key=lambda i: -len(encodings[i].ids))
        vectors = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in tqdm(range(0, len(order), batch_size), desc="Batches", disable=not progress):
            rows = order[start:start + batch_size]
            length = len(encodings[rows[0]].ids)
            ids = torch.zeros((len(rows), length), dtype=torch.long)
            mask = torch.zeros((len(rows), length), dtype=torch.bool)
            for row, i in enumerate(rows):
                tokens = encodings[i].ids
                ids[row, :len(tokens)] = torch.tensor(tokens)
                mask[row, :len(tokens)] = True
            vectors[rows] = self._forward(ids.to(self._device), mask.to(self._device)).cpu().numpy()
        return vectors

    def _prepared(self, text: str) -> str:
        """The text as sentence-transformers hands it to the tokenizer: stripped, lowercased if the model says so."""
        text = str(text).strip()
        return text.lower() if self._lowercase else text

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """BERT's layers over token ids (padding masked out), mean-pooled over the real tokens, normalised."""
        with torch.inference_mode():
            count, length = ids.shape
            hidden = (self._weight("embeddings.word_embeddings")[ids]
                      + self._weight("embeddings.position_embeddings")[:length]
                      + self._weight("embeddings.token_type_embeddings")[0])
            hidden = self._layer_norm(hidden, "embeddings.LayerNorm")
            attend = mask[:, None, None, :]
            for layer in (f"encoder.layer.{i}" for i in range(self._layers)):
                heads = [self._linear(hidden, f"{layer}.attention.self.{part}")
                         .view(count, length, self._heads, self.dim // self._heads).transpose(1, 2)
                         for part in ("query", "key", "value")]
                context = F.scaled_dot_product_attention(*heads, attn_mask=attend)
                context = context.transpose(1, 2).reshape(count, length, self.dim)
                hidden = self._layer_norm(hidden + self._linear(context, f"{layer}.attention.output.dense"),
                                          f"{layer}.attention.output.LayerNorm")
                inner = F.gelu(self._linear(hidden, f"{layer}.intermediate.dense"))
                hidden = self._layer_norm(hidden + self._linear(inner, f"{layer}.output.dense"),
                                          f"{layer}.output.LayerNorm")
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
            return F.normalize(pooled, p=2, dim=1)

    def _weight(self, name: str) -> torch.Tensor:
        return self._weights[f"{name}.weight"]

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self._weights[f"{name}.weight"], self._weights[f"{name}.bias"])

    def _layer_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.layer_norm(x, (self.dim,), self._weights[f"{name}.weight"], self._weights[f"{name}.bias"], self._eps)
