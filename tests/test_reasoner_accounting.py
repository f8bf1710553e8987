"""A reasoner's result counts only the LLM calls made for its own question."""
from __future__ import annotations

from pathlib import Path

from localkg.llm import ScriptedLLM
from localkg.reasoners.base import Answer, Context, Reasoner, Result
from localkg.store import KG


class OneCall(Reasoner):
    name = "one-call-test"

    def solve(self, question: str, topics: list[str], result: Result) -> None:
        self.llm.yes_no(f"Is {topics[0]} the answer to: {question}?", step="judge")
        result.answers.append(Answer(topics[0], topics[0]))


def test_a_shared_model_built_lazily_counts_only_this_questions_calls(tmp_path: Path) -> None:
    shared = ScriptedLLM({"judge": [True, True, True]})
    shared.yes_no("an earlier question", step="judge")  # calls made before this reasoner existed
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("a", "r", "b")])
        reasoner = OneCall(Context(kg, llm_factory=lambda: shared))
        first = reasoner.answer("q1?", ["a"])
        second = reasoner.answer("q2?", ["a"])
    assert [call["prompt"].startswith("Is a the answer to: q1??") for call in first.llm_calls] == [True]
    assert [call["prompt"].startswith("Is a the answer to: q2??") for call in second.llm_calls] == [True]
