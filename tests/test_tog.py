"""Think-on-Graph: control flow with scripted model outputs on small real graphs, and one end-to-end
run with the real bundled model on a MetaQA question."""
from __future__ import annotations

import pytest

from localkg.errors import CheckpointError, SettingsError
from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Context
from localkg.reasoners.tog import ThinkOnGraph
from localkg.store import KG
from localkg.store.batch import FactBatch

MOVIES = [
    ("Top Hat", "directed_by", "Mark Sandrich"),
    ("Top Hat", "starred_actors", "Ginger Rogers"),
    ("Top Hat", "starred_actors", "Fred Astaire"),
    ("Top Hat", "has_genre", "Musical"),
    ("Swing Time", "starred_actors", "Ginger Rogers"),
    ("Swing Time", "directed_by", "George Stevens"),
    ("Carefree", "starred_actors", "Ginger Rogers"),
    ("Carefree", "directed_by", "Mark Sandrich"),
]


@pytest.fixture()
def movies(tmp_path):
    kg = KG.create(tmp_path / "db")
    kg.add_triples(MOVIES)
    yield kg
    kg.close()


def tog(kg, scorer, script=None, **settings) -> ThinkOnGraph:
    llm = ScriptedLLM(script or {})
    return ThinkOnGraph(Context(kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer), **settings)


def steps_of(result) -> list[str]:
    return [call["step"] for call in result.llm_calls]


def test_stops_at_the_first_yes_and_answers_with_the_evidence_path(movies, scorer):
    result = tog(movies, scorer, {"sufficient-1": [True]}).answer("who directed Top Hat", ["Top Hat"])
    assert steps_of(result) == ["sufficient-1", "answer"]
    assert result.answers[0].id == "Mark Sandrich"
    assert str(result.evidence[0]) == "Top Hat —directed_by→ Mark Sandrich"


def test_without_a_yes_it_runs_to_max_depth_and_answers_from_the_gathered_paths(movies, scorer):
    result = tog(movies, scorer, depth=2, stop_without_gain=False).answer("who directed Top Hat", ["Top Hat"])
    assert steps_of(result) == ["sufficient-1", "sufficient-2", "answer"]
    assert any("maximum depth 2 reached without a 'yes'" in note for note in result.notes)
    assert result.answers, "the gathered paths are used, not thrown away"
    assert all(answer.id != "Top Hat" for answer in result.answers)


def test_exploration_stops_when_a_depth_brings_no_better_relation_chain(movies, scorer):
    result = tog(movies, scorer).answer("who directed Top Hat", ["Top Hat"])
    assert steps_of(result) == ["sufficient-1", "answer"]
    assert any("exploration stops (graph side)" in note for note in result.notes)
    assert result.answers[0].id == "Mark Sandrich"


def test_the_beam_keeps_width_chains(movies, scorer):
    for width in (1, 2):
        result = tog(movies, scorer, width=width, depth=1).answer("who starred in Top Hat", ["Top Hat"])
        beam = next(note for note in result.notes if note.startswith("depth 1: beam"))
        assert beam.count("—") == width


def test_answers_list_every_end_of_the_winning_relation_chain(movies, scorer):
    result = tog(movies, scorer, {"sufficient-1": [True]}, width=1).answer(
        "which movies did Ginger Rogers star in", ["Ginger Rogers"])
    assert {a.id for a in result.answers} == {"Top Hat", "Swing Time", "Carefree"}
    assert all(str(path).startswith("Ginger Rogers —starred_actors⁻¹→") for path in result.evidence)


def test_the_model_chooses_among_relation_chains_each_shown_once(movies, scorer):
    shown: list[list[str]] = []

    def script(step, prompt, options):
        if step == "answer":
            shown.append(options)
            return [1.0 if "directed_by" in option else 0.0 for option in options]
        return True

    result = tog(movies, scorer, script, depth=1).answer("who starred in Top Hat", ["Top Hat"])
    relations = [option.split("—")[1] for option in shown[0]]
    assert len(relations) == len(set(relations)) >= 2, shown
    assert result.answers[0].id == "Mark Sandrich"


