"""PPoGA (`ppoga`): planner/executor control flow on a hand-made graph with a scripted model, and one
real run.

The graph, the store and the embedding scorer are real; the scripted model plays the planner
(and the executor's choices), and each test checks how the reasoner reacts: path correction,
plan correction, the caps, the call accounting and the fallbacks.
"""
from __future__ import annotations

from typing import Any

import pytest

from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Context, get_reasoner
from localkg.store import KG

FILMS = [
    ("Top Hat", "starred_actors", "Ginger Rogers"), ("Top Hat", "directed_by", "Mark Sandrich"),
    ("Top Hat", "release_year", "1935"), ("Swing Time", "release_year", "1936"),
    ("Swing Time", "starred_actors", "Ginger Rogers"), ("Swing Time", "directed_by", "George Stevens"),
]
PLAN = {"steps": [
    {"description": "look up Top Hat", "objective": "find who directed Top Hat", "expected_outcome": "a person"},
    {"description": "check", "objective": "confirm the director", "expected_outcome": "a person"},
    {"description": "answer", "objective": "give the director", "expected_outcome": "a person"}]}


@pytest.fixture()
def films(tmp_path):
    kg = KG.create(tmp_path / "db")
    kg.add_triples(FILMS)
    yield kg
    kg.close()


def scripted(decisions: dict[str, list[Any]]) -> ScriptedLLM:
    """Choices pick the option containing the scripted text (the first option when the queue is
    empty); other steps take their scripted values in order."""
    queues = {step: list(values) for step, values in decisions.items()}

    def answer(step: str, prompt: str, options: list[str] | None) -> Any:
        queue = queues.get(step) or []
        value = queue.pop(0) if queue else None
        if options is not None:
            if value is None:
                return [0]
            return [i for i, option in enumerate(options) if value in option][:1] or [0]
        return value

    return ScriptedLLM(answer)


def ppoga(kg: KG, llm: ScriptedLLM, scorer, **settings):
    return get_reasoner("ppoga")(Context(kg, _llm=llm, _scorer=scorer), **settings)


def relation_options(result, step: str = "executor relations") -> list[str]:
    """The options the executor offered the model, call by call."""
    return [call["prompt"].split("Options:\n")[1].split("\nReply")[0] for call in result.llm_calls
            if call["step"] == step]


def decision(action: str, found: bool = False) -> dict[str, Any]:
    return {"direct_answer_found": found, "next_action": action}


def test_path_correction_retries_the_step_without_the_failed_move(films, scorer):
    llm = scripted({"plan": [PLAN], "executor relations": ["release year", "directed by"],
                    "think": [decision("CORRECT_PATH"), decision("FINISH", found=True)]})
    result = ppoga(films, llm, scorer).answer("who directed Top Hat", ["Top Hat"])
    first, second = relation_options(result)
    assert "release year" in first and "release year" not in second
    assert [a.name for a in result.answers] == ["Mark Sandrich"]
    assert any("CORRECT_PATH" in n for n in result.notes)


def test_replan_starts_over_without_re_exploring_the_first_moves(films, scorer):
    llm = scripted({"plan": [PLAN], "replan": [PLAN], "executor relations": ["release year", "directed by"],
                    "think": [decision("REPLAN"), decision("FINISH", found=True)]})
    result = ppoga(films, llm, scorer).answer("who directed Top Hat", ["Top Hat"])
    steps = [call["step"] for call in result.llm_calls]
    assert steps.count("plan") == 1 and steps.count("replan") == 1
    before, after = relation_options(result)
    assert "Top Hat → release year → ?" in before
    assert "Top Hat → release year → ?" not in after       # the walked move is not offered again
    assert any(n.startswith("re-plan 1: restarting from Top Hat, 1935") for n in result.notes)
    assert [a.name for a in result.answers] == ["Mark Sandrich"]


def test_replans_and_iterations_are_capped(films, scorer):
    llm = scripted({"plan": [PLAN], "replan": [PLAN] * 5, "think": [decision("REPLAN")] * 10})
    result = ppoga(films, llm, scorer, max_replans=2).answer("who directed Top Hat", ["Top Hat"])
    steps = [call["step"] for call in result.llm_calls]
    assert steps.count("replan") == 2
    assert "re-plan limit (2) reached" in result.notes

    llm = scripted({"plan": [PLAN], "think": [decision("CORRECT_PATH")] * 10})
    result = ppoga(films, llm, scorer, max_iterations=4, max_replans=0).answer("who directed Top Hat", ["Top Hat"])
    assert [call["step"] for call in result.llm_calls].count("predict") <= 4
    assert any(n.startswith("step 1 failed 3 times") for n in result.notes)


def test_every_call_is_counted_executor_included(films, scorer):
    llm = scripted({"plan": [PLAN], "think": [decision("PROCEED"), decision("FINISH", found=True)]})
    result = ppoga(films, llm, scorer).answer("who directed Top Hat", ["Top Hat"])
    executor = sum(1 for call in result.llm_calls if call["step"].startswith("executor "))
    planner = len(result.llm_calls) - executor
    assert executor >= 2
    assert any(n.startswith(f"LLM calls: {planner} planner, {executor} executor;") for n in result.notes)
    assert result.to_json()["llm_calls"] == planner + executor


def test_unusable_outputs_fall_back_to_graph_side_rules(films, scorer):
    llm = ScriptedLLM(lambda step, prompt, options: [] if options is not None else None)
    result = ppoga(films, llm, scorer).answer("who directed Top Hat", ["Top Hat"])
    assert "plan: unusable plan; using the generic plan" in result.notes
    assert any(n.startswith("think: unusable decision; PROCEED by the graph-side rule") for n in result.notes)
    assert any("picked nothing; kept the embedding order" in n for n in result.notes)
    assert result.answers and all(films.has_node(a.id) for a in result.answers)


@pytest.mark.model
def test_real_model_runs_one_step_cycle(metaqa_kg, llm, scorer):
    reasoner = get_reasoner("ppoga")(Context(metaqa_kg, _llm=llm, _scorer=scorer), max_iterations=1,
                                     plan_tokens=128)
    result = reasoner.answer("what movies did Temuera Morrison act in", ["Temuera Morrison"])
    steps = [call["step"] for call in result.llm_calls]
    assert steps[:3] == ["plan", "predict", "executor relations"] and steps[-1] == "think"
    assert any(n.startswith("plan: ") for n in result.notes)
    # one step from the actor: every answer is a node one fact away from him
    assert result.answers and all(len(path) == 1 and path.start.id == "Temuera Morrison" for path in result.evidence)


def test_without_a_direct_answer_the_best_matching_observation_answers(tmp_path, scorer):
    kg = KG.create(tmp_path / "db")
    kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich"), ("Mark Sandrich", "born_in", "New York"),
                    ("New York", "in_country", "United States")])
    llm = scripted({"plan": [PLAN], "think": [decision("PROCEED")] * 3})
    result = ppoga(kg, llm, scorer).answer("who directed Top Hat", ["Top Hat"])
    assert any(n.startswith("the planner found no direct answer; answered from observation 1") for n in result.notes)
    assert [a.name for a in result.answers] == ["Mark Sandrich"]
    kg.close()
