"""``relations=trained``: every reasoner that ranks relations scores them with the trained path
scorer (the tiny one conftest's ``trained_paths`` trains), on a real store with MiniLM; ``auto``
picks it when the checkpoint sits beside the store. Model outputs are scripted: what is checked
is which ranker the reasoners consult, not what the model says."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from localkg.errors import CheckpointError, SettingsError
from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Context, get_reasoner
from localkg.reasoners.common import candidate_moves, node_of
from localkg.reasoners.relation_ranking import RelationRanking
from localkg.path_scorer.location import default_checkpoint
from localkg.store import KG

FIXTURES = Path(__file__).parent / "fixtures"

RANKING_REASONERS = ["tog", "bpc", "paths", "plan", "ppoga", "fog", "dtkg", "embed-path"]


@pytest.fixture(scope="module")
def store_with_scorer(tmp_path_factory, trained_paths):
    """The path-movies graph in a store of its own, with the trained scorer beside it."""
    from localkg.loaders.triples import load_triples

    checkpoint, _report = trained_paths
    kg = KG.create(tmp_path_factory.mktemp("relations-trained") / "db")
    load_triples(kg, [FIXTURES / "path_movies.tsv"], progress=False)
    default_checkpoint(kg.path).parent.mkdir(parents=True)
    shutil.copy(checkpoint, default_checkpoint(kg.path))
    yield kg
    kg.close()


def context(kg, scorer):
    return Context(kg, scorer_factory=lambda: scorer, llm_factory=lambda: ScriptedLLM({}))


def test_auto_is_trained_beside_a_checkpoint_and_embed_without(store_with_scorer, path_movies, scorer):
    assert RelationRanking(context(store_with_scorer, scorer)).mode == "trained"
    assert RelationRanking(context(path_movies, scorer)).mode == "embed"
    assert RelationRanking(context(store_with_scorer, scorer), "embed").mode == "embed"


def test_trained_without_a_checkpoint_says_how_to_train_one(path_movies, scorer):
    with pytest.raises(CheckpointError, match="localkg train paths"):
        get_reasoner("tog")(context(path_movies, scorer), relations="trained")


def test_an_unknown_mode_is_a_settings_error(store_with_scorer, scorer):
    with pytest.raises(SettingsError, match="relations"):
        get_reasoner("bpc")(context(store_with_scorer, scorer), relations="learned")


def test_trained_scores_are_the_path_scorer_s(store_with_scorer, scorer):
    ranking = RelationRanking(context(store_with_scorer, scorer), "trained")
    moves = candidate_moves(store_with_scorer, "Vertigo")
    ranked = ranking.rank_moves("who directed", moves)
    raw = ranking._ranker_for().score("who directed", (), [move.steps for move, _score in ranked])
    assert [score for _move, score in ranked] == pytest.approx(raw, rel=1e-5)
    assert [score for _move, score in ranked] == sorted((score for _move, score in ranked), reverse=True)
    assert ranked[0][0].steps == (("directed_by", "out"),)  # Vertigo was held out of training


@pytest.mark.parametrize("name", RANKING_REASONERS)
def test_every_relation_ranking_reasoner_consults_the_trained_scorer(name, store_with_scorer, scorer):
    reasoner = get_reasoner(name)(context(store_with_scorer, scorer), relations="trained")
    assert reasoner.relations.mode == "trained"
    consulted = []
    score = reasoner.relations._trained
    reasoner.relations._trained = lambda query, chains: consulted.append(len(chains)) or score(query, chains)
    if name == "dtkg":  # its chain branch ranks relations; the scripted classifier says "chained"
        reasoner.context._llm = ScriptedLLM({"classify": [True]})
    result = reasoner.answer("who directed Vertigo", ["Vertigo"])
    assert consulted and sum(consulted) > 0, result.notes
    assert result.reasoner == name


def test_embed_path_answers_with_the_trained_ranking(store_with_scorer, scorer):
    result = get_reasoner("embed-path")(context(store_with_scorer, scorer), relations="trained").answer(
        "who directed the films Kim Novak acted in", ["Kim Novak"])
    assert [a.id for a in result.answers] == ["Alfred Hitchcock"]


def test_fog_scores_triples_as_the_chains_that_reach_them(store_with_scorer, scorer):
    reasoner = get_reasoner("fog")(context(store_with_scorer, scorer), relations="trained", decompose=False)
    chains = {"Kim Novak": ()}
    triple_scorer = reasoner.triple_scorer("who directed the films Kim Novak acted in", ["Kim Novak"], chains)
    expansion = reasoner.expand(triple_scorer, ["who directed the films Kim Novak acted in"],
                                {"Kim Novak": node_of(store_with_scorer, "Kim Novak")}, [], excluded=set(),
                                chains=chains)
    assert chains["Vertigo"] == (("starred_actors", "in"),)
    assert chains["Alfred Hitchcock"] == (("starred_actors", "in"), ("directed_by", "out"))
    scores = dict(zip(((t.head.id, t.relation, t.tail.id) for t in expansion.triples),
                      triple_scorer.refined([], expansion.triples, expansion.levels)))
    # the two-hop chain is the best; its first hop scores as the chain it starts; Hitchcock's
    # other films (a third hop back) score far below
    assert scores[("Vertigo", "directed_by", "Alfred Hitchcock")] == 1.0
    assert scores[("Vertigo", "starred_actors", "Kim Novak")] == 1.0
    assert scores[("Rope", "directed_by", "Alfred Hitchcock")] < 0.5
    result = reasoner.answer("who directed the films Kim Novak acted in", ["Kim Novak"])
    assert result.answers[0].id == "Alfred Hitchcock", result.notes
    assert any("trained path scorer" in note for note in result.notes)


def test_fog_keeps_its_own_trained_scorer_where_it_has_one(store_with_scorer, scorer, tmp_path):
    from localkg.fog.location import checkpoint_location

    fog = get_reasoner("fog")
    assert fog(context(store_with_scorer, scorer)).relations.mode == "trained"
    assert fog(context(store_with_scorer, scorer), checkpoint=str(tmp_path / "fog.pt")).relations.mode == "embed"
    own = checkpoint_location("", store_with_scorer.path)
    own.parent.mkdir(parents=True, exist_ok=True)
    own.touch()  # only where it lies is read here; loading waits for the first question
    try:
        assert fog(context(store_with_scorer, scorer)).relations.mode == "embed"
        assert fog(context(store_with_scorer, scorer), relations="trained").relations.mode == "trained"
    finally:
        own.unlink()


def test_eval_with_relations_trained_on_a_store_without_a_scorer_is_one_line(tmp_path):
    from click.testing import CliRunner

    from localkg.cli import main

    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "who directed Vertigo", "answers": ["Alfred Hitchcock"], '
                         '"topic_entities": ["Vertigo"]}\n')
    path = tmp_path / "db"
    with KG.create(path) as kg:
        kg.add_triples([("Vertigo", "directed_by", "Alfred Hitchcock")])
    result = CliRunner().invoke(main, ["eval", str(questions), "--db", str(path), "--reasoner", "embed-path",
                                       "--set", "relations=trained", "--out", str(tmp_path / "run")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "localkg train paths" in result.output
    bad = CliRunner().invoke(main, ["eval", str(questions), "--db", str(path), "--reasoner", "tog",
                                    "--set", "relations=learned", "--out", str(tmp_path / "run2")])
    assert bad.exit_code == 1 and "relations" in bad.output and "Traceback" not in bad.output
