"""FoG training: triple supervision from real gold paths, and a short real training run.

Runs on the real MetaQA store (fixture ``metaqa_kg``), the real PathQuestion files and the
real bundled MiniLM as the frozen encoder.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from localkg.datasets import Question, TrainingSet, read_questions, resolve_topics, select_questions, select_training_questions
from localkg.errors import TrainingDataError
from localkg.fog.features import TextVectors, triple_key
from localkg.datasets.metaqa import metaqa_relation_path
from localkg.fog.supervision import SupervisionLimits, build_example, gold_walks
from localkg.fog.train import TrainConfig, build_examples, train_scorer
from localkg.store.model import IN, OUT


def metaqa_question(shared: Path, hop: int, line: int) -> Question:
    return read_questions(shared / "metaqa" / f"{hop}-hop" / "qa_dev.txt")[line - 1]


def test_metaqa_question_types_give_relation_paths():
    assert metaqa_relation_path("actor_to_movie_to_year") == [("starred_actors", IN), ("release_year", OUT)]
    assert metaqa_relation_path("movie_to_tags") == [("has_tags", OUT)]
    assert metaqa_relation_path("movie_to_writer_to_movie_to_director") == [
        ("written_by", OUT), ("written_by", IN), ("directed_by", OUT)]
    with pytest.raises(TrainingDataError, match="not film-centred"):
        metaqa_relation_path("actor_to_director")


def test_positives_are_the_gold_path_and_negatives_near_and_far_from_it(metaqa_kg, shared):
    question = metaqa_question(shared, 2, 1)  # languages of the films directed by [Joel Zwick] → Greek
    assert question.qtype == "director_to_movie_to_language"
    example = build_example(metaqa_kg, question, resolve_topics(metaqa_kg, question), random.Random(0))
    positives = {triple_key(t) for t, y in zip(example.triples, example.labels) if y == 1.0}
    assert positives == {("My Big Fat Greek Wedding", "directed_by", "Joel Zwick"),
                         ("My Big Fat Greek Wedding", "in_language", "Greek")}
    negatives = [t for t, y in zip(example.triples, example.labels) if y == 0.0]
    assert not {triple_key(t) for t in negatives} & positives
    path_nodes = {"Joel Zwick", "My Big Fat Greek Wedding", "Greek"}
    near = [t for t in negatives if t.head.id in path_nodes or t.tail.id in path_nodes]
    far = [t for t in negatives if t not in near]
    assert 0 < len(near) <= 10 * len(positives) and 0 < len(far) <= 10 * len(positives)
    # far negatives lie beyond the path's first hop: what teaches the scorer that distance matters
    assert all(max(example.levels[t.head.id], example.levels[t.tail.id]) >= 2 for t in far)
    without_far = build_example(metaqa_kg, question, resolve_topics(metaqa_kg, question), random.Random(0),
                                SupervisionLimits(far_kappa=0))
    assert all(t.head.id in path_nodes or t.tail.id in path_nodes
               for t, y in zip(without_far.triples, without_far.labels) if y == 0.0)
    assert example.levels["Joel Zwick"] == 0 and example.levels["My Big Fat Greek Wedding"] == 1
    assert example.levels["Greek"] == 2
    assert example.distance == 2  # the answer lies two hops out: what the distance head learns
    assert example.distance_question == "what are the languages spoken in the films directed by"
    # off-path branches continue too, so "has onward triples" does not give the label away
    context = [t for t, y in zip(example.triples, example.labels) if y == -1.0]
    off_path = {end for t in context for end in (t.head.id, t.tail.id)
                if end not in path_nodes and example.levels.get(end) == 2}
    assert any({t.head.id, t.tail.id} & off_path for t in context
               if {example.levels.get(t.head.id), example.levels.get(t.tail.id)} == {2, 3})


def test_pathquestion_gold_path_is_walked_to_the_answer(tmp_path, shared):
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    with KG.create(tmp_path / "pq") as kg:
        load_triples(kg, [shared / "pathquestion" / "2H-kb.txt"], progress=False)
        question = read_questions(shared / "pathquestion" / "PQ-2H.txt")[0]
        topics = resolve_topics(kg, question)
        assert gold_walks(question, topics) == [(topics[0], [("spouse", OUT), ("nationality", OUT)])]
        example = build_example(kg, question, topics, random.Random(0))
    positives = {triple_key(t) for t, y in zip(example.triples, example.labels) if y == 1.0}
    assert ("frederica_of_mecklenburg-strelitz", "spouse", "ernest_augustus_i_of_hanover") in positives
    assert ("ernest_augustus_i_of_hanover", "nationality", "united_kingdom") in positives


def test_an_answer_the_metric_counts_is_a_positive(tmp_path):
    """The labels compare answers as the metric does: "The United Kingdom." is ``united_kingdom``."""
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    facts = tmp_path / "facts.tsv"
    facts.write_text("frederica\tspouse\ternest\nernest\tnationality\tunited_kingdom\nernest\tborn_in\thanover\n")
    question = Question(id="q", text="what is the nationality of frederica's spouse", topic_entities=["frederica"],
                        answers=[["The United Kingdom."]], meta={"relation_path": ["spouse", "nationality"]})
    with KG.create(tmp_path / "db") as kg:
        load_triples(kg, [facts], progress=False)
        example = build_example(kg, question, ["frederica"], random.Random(0))
    assert example is not None
    assert {triple_key(t) for t, y in zip(example.triples, example.labels) if y == 1.0} == {
        ("frederica", "spouse", "ernest"), ("ernest", "nationality", "united_kingdom")}


def test_questions_without_gold_path_are_refused():
    question = Question(id="q1", text="who directed Top Hat", answers=[["Mark Sandrich"]], topic_entities=["Top Hat"])
    with pytest.raises(TrainingDataError, match="no gold path"):
        gold_walks(question, ["Top Hat"])


def test_the_eval_sample_is_left_out(shared):
    path = shared / "pathquestion" / "PQ-2H.txt"
    chosen, counts = select_training_questions(TrainingSet([str(path)], exclude_sample=200), seed=0)
    evaluated = {q.id for q in select_questions(read_questions(path), 200, 0, None)}
    assert counts == [len(read_questions(path)) - 200]
    assert not evaluated & {q.id for q in chosen}


def test_a_short_real_training_run_lowers_the_loss(metaqa_kg, shared, scorer, tmp_path):
    questions = select_questions(read_questions(shared / "metaqa" / "2-hop" / "qa_dev.txt"), 16, 1, None)
    pairs = [(q, resolve_topics(metaqa_kg, q)) for q in questions]
    examples, skipped = build_examples(metaqa_kg, pairs, SupervisionLimits(max_negatives=60))
    assert skipped == 0 and len(examples) == 16
    config = TrainConfig(epochs=4, lr=1e-3, batch_size=8, hidden=64, validation=0.25)
    report = train_scorer(examples, TextVectors(scorer.embedder), config, tmp_path / "scorer.pt",
                          scorer.embedder.model_name)
    assert report.epochs[-1].train_loss < report.epochs[0].train_loss
    held_out = report.epochs[-1].held_out
    assert held_out.validation_loss < report.first_batch_loss
    assert held_out.positive_score > held_out.negative_score
    assert 0.0 <= held_out.distance_accuracy <= 1.0
    assert Path(report.checkpoint).is_file()
