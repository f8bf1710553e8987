"""Bounded Path Context: control flow with scripted model outputs on small real graphs, the K-hop
history rendering, and one end-to-end run with the real bundled model on a MetaQA question."""
from __future__ import annotations

import pytest

from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Context
from localkg.reasoners.bpc import BoundedPathContext, render_history
from localkg.store import KG
from localkg.store.model import Node, Path, Step, Triple
from localkg.store.batch import FactBatch

MOVIES = [
    ("Top Hat", "directed_by", "Mark Sandrich"),
    ("Top Hat", "starred_actors", "Ginger Rogers"),
    ("Top Hat", "starred_actors", "Fred Astaire"),
    ("Top Hat", "in_language", "English"),
    ("Swing Time", "starred_actors", "Ginger Rogers"),
    ("Swing Time", "directed_by", "George Stevens"),
    ("Carefree", "starred_actors", "Ginger Rogers"),
    ("Carefree", "directed_by", "Mark Sandrich"),
    ("Mark Sandrich", "born_in", "Manhattan"),
]


@pytest.fixture()
def movies(tmp_path):
    kg = KG.create(tmp_path / "db")
    kg.add_triples(MOVIES)
    yield kg
    kg.close()


def bpc(kg, scorer, script=None, **settings) -> BoundedPathContext:
    llm = ScriptedLLM(script or {})
    return BoundedPathContext(Context(kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer), **settings)


def steps_of(result) -> list[str]:
    return [call["step"] for call in result.llm_calls]


def stop_option(options):
    return next(i for i, option in enumerate(options) if option.startswith("STOP"))


def first_then_stop(step, prompt, options):
    """Follow the most relevant relation at depth 1, STOP afterwards, answer with the first option."""
    if step == "select-1":
        return [0]
    if step.startswith("select"):
        return [stop_option(options)]
    return None


def three_hops() -> Path:
    a, b, c, d = (Node(x, x) for x in "ABCD")
    return Path((Step(Triple(a, "r1", b)), Step(Triple(c, "r2", b), forward=False), Step(Triple(c, "r3", d))))


def test_history_shows_the_last_k_hops():
    path = three_hops()
    assert render_history(path, 0) == "(none — start of reasoning)"
    assert render_history(path, 1) == "hop 3: C --[r3]--> D"
    assert render_history(path, 2) == "hop 2: B --[r2⁻¹]--> C\nhop 3: C --[r3]--> D"
    assert render_history(path, -1) == "hop 1: A --[r1]--> B\nhop 2: B --[r2⁻¹]--> C\nhop 3: C --[r3]--> D"
    assert render_history(Path(()), 1) == "(none — start of reasoning)"


@pytest.mark.parametrize("k, shown, hidden", [(0, [], ["hop 1", "hop 2"]), (1, ["hop 2:"], ["hop 1:"]),
                                              (-1, ["hop 1:", "hop 2:"], [])])
def test_selection_prompts_carry_only_the_last_k_hops(movies, scorer, k, shown, hidden):
    prompts_seen = {}

    def script(step, prompt, options):
        prompts_seen.setdefault(step, prompt)
        return [0] if step.startswith("select") else None

    bpc(movies, scorer, script, K=k, width=1).answer("where was the director of the films with Ginger Rogers born",
                                                     ["Ginger Rogers"])
    third = prompts_seen["select-3"]
    assert all(text in third for text in shown)
    assert not any(text in third for text in hidden)
    assert ("(none — start of reasoning)" in third) == (k == 0)
    assert "(none — start of reasoning)" in prompts_seen["select-1"]


def test_stop_finishes_the_beam_and_the_answer_comes_from_its_path(movies, scorer):
    result = bpc(movies, scorer, first_then_stop).answer("who directed Top Hat", ["Top Hat"])
    assert steps_of(result) == ["select-1", "select-2"]  # one path left: nothing for the answer step to choose
    assert result.answers[0].id == "Mark Sandrich"
    assert str(result.evidence[0]) == "Top Hat —directed_by→ Mark Sandrich"
    assert any("STOP at Mark Sandrich" in note for note in result.notes)


