"""How far relation words alone carry a multi-hop reasoner on MetaQA.

Every graph reasoner here leans on ``RelevanceScorer`` (MiniLM cosine + shared stems) to rank
relation chains before a small model decides. This measures that ranking by itself: for each
sampled dev question, every relation chain of one or two hops that MetaQA's schema allows from
the topic's kind is put into words the way ``localkg.reasoners.common.chain_words`` does, scored
against the question (topic mention removed), and the best chain is compared with the gold
chain that the question type names (``actor_to_movie_to_director`` → ``starred_actors⁻¹``,
``directed_by``). Two numbers per chain score and depth penalty: top-1 over chains of both
lengths, and top-1 among chains of the gold length only (the depth given by an oracle). Besides
the reasoners' score, two alternatives are measured (``chain_scores``), so that a change of
chain score can be judged here, without an LLM, before a reasoner uses it.

Prints one JSON object. Usage::

    python bench/chain_ranking.py --questions 300 --threads 1
"""
from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

import numpy as np
import torch

from localkg.indexes.scoring import RelevanceScorer
from localkg.reasoners.relation_paths import path_similarities
from localkg.reasoners.common import IN, OUT, Move, chain_words

METAQA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "metaqa"
PEOPLE = ["directed_by", "written_by", "starred_actors"]
ATTRIBUTES = ["release_year", "in_language", "has_genre", "has_tags", "has_imdb_rating", "has_imdb_votes"]
KIND_RELATION = {"director": "directed_by", "writer": "written_by", "actor": "starred_actors",
                 "year": "release_year", "language": "in_language", "genre": "has_genre", "tags": "has_tags",
                 "tag": "has_tags", "imdbrating": "has_imdb_rating", "imdbvotes": "has_imdb_votes"}
PENALTIES = (0.0, 0.05, 0.1, 0.15, 0.2)
HOP_GAP_WEIGHT = 0.25


def move(relation: str, direction: str) -> Move:
    return Move(((relation, direction),), (relation,))


def gold_chain(question_type: str) -> tuple[Move, ...]:
    """``actor_to_movie_to_director`` → (starred_actors⁻¹, directed_by): films are the heads."""
    kinds = question_type.split("_to_")
    return tuple(move(KIND_RELATION[b], OUT) if a == "movie" else move(KIND_RELATION[a], IN)
                 for a, b in zip(kinds, kinds[1:]))


def candidate_chains(topic_kind: str) -> list[tuple[Move, ...]]:
    """Every one- and two-hop chain MetaQA's schema allows from a node of ``topic_kind``."""
    firsts = ([move(r, OUT) for r in PEOPLE + ATTRIBUTES] if topic_kind == "movie"
              else [move(r, IN) for r in PEOPLE + ATTRIBUTES])
    chains: list[tuple[Move, ...]] = []
    for first in firsts:
        relation, direction = first.steps[0]
        chains.append((first,))
        seconds = ([move(r, IN) for r in (PEOPLE if relation in PEOPLE else [relation])] if direction == OUT
                   else [move(r, OUT) for r in PEOPLE + ATTRIBUTES])
        chains.extend((first, second) for second in seconds)
    return chains


def sample(hop: int, n: int) -> list[tuple[str, str]]:
    folder = METAQA / f"{hop}-hop"
    questions = (folder / "qa_dev.txt").read_text(encoding="utf-8").splitlines()
    types = (folder / "qa_dev_qtype.txt").read_text(encoding="utf-8").splitlines()
    pairs = list(zip(questions, types))
    random.Random(0).shuffle(pairs)
    return pairs[:n]


def chain_scores(scorer: RelevanceScorer, query: str, chains: list[tuple[Move, ...]]) -> dict[str, np.ndarray]:
    """Each chain scored three ways: the reasoners' ``chain_words`` text; embed-path's bag of
    relation embeddings (``path_similarities``); and the text score less
    :data:`HOP_GAP_WEIGHT` x the gap between the chain's best and worst single hop, which
    should punish a hop the question does not ask for."""
    text = np.asarray(scorer.score(query, [chain_words(chain) for chain in chains]))
    bag = path_similarities(scorer, query, [tuple(move.words for move in chain) for chain in chains])
    hops = [np.asarray(scorer.score(query, [chain_words((move,)) for move in chain])) for chain in chains]
    gap = text - HOP_GAP_WEIGHT * np.array([h.max() - h.min() for h in hops])
    return {"chain_words": text, "bag_of_relations": np.asarray(bag), f"hop_gap_{HOP_GAP_WEIGHT}": gap}


def measure(scorer: RelevanceScorer, hop: int, n: int) -> dict[str, dict[str, dict[str, float]]]:
    rows = []
    for line, question_type in sample(hop, n):
        query = " ".join(re.sub(r"\[[^\]]*\]", " ", line.split("\t")[0]).split())
        chains = candidate_chains(question_type.split("_to_")[0])
        rows.append((chains, chain_scores(scorer, query, chains), gold_chain(question_type)))
    report: dict[str, dict[str, dict[str, float]]] = {}
    for name in rows[0][1]:
        for penalty in PENALTIES:
            any_length = same_length = 0
            for chains, scored, gold in rows:
                scores = scored[name]
                lengths = np.array([len(c) for c in chains])
                any_length += chains[int(np.argmax(scores - penalty * (lengths - 1)))] == gold
                same = np.flatnonzero(lengths == len(gold))
                same_length += chains[int(same[np.argmax(scores[same])])] == gold
            report.setdefault(name, {})[f"penalty {penalty}"] = {
                "top1": round(any_length / len(rows), 3), "top1_oracle_depth": round(same_length / len(rows), 3)}
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=300, help="sampled dev questions per hop file")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    scorer = RelevanceScorer()
    print(json.dumps({f"{hop}-hop": measure(scorer, hop, args.questions) for hop in (1, 2)}, indent=2))


if __name__ == "__main__":
    main()
