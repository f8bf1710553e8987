"""The reasoner interface every method shares: the registry, settings from ``--set``, and the
promise that no reasoner raises for an unknown entity, an empty graph or a model that says nothing
useful (the result then says why it has no answer)."""
from __future__ import annotations

import typing

import pytest

from localkg.errors import ModelNotFoundError, PromptTooLongError, SettingsError, UnknownReasonerError
from localkg.llm import LLM, ScriptedLLM
from localkg.reasoners.base import REASONERS, Context, Result, get_reasoner
from localkg.reasoners.settings import declared_ranges, parse_settings
from localkg.store import KG

EXPECTED = {"io", "cot", "embed-path", "tog", "bpc", "paths", "plan", "ppoga", "fog", "dtkg"}
QUESTION = "who directed [Top Hat]"


def build(name: str, kg: KG, scorer, llm: ScriptedLLM, **settings):
    context = Context(kg, llm_factory=lambda: llm, scorer_factory=lambda: scorer)
    return get_reasoner(name)(context, **settings)


def test_every_reasoner_is_found_by_its_name_in_its_module():
    assert EXPECTED <= set(REASONERS)
    for name, module in REASONERS.items():
        cls = get_reasoner(name)
        assert cls.name == name and cls.__module__ == module


def test_an_unknown_reasoner_names_the_available_ones():
    with pytest.raises(UnknownReasonerError, match="available: .*tog"):
        get_reasoner("think-harder")


def test_settings_from_the_command_line_take_the_type_of_the_field(demo_kg, scorer):
    reasoner = build("tog", demo_kg, scorer, ScriptedLLM(), width="5", temperature="0.1",
                     skip_reverse="no", prune="llm")
    assert reasoner.settings.width == 5 and reasoner.settings.temperature == 0.1
    assert reasoner.settings.skip_reverse is False and reasoner.settings.prune == "llm"
    assert get_reasoner("tog").Settings().width == 3  # overrides never leak into the defaults


def test_settings_from_python_keep_their_values(demo_kg, scorer):
    reasoner = build("tog", demo_kg, scorer, ScriptedLLM(), width=4, temperature=1, skip_reverse=True)
    assert (reasoner.settings.width, reasoner.settings.temperature, reasoner.settings.skip_reverse) == (4, 1.0, True)
    assert isinstance(reasoner.settings.temperature, float)


@pytest.mark.parametrize("settings, message", [
    ({"widht": "5"}, "tog has no setting widht; settings: .*width"),
    ({"width": "three"}, "tog setting width: expected a whole number, got 'three'"),
    ({"width": 2.5}, "tog setting width: expected a whole number, got 2.5"),
    ({"width": True}, "tog setting width: expected a whole number"),
    ({"temperature": "warm"}, "tog setting temperature: expected a number, got 'warm'"),
    ({"skip_reverse": "ture"}, "tog setting skip_reverse: expected true or false, got 'ture'"),
    ({"prune": "magic"}, "tog setting prune: expected one of embed, llm, hybrid, got 'magic'"),
    ({"relation_filter": 3}, "tog setting relation_filter: expected str, got 3"),
])
def test_bad_settings_are_refused_with_a_clear_error(demo_kg, scorer, settings, message):
    with pytest.raises(SettingsError, match=message):
        build("tog", demo_kg, scorer, ScriptedLLM(), **settings)


@pytest.mark.parametrize("name", sorted(REASONERS))
def test_every_numeric_setting_declares_its_range_and_its_default_is_in_it(name):
    schema = get_reasoner(name).Settings
    types = typing.get_type_hints(schema)
    numeric = {key for key, kind in types.items() if kind in (int, float)}
    assert not numeric - set(declared_ranges(schema)), f"{name}: settings without a range"
    parse_settings(name, schema, {})  # the defaults are inside their ranges


@pytest.mark.parametrize("name, settings, message", [
    ("embed-path", {"beam": "-5"}, "embed-path setting beam: expected a whole number at least 1, got -5"),
    ("embed-path", {"beam": 0}, "embed-path setting beam: expected a whole number at least 1, got 0"),
    ("embed-path", {"max_answers": "0"}, "embed-path setting max_answers: expected a whole number at least 1, got 0"),
    ("tog", {"depth": "-3"}, "tog setting depth: expected a whole number at least 1, got -3"),
    ("tog", {"temperature": "0"}, "tog setting temperature: expected a number above 0, got 0.0"),
    ("tog", {"temperature": "nan"}, "tog setting temperature: expected a number, got 'nan'"),
    ("dtkg", {"alpha": 1.5}, "dtkg setting alpha: expected a number from 0 to 1, got 1.5"),
    ("bpc", {"K": "-2"}, "bpc setting K: expected a whole number at least -1, got -2"),
    ("ppoga", {"min_steps": "7"}, r"ppoga setting min_steps: expected a whole number from 1 to max_steps \(5\), got 7"),
])
def test_a_setting_outside_its_range_is_refused_with_what_is_allowed(name, settings, message, demo_kg, scorer):
    with pytest.raises(SettingsError, match=f"^{message}$"):
        build(name, demo_kg, scorer, ScriptedLLM(), **settings)


