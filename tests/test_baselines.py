"""The baselines: embed-path on a real store with the real MiniLM scorer; io and cot with a
scripted model (how they parse what a model says) and once with the real bundled model."""
from __future__ import annotations


import pytest

from localkg.llm import ScriptedLLM
from localkg.reasoners import Context, get_reasoner
from localkg.reasoners.common import split_answers
from localkg.reasoners.relation_paths import rank_relation_paths
from localkg.reasoners.relation_ranking import RelationRanking
from localkg.text import readable_relation
from localkg.store import KG

MOVIES = [
    ("Top Hat", "directed_by", "Mark Sandrich"),
    ("Top Hat", "starred_actors", "Fred Astaire"),
    ("Top Hat", "starred_actors", "Ginger Rogers"),
    ("Top Hat", "in_language", "English"),
    ("Top Hat", "release_year", "1935"),
    ("Swing Time", "directed_by", "George Stevens"),
    ("Swing Time", "starred_actors", "Fred Astaire"),
    ("Swing Time", "in_language", "English"),
    ("Roberta", "starred_actors", "Fred Astaire"),
    ("Roberta", "in_language", "French"),
    ("Roberta", "directed_by", "William A. Seiter"),
    ("Roberta", "release_year", "1935"),
]


@pytest.fixture(scope="module")
def movies_kg(tmp_path_factory: pytest.TempPathFactory):
    kg = KG.create(tmp_path_factory.mktemp("movies") / "db")
    kg.add_triples(MOVIES)
    yield kg
    kg.close()


def test_split_answers() -> None:
    assert split_answers(" German | French|  Italian.\nQuestion: next") == ["German", "French", "Italian"]
    assert split_answers('"Paris" | Paris | ') == ["Paris"]
    assert split_answers("") == []


def test_readable_relation() -> None:
    assert readable_relation("film.film.directed_by") == "film directed by"
    assert readable_relation("__film__cinematographer__film") == "film cinematographer film"
    assert readable_relation("plays_in_club_inverse") == "plays in club inverse"


def test_rank_relation_paths_one_hop(movies_kg: KG, scorer) -> None:
    ranking = RelationRanking(Context(movies_kg, scorer_factory=lambda: scorer), "embed")
    paths = rank_relation_paths(movies_kg, ranking, "who directed Top Hat", "Top Hat")
    best = paths[0]
    assert best.steps == (("directed_by", "out"),)
    assert [n.id for n in best.tails] == ["Mark Sandrich"]
    assert str(best.examples[0]) == "Top Hat —directed_by→ Mark Sandrich"
    assert [p.score for p in paths] == sorted((p.score for p in paths), reverse=True)


def test_embed_path_two_hops_ranks_most_reached_first(movies_kg: KG, scorer) -> None:
    reasoner = get_reasoner("embed-path")(Context(movies_kg, scorer_factory=lambda: scorer))
    result = reasoner.answer("which languages are the films starring Fred Astaire in", ["Fred Astaire"])
    assert [a.name for a in result.answers] == ["English", "French"]   # English reached by two films
    assert any("starred_actors⁻¹ / in_language" in note for note in result.notes)
    assert all(len(path) == 2 and path.start.id == "Fred Astaire" for path in result.evidence)
    assert result.llm_calls == [] and result.kg_queries


def test_embed_path_intersects_several_topics(movies_kg: KG, scorer) -> None:
    reasoner = get_reasoner("embed-path")(Context(movies_kg, scorer_factory=lambda: scorer), max_depth=1)
    result = reasoner.answer("which film released in 1935 starred Fred Astaire", ["Fred Astaire", "1935"])
    assert {a.name for a in result.answers} == {"Top Hat", "Roberta"}


def test_io_parses_the_models_answer(movies_kg: KG) -> None:
    llm = ScriptedLLM({"answer": ["Paris | Lyon\nQuestion: more"]})
    reasoner = get_reasoner("io")(Context(movies_kg, llm_factory=lambda: llm), max_tokens=8)
    result = reasoner.answer("What is the capital of France?", ["Top Hat"])
    assert [(a.id, a.name) for a in result.answers] == [("", "Paris"), ("", "Lyon")]
    assert [call["step"] for call in result.llm_calls] == ["answer"]
    assert result.llm_calls[0]["prompt"].endswith("Question: What is the capital of France?\nAnswer:")
    assert result.kg_queries == []                       # the LLM alone: no graph query


def test_cot_reasons_then_answers(movies_kg: KG) -> None:
    llm = ScriptedLLM({"reason": ["Top Hat was directed by Mark Sandrich."], "answer": ["Mark Sandrich"]})
    reasoner = get_reasoner("cot")(Context(movies_kg, llm_factory=lambda: llm))
    result = reasoner.answer("who directed Top Hat", ["Top Hat"])
    assert [a.name for a in result.answers] == ["Mark Sandrich"]
    assert [call["step"] for call in result.llm_calls] == ["reason", "answer"]
    assert "Reasoning: Top Hat was directed by Mark Sandrich.\nAnswer:" in result.llm_calls[1]["prompt"]
    assert result.notes[0] == "reasoning: Top Hat was directed by Mark Sandrich."


def test_a_model_that_says_nothing_gives_no_answer(movies_kg: KG) -> None:
    reasoner = get_reasoner("io")(Context(movies_kg, llm_factory=lambda: ScriptedLLM({})))
    result = reasoner.answer("What is the capital of France?", ["Top Hat"])
    assert result.answers == [] and any(n.startswith("no answer found") for n in result.notes)


@pytest.mark.model
def test_io_with_the_real_model(movies_kg: KG, llm) -> None:
    reasoner = get_reasoner("io")(Context(movies_kg, llm_factory=lambda: llm), max_tokens=8)
    result = reasoner.answer("What is the capital of Italy?", ["Top Hat"])
    assert len(result.llm_calls) == 1
    call = result.llm_calls[0]
    assert call["step"] == "answer" and 0 < call["completion_tokens"] <= 8
    assert call["prompt"].endswith("Question: What is the capital of Italy?\nAnswer:")
    assert all(a.id == "" and a.name and "\n" not in a.name for a in result.answers)