def test_a_stop_after_relations_drops_only_the_relations_ranked_below_it(movies, scorer):
    picked = {}

    def script(step, prompt, options):
        if step == "select-1":
            return [0]
        if step == "select-2":  # "1, STOP, 3": follow the first relation only
            relation = next(o for o in options if not o.startswith("STOP"))
            rest = [o for o in options if not o.startswith("STOP") and o != relation]
            picked.update(followed=relation, dropped=rest[0])
            return [relation, stop_option(options), rest[0]]
        return [stop_option(options)] if step.startswith("select") else None

    result = bpc(movies, scorer, script, depth=3).answer("where was the director of Top Hat born", ["Top Hat"])
    followed = [n for n in result.notes if n.startswith("depth 2: from")]
    assert followed and picked["followed"].split(" → ")[1] in followed[0].replace("_", " ")
    assert picked["dropped"].split(" → ")[1] not in followed[0].replace("_", " ")
    assert "select-3" in steps_of(result)  # the followed relation's beams went on


def test_no_relation_picked_finishes_the_beam(movies, scorer):
    def script(step, prompt, options):
        return [0] if step == "select-1" else ([] if step.startswith("select") else None)

    result = bpc(movies, scorer, script).answer("who directed Top Hat", ["Top Hat"])
    assert steps_of(result) == ["select-1", "select-2"]
    assert any("no relation picked" in note for note in result.notes)
    assert result.answers


def test_stop_is_not_offered_before_the_first_hop(movies, scorer):
    seen = {}

    def script(step, prompt, options):
        seen.setdefault(step, options)
        return first_then_stop(step, prompt, options)

    bpc(movies, scorer, script).answer("who directed Top Hat", ["Top Hat"])
    assert not any(option.startswith("STOP") for option in seen["select-1"])
    # no relation of Mark Sandrich makes the chain match "who directed" better: STOP is ranked first
    assert seen["select-2"][0].startswith("STOP")


def test_relations_in_both_directions_answer_reverse_questions(movies, scorer):
    result = bpc(movies, scorer, first_then_stop).answer("which movies did Mark Sandrich direct", ["Mark Sandrich"])
    assert {a.id for a in result.answers} == {"Top Hat", "Carefree"}
    assert all(str(p).startswith("Mark Sandrich —directed_by⁻¹→") for p in result.evidence)


def test_beams_are_capped_and_the_search_ends_at_max_depth(tmp_path, scorer):
    kg = KG.create(tmp_path / "db")
    kg.add_triples([("Hub", "links_to", f"A{i}") for i in range(10)]
                   + [(f"A{i}", "leads_to", f"B{i}{j}") for i in range(10) for j in range(10)]
                   + [(f"B{i}{j}", "ends_at", f"C{i}{j}") for i in range(10) for j in range(10)])
    try:
        wanted = {"select-1": "links to", "select-2": "leads to", "select-3": "ends at"}

        def script(step, prompt, options):
            if step in wanted:
                return [next(i for i, o in enumerate(options) if wanted[step] in o)]
            return None

        result = bpc(kg, scorer, script, max_total_beams=4).answer("what does Hub lead to", ["Hub"])
        counts = [note for note in result.notes if " beams, " in note]
        assert counts == ["depth 1: 3 beams, 0 finished", "depth 2: 4 beams, 0 finished",
                          "depth 3: 4 beams, 0 finished"]
        # siblings (same start and relation chain) share one call per depth
        assert steps_of(result) == ["select-1", "select-2", "select-3", "answer"]
        assert all(len(path) == 3 for path in result.evidence)
    finally:
        kg.close()


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
        options_seen = {}

        def script(step, prompt, options):
            options_seen.setdefault(step, options)
            return first_then_stop(step, prompt, options)

        spouse = bpc(kg, scorer, script).answer("who is the spouse of Barack Obama", ["m.obama"])
        assert spouse.answers[0].id == "m.michelle"
        assert "Barack Obama → spouse s → (mediator); (mediator) → spouse → ?" in options_seen["select-1"]
        assert all(a.id != "m.marriage" for a in spouse.answers)
        born = bpc(kg, scorer, first_then_stop).answer("when was Barack Obama born", ["m.obama"])
        assert (born.answers[0].id, born.answers[0].name) == ('"1961-08-04"^^xsd:date', "1961-08-04")
    finally:
        kg.close()