def test_a_bound_naming_another_setting_reads_that_settings_value(demo_kg, scorer):
    reasoner = build("ppoga", demo_kg, scorer, ScriptedLLM(), min_steps=7, max_steps=8)
    assert (reasoner.settings.min_steps, reasoner.settings.max_steps) == (7, 8)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_reasoner_refuses_an_unknown_setting(name, demo_kg, scorer):
    with pytest.raises(SettingsError, match=f"{name} has no setting nonsense"):
        build(name, demo_kg, scorer, ScriptedLLM(), nonsense="1")


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_unknown_entity_gives_no_answer_with_the_reason(name, demo_kg, scorer):
    result = build(name, demo_kg, scorer, ScriptedLLM()).answer(QUESTION, ["No Such Film"])
    assert isinstance(result, Result)
    if name in ("io", "cot"):  # the model alone: answers without the graph
        return
    assert result.answers == []
    assert any(note.startswith("no answer found") for note in result.notes)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_empty_graph_gives_no_answer_with_the_reason(name, tmp_path, scorer):
    kg = KG.create(tmp_path / "empty")
    try:
        result = build(name, kg, scorer, ScriptedLLM()).answer(QUESTION, ["Top Hat"])
    finally:
        kg.close()
    if name not in ("io", "cot"):
        assert result.answers == []
        assert any(note.startswith("no answer found") for note in result.notes)


@pytest.mark.parametrize("name", sorted(name for name in EXPECTED if get_reasoner(name).uses_llm))
def test_a_model_that_cannot_be_loaded_stops_the_question(name, demo_kg, scorer, tmp_path):
    """Only a prompt too long for the context is a call a reasoner may skip; a model file that is
    no model must not become a run of "no LLM calls" that looks like an answer."""
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"not a model")
    context = Context(demo_kg, llm_factory=lambda: LLM(model_path=garbage), scorer_factory=lambda: scorer)
    with pytest.raises(ModelNotFoundError, match="is not a GGUF model file"):
        get_reasoner(name)(context).answer(QUESTION, ["Top Hat"])


def too_long(step: str, prompt: str, options: list[str] | None):
    raise PromptTooLongError(f"step {step!r}: the prompt does not fit the context")


@pytest.mark.parametrize("name", sorted(name for name in EXPECTED if get_reasoner(name).uses_graph))
def test_calls_whose_prompts_do_not_fit_are_skipped_and_each_is_noted(name, demo_kg, scorer):
    result = build(name, demo_kg, scorer, ScriptedLLM(too_long)).answer(QUESTION, ["Top Hat"])
    assert result.llm_calls == []
    if get_reasoner(name).uses_llm:
        assert result.skipped_llm_calls and all("does not fit the context" in n for n in result.skipped_llm_calls)


def useless_model(step: str, prompt: str, options: list[str] | None):
    """A model with nothing useful to say: JSON objects without any expected key, blank text, "no"
    to every yes/no question, and no preference among options (the grammars rule out unparseable
    picks and scores, so "useless" is the worst a real model can return)."""
    if options is not None:
        return None
    if prompt.endswith("Reply with JSON only.\nAnswer:"):
        return {"unexpected": "shape"}
    if prompt.endswith("Reply yes or no.\nAnswer:"):
        return False
    return "   "


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_unusable_model_outputs_never_raise_and_the_trace_is_complete(name, demo_kg, scorer):
    llm = ScriptedLLM(useless_model)
    result = build(name, demo_kg, scorer, llm).answer(QUESTION, ["Top Hat"])
    assert result.topic_entities == ["Top Hat"]
    assert len(result.llm_calls) == len(llm.calls)  # every call this question made is in its trace
    assert result.answered or any(note.startswith("no answer found") for note in result.notes)
    shape = result.to_json()
    assert {"question", "answers", "evidence", "llm_calls", "prompt_tokens", "completion_tokens",
            "seconds", "trace"} <= set(shape)
    assert shape["llm_calls"] == len(shape["trace"]["llm"])
    if get_reasoner(name).uses_llm is False:
        assert result.llm_calls == []
