"""The path scorer: a tiny model trained in the test run (conftest ``trained_paths``) on the
hand-built movie graph ranks the paths of unseen questions, its checkpoint round-trips, and a
mismatched one is refused.

Real Kùzu, real bundled MiniLM as the frozen encoder.
"""
from __future__ import annotations

import math

import pytest
import torch

from localkg.errors import CheckpointError
from localkg.path_scorer.checkpoint import load_checkpoint, save_checkpoint, store_state
from localkg.path_scorer.ranking import PathRanker
from localkg.store.model import IN, OUT

HELD_OUT = "Vertigo"  # conftest.PATHS_HELD_OUT: no training question mentions it


def test_training_reports_each_epoch_and_learns(trained_paths):
    _out, result = trained_paths
    assert len(result.epochs) == 40
    assert result.epochs[-1].train_loss < result.epochs[0].train_loss
    assert result.supervision.labelled == result.training_questions


def test_ranking_unseen_questions(path_movies, scorer, trained_paths):
    out, _result = trained_paths
    ranker = PathRanker(path_movies, out, embedder=scorer.embedder, beam=5)
    routes = ranker.rank_paths(f"who directed {HELD_OUT}", [HELD_OUT], k=3)
    best = routes[0]
    assert best.legs == ((HELD_OUT, (("directed_by", OUT),)),)
    assert [n.id for n in best.answers] == ["Alfred Hitchcock"]
    assert routes[0].probability >= routes[1].probability
    evidence = best.evidence[0][0]
    assert (evidence.start.id, evidence.end.id) == (HELD_OUT, "Alfred Hitchcock")
    assert evidence.relations == ("directed_by",)

    years = ranker.rank_paths(f"when was {HELD_OUT} released", [HELD_OUT], k=1)[0]
    assert [n.id for n in years.answers] == ["1958"]
    # two hops for an actor never asked about in that form: a combination learned from others
    chain = ranker.rank_paths("who directed the films Kim Novak acted in", ["Kim Novak"], k=1)[0]
    assert chain.legs[0][1] == (("starred_actors", IN), ("directed_by", OUT))
    assert [str(p) for p in chain.evidence[0]] == ["Kim Novak —starred_actors⁻¹→ Vertigo —directed_by→ Alfred Hitchcock"]


def test_two_topics_answer_with_what_both_paths_reach(path_movies, scorer, trained_paths):
    out, _result = trained_paths
    ranker = PathRanker(path_movies, out, embedder=scorer.embedder)
    route = ranker.rank_paths("which films did James Stewart act in which films did Kim Novak act in",
                              ["James Stewart", "Kim Novak"], k=1)[0]
    assert [n.id for n in route.answers] == ["Vertigo"]
    assert len(route.evidence[0]) == 2  # one walk per topic


def test_checkpoint_round_trip(path_movies, scorer, trained_paths, tmp_path):
    out, _result = trained_paths
    model, meta = load_checkpoint(out, path_movies, scorer.embedder.model_name)
    assert meta["max_hops"] == 2 and meta["epochs_done"] == 40
    copy = save_checkpoint(tmp_path / "copy.pt", model, meta["encoder"], store_state(path_movies),
                           list(meta["path_types"]), {"max_hops": meta["max_hops"]})
    again, _meta = load_checkpoint(copy, path_movies, scorer.embedder.model_name)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, again.state_dict()[name])
    assert not (tmp_path / "copy.pt.tmp").exists()  # written through a temporary file, then replaced


def test_mismatched_checkpoints_are_refused(path_movies, scorer, trained_paths, tmp_path, metaqa_sample):
    out, _result = trained_paths
    from localkg.store import KG

    with KG.open(metaqa_sample[1], read_only=True) as other:
        with pytest.raises(CheckpointError, match="another store"):
            load_checkpoint(out, other, scorer.embedder.model_name)
    with pytest.raises(CheckpointError, match="encoder"):
        load_checkpoint(out, path_movies, "some-other-encoder")
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match="not a path scorer checkpoint"):
        load_checkpoint(broken, path_movies)
    with pytest.raises(CheckpointError, match="train one with"):
        load_checkpoint(tmp_path / "missing.pt", path_movies)


def test_the_loss_is_the_probability_of_the_positives_together():
    # tied positives share one probability: the scorer may put it all on either of them
    from localkg.path_scorer.model import PathScorer, ScorerConfig
    from localkg.path_scorer.train import Group, _Tensors, group_loss

    class Vectors:
        matrix = torch.eye(4)

        def indices(self, relations):
            return [int(r[1]) for r in relations]

        def said(self, relation, stems):
            return 0.0

        def word_vectors(self, question):
            return None

        def word_match(self, path, words, stems, distances=None, sharing=False, leg=False):
            return 0.0

    torch.manual_seed(0)
    paths = [(("r0", OUT),), (("r1", OUT),), (("r2", IN),)]
    tensors = _Tensors(Group(0, paths, [True, True, False], True), "q", Vectors(), {}, 1)
    model = PathScorer(ScorerConfig(encoder_dim=4, hidden=8, dropout=0.0)).eval()
    with torch.no_grad():  # the label match at weight 1: no probability rounds to 1 in float32
        model.log_prior_weight.zero_()
    questions = torch.randn(1, 4)
    loss, hits = group_loss(model, questions, Vectors.matrix, [tensors], torch.device("cpu"))
    scores = model(questions, torch.zeros(3, dtype=torch.long), Vectors.matrix, tensors.relations, tensors.backward,
                   tensors.said, tensors.mask, tensors.words, tensors.types)
    probabilities = torch.softmax(scores, dim=0)
    assert loss.item() == pytest.approx(-math.log(probabilities[0].item() + probabilities[1].item()), rel=1e-5)
    assert hits.tolist() == [float(probabilities.argmax().item() < 2)]


def test_the_word_match_tells_one_hop_from_two(path_movies, scorer):
    # "directed" and "acted" each want a hop: the two-hop chain covers the question, one hop does not;
    # asked for the director alone, the one hop covers it and the chain's extra hop is unmatched
    from localkg.path_scorer.features import RelationVectors, question_stems

    vectors = RelationVectors(path_movies, scorer.embedder)
    films_of = (("starred_actors", IN),)
    directors_of_films = (("starred_actors", IN), ("directed_by", OUT))
    directed = (("directed_by", OUT),)
    vectors.indices(relation for path in (directors_of_films, directed) for relation, _d in path)

    def match(question, path):
        return vectors.word_match(path, vectors.word_vectors(question), question_stems(question))

    two_hops = "who directed the films acted in"
    assert match(two_hops, directors_of_films) > match(two_hops, films_of)
    one_hop = "who directed"
    assert match(one_hop, directed) > match(one_hop, directors_of_films)
    assert match("", directed) == 0.0
