"""Readers that turn the KGQA benchmark files into one :class:`Question` shape.

A reader keeps what the dataset gives and invents nothing (topic entities, answer aliases, hop
count and question type only where the data has them). Formats (``format="auto"`` picks one):

``metaqa``           ``question with [topic]\\tans1|ans2``; a line-aligned ``<stem>_qtype.txt`` beside it
                     gives the question types (and the hop count)
``pathquestion``     PathQuestion ``question\\tanswer(ans1/ans2/)\\tsubject#r1#e1#r2#...``
``worldcup``         WC2014: conjunctive WC-C ``question\\tanswer\\tpaths\\tans1/ans2/\\tfacts\\ttopic1/topic2``,
                     path questions WC-P/WC-P1/WC-P2 ``question\\tanswer\\thead#r1#e1#r2#answer\\tans1/ans2/\\tfacts``
``tog``              ToG-style JSON list (CWQ, WebQuestions, GrailQA, SimpleQA, QALD-10, T-REx, Zero-Shot RE, Creak)
``rog``              RoG JSONL: ``question``, ``answer``, ``q_entity``, ``a_entity``, ``graph`` ([h, r, t] names)
``mintaka``          Mintaka JSON list (``questionEntity``, ``answer.answer``)
``simplequestions``  ``subject\\tproperty\\tobject\\tquestion`` (Wikidata QIDs or Freebase URLs)
``jsonl``            plain JSONL: ``question``, ``answers`` (strings or alias lists), optional ``topic_entities``,
                     ``id``, ``hop``, ``qtype``
"""
from __future__ import annotations

import json
import logging
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from localkg.errors import DatasetError

log = logging.getLogger(__name__)

FORMATS = ("metaqa", "pathquestion", "worldcup", "tog", "rog", "mintaka", "simplequestions", "jsonl")


@dataclass
class Question:
    """One benchmark question.

    ``answers`` holds each gold answer as a list of the strings that count for it (its name,
    the aliases the dataset lists, and its id when the dataset gives one). ``topic_entities``
    holds the dataset's own references to the topic entities (ids, or names where the dataset
    has no ids), ``None`` when the dataset names none; ``meta["topic_names"]`` holds their names
    when the dataset gives ids and names side by side.
    """

    id: str
    text: str
    answers: list[list[str]]
    topic_entities: list[str] | None = None
    hop: int | None = None
    qtype: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def read_questions(path: str | Path, format: str = "auto") -> list[Question]:
    """Read a questions file; ``format="auto"`` detects the format from the content.

    Questions without any gold answer cannot be scored and are left out (with a warning
    saying how many); a malformed line or record raises :class:`DatasetError` with its place.
    """
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"no questions file at {path}")
    if format == "auto":
        format = detect_format(path)
    if format not in READERS:
        raise DatasetError(f"unknown questions format {format!r}; formats: {', '.join(FORMATS)}")
    questions = []
    unanswerable = 0
    for question in READERS[format](path):
        if question.answers:
            questions.append(question)
        else:
            unanswerable += 1
    if unanswerable:
        log.warning("%s: left out %d question(s) that have no gold answer", path, unanswerable)
    if not questions:
        raise DatasetError(f"{path} holds no question with a gold answer (read as {format})")
    _make_ids_unique(questions)
    return questions


def _make_ids_unique(questions: list[Question]) -> None:
    """Runs resume by question id, so a dataset id seen twice gets ``#2``, ``#3``... on repeats."""
    seen: Counter[str] = Counter()
    for question in questions:
        seen[question.id] += 1
        if seen[question.id] > 1:
            question.id = f"{question.id}#{seen[question.id]}"


