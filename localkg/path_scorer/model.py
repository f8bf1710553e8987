"""The path scorer: how well a relation path answers a question, over a frozen sentence encoder.

The question is embedded once by the frozen encoder (MiniLM), with its topic
names taken out. A path is built from its hops, so a combination never seen in
training (a 3-hop chain after training on 1- and 2-hop ones) still gets a
score: each hop is the encoder's vector of its relation's readable label, that
vector times the question's (so a hop can match the meaning of words of the
question, "sex" and ``gender``), the share of the label's words the question
says ("place of death" is not ``cause_of_death``), its direction and its
position (first, last, both or neither), put through a small MLP; the hops' vectors are summed. A chain seen
among the positives in training also has a vector of its own, added to that
sum (the "path type" a classifier would learn; unseen chains have none). The
learned score is the dot product of the projected question and the path vector; to it is added,
with a learned weight, ``label_match``, which needs no training: the cosine of the question to
the path's labels and their word match (``features``), so that a chain length or wording the
training never showed still scores by what its labels mean. A per-hop MLP, not a plain sum of hop
embeddings, because the order matters: ``starred_actors⁻¹ / directed_by``
(the directors of X's films) and ``directed_by⁻¹ / starred_actors`` (the
actors of X's films) have the same hops in another order.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

#: Hop position features: is it the first hop, is it the last (a one-hop path's is both; a
#: middle hop is neither).
POSITIONS = 2
#: The untrained label match (``label_match``) has embed-path's depth penalty; its weight in the
#: score starts where a 0.1 better match is worth e² in odds.
DEPTH_PENALTY = 0.05
PRIOR_WEIGHT = 20.0


@dataclass(frozen=True)
class ScorerConfig:
    encoder_dim: int = 384
    hidden: int = 256
    dropout: float = 0.1
    path_types: int = 0

    def to_json(self) -> dict[str, int | float]:
        return asdict(self)


class PathScorer(nn.Module):
    """Scores (question, relation path) pairs; see the module docstring."""

    def __init__(self, config: ScorerConfig):
        super().__init__()
        self.config = config
        hidden = config.hidden
        self.question = nn.Sequential(nn.Linear(config.encoder_dim, hidden), nn.GELU(), nn.Dropout(config.dropout),
                                      nn.Linear(hidden, hidden))
        self.hop = nn.Sequential(nn.Linear(2 * config.encoder_dim + 2 + POSITIONS, hidden), nn.GELU(),
                                 nn.Dropout(config.dropout), nn.Linear(hidden, hidden))
        self.path = nn.Sequential(nn.GELU(), nn.Linear(hidden, hidden))
        self.types = nn.Embedding(config.path_types + 1, hidden, padding_idx=0)  # row 0: a chain not seen
        # in log space, so that training can move it by a factor and not only by a few units
        self.log_prior_weight = nn.Parameter(torch.tensor(math.log(PRIOR_WEIGHT)))

    def encode_paths(self, questions: torch.Tensor, relation_vectors: torch.Tensor, relations: torch.Tensor,
                     backward: torch.Tensor, said: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Path vectors (n, hidden) for the encoded ``questions`` (n, dim) from hop tensors
        (n, hops): relation index into ``relation_vectors``, whether the hop is walked
        backwards, the share of its label's words the question says, and which hops exist."""
        length = mask.sum(dim=1, keepdim=True)
        index = torch.arange(mask.shape[1], device=mask.device).unsqueeze(0).expand_as(mask)
        positions = torch.stack([index == 0, index == (length - 1)], dim=-1).float()
        labels = relation_vectors[relations]
        features = torch.cat([labels, labels * questions.unsqueeze(1), backward.unsqueeze(-1).float(),
                              said.unsqueeze(-1), positions], dim=-1)
        hops = self.hop(features) * mask.unsqueeze(-1).float()
        return self.path(hops.sum(dim=1))

    def forward(self, questions: torch.Tensor, owner: torch.Tensor, relation_vectors: torch.Tensor,
                relations: torch.Tensor, backward: torch.Tensor, said: torch.Tensor, mask: torch.Tensor,
                words: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        """One score per path; ``owner`` says which row of ``questions`` each path belongs to,
        ``words`` the path's word match (``features.path_tensors``), ``types`` which seen chain
        it is (0: none)."""
        own = questions[owner]
        paths = self.encode_paths(own, relation_vectors, relations, backward, said, mask)
        paths = paths + self.types(types)
        learned = (self.question(questions)[owner] * paths).sum(dim=-1) / self.config.hidden ** 0.5
        return learned + self.prior(own, relation_vectors, relations, mask, words)

    def prior(self, questions: torch.Tensor, relation_vectors: torch.Tensor, relations: torch.Tensor,
              mask: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """The untrained part of the score alone (``label_match`` at its learned weight), for a
        question unlike every training pair (``familiarity``); ``questions``: one row per path."""
        return self.log_prior_weight.exp() * label_match(questions, relation_vectors, relations, mask, words)


def label_match(questions: torch.Tensor, relation_vectors: torch.Tensor, relations: torch.Tensor,
                mask: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
    """The untrained match of each path to its question: the cosine of the question to the sum
    of the path's label vectors (a relation walked there and back counted once), as
    ``embed-path`` ranks paths, plus its word match, less a little per hop beyond the first."""
    once = mask.clone()
    once[:, 1:] &= relations[:, 1:] != relations[:, :-1]
    bag = (relation_vectors[relations] * once.unsqueeze(-1).float()).sum(dim=1)
    cosine = nn.functional.cosine_similarity(bag, questions, dim=-1)
    return cosine + words - DEPTH_PENALTY * (mask.sum(dim=1) - 1).float()
