"""Paths-over-Graph (`paths`): control flow on hand-made graphs with a scripted model, and one real run.

The graph, the store and the embedding scorer are real; the scripted model says what a
model might say, and each test checks how the reasoner reacts.
"""
from __future__ import annotations

from typing import Any

import pytest

from localkg.errors import CheckpointError
from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Context, get_reasoner
from localkg.store import KG

# Two topic entities (a position and a club): the answer is the player between them. The
# `_inverse` facts are parallel edges, as in WC2014.
FOOTBALL = [
    ("Alan", "plays_position", "Forward"), ("Forward", "plays_position_inverse", "Alan"),
    ("Alan", "plays_in_club", "Tigres"), ("Tigres", "plays_in_club_inverse", "Alan"),
    ("Bruno", "plays_position", "Forward"), ("Bruno", "plays_in_club", "Pumas"),
    ("Carlos", "plays_position", "Goalkeeper"), ("Carlos", "plays_in_club", "Tigres"),
    ("Alan", "plays_for_country", "Mexico"), ("Tigres", "is_in_country", "Mexico"),
]

# One topic entity, two hops to the answer.
FILMS = [
    ("Top Hat", "starred_actors", "Ginger Rogers"), ("Top Hat", "directed_by", "Mark Sandrich"),
    ("Swing Time", "starred_actors", "Ginger Rogers"), ("Swing Time", "directed_by", "George Stevens"),
    ("Top Hat", "release_year", "1935"), ("Swing Time", "release_year", "1936"),
    ("Mark Sandrich", "born_in", "New York"),
]


def graph(tmp_path, triples) -> KG:
    kg = KG.create(tmp_path / "db")
    kg.add_triples(triples)
    return kg


@pytest.fixture()
def football(tmp_path):
    kg = graph(tmp_path, FOOTBALL)
    yield kg
    kg.close()


@pytest.fixture()
def films(tmp_path):
    kg = graph(tmp_path, FILMS)
    yield kg
    kg.close()


def reasoner(kg: KG, llm: ScriptedLLM, scorer, **settings):
    return get_reasoner("paths")(Context(kg, _llm=llm, _scorer=scorer), **settings)


def test_multi_entity_paths_connect_both_topics(football, scorer):
    llm = ScriptedLLM({"analyse": [{"split_questions": ["who plays Forward", "who plays at Tigres"], "depth": 2}],
                       "indicator": [[0]], "sufficient": [True]})
    result = reasoner(football, llm, scorer).answer("which Forward plays at the club Tigres", ["Forward", "Tigres"])
    assert [a.name for a in result.answers] == ["Alan"]
    assert "indicator: Forward → ? → Tigres" in result.notes
    # The four parallel-edge walks are one candidate; its evidence runs through both topics.
    assert any(n.startswith("depth 2: 1 candidate paths") for n in result.notes)
    ends = {(p.start.id, p.end.id) for p in result.evidence}
    assert ends == {("Forward", "Tigres")}


def test_connecting_search_grows_the_depth(football, scorer):
    # Forward and Tigres are two hops apart: depth 1 finds nothing, depth 2 finds the player.
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 1}], "indicator": [[0]], "sufficient": [True]})
    result = reasoner(football, llm, scorer).answer("which Forward plays at the club Tigres", ["Forward", "Tigres"])
    assert "depth 1: no candidate path" in result.notes
    assert [a.name for a in result.answers] == ["Alan"]


def test_insufficient_paths_grow_the_depth(films, scorer):
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 1}], "sufficient": [False, True],
                       "precise": [[1]]})
    result = reasoner(films, llm, scorer).answer("who directed the films Ginger Rogers starred in",
                                                 ["Ginger Rogers"])
    assert any(n.startswith("depth 1:") and "sufficient=False" in n for n in result.notes)
    assert any(n.startswith("depth 2:") and "sufficient=True" in n for n in result.notes)
    # depth 2 has three candidates (directed by, release year, starred actors); the model's
    # pick (option 2 in the embedding order) answers
    steps = [c["step"] for c in result.llm_calls]
    assert steps == ["analyse", "sufficient", "precise", "sufficient"]
    chosen = result.llm_calls[2]["prompt"].split("Options:\n")[1].splitlines()[1]
    assert all(a.name in chosen for a in result.answers[:1])


def test_supplement_paths_link_the_models_guess(films, scorer):
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 2}], "sufficient": [False, True],
                       "supplement": [{"answers": ["New York", "Paris"]}]})
    result = reasoner(films, llm, scorer, max_depth=2).answer("where was the director of Top Hat born",
                                                              ["Top Hat"])
    assert "supplement: the model guessed New York, Paris; 1 found in the graph" in result.notes
    assert [a.name for a in result.answers] == ["New York"]
    assert str(result.evidence[0]) == "Top Hat —directed_by→ Mark Sandrich —born_in→ New York"


