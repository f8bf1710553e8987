"""The metric against hand-worked cases (docs/metrics.md gives the same definitions)."""
from __future__ import annotations

import pytest

from localkg.evaluation.metrics import Prediction, aggregate, distribution, loose_match, score_question
from localkg.text import normalise_answer, without_punctuation


def preds(*names: str) -> list[Prediction]:
    return [Prediction("", name) for name in names]


@pytest.mark.parametrize("text, expected", [
    ("  The   United Kingdom ", "united kingdom"),
    ("united_kingdom", "united kingdom"),           # PathQuestion / WC2014 spelling
    ("Suddenly, Last Summer", "suddenly last summer"),
    ("frederica_of_mecklenburg-strelitz", "frederica of mecklenburgstrelitz"),
    ("“Top Hat”!", "top hat"),
    ("An American in Paris", "american in paris"),
    ("The", "the"),                                 # articles kept when nothing else is left
    ("Theatre", "theatre"),                         # only whole-word articles go
    ("Alan_PULIDO", "alan pulido"),
])
def test_normalise(text: str, expected: str) -> None:
    assert normalise_answer(text) == expected


def test_ascii_text_loses_what_unicode_calls_punctuation() -> None:
    """ASCII text takes a table, other text a category lookup per character: both must delete
    exactly the characters of category P*, so ``$``, ``+`` or ``|`` (symbols) stay in either."""
    import unicodedata

    every_ascii = "".join(map(chr, range(128)))
    kept = "".join(ch for ch in every_ascii if not unicodedata.category(ch).startswith("P"))
    assert without_punctuation(every_ascii) == kept
    assert without_punctuation(every_ascii + "é") == kept + "é"


def test_hand_worked_partial_answer() -> None:
    # gold {Drama, Music}; predicted [Comedy, drama, Music., drama] -> distinct {comedy, drama, music}
    score = score_question(preds("Comedy", "drama", "Music.", "drama"), [["Drama"], ["Music"]])
    assert score.hits_at_1 == 0.0          # the first prediction is wrong
    assert score.hit == 1.0
    assert score.precision == pytest.approx(2 / 3)
    assert score.recall == 1.0
    assert score.f1 == pytest.approx(0.8)  # 2 * (2/3) * 1 / (2/3 + 1)


def test_aliases_count_once_per_gold_answer() -> None:
    # one gold answer with two aliases: predicting both aliases finds 1 of 1 gold answers
    gold = [["United Kingdom", "UK"], ["France"]]
    score = score_question(preds("UK", "united_kingdom"), gold)
    assert score.hits_at_1 == 1.0
    assert score.precision == 1.0
    assert score.recall == 0.5
    assert score.f1 == pytest.approx(2 / 3)


def test_empty_prediction_is_wrong_not_skipped() -> None:
    score = score_question([], [["Paris"]])
    assert score.to_json() == {"hits@1": 0.0, "hit": 0.0, "precision": 0.0, "recall": 0.0, "f1": 0.0,
                               "em_loose": 0.0}
    blank = score_question(preds("", "  "), [["Paris"]])
    assert blank.f1 == 0.0 and blank.em_loose == 0.0
    # and it pulls the mean down: one right, one unanswered -> 0.5
    rows = [score_question(preds("Paris"), [["Paris"]]).to_json(), score.to_json()]
    assert aggregate(rows)["hits@1"] == 0.5 and aggregate(rows)["n"] == 2


def test_prediction_matches_by_id_when_gold_has_ids() -> None:
    gold = [["Q1010"]]                       # SimpleQuestions-Wikidata gives ids only
    assert score_question([Prediction("Q1010", "Kaunas")], gold).hits_at_1 == 1.0
    assert score_question([Prediction("Q64", "Berlin")], gold).hits_at_1 == 0.0


def test_loose_match_is_tog_style_and_separate() -> None:
    gold = [["2014 World Series"]]
    strict = score_question(preds("World Series"), gold)
    assert strict.hits_at_1 == 0.0 and strict.em_loose == 1.0   # prediction inside gold
    assert loose_match(preds("The 2014 World Series champions"), gold)  # gold inside prediction
    assert loose_match(preds("2014worldseries"), gold)            # spaces ignored
    assert not loose_match(preds("World Cup"), gold)


def test_distribution_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]   # 1..20
    result = distribution(values)
    assert result["mean"] == 10.5
    assert result["p50"] == 10.5
    assert result["p95"] == 19.0                 # ceil(0.95 * 20) = 19th value
    assert result["total"] == 210.0
    assert distribution([])["mean"] == 0.0
