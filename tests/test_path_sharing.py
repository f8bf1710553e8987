"""A relation walked there and back ("the films that share Top Hat's director") says its label
once, so its label match is the one hop's less the depth penalty, unless the question says the
sharing too, where the label match ranks alone (``sharing=True``). Real Kùzu, real MiniLM, the
hand-built movie graph; ``localkg.path_scorer.features``."""
from __future__ import annotations

from localkg.path_scorer.features import RelationVectors, mention_distances, question_stems, question_text
from localkg.path_scorer.model import DEPTH_PENALTY
from localkg.store.model import IN, OUT

DIRECTOR = (("directed_by", OUT),)
SAME_DIRECTOR = (("directed_by", OUT), ("directed_by", IN))


def word_match(vectors: RelationVectors, question: str, path) -> float:
    text = question_text(question, ["Top Hat"])
    return vectors.word_match(path, vectors.word_vectors(text), question_stems(text),
                              mention_distances(question, ["Top Hat"]), sharing=True)


def test_a_question_that_says_the_sharing_prefers_the_walk_there_and_back(path_movies, scorer) -> None:
    vectors = RelationVectors(path_movies, scorer.embedder)
    vectors.indices(["directed_by", "starred_actors"])
    for question in ("which films share the same director as Top Hat",
                     "what other movies have the same director as Top Hat"):
        gain = word_match(vectors, question, SAME_DIRECTOR) - word_match(vectors, question, DIRECTOR)
        assert gain > DEPTH_PENALTY, question


def test_a_question_that_does_not_say_it_keeps_the_one_hop(path_movies, scorer) -> None:
    vectors = RelationVectors(path_movies, scorer.embedder)
    vectors.indices(["directed_by", "starred_actors"])
    for question in ("who directed Top Hat", "who is the director of Top Hat"):
        gain = word_match(vectors, question, SAME_DIRECTOR) - word_match(vectors, question, DIRECTOR)
        assert gain < DEPTH_PENALTY, question


def test_training_features_keep_the_plain_word_match(path_movies, scorer) -> None:
    """Without ``sharing`` (what training and a familiar question use) the walk there and back
    matches as the one hop does: the learned part is fitted beside the plain match."""
    vectors = RelationVectors(path_movies, scorer.embedder)
    vectors.indices(["directed_by"])
    question = "which films share the same director as Top Hat"
    text = question_text(question, ["Top Hat"])
    words, stems = vectors.word_vectors(text), question_stems(text)
    assert vectors.word_match(SAME_DIRECTOR, words, stems) == vectors.word_match(DIRECTOR, words, stems)
