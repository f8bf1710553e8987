"""The ``learned-paths`` reasoner end to end: the tiny scorer trained in the test run
(conftest ``trained_paths``), the real store, MiniLM and, for the close call, the bundled GGUF."""
from __future__ import annotations

import pytest

from localkg.errors import CheckpointError
from localkg.reasoners.base import Context, get_reasoner


def reasoner(kg, scorer, checkpoint, llm=None, **settings):
    context = Context(kg, scorer_factory=lambda: scorer, llm_factory=(lambda: llm) if llm else None)
    return get_reasoner("learned-paths")(context, checkpoint=str(checkpoint), **settings)


def test_answers_with_the_best_path_and_its_evidence_without_the_llm(path_movies, scorer, trained_paths):
    checkpoint, _report = trained_paths
    result = reasoner(path_movies, scorer, checkpoint, margin=0.0).answer("who directed Vertigo", ["Vertigo"])
    assert result.reasoner == "learned-paths"
    assert [a.id for a in result.answers] == ["Alfred Hitchcock"]
    assert [str(p) for p in result.evidence] == ["Vertigo —directed_by→ Alfred Hitchcock"]
    assert result.llm_calls == []
    assert any(note.startswith("relation path Vertigo: directed_by") for note in result.notes)

    two_hops = reasoner(path_movies, scorer, checkpoint, margin=0.0).answer(
        "who directed the films Kim Novak acted in", ["Kim Novak"])
    assert [a.id for a in two_hops.answers] == ["Alfred Hitchcock"]
    assert [p.relations for p in two_hops.evidence] == [("starred_actors⁻¹", "directed_by")]


@pytest.mark.model
def test_a_close_call_costs_one_grammar_constrained_choice(path_movies, scorer, trained_paths, llm):
    checkpoint, _report = trained_paths
    # margin 1: every question is a close call between the top paths
    result = reasoner(path_movies, scorer, checkpoint, llm, margin=1.0).answer("who acted in Vertigo", ["Vertigo"])
    assert len(result.llm_calls) == 1
    call = result.llm_calls[0]
    assert call["step"] == "choose path" and "Vertigo" in call["prompt"]
    assert result.answers and len(result.evidence) >= len(result.answers)
    ends = {p.end.id for p in result.evidence}
    assert all(a.id in ends for a in result.answers)  # every answer carries its evidence path
    assert any("close call" in note for note in result.notes)


def test_without_a_checkpoint_the_error_says_how_to_train_one(path_movies, scorer, tmp_path):
    with pytest.raises(CheckpointError, match="localkg train paths"):
        reasoner(path_movies, scorer, tmp_path / "missing.pt").answer("who directed Vertigo", ["Vertigo"])