def test_caps_on_width_and_expansion(films, scorer):
    # The model never finds the paths sufficient: every stage runs, then node expansion until its
    # edge budget is spent; each stage keeps at most `width` paths.
    films.add_triples([("New York", "in_country", "United States"), ("United States", "capital", "Washington"),
                       ("Washington", "on_river", "Potomac"), ("1935", "followed_by", "1936")])
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 1}]})
    result = reasoner(films, llm, scorer, width=2, expand_total=3, supplement=False).answer(
        "what about Ginger Rogers", ["Ginger Rogers"])
    expansions = [n for n in result.notes if n.startswith("expansion")]
    assert expansions and all(int(n.split("(")[1].split()[0]) <= 3 for n in expansions)
    for call in result.llm_calls:
        if call["step"] == "sufficient":
            listed = call["prompt"].rsplit("Paths:\n", 1)[1].split("\nDo these")[0]
            assert listed.count("\n- ") + 1 <= 2
    assert any("no stage was judged sufficient" in n for n in result.notes)
    assert result.answers


def test_unusable_outputs_fall_back(films, scorer):
    # {} for the analysis, "none" for every choice: depth from the graph, embedding order kept.
    def script(step: str, prompt: str, options: list[str] | None) -> Any:
        return [] if options is not None else None

    result = reasoner(films, ScriptedLLM(script), scorer).answer(
        "who directed the films Ginger Rogers starred in", ["Ginger Rogers"])
    assert "analyse: unusable depth from the model" in result.notes
    assert any("picked nothing; kept the embedding order" in n for n in result.notes)
    assert result.answers and all(films.has_node(a.id) for a in result.answers)


@pytest.mark.model
def test_real_model_answers_a_one_hop_question(metaqa_kg, llm, scorer):
    paths = get_reasoner("paths")(Context(metaqa_kg, _llm=llm, _scorer=scorer), max_depth=1, supplement=False,
                                  expand_total=0, analysis_tokens=48)
    result = paths.answer("what movies did Temuera Morrison act in", ["Temuera Morrison"])
    # One hop from an actor has one relation pattern, so the graph fixes the answer set whatever
    # the model says; the run shows the real model's outputs parse at every step.
    assert {a.name for a in result.answers} == {"Once Were Warriors", "Tracker", "River Queen"}
    assert [c["step"] for c in result.llm_calls] == ["analyse", "sufficient"]
    assert all(call["prompt_tokens"] > 0 for call in result.llm_calls)


def test_path_summary_is_shown_to_the_sufficiency_check(films, scorer):
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 1}], "sufficient": [True],
                       "summary": [{"summary": "Top Hat was directed by Mark Sandrich."}]})
    result = reasoner(films, llm, scorer, summary_tokens=24).answer("who directed Top Hat", ["Top Hat"])
    steps = [c["step"] for c in result.llm_calls]
    assert steps.index("summary") < steps.index("sufficient")
    assert "Summary: Top Hat was directed by Mark Sandrich." in result.llm_calls[-1]["prompt"]


@pytest.mark.parametrize("hops", [1, 2])
def test_depth_from_distance_answers_at_the_predicted_depth_without_a_check(films, scorer, tmp_path, hops,
                                                                            distance_checkpoint):
    # The model predicts depth 3 and would find every stage sufficient; the head decides.
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 3}], "sufficient": [True] * 3})
    result = reasoner(films, llm, scorer, depth_from="distance",
                      checkpoint=str(distance_checkpoint(tmp_path / "d.pt", hops))).answer(
        "who directed the films Ginger Rogers starred in", ["Ginger Rogers"])
    assert "sufficient" not in [c["step"] for c in result.llm_calls]
    assert any(n.endswith(f"exploring {hops} hops") for n in result.notes)
    assert any(n.startswith(f"depth {hops}:") and "at the trained depth" in n for n in result.notes)
    assert result.answers and all(len(path.steps) == hops for path in result.evidence)


def test_depth_from_distance_keeps_the_papers_search_for_several_topics(football, scorer, tmp_path,
                                                                        distance_checkpoint):
    llm = ScriptedLLM({"analyse": [{"split_questions": [], "depth": 2}], "indicator": [[0]], "sufficient": [True]})
    result = reasoner(football, llm, scorer, depth_from="distance",
                      checkpoint=str(distance_checkpoint(tmp_path / "d.pt", 1))).answer(
        "which Forward plays at the club Tigres", ["Forward", "Tigres"])
    assert [a.name for a in result.answers] == ["Alan"]
    assert "sufficient" in [c["step"] for c in result.llm_calls]


def test_depth_from_distance_without_a_checkpoint_is_refused_when_built(films, scorer, tmp_path):
    with pytest.raises(CheckpointError, match="needs a trained fog checkpoint"):
        reasoner(films, ScriptedLLM({}), scorer, depth_from="distance", checkpoint=str(tmp_path / "none.pt"))
