"""A scorer trained on pairs of one shape meets a question of another: the question is unlike every
pair, so its paths are ranked by their labels instead of by what the pairs taught (real Kùzu,
real MiniLM, the hand-built movie graph; ``localkg.path_scorer.familiarity``)."""
from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from localkg.cli import main
from localkg.datasets import TrainingSet
from localkg.path_scorer.checkpoint import load_checkpoint
from localkg.path_scorer.familiarity import Familiarity
from localkg.path_scorer.ranking import PathRanker
from localkg.path_scorer.supervision import SupervisionLimits
from localkg.path_scorer.train import TrainConfig, train_from_files
from localkg.store import KG
from localkg.store.model import IN, OUT

FIXTURES = Path(__file__).parent / "fixtures"
TWO_HOP = "who directed the films Kim Novak acted in"


@pytest.fixture(scope="module")
def one_hop_scorer(path_movies, scorer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Trained on the fixture's one-hop pairs alone, no store questions: every positive is one hop."""
    folder = tmp_path_factory.mktemp("one-hop")
    pairs = folder / "one-hop.jsonl"
    pairs.write_text("".join(line + "\n" for line in (FIXTURES / "path_questions.jsonl").read_text().splitlines()
                             if "the films" not in json.loads(line)["question"]))
    out = folder / "scorer.pt"
    train_from_files(path_movies, TrainingSet([str(pairs)]), TrainConfig(epochs=30, hidden=64, batch_size=8), out,
                     embedder=scorer.embedder, limits=SupervisionLimits(max_hops=2))
    return out


def test_a_question_like_the_pairs_keeps_what_they_taught(path_movies, scorer, one_hop_scorer: Path) -> None:
    ranker = PathRanker(path_movies, one_hop_scorer, embedder=scorer.embedder, beam=5)
    familiar, nearest = ranker.familiar("who directed Vertigo", ["Vertigo"])
    assert familiar and nearest == pytest.approx(1.0, abs=1e-3)   # "who directed X" was a pair, X aside
    best = ranker.rank_paths("who directed Vertigo", ["Vertigo"], k=1)[0]
    assert [node.id for node in best.answers] == ["Alfred Hitchcock"]


def test_a_question_unlike_every_pair_is_ranked_by_its_labels(path_movies, scorer, one_hop_scorer: Path) -> None:
    ranker = PathRanker(path_movies, one_hop_scorer, embedder=scorer.embedder, beam=5)
    familiar, nearest = ranker.familiar(TWO_HOP, ["Kim Novak"])
    assert not familiar and nearest < ranker.meta["familiarity"].threshold
    best = ranker.rank_paths(TWO_HOP, ["Kim Novak"], k=1)[0]
    assert best.legs == (("Kim Novak", (("starred_actors", IN), ("directed_by", OUT))),)
    assert [node.id for node in best.answers] == ["Alfred Hitchcock"]
    # what the gate prevents: all the pairs taught, one-hop paths, answers it with Kim Novak's films
    ranker.meta["familiarity"] = replace(ranker.meta["familiarity"], threshold=-1.0)
    taught = ranker.rank_paths(TWO_HOP, ["Kim Novak"], k=1)[0]
    assert len(taught.legs[0][1]) == 1


def test_the_reasoner_says_when_it_ranked_by_labels(movie_store, one_hop_scorer: Path) -> None:
    result = CliRunner().invoke(main, ["ask", TWO_HOP, "--db", str(movie_store(False)), "--reasoner", "learned-paths",
                                       "--set", f"checkpoint={one_hop_scorer}", "--set", "llm_options=0",
                                       "--topic", "Kim Novak", "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert "Alfred Hitchcock" in result.output
    assert any("unlike the scorer's training questions" in note for note in answer["notes"])


def test_the_threshold_comes_from_the_pairs_and_survives_the_checkpoint(path_movies, one_hop_scorer: Path) -> None:
    _model, meta = load_checkpoint(one_hop_scorer, path_movies)
    familiarity = meta["familiarity"]
    assert familiarity.vectors.dtype == torch.float32 and familiarity.vectors.shape[1] == 384
    assert torch.allclose(familiarity.vectors.norm(dim=1), torch.ones(len(familiarity.vectors)), atol=1e-2)
    units = torch.nn.functional.normalize(torch.tensor([[1.0, 0.0], [0.99, 0.1], [0.0, 1.0]]), dim=-1)
    three = Familiarity.of_pairs(units, random.Random(0))
    # nearest cosines 0.995, 0.995 and 0.0995 (the third pair is unlike both): the 1st percentile
    # lies just above the lowest
    assert 0.0995 < three.threshold < 0.2
    assert Familiarity.of_pairs(units[:1], random.Random(0)) is None


def test_a_question_with_two_topics_is_not_gated(path_movies, scorer, one_hop_scorer: Path) -> None:
    """The label match would score each topic's leg against words that name the other's too."""
    ranker = PathRanker(path_movies, one_hop_scorer, embedder=scorer.embedder, beam=5)
    question = "which film did Alfred Hitchcock direct with Kim Novak starring"
    assert not ranker.familiar(question, ["Kim Novak"])[0]
    assert ranker.familiar(question, ["Alfred Hitchcock", "Kim Novak"]) == (True, None)


def test_a_scorer_trained_on_the_store_alone_is_gated_by_the_stores_questions(path_movies, scorer,
                                                                             tmp_path: Path) -> None:
    from localkg.path_scorer.synthetic import SyntheticLimits

    out, made = tmp_path / "store.pt", tmp_path / "store.jsonl"
    train_from_files(path_movies, None, TrainConfig(epochs=1, hidden=32), out, embedder=scorer.embedder,
                     limits=SupervisionLimits(max_hops=2), synthetic=SyntheticLimits(topics_per_relation=4),
                     save_synthetic=made)
    ranker = PathRanker(path_movies, out, embedder=scorer.embedder)
    questions = [json.loads(line) for line in made.read_text().splitlines()]
    assert len(ranker.meta["familiarity"].vectors) == len(questions) > 2
    # a question worded as the store's own is one of them, whatever its topic
    first = next(question for question in questions if len(question["topic_entities"]) == 1)
    names = [path_movies.name(topic) for topic in first["topic_entities"]]
    familiar, nearest = ranker.familiar(first["question"], names)
    assert familiar and nearest == pytest.approx(1.0, abs=1e-3)
