"""ScriptedLLM: replays scripted outputs under the same contract as the real model, so reasoner
tests can say "if the model answers this, the reasoner must do that"."""
from __future__ import annotations

import pytest

from localkg.llm import LLMCall, ScriptedLLM

OPTIONS = ["directed_by", "starred_actors", "release_year"]


def test_queued_outputs_are_replayed_per_step_then_defaults():
    llm = ScriptedLLM({"pick": [[2, 0], ["starred_actors"]], "check": [True, 0.25], "fill": [{"a": 1}],
                       "say": ["hello"]})
    assert llm.choose("Q", OPTIONS, step="pick", k=2) == [2, 0]
    assert llm.choose("Q", OPTIONS, step="pick") == [1]
    assert llm.choose("Q", OPTIONS, step="pick") == [0]  # queue empty
    assert llm.yes_no("Q", step="check") == (True, 1.0)
    assert llm.yes_no("Q", step="check") == (False, 0.25)
    assert llm.yes_no("Q", step="check") == (False, 0.0)
    assert llm.json("Q", {"type": "object"}, step="fill") == {"a": 1}
    assert llm.json("Q", {"type": "object"}, step="fill") == {}
    assert llm.generate("Q", step="say") == "hello"
    assert llm.generate("Q", step="say") == ""
    assert llm.remaining("pick") == 0


def test_choices_keep_the_real_contract():
    llm = ScriptedLLM({"pick": [[1, 1, 2, 0], [], []]})
    assert llm.choose("Q", OPTIONS, step="pick", k=2) == [1, 2]  # distinct, at most k
    assert llm.choose("Q", OPTIONS, step="pick", allow_none=True) == []
    with pytest.raises(ValueError):
        llm.choose("Q", OPTIONS, step="pick")  # "none" without allow_none
    with pytest.raises(ValueError):
        ScriptedLLM({"pick": [[5]]}).choose("Q", OPTIONS, step="pick")
    with pytest.raises(ValueError):
        ScriptedLLM({"pick": ["not an option"]}).choose("Q", OPTIONS, step="pick")
    assert llm.choose("Q", [], step="pick") == []


def test_scores_are_probabilities():
    llm = ScriptedLLM({"score": [[2, 1, 1], "release_year"]})
    assert llm.score_options("Q", OPTIONS, step="score") == [0.5, 0.25, 0.25]
    assert llm.score_options("Q", OPTIONS, step="score") == [0.0, 0.0, 1.0]
    assert llm.score_options("Q", OPTIONS, step="score") == pytest.approx([1 / 3] * 3)
    with pytest.raises(ValueError):
        ScriptedLLM({"score": [[1, 2]]}).score_options("Q", OPTIONS, step="score")


def test_callable_script_sees_step_prompt_and_options():
    seen = []

    def script(step: str, prompt: str, options: list[str] | None):
        seen.append((step, options))
        return options.index("directed_by") if options else None

    llm = ScriptedLLM(script)
    assert llm.choose("Who directed Top Hat?", OPTIONS, step="relations") == [0]
    assert llm.yes_no("Enough?", step="stop") == (False, 0.0)  # None means "use the default"
    assert seen == [("relations", OPTIONS), ("stop", None)]
    assert "1. directed_by" in llm.calls[0].prompt and "Who directed Top Hat?" in llm.calls[0].prompt


def test_every_call_is_recorded():
    llm = ScriptedLLM({"say": ["one two, three"]})
    llm.generate("a b c", step="say", stop=[","])
    llm.choose("Q", OPTIONS, step="pick")
    assert [call.step for call in llm.calls] == ["say", "pick"]
    call = llm.calls[0]
    assert isinstance(call, LLMCall) and call.output == "one two"
    assert (call.prompt_tokens, call.completion_tokens) == (3, 2)
    assert call.to_json().keys() == {"step", "prompt", "output", "prompt_tokens", "completion_tokens", "seconds",
                                      "cached"}
    assert llm.calls[1].output == "1"


def test_fit_options_drops_the_lowest_ranked():
    llm = ScriptedLLM(n_ctx=40)
    options = [f"option number {i} with words" for i in range(20)]
    render = lambda some: llm.choice_prompt("Which?", some)  # noqa: E731
    kept = llm.fit_options(render, options, reserve=8)
    assert kept == options[:len(kept)] and 0 < len(kept) < 20
    assert llm.count_tokens(render(kept)) <= 32 < llm.count_tokens(render(options[:len(kept) + 1]))
    # choose shows the model only what fits, and indices refer to the caller's list
    picks = ScriptedLLM({"pick": [[0]]}, n_ctx=40).choose("Which?", options, step="pick")
    assert picks == [0]
