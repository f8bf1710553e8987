"""The ``fog`` reasoner on the real demo store: thresholds, memory masking, exact-copy checks, the
stop rule, the checkpoint/fallback switch, no gold at inference, and one run with the real model.

Tests of how the reasoner reacts to model outputs use ``ScriptedLLM``; the store, the embedder
and (in the last test) the GGUF model are real.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from localkg.errors import CheckpointError
from localkg.fog.checkpoint import save_checkpoint
from localkg.fog.model import ForesightScorer, ScorerConfig
from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Context
from localkg.reasoners.common import node_of
from localkg.errors import PromptTooLongError, SettingsError
from localkg.fog.features import triple_key
from localkg.reasoners.fog import FoGReasoner, _answer_options, answer_scores, check_update
from localkg.store.model import Node, Triple

QUESTION = "Who directed Top Hat?"
TRIPLE = re.compile(r"^\((.+), (\S+), (.+)\)$")


def shown_triples(prompt: str) -> list[str]:
    """The triple lines of the question's own ``Triples:`` section (the last one; the first is the example)."""
    section = prompt.rsplit("Triples:\n", 1)[1].split("\nReply with JSON only.", 1)[0]
    return [line for line in section.splitlines() if line.startswith("(")]


def memory_lines(prompt: str) -> list[str]:
    section = prompt.rsplit("Memory:\n", 1)[1].split("\nTriples:", 1)[0]
    return [line for line in section.splitlines() if line.startswith("(")]


def fog(demo_kg, scorer, llm, **settings) -> FoGReasoner:
    base = {"decompose": False, "hops": 1, "llm_triples": 5}
    return FoGReasoner(Context(demo_kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer), **{**base, **settings})


class FixedScores:
    """Known scores per relation, to check which thresholds the reasoner applies where."""

    description = "fixed test scores"

    def initial(self, questions, triples, levels):
        return np.array([0.05 if t.relation == "has_tags" else 0.5 for t in triples])

    def refined(self, questions, triples, levels):
        return np.array([0.9 if t.relation in ("directed_by", "written_by") else 0.6 for t in triples])

    def answer_distance(self, question):
        return None


def test_tau_e_limits_expansion_and_tau_p_the_potential_subgraph(demo_kg, scorer):
    llm = ScriptedLLM()
    reasoner = fog(demo_kg, scorer, llm, llm_triples=30, min_potential=0)
    reasoner.triple_scorer = lambda question, topics, chains: FixedScores()
    expansion = reasoner.expand(FixedScores(), [QUESTION], {"Top Hat": node_of(demo_kg, "Top Hat")}, [],
                                excluded=set(), chains={"Top Hat": ()})
    assert expansion.triples and not any(t.relation == "has_tags" for t in expansion.triples)  # 0.05 < tau_e
    result = reasoner.answer(QUESTION, ["Top Hat"])
    shown = shown_triples(llm.calls[0].prompt)
    assert shown and all(TRIPLE.match(line).group(2) in ("directed_by", "written_by") for line in shown)
    assert "(Top Hat, directed_by, Mark Sandrich)" in shown
    assert any("in the potential subgraph" in note for note in result.notes)


def test_with_an_empty_memory_the_model_sees_the_best_triples_below_tau_p_too(demo_kg, scorer):
    llm = ScriptedLLM()
    reasoner = fog(demo_kg, scorer, llm, llm_triples=30, min_potential=8, rounds=2)
    reasoner.triple_scorer = lambda question, topics, chains: FixedScores()
    result = reasoner.answer(QUESTION, ["Top Hat"])
    first, *later = [shown_triples(c.prompt) for c in llm.calls if c.step == "memory_update"]
    above = [line for line in first if TRIPLE.match(line).group(2) in ("directed_by", "written_by")]
    assert len(first) == 8 and first[:len(above)] == above  # the ones above tau_p first, then the best below
    assert any("below tau_p included" in note for note in result.notes)
    assert later and not set(later[0]) & set(first)  # still nothing in memory: the next best, none shown twice


