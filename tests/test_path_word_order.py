"""A path is said from the topic outwards: the word nearest the topic's name names the first hop
(real Kùzu, real MiniLM, the hand-built movie graph; ``localkg.path_scorer.features``)."""
from __future__ import annotations

import numpy as np
import pytest

from localkg.path_scorer.features import RelationVectors, mention_distances, question_stems, question_text
from localkg.store.model import IN, OUT

ACTORS_OF_THE_DIRECTORS_FILMS = (("directed_by", OUT), ("directed_by", IN), ("starred_actors", OUT))
DIRECTORS_OF_THE_ACTORS_FILMS = (("starred_actors", OUT), ("starred_actors", IN), ("directed_by", OUT))


def test_distances_count_content_words_from_the_nearest_mention() -> None:
    question = "who acted in the films directed by the director of Top Hat"
    assert question_text(question, ["Top Hat"]) == "who acted in the films directed by the director of"
    # content words: acted, directed, director ("films" is a function word here), then the topic
    assert mention_distances(question, ["Top Hat"]).tolist() == [3, 2, 1]
    # a possessive's "s" stands where the topic does: "wife" is as near as "nation"
    assert mention_distances("the nation of Top Hat's wife", ["Top Hat"]).tolist() == [1, 0, 1]
    assert mention_distances("who directed it", ["Top Hat"]) is None
    # two topics: the words between them belong to different legs
    assert mention_distances("which film of Giant starred James Dean", ["Giant", "James Dean"]) is None


def test_the_path_said_from_the_topic_outwards_is_preferred(path_movies, scorer) -> None:
    vectors = RelationVectors(path_movies, scorer.embedder)
    vectors.indices(["directed_by", "starred_actors"])
    # each relation is placed at the word that means it most, a word saying its label's stem at
    # least as much as the label's own word ("actors" for starred_actors)
    question = "who are the actors in the films directed by the director of Top Hat"
    text = question_text(question, ["Top Hat"])
    words, distances = vectors.word_vectors(text), mention_distances(question, ["Top Hat"])
    assert vectors.order(ACTORS_OF_THE_DIRECTORS_FILMS, words, question_stems(text), distances) == 1.0
    assert vectors.order(DIRECTORS_OF_THE_ACTORS_FILMS, words, question_stems(text), distances) == -1.0
    reversed_question = "who directed the films starring the actors of Top Hat"
    text = question_text(reversed_question, ["Top Hat"])
    words, distances = vectors.word_vectors(text), mention_distances(reversed_question, ["Top Hat"])
    assert vectors.order(DIRECTORS_OF_THE_ACTORS_FILMS, words, question_stems(text), distances) == 1.0
    # the word match, which both paths' labels meet alike, now tells them apart
    stems = question_stems(text)
    assert vectors.word_match(DIRECTORS_OF_THE_ACTORS_FILMS, words, stems, distances) == pytest.approx(
        vectors.word_match(ACTORS_OF_THE_DIRECTORS_FILMS, words, stems, distances) + 0.2, abs=1e-6)


def test_one_relation_or_no_mention_has_no_order(path_movies, scorer) -> None:
    vectors = RelationVectors(path_movies, scorer.embedder)
    vectors.indices(["directed_by"])
    words = vectors.word_vectors("who directed")
    there_and_back = (("directed_by", OUT), ("directed_by", IN))
    assert vectors.order(there_and_back, words, ("direct",), np.array([1.0], dtype=np.float32)) == 0.0
    assert vectors.order(ACTORS_OF_THE_DIRECTORS_FILMS, words, ("direct",), None) == 0.0
