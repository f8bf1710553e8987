"""Path supervision from question–answer pairs, on a small hand-built movie graph (real Kùzu).

The graph is tests/fixtures/path_movies.tsv: eleven films with their director, actors and
release year, and one fact no question reaches.
"""
from __future__ import annotations

import pytest

from localkg.datasets import Question
from localkg.path_scorer.supervision import SupervisionLimits, answer_f1, label_question, matches_gold
from localkg.path_scorer.train import groups_of, supervise
from localkg.path_scorer.walk import PathWalker
from localkg.store.model import IN, OUT, Node

@pytest.fixture()
def movies(path_movies):
    return path_movies


def labels_of(supervision, topic_index=0):
    topic = supervision.topics[topic_index]
    return dict(zip(topic.paths, topic.labels))


def test_one_hop_question_labels_every_path_by_f1(movies):
    supervision = label_question(PathWalker(movies), ["Top Hat"], [["Mark Sandrich"]])
    labels = labels_of(supervision)
    assert supervision.best_paths() == [(("directed_by", OUT),)]
    assert labels[(("directed_by", OUT),)] == 1.0
    assert labels[(("starred_actors", OUT),)] == 0.0
    # the films Top Hat shares its director with reach Mark Sandrich only one hop on: F1 0 there
    assert labels[(("directed_by", OUT), ("directed_by", IN))] == 0.0
    assert supervision.best_f1 == 1.0


def test_two_hop_answers_and_partial_overlap(movies):
    supervision = label_question(PathWalker(movies), ["Ginger Rogers"], [["Mark Sandrich"], ["George Stevens"]])
    labels = labels_of(supervision)
    assert supervision.best_paths() == [(("starred_actors", IN), ("directed_by", OUT))]
    # her co-stars' films' directors are the same two: a tie, and longer, so not the first best
    assert labels[(("starred_actors", IN), ("directed_by", OUT))] == 1.0
    one_director = answer_f1([Node("Mark Sandrich", "Mark Sandrich")], [frozenset({"mark sandrich"}),
                                                                         frozenset({"george stevens"})])
    assert one_director == pytest.approx(2 / 3)


@pytest.mark.parametrize("name, node_id, answer", [
    ("Suddenly, Last Summer", "suddenly_last_summer", "suddenly last summer"),  # punctuation
    ("United Kingdom", "united_kingdom", "the United Kingdom"),                  # an article
    ("Alan Pulido", "Q1", "Alan_PULIDO"),                                       # WC2014's `_`
])
def test_a_label_counts_an_answer_right_exactly_when_the_metric_does(name, node_id, answer):
    from localkg.evaluation.metrics import Prediction, score_question
    from localkg.path_scorer.supervision import gold_keys

    metric = score_question([Prediction(node_id, name)], [[answer]]).f1
    assert answer_f1([Node(node_id, name)], gold_keys([[answer]])) == metric == 1.0
    assert answer_f1([Node("Q9", "Another Name")], gold_keys([[answer]])) == 0.0


def test_the_topic_is_left_out_of_what_a_path_reaches(movies):
    # films sharing Top Hat's director: the path reaches Top Hat itself, which is left out
    walker = PathWalker(movies)
    supervision = label_question(walker, ["Top Hat"], [["Shall We Dance"]])
    assert supervision.best_paths() == [(("directed_by", OUT), ("directed_by", IN))]
    assert labels_of(supervision)[(("directed_by", OUT), ("directed_by", IN))] == 1.0
    assert set(walker.ends("Rope", (("starred_actors", OUT), ("starred_actors", IN)))) == {"Vertigo"}
    # ... unless it is all the path reaches (no other film of 1956: a store of merged namesakes
    # answers "the recording of Always's recording" with Always)
    assert set(walker.ends("Giant", (("release_year", OUT), ("release_year", IN)))) == {"Giant"}


def test_two_topics_label_paths_by_what_they_reach_together(movies):
    # the film with Ginger Rogers directed by Mark Sandrich: each topic alone reaches two films
    supervision = label_question(PathWalker(movies), ["Ginger Rogers", "Mark Sandrich"],
                                 [["Top Hat"], ["Shall We Dance"]])
    assert supervision.best_paths() == [(("starred_actors", IN),), (("directed_by", IN),)]
    assert labels_of(supervision, 0)[(("starred_actors", IN),)] == 1.0
    narrower = label_question(PathWalker(movies), ["Fred Astaire", "George Stevens"], [["Swing Time"]])
    assert narrower.best_f1 == 1.0  # Fred Astaire's films ∩ George Stevens's films = {Swing Time}
    assert labels_of(narrower, 0)[(("starred_actors", IN),)] == 1.0