def test_answers_are_the_ends_of_the_best_scoring_paths(demo_kg, scorer):
    class WriterFirst(FixedScores):
        def refined(self, questions, triples, levels):
            return np.array([0.9 if t.relation == "written_by" else 0.3 if t.relation == "directed_by" else 0.2
                             for t in triples])

    llm = ScriptedLLM()  # predicts nothing
    reasoner = fog(demo_kg, scorer, llm, rounds=1)
    reasoner.triple_scorer = lambda question, topics, chains: WriterFirst()
    result = reasoner.answer("Who wrote Top Hat?", ["Top Hat"])
    assert any("ends of the best-scoring paths (the model predicted none)" in note for note in result.notes)
    writers = {t.tail.id for t in demo_kg.triples("Top Hat") if t.relation == "written_by"}
    assert len(writers) > 1 and {a.id for a in result.answers} == writers  # every writer, nothing else


def test_an_answer_supported_from_every_topic_entity_ranks_first():
    fred, ginger = Node("Fred Astaire", "Fred Astaire"), Node("Ginger Rogers", "Ginger Rogers")
    top_hat, roberta = Node("Top Hat", "Top Hat"), Node("Roberta", "Roberta")
    triples = [Triple(top_hat, "starred_actors", fred), Triple(top_hat, "starred_actors", ginger),
               Triple(roberta, "starred_actors", fred)]
    scores = {triple_key(triples[0]): 0.6, triple_key(triples[1]): 0.6, triple_key(triples[2]): 0.9}
    answers = answer_scores(triples, scores, ["Fred Astaire", "Ginger Rogers"], 5, within=0.0)
    assert [a.name for a in answers] == ["Top Hat"]  # Roberta scores higher, from Fred alone: not an answer


def test_the_predicted_distance_weights_answers_by_their_hops():
    ginger, top_hat, sandrich = Node("Ginger Rogers", "Ginger Rogers"), Node("Top Hat", "Top Hat"), \
        Node("Mark Sandrich", "Mark Sandrich")
    triples = [Triple(top_hat, "starred_actors", ginger), Triple(top_hat, "directed_by", sandrich)]
    scores = {triple_key(triples[0]): 0.9, triple_key(triples[1]): 0.8}
    one_hop = answer_scores(triples, scores, ["Ginger Rogers"], 5, distance=[0.0, 0.9, 0.1])
    two_hops = answer_scores(triples, scores, ["Ginger Rogers"], 5, distance=[0.0, 0.1, 0.9])
    assert [a.name for a in one_hop] == ["Top Hat"] and [a.name for a in two_hops] == ["Mark Sandrich"]
    assert answer_scores(triples, scores, ["Ginger Rogers"], 5, distance=[1.0]) == []  # nothing at distance 0


def test_with_two_topic_entities_triples_to_the_other_one_are_kept(demo_kg, scorer):
    """Below tau_e, a triple from a node the expansion reached to another topic entity is kept:
    it is the support a conjunctive question asks for. Other low triples stay out."""
    class FredOnly(FixedScores):
        def initial(self, questions, triples, levels):
            return np.array([0.5 if "Fred Astaire" in (t.head.id, t.tail.id) else 0.05 for t in triples])

    reasoner = fog(demo_kg, scorer, ScriptedLLM(), hops=1)
    sources = {name: node_of(demo_kg, name) for name in ("Fred Astaire", "Ginger Rogers")}
    expansion = reasoner.expand(FredOnly(), ["Which film starred Fred Astaire and Ginger Rogers?"], sources, [],
                                excluded=set(), chains={name: () for name in sources})
    ginger_films = {t.head.id for t in expansion.triples if t.tail.id == "Ginger Rogers"}
    fred_films = {t.head.id for t in demo_kg.triples("Fred Astaire") if t.relation == "starred_actors"}
    assert ginger_films and ginger_films <= fred_films  # Top Hat, Roberta, ...: films with both
    assert any(t.tail.id == "Ginger Rogers" and t.head.id not in fred_films for t in expansion.dropped)
    single = reasoner.expand(FredOnly(), ["Which films starred Ginger Rogers?"], {"Ginger Rogers": sources["Ginger Rogers"]},
                             [], excluded=set(), chains={"Ginger Rogers": ()})
    assert not single.triples  # one topic entity: tau_e alone decides