def test_ends_of_the_winning_relation_chain_follow_the_graphs_entity_scores(movies, scorer):
    def script(step, prompt, options):  # prefers the end the graph scores lowest, if it were shown
        if step == "answer":
            return [1.0 if "Ginger Rogers" in option else 0.0 for option in options]
        return True

    result = tog(movies, scorer, script, depth=1, width=2).answer("who starred in Top Hat", ["Top Hat"])
    assert {a.id for a in result.answers} == {"Fred Astaire", "Ginger Rogers"}
    scores = [a.score for a in result.answers]
    assert scores == sorted(scores, reverse=True)
    assert not any(call["step"] == "answer" for call in result.llm_calls), "one relation chain: nothing to choose"


def test_prune_llm_follows_the_relations_the_model_scores(movies, scorer):
    def script(step, prompt, options):
        if step.startswith("relations"):
            return [1.0 if "has genre" in option else 0.0 for option in options]
        return True

    result = tog(movies, scorer, script, prune="llm").answer("who directed Top Hat", ["Top Hat"])
    assert steps_of(result)[0] == "relations-1"
    assert result.answers[0].id == "Musical"


def test_walks_never_revisit_a_node_and_skip_reverse_is_the_papers_rule(movies, scorer):
    def script(step, prompt, options):
        if step == "answer":
            return [1.0 if option.endswith("Carefree") else 0.0 for option in options]
        return False

    question = "which films share a director with Top Hat"
    shared = tog(movies, scorer, script, width=1, depth=2, stop_without_gain=False).answer(question, ["Top Hat"])
    assert str(shared.evidence[0]) == "Top Hat —directed_by→ Mark Sandrich —directed_by⁻¹→ Carefree"
    assert all("Top Hat" not in str(path).split(" —", 1)[1] for path in shared.evidence), "no walk comes back"
    paper = tog(movies, scorer, script, width=1, depth=2, stop_without_gain=False, skip_reverse=True).answer(
        question, ["Top Hat"])
    assert "Carefree" not in {a.id for a in paper.answers}
    for path in paper.evidence:
        relations = [(step.triple.relation, step.forward) for step in path.steps]
        assert all(not (r1 == r2 and f1 != f2) for (r1, f1), (r2, f2) in zip(relations, relations[1:]))


def test_cvt_nodes_are_hopped_through_and_literals_are_answers(tmp_path, scorer):
    kg = KG.create(tmp_path / "db")
    batch = FactBatch()
    batch.add_entity("m.obama", name="Barack Obama")
    batch.add_entity("m.michelle", name="Michelle Obama")
    batch.add_entity("m.marriage", kind="cvt")
    batch.add_literal('"1961-08-04"^^xsd:date', "1961-08-04", datatype="xsd:date")
    batch.add_fact("m.obama", "people.person.spouse_s", "m.marriage")
    batch.add_fact("m.marriage", "people.marriage.spouse", "m.michelle")
    batch.add_fact("m.obama", "people.person.date_of_birth", '"1961-08-04"^^xsd:date')
    with kg.writer() as writer:
        writer.write(batch)
    try:
        spouse = tog(kg, scorer, {"sufficient-1": [True]}).answer("who is the spouse of Barack Obama", ["m.obama"])
        assert spouse.answers[0].id == "m.michelle"
        assert str(spouse.evidence[0]) == ("Barack Obama —people.person.spouse_s→ (mediator) "
                                           "—people.marriage.spouse→ Michelle Obama")
        assert all(answer.id != "m.marriage" for answer in spouse.answers)
        born = tog(kg, scorer, {"sufficient-1": [True]}).answer("when was Barack Obama born", ["m.obama"])
        assert born.answers[0].id == '"1961-08-04"^^xsd:date'
        assert born.answers[0].name == "1961-08-04"
    finally:
        kg.close()


