"""How often a path-scorer checkpoint's best relation path is the dataset's gold path, against
the untrained label match alone (what the familiarity gate falls back to) in the same run.

It tells whether the learned part of a scorer helps on a question set or hurts: a scorer
trained on the store's own questions may trust the literal label words its training
questions say, where people's questions say other words. The sample is the one
``localkg eval --sample N --seed S`` asks. Only questions whose dataset names a gold path
(PathQuestion, MetaQA by its question type) count. WC-C's conjunctive gold legs are written from
the answer to each topic, the routes from the topic, so on WC-C nothing agrees: use it on
single-topic sets.

Prints one JSON object. Usage::

    python bench/path_agreement.py ../shared/data/pathquestion/PQ-2H.txt --db dbs/pq2h \\
        --checkpoint pq_store.pt --sample 200 --seed 0
"""
from __future__ import annotations

import argparse
import json
from collections import Counter

from localkg.datasets import gold_relation_paths, select_questions
from localkg.datasets.questions import read_questions
from localkg.path_scorer.ranking import PathRanker
from localkg.store.kg import KG


def best_paths(ranker: PathRanker, questions) -> list[list[tuple[str, str]] | None]:
    """The best route's legs (one relation path per topic) for each question."""
    found = []
    for question in questions:
        routes = ranker.rank_paths(question.text, question.topic_entities, k=1)
        found.append([list(path) for _topic, path in routes[0].legs] if routes else None)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("questions")
    parser.add_argument("--db", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    questions = [q for q in select_questions(read_questions(args.questions), args.sample, args.seed, None)
                 if gold_relation_paths(q)]
    ranker = PathRanker(KG.open(args.db, read_only=True), args.checkpoint)
    gold = [[list(map(tuple, leg)) for leg in gold_relation_paths(q)] for q in questions]
    result: dict[str, object] = {"questions": len(questions), "checkpoint": args.checkpoint}
    for name in ("trained", "label_match"):
        if name == "label_match":  # every question as unlike the pairs: the gate's fallback
            ranker.familiar = lambda _question, _topics: (False, None)
        paths = best_paths(ranker, questions)
        agree = sum(p is not None and [list(map(tuple, leg)) for leg in p] == g for p, g in zip(paths, gold))
        result[name] = {"gold_path_share": round(agree / max(len(questions), 1), 3),
                        "hops": dict(Counter(len(p[0]) if p else 0 for p in paths))}
    result["ratio_trained_to_label_match"] = round(
        result["trained"]["gold_path_share"] / max(result["label_match"]["gold_path_share"], 1e-9), 3)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