def test_selected_triples_join_memory_and_rejected_ones_are_masked(demo_kg, scorer):
    def script(step, prompt, options):
        if step == "memory_update":
            lines = shown_triples(prompt)
            return {"selected_triplets": lines[:1], "predict_answer": [],
                    "subsequent_question": ["Who made Top Hat?"]}
        return None

    llm = ScriptedLLM(script)
    fog(demo_kg, scorer, llm, rounds=2).answer(QUESTION, ["Top Hat"])
    first, second = [c.prompt for c in llm.calls if c.step == "memory_update"]
    selected, rejected = shown_triples(first)[0], set(shown_triples(first)[1:])
    assert memory_lines(second) == [selected]
    assert selected not in shown_triples(second)              # absorbed: not expanded again
    assert not rejected & set(shown_triples(second))           # rejected: masked
    assert shown_triples(second)


def test_a_skipped_memory_call_masks_nothing(demo_kg, scorer):
    calls = []

    def script(step, prompt, options):
        if step == "memory_update":
            calls.append(prompt)
            if len(calls) == 1:
                raise PromptTooLongError("step 'memory_update': the prompt does not fit the context")
            return {"selected_triplets": [], "predict_answer": [], "subsequent_question": ["Who made Top Hat?"]}
        return None

    result = fog(demo_kg, scorer, ScriptedLLM(script), rounds=2).answer(QUESTION, ["Top Hat"])
    assert len(calls) == 2 and any(n.startswith("model call skipped") for n in result.notes)
    assert shown_triples(calls[1]) == shown_triples(calls[0])  # the model never saw them: not rejected


def test_any_shown_node_may_be_the_answer_path_ends_first():
    director, film, actor = Node("Mark Sandrich", "Mark Sandrich"), Node("Top Hat", "Top Hat"), Node("Fred", "Fred")
    shown = [Triple(film, "directed_by", director), Triple(film, "starred_actors", actor)]
    options = _answer_options(shown, {"Mark Sandrich"})
    assert list(options) == ["Fred", "Top Hat"]  # "films Mark Sandrich directed" stays answerable


def test_output_not_copied_from_the_input_is_dropped(demo_kg, scorer):
    llm = ScriptedLLM({"memory_update": [{"selected_triplets": ["(Top Hat, directed_by, Alfred Hitchcock)"],
                                          "predict_answer": ["Alfred Hitchcock"], "subsequent_question": []}]})
    result = fog(demo_kg, scorer, llm, rounds=1).answer(QUESTION, ["Top Hat"])
    assert any("dropped output not copied" in n and "Alfred Hitchcock" in n for n in result.notes)
    assert "Alfred Hitchcock" not in [a.name for a in result.answers]
    assert any("the model predicted none" in n for n in result.notes)
    update = check_update({"selected_triplets": ["(Top Hat, directed_by, Mark Sandrich)", "(made, up, triple)"],
                           "predict_answer": ["Mark Sandrich"]}, {"(Top Hat, directed_by, Mark Sandrich)": None},
                          {"Mark Sandrich": "node"})
    assert update.selected == [None] and update.answers == ["node"] and update.dropped == ["(made, up, triple)"]


def test_search_stops_one_round_after_the_first_answer(demo_kg, scorer):
    def script(step, prompt, options):
        head, relation, tail = TRIPLE.match(shown_triples(prompt)[0]).groups()
        return {"selected_triplets": [shown_triples(prompt)[0]], "predict_answer": [tail if head == "Top Hat" else head],
                "subsequent_question": ["Anything else?"]}

    answering = ScriptedLLM(script)
    result = fog(demo_kg, scorer, answering, rounds=4, answer_from="model").answer(QUESTION, ["Top Hat"])
    assert [c.step for c in answering.calls] == ["memory_update", "memory_update"]
    assert result.answers and all(demo_kg.has_node(a.id) for a in result.answers)
    first, second = [json.loads(c.output)["predict_answer"][0] for c in answering.calls]
    assert [a.name for a in result.answers][:2] == list(dict.fromkeys([first, second]))  # the first answer leads

    silent = ScriptedLLM({"memory_update": [{"selected_triplets": [], "predict_answer": [],
                                             "subsequent_question": ["What else?"]}] * 4})
    fog(demo_kg, scorer, silent, rounds=3).answer(QUESTION, ["Top Hat"])
    assert len([c for c in silent.calls if c.step == "memory_update"]) == 3