# ---------------------------------------------------------------- detection
def detect_format(path: Path) -> str:
    """Name the format of ``path`` from its first record (never from its file name)."""
    head = _first_line(path)
    if head is None:
        raise DatasetError(f"{path} is empty")
    stripped = head.lstrip()
    if stripped.startswith("["):
        return _detect_json_list(path)
    if stripped.startswith("{"):
        try:
            record = json.loads(stripped)
        except json.JSONDecodeError:
            return _detect_json_list(path)
        if "graph" in record and "question" in record:
            return "rog"
        if "question" in record and "answers" in record:
            return "jsonl"
        raise DatasetError(f"{path}: a JSON line with keys {sorted(record)} matches no known format")
    columns = head.rstrip("\n").split("\t")
    if len(columns) == 2 and re.search(r"\[[^\]]+\]", columns[0]):
        return "metaqa"
    if len(columns) == 3 and re.fullmatch(r".*\(.*/\)", columns[1]) and "#" in columns[2]:
        return "pathquestion"
    if len(columns) in (5, 6) and "#" in columns[2]:
        return "worldcup"
    if len(columns) == 4 and re.fullmatch(r"(Q\d+|www\.freebase\.com/m/\S+)", columns[0]):
        return "simplequestions"
    raise DatasetError(f"cannot tell the format of {path} from its first line; pass --format "
                       f"({', '.join(FORMATS)})")


def _first_line(path: Path) -> str | None:
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                return line
    return None


def _detect_json_list(path: Path) -> str:
    records = _load_json_list(path)
    first = records[0]
    if "questionEntity" in first:
        return "mintaka"
    if any(key in first for key in ("topic_entity", "qid_topic_entity", "topic_entity_ids")):
        return "tog"
    raise DatasetError(f"{path}: a JSON list whose records have keys {sorted(first)} matches no known format")


def _load_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DatasetError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
        raise DatasetError(f"{path}: expected a non-empty JSON list of objects")
    return records


