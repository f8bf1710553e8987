"""Entity linking on MetaQA entities: real Kùzu (exact names, full-text), real MiniLM and FAISS."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from localkg.errors import StaleIndexError
from localkg.indexes import fulltext
from localkg.indexes.build import build_indexes
from localkg.indexes.label_table import STOPWORDS, LabelTable, label_table_for, serves, table_directory
from localkg.indexes.linking import EntityLinker
from localkg.indexes.mentions import CAPITALISED, MARKED, NGRAM, QUOTED, detect_mentions, strip_marks
from localkg.store import KG, schema

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def metaqa_subset() -> list[tuple[str, str, str]]:
    """The first 500 MetaQA facts plus everything about Top Hat and Ginger Rogers (~940 entities)."""
    lines = (SHARED / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()
    chosen = lines[:500] + [line for line in lines[500:]
                            if "Top Hat|" in line or "Ginger Rogers" in line or line.endswith("|ginger rogers")]
    return [tuple(line.split("|")) for line in chosen]


@pytest.fixture(scope="module")
def kg(tmp_path_factory, scorer):
    kg = KG.create(tmp_path_factory.mktemp("linking") / "db")
    kg.add_triples(metaqa_subset())
    build_indexes(kg, "entities", scorer.embedder, progress=False)
    yield kg
    kg.close()


@pytest.fixture(scope="module")
def linker(kg, scorer) -> EntityLinker:
    return EntityLinker(kg, scorer.embedder)


def dev_questions(kg: KG, n: int) -> list[tuple[str, str]]:
    """The first ``n`` MetaQA 1-hop dev questions whose marked topic is in the subset graph."""
    found = []
    for line in (SHARED / "metaqa" / "1-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines():
        question = line.split("\t")[0]
        topic = re.search(r"\[(.+?)\]", question).group(1)
        if kg.has_node(topic):
            found.append((question, topic))
            if len(found) == n:
                break
    return found


def test_mentions_marked_quoted_capitalised_ngram() -> None:
    assert [(m.text, m.how) for m in detect_mentions("what movies did [Ginger Rogers] act in")] == [
        ("Ginger Rogers", MARKED)]
    spans = {m.text: m.how for m in detect_mentions('who wrote "Top Hat" with The Lord of the Rings cast')}
    assert spans["Top Hat"] == QUOTED and spans["The Lord of the Rings"] == CAPITALISED
    spans = {m.text: m.how for m in detect_mentions("who directed the departed?")}
    assert spans["the departed"] == NGRAM and "who" not in spans and "the" not in spans
    assert strip_marks("what does [Tom Cullen] act in") == "what does Tom Cullen act in"


def test_marked_mention_links_exactly(linker: EntityLinker) -> None:
    top = linker.link("what movies did [Ginger Rogers] act in", k=3)[0]
    assert (top.id, top.mention) == ("Ginger Rogers", "Ginger Rogers")
    assert "exact name of marked mention" in top.reason and "full-text match" in top.reason


def test_namesakes_differing_in_case_prefer_the_exact_case(linker: EntityLinker) -> None:
    ids = [c.id for c in linker.link("movies tagged [ginger rogers]", k=2)]
    assert ids == ["ginger rogers", "Ginger Rogers"]
    assert linker.link("what did [Ginger Rogers] star in", k=2)[0].id == "Ginger Rogers"


@pytest.mark.parametrize(("question", "expected"), [("what movies did Ginger Rogers act in", "Ginger Rogers"),
                                                   ("who directed top hat", "Top Hat"),
                                                   ("which films star ginger rogers", "Ginger Rogers")])
def test_unmarked_questions_link_by_detected_mentions(linker: EntityLinker, question: str, expected: str) -> None:
    assert linker.link(question, k=1)[0].id == expected


def test_misspelled_name_is_found_by_the_vector_index(linker: EntityLinker) -> None:
    top = linker.link("who directed [Top Hatt]", k=3)[0]
    assert top.id == "Top Hat" and "vector similarity" in top.reason and "exact" not in top.reason


def test_partial_name_is_found_by_full_text_search(kg: KG, scorer) -> None:
    no_vectors = EntityLinker(kg, scorer.embedder)
    no_vectors.vectors = None  # exact names and full-text search only
    top = no_vectors.link("which films starred [Rogers, Ginger]", k=3)[0]
    assert top.id in ("Ginger Rogers", "ginger rogers") and top.reason.startswith("full-text match")


def test_metaqa_dev_questions_with_and_without_marks(kg: KG, linker: EntityLinker) -> None:
    questions = dev_questions(kg, 40)
    assert len(questions) == 40
    marked = sum(linker.link(q, k=1)[0].id == topic for q, topic in questions)
    unmarked = sum(topic in [c.id for c in linker.link(strip_marks(q), k=5)] for q, topic in questions)
    assert marked == 40
    assert unmarked >= 38


def test_question_text_never_reaches_cypher_as_code(kg: KG, linker: EntityLinker) -> None:
    before = kg.stats()
    hostile = "who is [x'}) DETACH DELETE n //] and \"'); MATCH (n) DETACH DELETE n; //\""
    assert isinstance(linker.link(hostile), list)
    assert kg.stats() == before


def test_nothing_to_link_gives_no_candidates(linker: EntityLinker) -> None:
    assert linker.link("") == [] and linker.link("who is the") == []


def test_stale_entity_index_is_refused(tmp_path: Path, scorer) -> None:
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
        build_indexes(kg, "entities", scorer.embedder, progress=False)
        assert EntityLinker(kg, scorer.embedder).link("[Top Hat]")[0].id == "Top Hat"
        kg.add_triples([("Swing Time", "directed_by", "George Stevens")])
        with pytest.raises(StaleIndexError, match="localkg index build"):
            EntityLinker(kg, scorer.embedder)


def test_without_any_index_exact_names_still_link(tmp_path: Path) -> None:
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
        linker = EntityLinker(kg)
        assert linker.vectors is None
        top = linker.link("who directed Top Hat")[0]
        assert top.id == "Top Hat" and top.reason.startswith("exact name of capitalised mention")
        assert linker.link("who directed [Hat Top]")[0].reason.startswith("full-text match of 'top hat'")


def test_label_table_answers_as_kuzu_does_for_every_span(kg: KG, linker: EntityLinker) -> None:
    """All spans of a question are looked up at once in memory; each must find what a per-span
    Kùzu query finds, with the degree that ranks namesakes."""
    questions = [strip_marks(q) for q, _ in dev_questions(kg, 10)] + ["which films star ginger rogers"]
    keys = {schema.normalise_label(m.text) for q in questions for m in detect_mentions(q)}
    found = linker.labels.nodes_named(keys)
    for key in keys:
        rows = kg.execute("MATCH (l:Label {id: $key})-[:Names]->(n:Node) RETURN n.id, n.name", {"key": key}).get_all()
        assert sorted((n.id, n.name) for n in found.get(key, [])) == sorted((i, name or "") for i, name in rows), key
    assert {n.id for n in found["ginger rogers"]} == {"Ginger Rogers", "ginger rogers"}
    for node in found["ginger rogers"]:
        assert node.degree == sum(r.count for r in kg.relations(node.id))


def test_full_text_search_finds_the_labels_kuzus_full_text_index_finds(kg: KG, linker: EntityLinker) -> None:
    """The linker's in-memory BM25 must agree with Kùzu's full-text index over the same labels
    (``index build`` creates it too): the same best label, and mostly the same top ten."""
    names = [topic for _, topic in dev_questions(kg, 40)]
    first_words = [name.split()[0] for name in names if " " in name]
    queries = names + [w for w in first_words if w.casefold() not in STOPWORDS] + ["Top Hat dance", "rogers ginger"]
    overlap = []
    for text in queries:
        kuzu = fulltext.search_label_offsets(kg, text, 10)
        ours = linker.labels.search(text, 10)
        assert ours and kuzu, text
        kuzu_best = {offset for offset, score in kuzu if score >= kuzu[0][1] - 1e-6}
        ours_best = {offset for offset, score in ours if score >= ours[0][1] - 1e-6}
        assert ours_best & kuzu_best, (text, ours[:3], kuzu[:3])
        overlap.append(len({o for o, _ in ours} & {o for o, _ in kuzu}) / len(kuzu))
    assert sum(overlap) / len(overlap) >= 0.8


def test_a_misspelt_mark_asks_the_vector_index_and_an_exact_one_does_not(linker: EntityLinker) -> None:
    assert any("vector similarity" in c.reason for c in linker.link("who directed [Top Hatt]", k=5))
    assert not any("vector similarity" in c.reason for c in linker.link("who directed [Top Hat]", k=5))


def test_label_table_is_saved_by_index_build_and_reread_after_a_load(tmp_path: Path, scorer) -> None:
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
        build_indexes(kg, "entities", scorer.embedder, progress=False)
        saved = LabelTable.load(table_directory(kg))
        assert saved is not None and saved.generation == kg.generation and serves(saved, kg)
        linker = EntityLinker(kg, scorer.embedder)
        linker.vectors = None  # the load below makes the vector index stale; labels must follow it
        assert "Swing Time" not in [c.id for c in linker.link("who directed Swing Time")]
        kg.add_triples([("Swing Time", "directed_by", "George Stevens")])
        top = linker.link("who directed Swing Time", k=1)[0]
        assert top.id == "Swing Time" and top.reason.startswith("exact name")
        assert not serves(saved, kg)


def test_a_label_table_with_fewer_labels_than_the_graph_is_not_served(tmp_path: Path) -> None:
    """Labels written by a load killed before it bumped the generation are caught by the count."""
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
        table = LabelTable.from_graph(kg)
        assert serves(table, kg)
        kg.execute("CREATE (:Label {id: 'swing time'})")
        assert not serves(table, kg) and len(label_table_for(kg)) == len(table) + 1
