"""Relation-ranking benchmark: latency for 100 relations, and accuracy on MetaQA 1-hop dev.

Prints one JSON object:

* ``latency``: ``RelevanceScorer.rank(question, 100 relations)`` with the question embedding
  cached (the reasoners' case: one question, many calls) against uncached (a new question
  every call; the reference); relation embeddings are cached in both. p50 over ``--repeats``.
* ``accuracy``: top-1 relation among MetaQA's 9 on the first N 1-hop dev questions (gold from
  ``qa_dev_qtype.txt``), for the plain MiniLM cosine and for the scorer's cosine + stem overlap,
  with relation ids (``directed_by``) and labels (``directed by``).

Usage::

    python bench/relation_ranking.py --questions 1000
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import localkg  # noqa: F401  (offline environment)
from localkg.indexes.scoring import LEXICAL_WEIGHT, RelevanceScorer

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
QTYPE_RELATION = {
    "actor_to_movie": "starred_actors", "movie_to_actor": "starred_actors", "director_to_movie": "directed_by",
    "movie_to_director": "directed_by", "movie_to_genre": "has_genre", "movie_to_imdbrating": "has_imdb_rating",
    "movie_to_imdbvotes": "has_imdb_votes", "movie_to_language": "in_language", "movie_to_tags": "has_tags",
    "tag_to_movie": "has_tags", "movie_to_writer": "written_by", "writer_to_movie": "written_by",
    "movie_to_year": "release_year",
}
METAQA_RELATIONS = sorted(set(QTYPE_RELATION.values()))
FREEBASE_LIKE = [f"{domain}.{kind}.{prop}" for domain, kind in [("film", "film"), ("people", "person"),
                                                                ("music", "artist"), ("location", "location")]
                 for prop in ["directed_by", "starring", "genre", "release_date", "written_by", "language",
                              "place_of_birth", "nationality", "profession", "spouse", "children", "height",
                              "award", "label", "contained_by", "population", "area", "capital", "founder",
                              "official_website", "notable_for", "instrument", "album", "track", "producer"]]


def p50_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 4)


def bench_latency(scorer: RelevanceScorer, repeats: int) -> dict:
    relations = FREEBASE_LIKE[:100]
    scorer.rank("warm up", relations)  # relation embeddings cached from here on
    cached, uncached = [], []
    for i in range(repeats):
        started = time.perf_counter()
        scorer.rank("who directed Top Hat", relations)
        cached.append(time.perf_counter() - started)
        started = time.perf_counter()
        scorer.rank(f"who directed film number {i}", relations)
        uncached.append(time.perf_counter() - started)
    return {"relations": len(relations), "repeats": repeats, "cached_question_p50_ms": p50_ms(cached),
            "uncached_question_p50_ms": p50_ms(uncached),
            "speedup": round(statistics.median(uncached) / statistics.median(cached), 1)}


def bench_accuracy(scorer: RelevanceScorer, n: int) -> dict:
    metaqa = SHARED / "metaqa" / "1-hop"
    questions = [line.split("\t")[0] for line in (metaqa / "qa_dev.txt").read_text(encoding="utf-8").splitlines()[:n]]
    gold = [QTYPE_RELATION[line.strip()] for line in (metaqa / "qa_dev_qtype.txt").read_text().splitlines()[:n]]
    result = {"questions": len(questions)}
    for weight, name in ((0.0, "cosine"), (LEXICAL_WEIGHT, f"cosine+{LEXICAL_WEIGHT}*stems")):
        scorer.lexical_weight = weight
        for spelling, texts in (("ids", METAQA_RELATIONS), ("labels", [r.replace("_", " ") for r in METAQA_RELATIONS])):
            top = [METAQA_RELATIONS[scorer.rank(q, texts, k=1)[0][0]] for q in questions]
            directed = [t == g for t, g in zip(top, gold) if g == "directed_by"]
            result[f"{name}/{spelling}"] = {"top1": round(sum(t == g for t, g in zip(top, gold)) / len(gold), 4),
                                            "directed_by_top1": f"{sum(directed)}/{len(directed)}"}
    scorer.lexical_weight = LEXICAL_WEIGHT
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    scorer = RelevanceScorer()
    report = {"torch_threads": torch.get_num_threads(), "latency": bench_latency(scorer, args.repeats),
              "accuracy": bench_accuracy(scorer, args.questions)}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