def _tab_lines(path: Path, columns: int) -> Iterator[tuple[int, list[str]]]:
    """Non-empty lines split on tabs, each checked to have ``columns`` fields."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.rstrip("\n").rstrip("\r")
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != columns:
                raise DatasetError(f"{path}:{number}: expected {columns} tab-separated fields, found {len(fields)}")
            yield number, fields


def _singletons(values: Iterable[str]) -> list[list[str]]:
    """Gold answers without aliases, deduplicated, order kept."""
    return [[value] for value in dict.fromkeys(v.strip() for v in values) if value]


# ---------------------------------------------------------------- MetaQA
_TOPIC = re.compile(r"\[([^\]]+)\]")


def read_metaqa(path: Path) -> Iterator[Question]:
    """MetaQA: the bracketed span is the gold topic; answers split on ``|``.

    The hop count is the number of ``_to_`` in the question type (``actor_to_movie_to_year`` is
    2 hops) when the ``<stem>_qtype.txt`` file is there, else the ``k-hop`` folder name.
    """
    qtypes = _metaqa_qtypes(path)
    folder_hop = next((int(m.group(1)) for part in reversed(path.parts)
                       if (m := re.fullmatch(r"(\d+)-hop", part))), None)
    lines = list(_tab_lines(path, 2))
    if qtypes is not None and len(qtypes) != len(lines):
        raise DatasetError(f"{path}: {len(lines)} questions but {len(qtypes)} question types in the qtype file")
    for index, (number, (text, answers)) in enumerate(lines):
        topic = _TOPIC.search(text)
        if topic is None:
            raise DatasetError(f"{path}:{number}: no [topic entity] in the question")
        qtype = qtypes[index] if qtypes is not None else None
        hop = qtype.count("_to_") if qtype else folder_hop
        yield Question(id=f"{path.stem}:{number}", text=_TOPIC.sub(r"\1", text).strip(),
                       answers=_singletons(answers.split("|")), topic_entities=[topic.group(1)],
                       hop=hop, qtype=qtype)


def _metaqa_qtypes(path: Path) -> list[str] | None:
    qtype_path = path.with_name(f"{path.stem}_qtype{path.suffix}")
    if not qtype_path.is_file():
        return None
    return [line.strip() for line in qtype_path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---------------------------------------------------------------- PathQuestion / WC2014
def read_pathquestion(path: Path) -> Iterator[Question]:
    """PathQuestion: ``answer(a1/a2/)`` names the answer and, in parentheses, the whole answer
    set (every entity the gold path reaches, e.g. ``female(male/female/)`` for the gender of
    someone's children); every member of the set is a correct answer. The topic entity is the
    first element of the gold path; the hop count is the number of relations on it."""
    for number, (text, answer, gold_path) in _tab_lines(path, 3):
        named, answer_set = _split_answer_field(answer.strip())
        if answer_set is None:
            raise DatasetError(f"{path}:{number}: answer field {answer!r} is not answer(a1/a2/)")
        yield _path_question(f"{path.stem}:{number}", text, [named, *answer_set], gold_path, qtype=None)


def _path_question(qid: str, text: str, answers: list[str], gold_path: str, qtype: str | None) -> Question:
    """A question whose gold path ``head#r1#e1#r2#...`` (up to an ``<end>``) starts at its topic."""
    elements = gold_path.strip().split("#")
    if "<end>" in elements:
        elements = elements[:elements.index("<end>")]
    relations = elements[1::2]
    return Question(id=qid, text=text.strip(), answers=_singletons(answers), topic_entities=[elements[0]],
                    hop=len(relations), qtype=qtype, meta={"relation_path": relations})


def _split_answer_field(field: str) -> tuple[str, list[str] | None]:
    """``PG_(USA)(PG_(USA)/)`` → (``PG_(USA)``, [``PG_(USA)``]): names may hold parentheses, so the
    split is the one whose named answer is a member of the set (else the last ``(``)."""
    if not field.endswith(")"):
        return field, None
    splits = []
    for position in (i for i, ch in enumerate(field) if ch == "("):
        named, members = field[:position], [m for m in field[position + 1:-1].split("/") if m]
        if named in members:
            return named, members
        splits.append((named, members))
    return splits[-1] if splits else (field, None)


def read_worldcup(path: Path) -> Iterator[Question]:
    """WC2014. The fourth field is the set of all correct answers. A conjunctive WC-C line has six
    fields, the sixth the topic entities (``Forward/Mexico``), every gold path one hop. A path
    question of WC-P, WC-P1 or WC-P2 has five: its gold path (``head#rel#tail#rel#answer``,
    starting at the topic entity) is the third, the facts the fifth. The first line decides."""
    if len(_first_line(path).split("\t")) == 5:  # type: ignore[union-attr]  (read_questions refuses empty files)
        for number, (text, answer, gold_path, answer_set, _facts) in _tab_lines(path, 5):
            yield _path_question(f"{path.stem}:{number}", text, [answer, *answer_set.split("/")], gold_path, "path")
        return
    for number, (text, answer, paths, answer_set, _facts, topics) in _tab_lines(path, 6):
        gold_paths = [p.split("#") for p in paths.split("*") if p]
        hops = [len(p[:p.index("<end>")] if "<end>" in p else p) // 2 for p in gold_paths]
        yield Question(id=f"{path.stem}:{number}", text=text.strip(),
                       answers=_singletons([answer, *answer_set.split("/")]),
                       topic_entities=[t for t in topics.split("/") if t],
                       hop=max(hops) if hops else None, qtype="conjunction",
                       meta={"relation_path": [p[1] for p in gold_paths if len(p) > 1]})


# ---------------------------------------------------------------- SimpleQuestions
def read_simplequestions(path: Path) -> Iterator[Question]:
    """SimpleQuestions (Wikidata QIDs or the Freebase original): ids only, no names. The topic is
    the subject, the answer the object (an ``R`` property is the inverse of its ``P``; the
    subject stays the topic)."""
    for number, (subject, relation, obj, text) in _tab_lines(path, 4):
        yield Question(id=f"{path.stem}:{number}", text=text.strip(), answers=[[_freebase_id(obj)]],
                       topic_entities=[_freebase_id(subject)], hop=1, meta={"relation": _freebase_id(relation)})


def _freebase_id(value: str) -> str:
    """``www.freebase.com/m/0n2z`` → ``m.0n2z``; Wikidata ids pass through."""
    if value.startswith("www.freebase.com/"):
        return value[len("www.freebase.com/"):].replace("/", ".")
    return value


# ---------------------------------------------------------------- ToG-style JSON
def read_tog(path: Path) -> Iterator[Question]:
    """ToG's question files. Gold topics are ``topic_entity`` ({mid: name}) and
    ``qid_topic_entity`` / ``topic_entity_ids`` ({QID: name}); the harness resolves each by id,
    then by name. Answers per file: ``answer`` (string, with ``alias`` list), ``answers`` (list),
    GrailQA's ``answer`` records, QALD's {QID: label}, Creak's true/false ``label``."""
    for index, record in enumerate(_load_json_list(path)):
        text = record.get("question") or (record.get("template_questions") or [None])[0] \
            or record.get("input") or record.get("sentence")
        if not text:
            raise DatasetError(f"{path}: record {index} has no question text")
        ids: dict[str, str] = {}
        for key in ("topic_entity", "qid_topic_entity", "topic_entity_ids"):
            for entity_id, name in (record.get(key) or {}).items():
                ids.setdefault(entity_id, name)
        qtype = record.get("compositionality_type") or record.get("level") or record.get("relation")
        yield Question(id=str(record.get("ID") or record.get("qid") or record.get("ex_id") or f"{path.stem}:{index}"),
                       text=str(text).strip(), answers=_tog_answers(record),
                       topic_entities=list(ids) or None, hop=record.get("num_edge"), qtype=qtype,
                       meta={"topic_names": list(ids.values())} if ids else {})


def _tog_answers(record: dict[str, Any]) -> list[list[str]]:
    answer = record.get("answer", record.get("answers"))
    if answer is None and "label" in record:
        return [[str(record["label"])]]
    if isinstance(answer, str):
        return [[answer, *[a for a in record.get("alias", []) if a != answer]]] if answer.strip() else []
    if isinstance(answer, dict):
        return [[label, qid] for qid, label in answer.items()]
    golds = []
    for item in answer or []:
        if isinstance(item, dict):
            names = [item.get("entity_name"), item.get("answer_argument")]
            golds.append([str(n) for n in names if n not in (None, "")])
        elif str(item).strip():
            golds.append([str(item)])
    return [g for g in golds if g]


# ---------------------------------------------------------------- Mintaka
def read_mintaka(path: Path) -> Iterator[Question]:
    """Mintaka: topic entities are the ``questionEntity`` items of type ``entity`` (QID and
    label); each answer is an entity (label and QID) or a value; a lone answer also counts
    under the dataset's ``mention`` text (``Yes`` for ``True``)."""
    for index, record in enumerate(_load_json_list(path)):
        entities = [e for e in record.get("questionEntity") or [] if e.get("entityType") == "entity"]
        answer = record.get("answer") or {}
        values = answer.get("answer") or []
        golds = []
        for value in values:
            if isinstance(value, dict):
                label = (value.get("label") or {}).get("en")
                golds.append([str(x) for x in (label, value.get("name")) if x])
            else:
                golds.append([_mintaka_value(value)])
        mention = answer.get("mention")
        if mention and len(golds) == 1 and mention not in golds[0]:
            golds[0].append(str(mention))
        if not golds and mention:
            golds = [[str(mention)]]
        yield Question(id=str(record.get("id", f"{path.stem}:{index}")), text=str(record["question"]).strip(),
                       answers=golds, topic_entities=[str(e["name"]) for e in entities] or None,
                       qtype=record.get("complexityType"),
                       meta={"topic_names": [e.get("label") or e.get("mention") or "" for e in entities],
                             "category": record.get("category")})


def _mintaka_value(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


# ---------------------------------------------------------------- JSONL (RoG and plain)
@dataclass(frozen=True)
class _FieldType:
    """What a JSONL field may hold: ``accepts`` checks a value, ``what`` names it for the error."""

    what: str
    accepts: Callable[[Any], bool]


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_texts(value: Any) -> bool:
    return _is_text(value) or (isinstance(value, list) and all(_is_text(item) for item in value))


_TEXT = _FieldType("a non-empty string", _is_text)
_STRING = _FieldType("a string", lambda value: isinstance(value, str))
_TEXTS = _FieldType("a non-empty string or a list of them", _is_texts)
_ID = _FieldType("a string or an integer", lambda value: isinstance(value, str) or _is_integer(value))
_INTEGER = _FieldType("an integer", _is_integer)
_ANSWERS = _FieldType("a string, or a list of answers each a string or a list of alias strings",
                      lambda value: isinstance(value, str) or (isinstance(value, list) and all(
                          isinstance(item, str) or (isinstance(item, list) and all(isinstance(a, str) for a in item))
                          for item in value)))
_TRIPLES = _FieldType("a list of [head, relation, tail] triples of strings",
                      lambda value: isinstance(value, list) and all(
                          isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) for x in triple)
                          for triple in value))
# Each reader's fields (absent or null: not given; "question" is required).
_JSONL_FIELDS = {"question": _TEXT, "answers": _ANSWERS, "topic_entities": _TEXTS, "id": _ID, "hop": _INTEGER,
                 "qtype": _STRING}
_ROG_FIELDS = {"question": _TEXT, "answer": _TEXTS, "a_entity": _TEXTS, "q_entity": _TEXTS, "id": _ID,
               "hop": _INTEGER, "qtype": _STRING, "graph": _TRIPLES}


def _jsonl_records(path: Path, fields: dict[str, _FieldType]) -> Iterator[tuple[int, dict[str, Any]]]:
    """The file's JSON objects with their line numbers, each field of ``fields`` checked for its
    type: a wrong one is an error at its line, never coerced (``12345`` is no question text) or
    dropped (a ``null`` among the topic entities)."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as error:
                raise DatasetError(f"{path}:{number}: not a JSON object: {error.msg}") from None
            if not isinstance(record, dict) or "question" not in record:
                raise DatasetError(f"{path}:{number}: expected a JSON object with a \"question\"")
            for name, field_type in fields.items():
                value = record.get(name)
                if (value is not None or name == "question") and not field_type.accepts(value):
                    raise DatasetError(f"{path}:{number}: \"{name}\" must be {field_type.what}, "
                                       f"not {_shown(value)}")
            yield number, record


def _shown(value: Any) -> str:
    """A JSON value as an error message quotes it, cut short."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def read_rog(path: Path) -> Iterator[Question]:
    """RoG per-question subgraphs (WebQSP/CWQ): ``graph`` is a list of [head, relation, tail]
    name triples that the harness loads into a scratch store for this question alone; the
    topics are the ``q_entity`` names, the gold answers ``answer`` (``a_entity`` when absent)."""
    for number, record in _jsonl_records(path, _ROG_FIELDS):
        graph = record.get("graph")
        if graph is None:
            raise DatasetError(f"{path}:{number}: \"graph\" must be {_TRIPLES.what}")
        answers = record.get("answer") or record.get("a_entity") or []
        topics = record.get("q_entity") or []
        yield Question(id=str(record.get("id", f"{path.stem}:{number}")), text=record["question"].strip(),
                       answers=_singletons(_as_list(answers)), topic_entities=_as_list(topics) or None,
                       hop=record.get("hop"), qtype=record.get("qtype"), meta={"graph": graph})


def read_jsonl(path: Path) -> Iterator[Question]:
    """Plain JSONL: ``answers`` lists gold answers, each a string or a list of aliases."""
    for number, record in _jsonl_records(path, _JSONL_FIELDS):
        golds = []
        for answer in _as_list(record.get("answers")):
            aliases = [alias for alias in _as_list(answer) if alias.strip()]
            if aliases:
                golds.append(aliases)
        yield Question(id=str(record.get("id", f"{path.stem}:{number}")), text=record["question"].strip(),
                       answers=golds, topic_entities=_as_list(record.get("topic_entities")) or None,
                       hop=record.get("hop"), qtype=record.get("qtype"))


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


READERS: dict[str, Callable[[Path], Iterator[Question]]] = {
    "metaqa": read_metaqa,
    "pathquestion": read_pathquestion,
    "worldcup": read_worldcup,
    "tog": read_tog,
    "rog": read_rog,
    "mintaka": read_mintaka,
    "simplequestions": read_simplequestions,
    "jsonl": read_jsonl,
}
