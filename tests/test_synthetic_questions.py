"""Questions made from a store alone: every relation asked both ways, answers exactly what the
path reaches, two-topic questions where the store has them, opaque relation ids said by their
labels, and nothing read but the store."""
from __future__ import annotations

import builtins
import io
from pathlib import Path

import pytest

from localkg.path_scorer.supervision import walk_vote
from localkg.path_scorer.synthetic import SyntheticLimits, synthetic_walks
from localkg.store import KG
from localkg.store.model import IN, OUT

FILMS = [  # film, director, actors, year, language
    ("Vertigo", "Alfred Hitchcock", ("James Stewart", "Kim Novak"), "1958", "English"),
    ("Rear Window", "Alfred Hitchcock", ("James Stewart", "Grace Kelly"), "1954", "English"),
    ("The Birds", "Alfred Hitchcock", ("Tippi Hedren", "Rod Taylor"), "1963", "English"),
    ("Harvey", "Henry Koster", ("James Stewart", "Josephine Hull"), "1950", "English"),
    ("High Noon", "Fred Zinnemann", ("Gary Cooper", "Grace Kelly"), "1952", "English"),
    ("Breathless", "Jean-Luc Godard", ("Jean Seberg", "Jean-Paul Belmondo"), "1960", "French"),
    ("Alphaville", "Jean-Luc Godard", ("Eddie Constantine", "Anna Karina"), "1965", "French"),
    ("Pierrot le Fou", "Jean-Luc Godard", ("Jean-Paul Belmondo", "Anna Karina"), "1965", "French"),
]


def film_triples(directed: str, starred: str, year: str, language: str) -> list[tuple[str, str, str]]:
    triples = []
    for film, director, actors, released, spoken in FILMS:
        triples += [(film, directed, director), (film, year, released), (film, language, spoken)]
        triples += [(film, starred, actor) for actor in actors]
    return triples


