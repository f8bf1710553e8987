"""The foresight triple scorer of FoG (Foresight-over-Graph), in torch.

For each triple of a question's subgraph, how likely it lies on an answer-supporting path. It
reads only frozen sentence embeddings (question, sub-questions, entity names, relation words), so
the trainable part is small and trains on a CPU.

* **Triple encoder**: subject, relation and object tokens (projected embedding + role bias), one
  self-attention and one cross-attention block over the question; their mean is the triple vector.
* **Scorer**: an MLP over the triple vector, the near and far end's node states and the question.
* **Far-to-near feedback**: node states are updated level by level from the outer frontier back
  to the sources, so one pass carries evidence to the triples at the sources; then re-scored.
* **Answer distance**: an MLP over the question without its topic names predicts how many hops
  out the answer lies, which the triple scores cannot say.

``initial`` scores (no feedback) serve the expansion (``tau_e``), refined ones ``tau_p``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class ScorerConfig:
    """Sizes of the scorer; stored in every checkpoint so it can be rebuilt."""

    encoder_dim: int = 384
    hidden: int = 128
    heads: int = 4
    feedback_layers: int = 1
    max_level: int = 4
    dropout: float = 0.1
    answer_distance: bool = True  # the distance head; checkpoints written before it load without

    def to_json(self) -> dict[str, int | float]:
        return asdict(self)


@dataclass
class GraphTensors:
    """One or more question subgraphs as tensors (several questions form one disjoint union).

    ``head``/``tail`` index ``node_*`` in graph orientation; ``node_level`` is each node's BFS
    distance from its question's sources; ``question_vectors[g]`` holds the question and its
    sub-questions for graph ``g`` (``question_padding`` marks unused slots).
    """

    node_vectors: Tensor
    node_level: Tensor
    node_graph: Tensor
    head: Tensor
    tail: Tensor
    relation_vectors: Tensor
    question_vectors: Tensor
    question_padding: Tensor

    def to(self, device: torch.device | str) -> "GraphTensors":
        return GraphTensors(*(getattr(self, name).to(device) for name in self.__dataclass_fields__))

    @property
    def edge_graph(self) -> Tensor:
        return self.node_graph[self.head]

    def near_far(self) -> tuple[Tensor, Tensor, Tensor]:
        """Each triple's end nearer to the sources, its farther end, and whether the two differ
        in level (only such triples carry feedback; a triple within one level does not)."""
        head_level, tail_level = self.node_level[self.head], self.node_level[self.tail]
        head_is_near = head_level <= tail_level
        near = torch.where(head_is_near, self.head, self.tail)
        far = torch.where(head_is_near, self.tail, self.head)
        return near, far, head_level != tail_level


def _mlp(inputs: int, hidden: int, outputs: int, dropout: float) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.GELU(), nn.Dropout(dropout), nn.Linear(hidden, outputs))


def _projection(inputs: int, hidden: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inputs, hidden), nn.LayerNorm(hidden))


def scatter_softmax(logits: Tensor, groups: Tensor, size: int) -> Tensor:
    """Softmax of ``logits`` within each group (``groups[i]`` in ``0..size-1``)."""
    peak = torch.full((size,), float("-inf"), device=logits.device, dtype=logits.dtype)
    peak = peak.scatter_reduce(0, groups, logits, reduce="amax", include_self=True)
    weights = torch.exp(logits - peak[groups])
    totals = torch.zeros(size, device=logits.device, dtype=logits.dtype).index_add(0, groups, weights)
    return weights / totals[groups].clamp_min(1e-12)


class ForesightScorer(nn.Module):
    """Scores triples of question subgraphs: :meth:`initial_logits` and :meth:`forward`."""

    def __init__(self, config: ScorerConfig = ScorerConfig()):
        super().__init__()
        self.config = config
        d, p = config.hidden, config.dropout
        self.node_in = _projection(config.encoder_dim, d)
        self.relation_in = _projection(config.encoder_dim, d)
        self.question_in = _projection(config.encoder_dim, d)
        self.level = nn.Embedding(config.max_level + 1, d)
        self.roles = nn.Parameter(torch.randn(3, d) * 0.02)
        self.self_attention = nn.TransformerEncoderLayer(d, config.heads, 2 * d, p, batch_first=True)
        self.cross_attention = nn.MultiheadAttention(d, config.heads, dropout=p, batch_first=True)
        self.cross_norm = nn.LayerNorm(d)
        self.message = nn.ModuleList(_mlp(2 * d, d, d, p) for _ in range(config.feedback_layers))
        self.attend = nn.ModuleList(nn.Linear(2 * d, 1) for _ in range(config.feedback_layers))
        self.phi = nn.ModuleList(nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Dropout(p))
                                 for _ in range(config.feedback_layers))
        self.score_head = _mlp(4 * d, d, 1, p)
        self.distance_head = _mlp(config.encoder_dim, d, config.max_level + 1, p) if config.answer_distance else None

    # ------------------------------------------------------------------ pieces
    def encode(self, graph: GraphTensors) -> tuple[Tensor, Tensor, Tensor]:
        """Triple vectors ``z`` (E, d), initial node states (N, d) and pooled questions (G, d)."""
        questions = self.question_in(graph.question_vectors)                       # (G, S, d)
        keep = (~graph.question_padding).unsqueeze(-1).float()
        pooled = (questions * keep).sum(1) / keep.sum(1).clamp_min(1.0)             # (G, d)
        nodes = self.node_in(graph.node_vectors)
        levels = graph.node_level.clamp(0, self.config.max_level)
        states = nodes + self.level(levels)
        tokens = torch.stack([nodes[graph.head], self.relation_in(graph.relation_vectors), nodes[graph.tail]], 1)
        tokens = self.self_attention(tokens + self.roles)                           # (E, 3, d)
        edge_graph = graph.edge_graph
        read, _ = self.cross_attention(tokens, questions[edge_graph], questions[edge_graph],
                                       key_padding_mask=graph.question_padding[edge_graph], need_weights=False)
        z = self.cross_norm(tokens + read).mean(1)
        return z, states, pooled

    def _score(self, z: Tensor, states: Tensor, pooled: Tensor, graph: GraphTensors) -> Tensor:
        near, far, _ = graph.near_far()
        return self.score_head(torch.cat([z, states[near], states[far], pooled[graph.edge_graph]], -1)).squeeze(-1)

    def propagate(self, z: Tensor, states: Tensor, pooled: Tensor, graph: GraphTensors) -> Tensor:
        """Far-to-near feedback: node states updated level by level, farthest level first."""
        near, far, crossing = graph.near_far()
        near_level = graph.node_level[near]
        edge_graph = graph.edge_graph
        n = states.shape[0]
        levels = sorted({int(v) for v in near_level[crossing].tolist()}, reverse=True)
        for message, attend, phi in zip(self.message, self.attend, self.phi):
            for level in levels:
                edges = torch.nonzero(crossing & (near_level == level), as_tuple=True)[0]
                source, target = far[edges], near[edges]
                messages = states[source] + message(torch.cat([states[source], z[edges]], -1))
                logits = attend(torch.cat([messages, pooled[edge_graph[edges]]], -1)).squeeze(-1)
                alpha = scatter_softmax(logits, target, n)
                gathered = torch.zeros_like(states).index_add(0, target, alpha.unsqueeze(-1) * messages)
                received = torch.zeros(n, 1, device=states.device, dtype=states.dtype).index_fill(0, target, 1.0)
                states = states + received * phi(gathered)
        return states

    # ------------------------------------------------------------------ entry points
    def initial_logits(self, graph: GraphTensors) -> Tensor:
        """Scores without feedback: each triple from its own text and its two ends."""
        z, states, pooled = self.encode(graph)
        return self._score(z, states, pooled, graph)

    def distance_logits(self, plain_questions: Tensor) -> Tensor | None:
        """Logits over the answer's distance from the sources (0..``max_level``) for embeddings of
        questions without their topic names (G, encoder_dim), or ``None`` for a scorer without
        the distance head."""
        return None if self.distance_head is None else self.distance_head(plain_questions)

    def forward(self, graph: GraphTensors) -> tuple[Tensor, Tensor]:
        """``(initial logits, refined logits)`` for every triple of ``graph``."""
        z, states, pooled = self.encode(graph)
        initial = self._score(z, states, pooled, graph)
        refined = self._score(z, self.propagate(z, states, pooled, graph), pooled, graph)
        return initial, refined
