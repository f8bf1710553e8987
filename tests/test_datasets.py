"""Each questions reader on the real benchmark files in ../shared/data (and on small files
written here for the formats that have no file there: Mintaka, plain JSONL)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from localkg.errors import DatasetError, TrainingDataError
from localkg.datasets import Question, detect_format, gold_relation_paths, read_questions
from localkg.store.model import IN, OUT

SHARED = Path(__file__).parents[1].parent / "shared" / "data"
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("hop, first_qtype", [(1, "actor_to_movie"), (2, "director_to_movie_to_language"),
                                             (3, "movie_to_director_to_movie_to_genre")])
def test_metaqa_dev(hop: int, first_qtype: str) -> None:
    path = SHARED / "metaqa" / f"{hop}-hop" / "qa_dev.txt"
    questions = read_questions(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert detect_format(path) == "metaqa"
    assert len(questions) == len(lines)
    assert {q.hop for q in questions} == {hop}
    assert questions[0].qtype == first_qtype
    assert all("[" not in q.text and len(q.topic_entities) == 1 for q in questions)


def test_metaqa_first_question_and_qtype_alignment() -> None:
    questions = read_questions(SHARED / "metaqa" / "1-hop" / "qa_dev.txt")
    first = questions[0]
    assert first.text == "what movies did Temuera Morrison act in"
    assert first.topic_entities == ["Temuera Morrison"]
    assert first.answers == [["Once Were Warriors"], ["Tracker"], ["River Queen"]]
    qtypes = (SHARED / "metaqa" / "1-hop" / "qa_dev_qtype.txt").read_text().splitlines()
    assert [q.qtype for q in questions] == qtypes


def test_metaqa_qtype_file_must_align(tmp_path: Path) -> None:
    (tmp_path / "qa_dev.txt").write_text("who directed [Top Hat]\tMark Sandrich\nwho wrote [Top Hat]\tDwight Taylor\n")
    (tmp_path / "qa_dev_qtype.txt").write_text("movie_to_director\n")
    with pytest.raises(DatasetError, match="2 questions but 1 question types"):
        read_questions(tmp_path / "qa_dev.txt")


def test_pathquestion_answer_set_and_topic() -> None:
    questions = read_questions(SHARED / "pathquestion" / "PQ-2H.txt")
    assert len(questions) == 1908
    first = questions[0]
    assert first.topic_entities == ["frederica_of_mecklenburg-strelitz"]
    assert first.answers == [["united_kingdom"]]
    assert first.hop == 2 and first.meta["relation_path"] == ["spouse", "nationality"]
    # "female(male/female/)": every member of the answer set is a gold answer of its own
    gender = next(q for q in questions if q.answers == [["female"], ["male"]])
    assert gender.hop == 2


def test_pql_leading_space_and_parentheses_in_names() -> None:
    questions = read_questions(SHARED / "pathquestion" / "PQL-2H.txt")
    assert len(questions) == 1594
    assert questions[0].text.startswith("what is the notable_types of Kenneth_Peach")
    assert questions[0].topic_entities == ["Kenneth_Peach"]
    # names may hold parentheses: "PG_(USA)(PG_(USA)/)" is the answer PG_(USA)
    rating = next(q for q in questions if q.id == "PQL-2H:215")
    assert rating.answers == [["PG_(USA)"]]
    assert any(q.answers == [["Hard_Times_(live)"], ["Hard_Times"]] for q in questions)
    # every line: the named answer comes first, and it is a member of the set in parentheses
    raw = [line.split("\t")[1] for line in (SHARED / "pathquestion" / "PQL-2H.txt").read_text().splitlines()]
    for question, field in zip(questions, raw):
        named = question.answers[0][0]
        assert field.startswith(named + "(") and named in field[len(named) + 1:-1].split("/")


def test_worldcup_conjunctive() -> None:
    questions = read_questions(SHARED / "pathquestion" / "WC-C.txt")
    assert detect_format(SHARED / "pathquestion" / "WC-C.txt") == "worldcup"
    assert len(questions) == 2208
    second = questions[1]
    assert second.topic_entities == ["Forward", "Mexico"]
    assert ["Alan_PULIDO"] in second.answers and ["Oribe_PERALTA"] in second.answers
    assert second.qtype == "conjunction" and second.hop == 1


def test_gold_relation_paths_one_per_topic_with_the_directions_walked() -> None:
    pathquestion = read_questions(SHARED / "pathquestion" / "PQ-2H.txt")[0]
    assert gold_relation_paths(pathquestion) == [[("spouse", OUT), ("nationality", OUT)]]
    conjunction = read_questions(SHARED / "pathquestion" / "WC-C.txt")[1]  # Forward, Mexico
    assert gold_relation_paths(conjunction) == [[("plays_position_inverse", OUT)], [("plays_for_country_inverse", OUT)]]
    metaqa = read_questions(SHARED / "metaqa" / "2-hop" / "qa_dev.txt")[0]
    assert metaqa.qtype == "director_to_movie_to_language"
    assert gold_relation_paths(metaqa) == [[("directed_by", IN), ("in_language", OUT)]]
    assert gold_relation_paths(Question("j", "who directed Top Hat", [["Mark Sandrich"]], ["Top Hat"])) is None
    with pytest.raises(TrainingDataError, match="not film-centred"):
        gold_relation_paths(Question("t", "q", [["y"]], ["x"], qtype="actor_to_director"))


@pytest.mark.parametrize("name, count", [("cwq.json", 3531), ("WebQuestions.json", 2032), ("SimpleQA.json", 1000),
                                         ("graliqa.json", 1000), ("qald_10-en.json", 332), ("T-REX.json", 5000),
                                         ("Zero_Shot_RE.json", 3724), ("creak.json", 1371)])
def test_tog_files(name: str, count: int) -> None:
    path = SHARED / "kgqa_questions" / name
    assert detect_format(path) == "tog"
    questions = read_questions(path)
    assert len(questions) == count      # QALD-10 has one question without an answer: left out
    assert all(q.answers and all(q.answers) for q in questions)
    assert len({q.id for q in questions}) == len(questions)


def test_tog_answer_shapes() -> None:
    cwq = read_questions(SHARED / "kgqa_questions" / "cwq.json")[0]
    assert cwq.answers == [["2014 World Series"]]
    assert cwq.topic_entities == ["m.03_dwn"] and cwq.meta["topic_names"] == ["Lou Seal"]
    webq = read_questions(SHARED / "kgqa_questions" / "WebQuestions.json")[0]
    assert webq.answers == [["Jamaican Creole English Language"], ["Jamaican English"]]
    assert webq.topic_entities == ["m.03_r3", "Q766"]     # Freebase mid and Wikidata QID of Jamaica
    grail = read_questions(SHARED / "kgqa_questions" / "graliqa.json")[0]
    assert grail.answers == [["The Illusion", "m.0yrltsn"]] and grail.hop == 1
    qald = read_questions(SHARED / "kgqa_questions" / "qald_10-en.json")[0]
    assert qald.answers == [["Bernhard Riemann", "Q42299"]]
    creak = read_questions(SHARED / "kgqa_questions" / "creak.json")[0]
    assert creak.answers == [["false"]]


def test_simplequestions_wikidata_and_freebase() -> None:
    wikidata = read_questions(SHARED / "simplequestions_wikidata" / "annotated_wd_data_valid_answerable.txt")
    assert wikidata[0].topic_entities == ["Q318926"] and wikidata[0].answers == [["Q1010"]]
    freebase = read_questions(SHARED / "simplequestions_wikidata" / "SimpleQuestions_v2_freebase"
                              / "annotated_fb_data_test.txt")
    assert freebase[0].topic_entities == ["m.01jp8ww"] and freebase[0].answers == [["m.01qzt1"]]


def test_rog_fixture() -> None:
    path = FIXTURES / "rog_tiny.jsonl"
    assert detect_format(path) == "rog"
    questions = read_questions(path)
    assert [q.id for q in questions] == ["WebQTrn-tiny-0", "WebQTrn-tiny-1", "WebQTrn-tiny-2"]
    assert questions[0].topic_entities == ["Top Hat"]
    assert ["Top Hat", "film.film.directed_by", "Mark Sandrich"] in questions[0].meta["graph"]


def test_mintaka(tmp_path: Path) -> None:
    records = [
        {"id": "a1", "question": "Which Academy Award did Tom Hanks win for Philadelphia?", "category": "movies",
         "complexityType": "generic",
         "questionEntity": [{"entityType": "entity", "name": "Q2263", "label": "Tom Hanks", "mention": "Tom Hanks"},
                            {"entityType": "ordinal", "name": 4, "mention": "fourth"}],
         "answer": {"answerType": "entity", "mention": "Best Actor",
                    "answer": [{"name": "Q103916", "label": {"en": "Academy Award for Best Actor"}}]}},
        {"id": "a2", "question": "Is Mont Blanc taller than Mount Rainier?", "complexityType": "comparative",
         "questionEntity": [{"entityType": "entity", "name": "Q583", "label": "Mont Blanc"}],
         "answer": {"answerType": "boolean", "answer": [True], "mention": "Yes"}},
    ]
    path = tmp_path / "mintaka_test.json"
    path.write_text(json.dumps(records))
    questions = read_questions(path)
    assert detect_format(path) == "mintaka"
    assert questions[0].answers == [["Academy Award for Best Actor", "Q103916", "Best Actor"]]
    assert questions[0].topic_entities == ["Q2263"] and questions[0].meta["topic_names"] == ["Tom Hanks"]
    assert questions[1].answers == [["yes", "Yes"]] and questions[1].qtype == "comparative"


def test_plain_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "who directed Top Hat?", "answers": ["Mark Sandrich"],
                                "topic_entities": ["Top Hat"]}) + "\n\n"
                    + json.dumps({"id": "q2", "question": "capital of the UK?",
                                  "answers": [["London", "City of London"]], "hop": 1}) + "\n")
    questions = read_questions(path)
    assert detect_format(path) == "jsonl"
    assert questions[0].answers == [["Mark Sandrich"]] and questions[0].topic_entities == ["Top Hat"]
    assert questions[1].id == "q2" and questions[1].answers == [["London", "City of London"]]
    assert questions[1].topic_entities is None and questions[1].hop == 1


def test_bad_input_is_a_clear_error(tmp_path: Path) -> None:
    unknown = tmp_path / "notes.txt"
    unknown.write_text("just some text\n")
    with pytest.raises(DatasetError, match="cannot tell the format"):
        read_questions(unknown)
    broken = tmp_path / "broken.txt"
    broken.write_text("who directed [Top Hat]\tMark Sandrich\nno tab here\n")
    with pytest.raises(DatasetError, match=r"broken.txt:2: expected 2 tab-separated fields"):
        read_questions(broken)
    with pytest.raises(DatasetError, match="no questions file"):
        read_questions(tmp_path / "missing.txt")
    with pytest.raises(DatasetError, match="unknown questions format"):
        read_questions(broken, format="csv")


@pytest.mark.parametrize("record, field", [
    ({"question": 12345, "answers": ["a"]}, "question"),
    ({"question": "who?", "answers": ["a"], "topic_entities": [None]}, "topic_entities"),
    ({"question": "who?", "answers": ["a"], "topic_entities": ["Top Hat", 7]}, "topic_entities"),
    ({"question": "who?", "answers": [["a", 1935]]}, "answers"),
    ({"question": "who?", "answers": {"a": 1}}, "answers"),
    ({"question": "who?", "answers": ["a"], "hop": "2"}, "hop"),
    ({"question": "who?", "answers": ["a"], "id": ["q1"]}, "id"),
])
def test_a_jsonl_record_with_a_field_of_the_wrong_type_is_an_error_at_its_line(
        tmp_path: Path, record: dict, field: str) -> None:
    """A wrong type is refused where it is, never coerced ("question": 12345 read as the text
    "12345") or dropped (a null topic entity left out without a word)."""
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps({"question": "who directed Top Hat?", "answers": ["Mark Sandrich"]}) + "\n"
                    + json.dumps(record) + "\n")
    with pytest.raises(DatasetError, match=rf"mine.jsonl:2: \"{field}\" must be "):
        read_questions(path, format="jsonl")


def test_a_rog_record_with_a_field_of_the_wrong_type_is_an_error_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "rog.jsonl"
    path.write_text(json.dumps({"id": "r1", "question": "who directed top hat", "answer": ["Mark Sandrich"],
                                "q_entity": [None], "graph": [["Top Hat", "directed_by", "Mark Sandrich"]]}) + "\n")
    with pytest.raises(DatasetError, match=r"rog.jsonl:1: \"q_entity\" must be "):
        read_questions(path, format="rog")