def test_unreachable_questions_are_skipped_and_counted(movies):
    walker = PathWalker(movies)
    assert label_question(walker, ["Top Hat"], [["Citizen Kane"]]) is None
    assert label_question(walker, ["Lonely Island"], [["Top Hat"]]) is None
    questions = [
        Question("a", "who directed Top Hat", [["Mark Sandrich"]], ["Top Hat"], meta={"relation_path": ["directed_by"]}),
        Question("b", "who directed Citizen Kane", [["Orson Welles"]], ["Top Hat"]),
        Question("c", "where is nowhere", [["Nowhere"]], None),
        Question("d", "who starred in Top Hat", [["Fred Astaire"], ["Ginger Rogers"]], ["Top Hat"],
                 meta={"relation_path": ["directed_by"]}),
    ]
    labelled, report = supervise(movies, questions, [["Top Hat"], ["Top Hat"], [], ["Top Hat"]],
                                 label_limits())
    assert [q.id for q, _s in labelled] == ["a", "d"]
    assert (report.skipped_no_path, report.skipped_no_topic, report.labelled) == (1, 1, 2)
    # "a" found the dataset's gold path, "d" (with a wrong gold path on purpose) did not
    assert (report.gold_named, report.gold_found) == (2, 1)


def label_limits():
    from localkg.path_scorer.supervision import SupervisionLimits

    return SupervisionLimits(max_hops=2)


def test_the_best_path_matches_the_gold_path_by_its_relations(movies):
    supervision = label_question(PathWalker(movies), ["Top Hat"], [["Mark Sandrich"]])
    assert supervision.best_paths() == [(("directed_by", OUT),)]
    assert matches_gold(supervision, [[("directed_by", OUT)]])
    assert matches_gold(supervision, [[("directed_by_inverse", IN)]])  # a materialised inverse is the same relation
    assert not matches_gold(supervision, [[("starred_actors", OUT)]])


def test_training_groups_mark_the_best_paths_and_teach_prefixes(movies):
    # the release years of the films by Top Hat's director: three hops
    supervision = label_question(PathWalker(movies), ["Top Hat"], [["1935"], ["1937"]])
    best = (("directed_by", OUT), ("directed_by", IN), ("release_year", OUT))
    assert supervision.best_paths() == [best]
    groups = groups_of(0, supervision)
    full = groups[0]
    assert full.full and sum(full.positive) == 1
    assert dict(zip(full.paths, full.positive))[best]
    assert not dict(zip(full.paths, full.positive))[(("release_year", OUT),)]  # F1 2/3 only
    prefixes = {len(g.paths[0]): g for g in groups if not g.full}
    assert sorted(prefixes) == [1, 2]
    for length, group in prefixes.items():
        assert all(len(p) == length for p in group.paths)
        assert dict(zip(group.paths, group.positive))[best[:length]]


def test_walks_may_be_kept_from_going_on_from_the_topic(movies):
    # the release years of the films of Top Hat's director: Top Hat's own, or only the others'
    walker = PathWalker(movies)
    path = (("directed_by", OUT), ("directed_by", IN), ("release_year", OUT))
    assert set(walker.ends("Top Hat", path)) == {"1935", "1937"}
    assert set(walker.ends("Top Hat", path, through_topic=False)) == {"1937"}
    evidence = walker.evidence("Top Hat", path, "1937", through_topic=False)
    assert [step.triple.head.id for step in evidence.steps] == ["Top Hat", "Shall We Dance", "Shall We Dance"]
    assert walker.ends("Top Hat", path[:1], through_topic=False) == walker.ends("Top Hat", path[:1])


def test_the_questions_decide_whether_walks_go_on_from_the_topic(movies):
    others = Question("o", "when were the other films of Top Hat's director released", [["1937"]], ["Top Hat"])
    all_films = Question("a", "when were the films of Top Hat's director released", [["1935"], ["1937"]],
                         ["Top Hat"])
    walker = PathWalker(movies)
    years = (("directed_by", OUT), ("directed_by", IN), ("release_year", OUT))
    through = label_question(walker, ["Top Hat"], others.answers)
    avoiding = label_question(walker, ["Top Hat"], others.answers, through_topic=False)
    assert through.best_f1 < 1.0 and avoiding.best_f1 == 1.0 and years in avoiding.best_paths()
    labelled, report = supervise(movies, [others, others, all_films], [["Top Hat"]] * 3, SupervisionLimits())
    assert (report.walk_differs, report.through_topic_better, report.through_topic) == (3, 1, False)
    # the store's walk labels every question, the one that favoured the other walk too
    assert [s.best_f1 for _q, s in labelled][:2] == [1.0, 1.0] and labelled[2][1].best_f1 < 1.0
    _labelled, same = supervise(movies, [Question("d", "who directed Top Hat", [["Mark Sandrich"]], ["Top Hat"])],
                                [["Top Hat"]], SupervisionLimits())
    assert (same.walk_differs, same.through_topic) == (0, True)