@pytest.fixture(scope="module")
def films(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("films") / "db"
    with KG.open(db, create=True) as kg:
        kg.add_triples(film_triples("directed_by", "starred_actors", "release_year", "in_language"))
    return db


def reached(kg: KG, topic: str, path: list[list[str]]) -> set[str]:
    """What ``path`` reaches from ``topic``, computed hop by hop with plain neighbour queries."""
    frontier = {topic}
    for relation, direction in path:
        frontier = {node.id for node_id in frontier for node in kg.neighbors(node_id, relation, direction)}
    return frontier - {topic} or frontier


def test_every_relation_is_asked_in_both_directions_with_exact_answers(films: Path) -> None:
    with KG.open(films, read_only=True) as kg:
        made = synthetic_walks(kg, SyntheticLimits(max_hops=2, topics_per_relation=6, max_answers=10))
        questions = [question for question, *_walks in made]
        first_hops = {tuple(question.meta["path"][0]) for question in questions if len(question.topic_entities) == 1}
        relations = {relation for relation, *_ in kg.relation_catalogue()}
        assert first_hops == {(relation, direction) for relation in relations for direction in (OUT, IN)}
        assert {question.hop for question in questions} == {1, 2}
        for question in questions:
            assert question.text.strip() and question.answers and len(question.answers) <= 10
            answers = {answer[1] for answer in question.answers}
            if len(question.topic_entities) == 1:
                assert answers == reached(kg, question.topic_entities[0], question.meta["path"]), question
        for question, supervision, _avoiding in made:  # the path asked about is among the positives it trains
            if len(question.topic_entities) == 1:
                topic = supervision.topics[0]
                asked = tuple(tuple(hop) for hop in question.meta["path"])
                assert topic.labels[topic.paths.index(asked)] == max(topic.labels) == 1.0
            else:
                answers = {answer[1] for answer in question.answers}
                (first, first_hop), (second, second_hop) = zip(question.topic_entities, question.meta["path"])
                assert answers == reached(kg, first, [first_hop]) & reached(kg, second, [second_hop]), question


def test_the_others_sharing_the_topics_value_are_not_the_topic(films: Path) -> None:
    """"The years of the others with the same director as Vertigo" are Rear Window's and The Birds',
    not Vertigo's own 1958 unless another of them has it: what is asked of the others is not asked
    of the topic. The questions' own vote then has the store's walks leave the topic behind."""
    with KG.open(films, read_only=True) as kg:
        walks = synthetic_walks(kg, SyntheticLimits(max_hops=3, topics_per_relation=8, max_answers=10))
    shared = [(question, through, avoiding) for question, through, avoiding in walks
              if len(question.meta["path"]) == 3 and question.meta["path"][1] == [question.meta["path"][0][0], IN]]
    assert shared
    with KG.open(films, read_only=True) as kg:
        for question, _through, _avoiding in shared:
            topic = question.topic_entities[0]
            (first, second, third) = question.meta["path"]
            others = reached(kg, topic, [first, second]) - {topic}
            expected = {node.id for other in others for node in kg.neighbors(other, third[0], third[1])} - {topic}
            assert {answer[1] for answer in question.answers} == expected, question.text
    differing = [walk_vote(through, avoiding) for _question, through, avoiding in shared
                 if walk_vote(through, avoiding) is not None]
    assert differing and not any(differing)  # walking on from Vertigo finds these answers worse


def test_two_topic_questions_are_made_where_answers_share_facts(films: Path) -> None:
    with KG.open(films, read_only=True) as kg:
        made = synthetic_walks(kg, SyntheticLimits(max_hops=1, topics_per_relation=8, conjunctive_share=1.0))
    pairs = [question for question, *_walks in made if len(question.topic_entities) == 2]
    assert pairs
    for question in pairs:
        names = question.meta["topic_names"]
        assert all(name in question.text for name in names), question.text


def test_two_topic_questions_train_against_longer_legs(films: Path) -> None:
    """A two-topic question's candidates are every path up to ``max_hops`` from each topic, as a
    user's question's are, so a scorer learns that a longer leg reaching other things is wrong
    (trained on one-hop candidates alone, it ranked three-hop legs first on WC-C)."""
    with KG.open(films, read_only=True) as kg:
        made = synthetic_walks(kg, SyntheticLimits(max_hops=2, topics_per_relation=8, conjunctive_share=1.0))
    pairs = [(question, supervision) for question, supervision, _avoiding in made if len(question.topic_entities) == 2]
    assert pairs
    for question, supervision in pairs:
        for topic, asked in zip(supervision.topics, question.meta["path"]):
            lengths = {len(path) for path in topic.paths}
            assert lengths == {1, 2}, question.text
            assert topic.labels[topic.paths.index((tuple(asked),))] == max(topic.labels), question.text
            assert min(topic.labels[index] for index, path in enumerate(topic.paths) if len(path) == 2) < 1.0

def test_no_file_but_the_store_is_read(films: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    real_open, real_io_open = builtins.open, io.open

    def watched(file, *args, **kwargs):
        opened.append(str(file))
        return real_open(file, *args, **kwargs)

    with KG.open(films, read_only=True) as kg:
        monkeypatch.setattr(builtins, "open", watched)
        monkeypatch.setattr(io, "open", watched)
        made = synthetic_walks(kg, SyntheticLimits(max_hops=2, topics_per_relation=4))
        monkeypatch.setattr(builtins, "open", real_open)
        monkeypatch.setattr(io, "open", real_io_open)
    assert made
    assert all(Path(file).resolve().is_relative_to(films.resolve()) for file in opened if not file.isdigit()), opened


@pytest.mark.parametrize("style", ["freebase", "wikidata"])
def test_opaque_relation_ids_are_said_by_their_labels(tmp_path: Path, style: str) -> None:
    ids = {"freebase": ("film.film.directed_by", "film.film.starring", "film.film.release_year", "film.film.language"),
           "wikidata": ("P57", "P161", "P577", "P364")}[style]
    labels = {"P57": "director", "P161": "cast member", "P577": "publication date", "P364": "original language"}
    with KG.open(tmp_path / "db", create=True) as kg:
        kg.add_triples(film_triples(*ids))
        if style == "wikidata":
            kg.execute("UNWIND $rows AS row MATCH (r:Relation {id: row[1]}) SET r.label = row[2]",
                       {"rows": [[key, value] for key, value in labels.items()]})
        made = synthetic_walks(kg, SyntheticLimits(max_hops=1, topics_per_relation=4))
    said = " ".join(question.text for question, *_walks in made)
    if style == "freebase":
        assert "directed by" in said and "starring" in said and "film.film" not in said
    else:
        assert "cast member" in said and "director" in said and "P161" not in said and "P57" not in said


def test_a_label_is_said_as_its_grammatical_shape_allows() -> None:
    # "directed by" is a passive verb: "the one X was directed by"; "has genre": "the genre X has";
    # a plain noun label gets the generic phrasings only; "when" asks only for dates and years
    from localkg.path_scorer.synthetic import ask_templates, phrasings

    def said(label, direction):
        return {template.format(label=label, inner="X") for template in phrasings(label, direction)}

    assert "the one X was directed by" in said("directed by", OUT)
    assert "the things directed by X" in said("directed by", IN)
    assert "the genre X has" in said("has genre", OUT)
    assert said("capital", OUT) == {"the capital of X", "X's capital"}
    assert any(t.startswith("when") for t in ask_templates(["1958", "1960-05-01"]))
    assert not any(t.startswith("when") for t in ask_templates(["1958", "Alfred Hitchcock"]))
    assert any(t.startswith("who") for t in ask_templates(["Alfred Hitchcock"]))


def test_the_seed_alone_decides_the_draw(tmp_path: Path) -> None:
    """The same facts stored in another order (so the store returns rows in another order) give
    the same questions: training from a store is reproducible from its seed."""
    triples = film_triples("directed_by", "starred_actors", "release_year", "in_language")
    drawn = []
    for name, order in (("forward", triples), ("backward", triples[::-1])):
        with KG.open(tmp_path / name, create=True) as kg:
            kg.add_triples(order)
            made = synthetic_walks(kg, SyntheticLimits(max_hops=2, topics_per_relation=3, max_answers=10))
        drawn.append([(q.text, q.topic_entities, sorted(answer[1] for answer in q.answers)) for q, *_walks in made])
    assert drawn[0] == drawn[1] and drawn[0]
