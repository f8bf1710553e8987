"""The label match's coverage gives each hop a question word of its own, counts a word that
says a label's stem (a compound such as "screenwriter" says "written by") as the label's own
word would be, and asks one topic's leg of a question with several to say only its own hops. Real Kùzu, real MiniLM; ``localkg.path_scorer.features``."""
from __future__ import annotations

import pytest

from localkg.path_scorer.features import RelationVectors, mention_distances, question_stems, question_text
from localkg.path_scorer.model import DEPTH_PENALTY
from localkg.store.model import IN, OUT

FILMS_OF = (("starred_actors", IN),)
THEIR_DIRECTORS = (("starred_actors", IN), ("directed_by", OUT))
THEIR_WRITERS = (("starred_actors", IN), ("written_by", OUT))


@pytest.fixture(scope="module")
def writers_kg(tmp_path_factory: pytest.TempPathFactory):
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    folder = tmp_path_factory.mktemp("writers")
    facts = folder / "facts.tsv"
    facts.write_text("Nightfall\tstarred_actors\tAnna Berg\nNightfall\twritten_by\tOle Dahl\n"
                     "Nightfall\tdirected_by\tKai Lund\n", encoding="utf-8")
    kg = KG.create(folder / "db")
    load_triples(kg, [facts], progress=False)
    yield kg
    kg.close()


def match(vectors: RelationVectors, question: str, path, leg: bool = False) -> float:
    return vectors.word_match(path, vectors.word_vectors(question), question_stems(question), leg=leg)


def test_a_hop_without_a_word_of_its_own_covers_nothing(writers_kg, scorer) -> None:
    """One content word ("described", which MiniLM puts nearer "directed by" than "starred
    actors") cannot be said by two hops: the hop that takes it is half of what the two-hop path
    covers, so the one hop wins once the depth penalty is paid (before, the second hop's better
    cosine raised the path's coverage by 0.09 and won)."""
    vectors = RelationVectors(writers_kg, scorer.embedder)
    vectors.indices(["starred_actors", "directed_by", "written_by"])
    question = "what can be described by her"
    assert match(vectors, question, FILMS_OF) > match(vectors, question, THEIR_DIRECTORS) - DEPTH_PENALTY


def test_a_compound_word_says_the_label_it_contains(writers_kg, scorer) -> None:
    vectors = RelationVectors(writers_kg, scorer.embedder)
    vectors.indices(["starred_actors", "directed_by", "written_by"])
    question = "who is the screenwriter of the movies she starred in"
    assert match(vectors, question, THEIR_WRITERS) > match(vectors, question, FILMS_OF)
    assert match(vectors, question, THEIR_WRITERS) > match(vectors, question, THEIR_DIRECTORS)
    # a short stem is said only by the same stem: "act" is no word of "character"
    assert vectors.said("starred_actors", question_stems("which character")) == 0.0
    assert vectors.said("written_by", question_stems("the screenwriter")) == 1.0


def test_a_leg_is_not_asked_to_say_the_other_legs_words(writers_kg, scorer) -> None:
    """In a question with two topics ("which films starring Anna Berg were written by Ole Dahl"),
    Anna Berg's leg is her films: the writer is Ole Dahl's leg's to say. Scored as the whole
    question, her leg would take the written_by hop too and end at writers, not films."""
    vectors = RelationVectors(writers_kg, scorer.embedder)
    vectors.indices(["starred_actors", "directed_by", "written_by"])
    question = "which films starring were written by"
    assert match(vectors, question, THEIR_WRITERS) > match(vectors, question, FILMS_OF) + DEPTH_PENALTY
    assert match(vectors, question, FILMS_OF, leg=True) > \
        match(vectors, question, THEIR_WRITERS, leg=True) - DEPTH_PENALTY


def test_stems_must_be_the_embedded_words(writers_kg, scorer) -> None:
    vectors = RelationVectors(writers_kg, scorer.embedder)
    vectors.indices(["written_by"])
    with pytest.raises(ValueError, match="question_stems"):
        vectors.word_match((("written_by", OUT),), vectors.word_vectors("who wrote it"), ())


def test_a_stem_said_twice_asks_for_two_hops(path_movies, scorer) -> None:
    """"the director of Top Hat also directed which films" says "direct" twice: the one hop
    ``directed_by`` explains one of the words, the walk there and back both. And in "who acted in
    the films directed by the director of Top Hat" the stem of "acted" says starred_actors, so the
    order of the hops is read from it (MiniLM alone puts "director" nearer "starred actors")."""
    vectors = RelationVectors(path_movies, scorer.embedder)
    vectors.indices(["directed_by", "starred_actors"])
    question = "the director of also directed which films"
    there_and_back = (("directed_by", OUT), ("directed_by", IN))
    assert match(vectors, question, there_and_back) - DEPTH_PENALTY > match(vectors, question, (("directed_by", OUT),))
    question = "who acted in the films directed by the director of Top Hat"
    text = question_text(question, ["Top Hat"])
    words, distances = vectors.word_vectors(text), mention_distances(question, ["Top Hat"])
    actors_of_the_directors_films = (("directed_by", OUT), ("directed_by", IN), ("starred_actors", OUT))
    assert vectors.order(actors_of_the_directors_films, words, question_stems(text), distances) == 1.0