def test_relation_cap_hides_the_rest_and_says_how_many(tmp_path, scorer):
    kg = KG.create(tmp_path / "db")
    kg.add_triples([("Hub", f"relation_{i}", f"T{i}") for i in range(7)])
    try:
        seen = {}

        def script(step, prompt, options):
            seen.setdefault(step, (prompt, options))
            return [0] if step == "select-1" else None

        bpc(kg, scorer, script, relation_cap=5).answer("what is Hub's relation_3", ["Hub"])
        prompt, options = seen["select-1"]
        assert len(options) == 5 and "2 more not shown" in prompt
    finally:
        kg.close()


def test_empty_graph_and_unknown_entity_give_no_answer_with_the_reason(tmp_path, movies, scorer):
    empty = KG.create(tmp_path / "empty")
    try:
        result = bpc(empty, scorer).answer("who directed Top Hat", ["Top Hat"])
        assert result.answers == [] and any(n.startswith("no answer found") for n in result.notes)
    finally:
        empty.close()
    unknown = bpc(movies, scorer).answer("who directed Nowhere", ["Nowhere"])
    assert unknown.answers == [] and any(n.startswith("no answer found") for n in unknown.notes)
    isolated = KG.create(tmp_path / "isolated")
    try:
        batch = FactBatch()
        batch.add_entity("Lonely", name="Lonely")
        with isolated.writer() as writer:
            writer.write(batch)
        result = bpc(isolated, scorer).answer("who directed Lonely", ["Lonely"])
        assert result.answers == [] and steps_of(result) == []
        assert "no answer found: no relation was followed from the topic entities" in result.notes
    finally:
        isolated.close()


def test_with_two_topics_the_answers_are_the_nodes_both_reach(tmp_path, scorer):
    """A conjunctive question: each topic alone reaches a wrong player too; only Alice is both."""
    kg = KG.create(tmp_path / "db")
    kg.add_triples([("Alice", "plays_for", "Club X"), ("Alice", "position", "Defender"),
                    ("Bob", "plays_for", "Club X"), ("Bob", "position", "Forward"),
                    ("Carol", "plays_for", "Club Y"), ("Carol", "position", "Defender")])
    result = bpc(kg, scorer, first_then_stop).answer("which defender plays for Club X", ["Club X", "Defender"])
    assert [answer.id for answer in result.answers] == ["Alice"]
    assert {path.start.id for path in result.evidence} <= {"Club X", "Defender"}
    one_topic = bpc(kg, scorer, first_then_stop).answer("which defender plays for Club X", ["Club X"])
    assert {answer.id for answer in one_topic.answers} == {"Alice", "Bob"}
    # Carol is a defender two hops from Club X (a teammate of Alice's): both topics reach her too,
    # but further; the closest meeting nodes are the answers
    kg.add_triples([("Alice", "teammate_of", "Carol")])

    def two_hops(step, prompt, options):
        if step in ("select-1", "select-2"):
            return [i for i, option in enumerate(options) if not option.startswith("STOP")][:3]
        return [stop_option(options)] if step.startswith("select") else None

    deeper = bpc(kg, scorer, two_hops).answer("which defender plays for Club X", ["Club X", "Defender"])
    assert any(note.startswith("depth 2: from Alice follow") and "teammate" in note for note in deeper.notes)
    assert [answer.id for answer in deeper.answers] == ["Alice"]
    assert "answer" not in steps_of(deeper)  # one candidate left: nothing for the model to choose
    kg.close()


@pytest.mark.model
def test_real_model_answers_a_metaqa_question(metaqa_kg, llm, scorer):
    reasoner = BoundedPathContext(Context(metaqa_kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer),
                                  depth=2)
    result = reasoner.answer("who directed Top Hat", ["Top Hat"])
    assert "Mark Sandrich" in [a.id for a in result.answers[:3]]
    assert all(str(path).startswith("Top Hat —") for path in result.evidence)
    assert result.llm_calls and all(call["prompt_tokens"] > 0 for call in result.llm_calls)
