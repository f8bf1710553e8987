"""Two-hop chain questions over the WC2014 KB, written for the "never below untrained" check.

WC-C asks conjunctive questions (two topics, one hop each). These ask chains (one topic, two
hops: "which country is the club of X in"), a shape WC-C never shows, in wordings written
here rather than taken from any dataset. Answers are every entity the chain reaches in the KB.
Writes JSONL (``question``, ``answers``, ``topic_entities``, ``hop``, ``qtype``), one shape per
``qtype``, the same number of questions per shape, sampled with a fixed seed::

    python scripts/make_wc_chains.py ../shared/data/pathquestion/WC2014.txt tests/fixtures/wc2014_chains.jsonl
"""
from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from pathlib import Path

#: shape -> (first relation, second relation, wordings with {topic}); relations as the KB names them.
SHAPES = {
    "player_club_country": ("plays_in_club", "is_in_country",
                            ["in which country is the club of {topic} based ?",
                             "{topic} plays club football in which country ?"]),
    "country_players_clubs": ("plays_for_country_inverse", "plays_in_club",
                              ["which clubs employ players of the {topic} national team ?",
                               "name a club where a {topic} international plays ."]),
    "club_players_countries": ("plays_in_club_inverse", "plays_for_country",
                               ["which national teams do the players of {topic} represent ?",
                                "players at {topic} are internationals for which countries ?"]),
    "country_clubs_players": ("is_in_country_inverse", "plays_in_club_inverse",
                              ["who plays for a club located in {topic} ?",
                               "name a footballer whose club is based in {topic} ."]),
    "club_players_positions": ("plays_in_club_inverse", "plays_position",
                               ["what positions are played by footballers of {topic} ?",
                                "at {topic} , the squad covers which positions ?"]),
}


def read_kb(path: Path) -> dict[str, dict[str, set[str]]]:
    """relation -> head -> tails, with every relation's inverse spelled ``<relation>_inverse``."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for line in path.read_text(encoding="utf-8").splitlines():
        head, relation, tail = line.split("\t")
        graph[relation][head].add(tail)
        inverse = relation[:-len("_inverse")] if relation.endswith("_inverse") else f"{relation}_inverse"
        graph[inverse][tail].add(head)
    return graph


def chain_questions(graph: dict[str, dict[str, set[str]]], per_shape: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    questions = []
    for qtype, (first, second, wordings) in SHAPES.items():
        topics = sorted(graph[first])
        rng.shuffle(topics)
        made = 0
        for topic in topics:
            answers = sorted({end for middle in graph[first][topic] for end in graph[second].get(middle, ())}
                             - {topic})
            if not answers:
                continue
            questions.append({"question": wordings[made % len(wordings)].format(topic=topic), "answers": answers,
                              "topic_entities": [topic], "hop": 2, "qtype": qtype})
            made += 1
            if made == per_shape:
                break
    return questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kb", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--per-shape", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    questions = chain_questions(read_kb(args.kb), args.per_shape, args.seed)
    args.out.write_text("".join(json.dumps(q) + "\n" for q in questions), encoding="utf-8")
    print(f"wrote {len(questions)} questions to {args.out}")


if __name__ == "__main__":
    main()