def test_defaults_cost_at_most_two_model_calls(demo_kg, scorer):
    silent = ScriptedLLM({"memory_update": [{"selected_triplets": [], "predict_answer": [],
                                             "subsequent_question": ["What else?"]}] * 3})
    reasoner = FoGReasoner(Context(demo_kg, llm_factory=lambda: silent, scorer_factory=lambda: scorer))
    result = reasoner.answer(QUESTION, ["Top Hat"])
    assert [c.step for c in silent.calls] == ["decompose", "memory_update"]  # R = 1: decomposition + one round
    assert result.answers


def test_graph_answers_lead_unless_the_model_is_asked_to(demo_kg, scorer):
    """The 270M model's predicted answer is worse than the scorer's best triple (docs/reasoners.md):
    by default it is noted, not used; ``answer_from=model`` restores the paper's rule."""
    class DirectorFirst(FixedScores):
        def refined(self, questions, triples, levels):
            return np.array([0.95 if t.relation == "directed_by" else 0.8 if t.relation == "written_by" else 0.6
                             for t in triples])

    def run(**settings):
        llm = ScriptedLLM({"memory_update": [{"selected_triplets": [], "predict_answer": ["Allan Scott"],
                                              "subsequent_question": ["Who else?"]}]})
        reasoner = fog(demo_kg, scorer, llm, rounds=1, llm_triples=30, **settings)
        reasoner.triple_scorer = lambda question, topics, chains: DirectorFirst()
        return reasoner.answer(QUESTION, ["Top Hat"])

    graph = run()
    assert graph.answers[0].name == "Mark Sandrich"
    assert any("(the model predicted ['Allan Scott'])" in n for n in graph.notes)
    assert [a.name for a in run(answer_from="model").answers] == ["Allan Scott"]
    with pytest.raises(SettingsError, match="fog setting answer_from: expected one of graph, model"):
        fog(demo_kg, scorer, ScriptedLLM(), answer_from="llm")


def test_fallback_without_checkpoint_and_trained_scorer_with_one(demo_kg, scorer, tmp_path):
    llm = ScriptedLLM()
    missing = fog(demo_kg, scorer, llm, rounds=1, checkpoint=str(tmp_path / "none.pt"))
    with pytest.raises(CheckpointError):
        missing.answer(QUESTION, ["Top Hat"])
    default = fog(demo_kg, scorer, llm, rounds=1).answer(QUESTION, ["Top Hat"])
    assert any("no trained scorer" in n for n in default.notes)
    torch.manual_seed(0)
    path = save_checkpoint(tmp_path / "scorer.pt", ForesightScorer(ScorerConfig(encoder_dim=scorer.embedder.dim,
                                                                                hidden=32)),
                           scorer.embedder.model_name, {"trained_on": "nothing (test)"})
    trained = fog(demo_kg, scorer, llm, rounds=1, checkpoint=str(path), tau_p=0.0).answer(QUESTION, ["Top Hat"])
    assert any(n.startswith("scores: trained scorer") for n in trained.notes)
    assert trained.answers


def test_inference_reads_no_gold_field(demo_kg, scorer, monkeypatch):
    """The supervision module (gold paths, gold answers) is never imported or called at inference."""
    code = ("import sys, localkg.reasoners.fog, localkg.fog.scoring, localkg.fog.checkpoint; "
            "print('localkg.fog.supervision' in sys.modules)")
    imported = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert imported.stdout.split() == ["False"]
    monkeypatch.setitem(sys.modules, "localkg.fog.supervision", None)   # any import now fails
    from localkg.datasets import Question

    for name in ("answers", "meta", "qtype", "hop"):
        monkeypatch.setattr(Question, name, property(lambda self: pytest.fail("gold field read")),
                            raising=False)
    result = fog(demo_kg, scorer, ScriptedLLM(), rounds=1).answer(QUESTION, ["Top Hat"])
    assert result.answers


@pytest.mark.model
def test_real_model_end_to_end(demo_kg, scorer, llm):
    reasoner = FoGReasoner(Context(demo_kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer),
                           hops=2, llm_triples=8, rounds=2)
    mark = len(llm.calls)
    result = reasoner.answer(QUESTION, ["Top Hat"])
    steps = [c.step for c in llm.calls[mark:]]
    assert 1 <= len(steps) <= 3 and set(steps) <= {"decompose", "memory_update"}
    assert result.answers and all(demo_kg.has_node(a.id) for a in result.answers)
    assert all(path.start.id == "Top Hat" for path in result.evidence)