def test_filtered_relations_are_never_followed(tmp_path, scorer):
    kg = KG.create(tmp_path / "db")
    kg.add_triples([("Top Hat", "common.topic.notable_for", "Film"), ("Top Hat", "directed_by", "Mark Sandrich")])
    try:
        result = tog(kg, scorer, depth=1).answer("what is Top Hat notable for", ["Top Hat"])
        assert [a.id for a in result.answers] == ["Mark Sandrich"]
        unfiltered = tog(kg, scorer, depth=1, relation_filter="").answer("what is Top Hat notable for", ["Top Hat"])
        assert "Film" in {a.id for a in unfiltered.answers}
    finally:
        kg.close()


def test_empty_graph_and_unknown_entity_give_no_answer_with_the_reason(tmp_path, movies, scorer):
    empty = KG.create(tmp_path / "empty")
    try:
        result = tog(empty, scorer).answer("who directed Top Hat", ["Top Hat"])
        assert result.answers == [] and any(n.startswith("no answer found") for n in result.notes)
    finally:
        empty.close()
    unknown = tog(movies, scorer).answer("who directed Nowhere", ["Nowhere"])
    assert unknown.answers == []
    assert any("no topic entity of the question is in the graph" in n for n in unknown.notes)
    isolated = KG.create(tmp_path / "isolated")
    try:
        batch = FactBatch()
        batch.add_entity("Lonely", name="Lonely")
        with isolated.writer() as writer:
            writer.write(batch)
        result = tog(isolated, scorer).answer("who directed Lonely", ["Lonely"])
        assert result.answers == [] and any(n.startswith("no answer found") for n in result.notes)
        assert steps_of(result) == []
    finally:
        isolated.close()


def test_an_unknown_prune_mode_is_refused_with_a_reason(movies, scorer):
    with pytest.raises(SettingsError, match="tog setting prune: expected one of embed, llm, hybrid, got 'magic'"):
        tog(movies, scorer, prune="magic")


@pytest.mark.parametrize("hops", [1, 2])
def test_depth_from_distance_explores_and_answers_at_the_predicted_distance(movies, scorer, tmp_path, hops,
                                                                           distance_checkpoint):
    path = distance_checkpoint(tmp_path / f"d{hops}.pt", hops)
    result = tog(movies, scorer, depth_from="distance", checkpoint=str(path)).answer(
        "who starred in films with Fred Astaire", ["Fred Astaire"])
    assert "sufficient-1" not in steps_of(result), "the head decides the depth, not the model"
    assert f"exploring {hops} hops" in result.notes[0]
    assert sum(note.startswith("depth ") for note in result.notes) == hops
    assert len(result.evidence[0].steps) == hops
    expected = {"Top Hat"} if hops == 1 else {"Ginger Rogers", "Mark Sandrich", "Musical"}
    assert result.answers[0].id in expected


def test_depth_from_distance_without_a_usable_checkpoint_is_refused_when_built(movies, scorer, tmp_path,
                                                                              distance_checkpoint):
    """Every question would fail the same way, so it is an error, not one "no answer" per question."""
    with pytest.raises(CheckpointError, match="needs a trained fog checkpoint"):
        tog(movies, scorer, depth_from="distance", checkpoint=str(tmp_path / "none.pt"))
    headless = distance_checkpoint(tmp_path / "old.pt", None)
    with pytest.raises(CheckpointError, match="answer-distance head"):
        tog(movies, scorer, depth_from="distance", checkpoint=str(headless))


@pytest.mark.model
def test_real_model_answers_a_metaqa_question(metaqa_kg, llm, scorer):
    reasoner = ThinkOnGraph(Context(metaqa_kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer))
    result = reasoner.answer("who directed Top Hat", ["Top Hat"])
    assert result.answers[0].id == "Mark Sandrich"
    assert str(result.evidence[0]) == "Top Hat —directed_by→ Mark Sandrich"
    assert 2 <= len(result.llm_calls) <= 6
    assert all(call["prompt_tokens"] > 0 for call in result.llm_calls)
