"""The store's query primitives against hand-checked facts of MetaQA and FB15k-237."""
from __future__ import annotations

from pathlib import Path

import pytest

from localkg.errors import (DatabaseExistsError, DatabaseFormatError, DatabaseLockedError, DatabaseNotFoundError,
                            UnknownEntityError)
from localkg.loaders.triples import load_triples
from localkg.store import KG, FactBatch
from localkg.store.kg import JOIN_FROM_SOURCES, QueryLog
from localkg.store.model import CVT, LITERAL


# ---------------------------------------------------------------- MetaQA (ids are names)
def test_relations_of_a_movie_with_direction_and_count(metaqa_kg: KG) -> None:
    relations = {(r.relation, r.direction): r.count for r in metaqa_kg.relations("Top Hat", "out")}
    # kb.txt: Top Hat has 5 starred_actors, 2 written_by, 6 has_tags, 2 has_genre, 1 directed_by, 1 release_year
    assert relations == {("starred_actors", "out"): 4, ("has_tags", "out"): 6, ("written_by", "out"): 2,
                         ("has_genre", "out"): 2, ("directed_by", "out"): 1, ("release_year", "out"): 1}
    assert metaqa_kg.relations("Top Hat", "out")[0].relation == "has_tags"  # most frequent first


def test_relations_in_and_both(metaqa_kg: KG) -> None:
    incoming = metaqa_kg.relations("Ginger Rogers", "in")
    assert [(r.relation, r.direction, r.count) for r in incoming] == [("starred_actors", "in", 26)]
    assert metaqa_kg.relations("Ginger Rogers", "out") == []
    assert metaqa_kg.relations("Ginger Rogers", "both") == incoming
    assert incoming[0].label == "starred actors"


def test_neighbors_both_directions_and_limit(metaqa_kg: KG) -> None:
    directors = metaqa_kg.neighbors("Top Hat", "directed_by", "out")
    assert [n.id for n in directors] == ["Mark Sandrich"]
    movies = {n.id for n in metaqa_kg.neighbors("Ginger Rogers", "starred_actors", "in")}
    assert len(movies) == 26 and {"Top Hat", "Swing Time", "Kitty Foyle"} <= movies
    assert len(metaqa_kg.neighbors("Ginger Rogers", "starred_actors", "in", limit=5)) == 5
    assert metaqa_kg.neighbors("Ginger Rogers", "starred_actors", "out") == []


def test_triples_have_names_and_orientation(metaqa_kg: KG) -> None:
    triples = metaqa_kg.triples("Top Hat")
    assert len(triples) == 16 + sum(1 for t in triples if t.tail.id == "Top Hat")
    directed = [t for t in triples if t.relation == "directed_by"]
    assert [(t.head.name, t.tail.name) for t in directed] == [("Top Hat", "Mark Sandrich")]
    assert str(directed[0]) == "Top Hat —directed_by→ Mark Sandrich"


def test_name_find_and_stats(metaqa_kg: KG) -> None:
    assert metaqa_kg.name("Top Hat") == "Top Hat"
    assert [n.id for n in metaqa_kg.find("  top   HAT ")][:1] == ["Top Hat"]
    assert metaqa_kg.find("no such movie at all") == []
    stats = metaqa_kg.stats()
    assert (stats.facts, stats.relations, stats.nodes) == (133_582, 9, 43_234)


def test_paths_between_two_entities(metaqa_kg: KG) -> None:
    paths = metaqa_kg.paths("Ginger Rogers", "Mark Sandrich", max_hops=2, limit=50)
    texts = {str(p) for p in paths}
    assert "Ginger Rogers —starred_actors⁻¹→ Top Hat —directed_by→ Mark Sandrich" in texts
    assert all(p.start.id == "Ginger Rogers" and p.end.id == "Mark Sandrich" for p in paths)
    assert all(len(p) <= 2 for p in paths)
    assert [len(p) for p in paths] == sorted(len(p) for p in paths)


def test_subgraph_distances_and_filter(metaqa_kg: KG) -> None:
    sub = metaqa_kg.subgraph(["Top Hat"], hops=1, relation_filter={"has_tags"})
    assert sub.distance["Top Hat"] == 0 and sub.distance["Mark Sandrich"] == 1
    assert all(t.relation != "has_tags" for t in sub.triples)
    assert "astaire and rogers" not in sub.distance
    two = metaqa_kg.subgraph(["Top Hat"], hops=2, relation_filter=lambda rel: rel == "directed_by")
    assert {t.relation for t in two.triples} == {"directed_by"}
    assert two.distance.get("The Gay Divorcee") == 2  # Top Hat ← Mark Sandrich → The Gay Divorcee


def test_unknown_entity(metaqa_kg: KG) -> None:
    with pytest.raises(UnknownEntityError):
        metaqa_kg.relations("Not A Movie 12345")
    with pytest.raises(UnknownEntityError):
        metaqa_kg.name("Not A Movie 12345")
    assert metaqa_kg.neighbors("Not A Movie 12345", "directed_by") == []


def test_direction_is_validated(metaqa_kg: KG) -> None:
    with pytest.raises(ValueError):
        metaqa_kg.relations("Top Hat", "sideways")


def test_user_text_is_a_parameter_not_cypher(metaqa_kg: KG) -> None:
    hostile = "x'}) MATCH (n) DETACH DELETE n //"
    assert metaqa_kg.find(hostile) == []
    assert metaqa_kg.neighbors(hostile, hostile) == []
    assert metaqa_kg.stats().facts == 133_582



@pytest.mark.parametrize("relation", [None, "directed_by"])
@pytest.mark.parametrize("direction", ["out", "in"])
def test_reach_joins_a_large_frontier_with_the_same_rows_as_filtering_it(metaqa_kg: KG, direction: str,
                                                                        relation: str | None) -> None:
    """From JOIN_FROM_SOURCES sources reach joins them with the facts: the rows must be the ones
    the node filter gives the same sources in smaller sets."""
    films = [row[0] for row in metaqa_kg.rows(
        "MATCH (a:Node)-[f:Fact]->(b:Node) WHERE f.rel = 'directed_by' RETURN DISTINCT a.id ORDER BY a.id LIMIT 450")]
    sources = films if direction == "out" else [node.id for film in films[:300]
                                                 for node in metaqa_kg.neighbors(film, "directed_by", "out")]
    sources = list(dict.fromkeys(sources))
    assert len(sources) >= JOIN_FROM_SOURCES
    joined = metaqa_kg.reach(sources, relation, direction)
    chunk = JOIN_FROM_SOURCES // 2
    filtered = [row for start in range(0, len(sources), chunk)
                for row in metaqa_kg.reach(sources[start:start + chunk], relation, direction)]
    assert filtered and sorted(map(repr, joined)) == sorted(map(repr, filtered))
    assert len(metaqa_kg.reach(sources, relation, direction, limit=7)) == 7

# ---------------------------------------------------------------- FB15k-237 (/m/ ids, names file)
@pytest.fixture(scope="module")
def fb15k_kg(tmp_path_factory: pytest.TempPathFactory, shared: Path):
    kg = KG.create(tmp_path_factory.mktemp("fb15k") / "db")
    summary = load_triples(kg, [shared / "fb15k237" / "train.txt"], names=shared / "fb15k237" / "entity2text.txt",
                           progress=False)
    assert summary.lines_read == 272_115 and summary.rejected == 0
    yield kg
    kg.close()


def test_fb15k_names_and_compound_relation_labels(fb15k_kg: KG) -> None:
    assert fb15k_kg.name("/m/0c94fn") == "Gary Rydstrom"
    assert [n.id for n in fb15k_kg.find("Gary Rydstrom")] == ["/m/0c94fn"]
    relations = {r.relation: r for r in fb15k_kg.relations("/m/0c94fn", "out")}
    nominated = relations["/award/award_nominee/award_nominations./award/award_nomination/nominated_for"]
    assert nominated.label == "award nominations / nominated for"
    total = sum(r.count for r in fb15k_kg.relations("/m/0c94fn", "both"))
    assert total == 53  # grep -cP "^/m/0c94fn\t|\t/m/0c94fn$" train.txt


def test_fb15k_neighbors_in(fb15k_kg: KG) -> None:
    crew_of = fb15k_kg.neighbors("/m/0c94fn", "/film/film/other_crew./film/film_crew_gig/crewmember", "in")
    assert "/m/01jrbb" in {n.id for n in crew_of}


# ---------------------------------------------------------------- CVTs, literals, lifecycle
@pytest.fixture()
def marriage_kg(tmp_path: Path):
    kg = KG.create(tmp_path / "db")
    batch = FactBatch()
    batch.add_entity("m.obama", name="Barack Obama")
    batch.add_entity("m.michelle", name="Michelle Obama")
    batch.add_entity("m.cvt1", kind=CVT)
    batch.add_literal('"1992-10-03"^^xsd:date', "1992-10-03", "xsd:date")
    batch.add_fact("m.obama", "people.person.spouse_s", "m.cvt1")
    batch.add_fact("m.cvt1", "people.marriage.spouse", "m.michelle")
    batch.add_fact("m.cvt1", "people.marriage.from", '"1992-10-03"^^xsd:date')
    with kg.writer() as writer:
        writer.write(batch)
    yield kg
    kg.close()


def test_steps_hop_through_cvt(marriage_kg: KG) -> None:
    moves = marriage_kg.steps("m.obama", hop_cvt=True)
    texts = sorted(str(m) for m in moves)
    assert texts == [
        "Barack Obama —people.person.spouse_s→ (mediator) —people.marriage.from→ 1992-10-03",
        "Barack Obama —people.person.spouse_s→ (mediator) —people.marriage.spouse→ Michelle Obama",
    ]
    plain = marriage_kg.steps("m.obama", hop_cvt=False)
    assert [m.end.kind for m in plain] == [CVT]


def test_literal_is_a_node_with_value(marriage_kg: KG) -> None:
    record = marriage_kg.node('"1992-10-03"^^xsd:date')
    assert (record.kind, record.value, record.datatype) == (LITERAL, "1992-10-03", "xsd:date")
    assert marriage_kg.name('"1992-10-03"^^xsd:date') == "1992-10-03"
    assert marriage_kg.find("1992-10-03") == []  # literals are not labels
    stats = marriage_kg.stats()
    assert (stats.entities, stats.cvts, stats.literals) == (2, 1, 1)


def test_every_primitive_call_is_logged(marriage_kg: KG) -> None:
    """A reasoner's ``kg_queries`` counts every query the store ran for it: ``steps`` and
    ``subgraph`` as the ``triples`` calls they make, ``name`` as its ``node`` call."""
    calls = {
        "node": lambda kg: kg.node("m.obama"), "has_node": lambda kg: kg.has_node("m.obama"),
        "name": lambda kg: kg.name("m.obama"), "relations": lambda kg: kg.relations("m.obama"),
        "neighbors": lambda kg: kg.neighbors("m.obama", "people.person.spouse_s"),
        "reach": lambda kg: kg.reach(["m.obama"], "people.person.spouse_s"),
        "triples": lambda kg: kg.triples("m.obama"), "find": lambda kg: kg.find("Barack Obama"),
        "steps": lambda kg: kg.steps("m.obama"), "paths": lambda kg: kg.paths("m.obama", "m.michelle"),
        "subgraph": lambda kg: kg.subgraph(["m.obama"], hops=1), "stats": lambda kg: kg.stats(),
        "relation_catalogue": lambda kg: kg.relation_catalogue(), "iter_nodes": lambda kg: list(kg.iter_nodes()),
    }
    logged = {}
    for primitive, call in calls.items():
        marriage_kg.log = QueryLog()
        call(marriage_kg)
        logged[primitive] = {entry["primitive"] for entry in marriage_kg.log.entries}
    marriage_kg.log = None
    assert logged == {**{primitive: {primitive} for primitive in calls}, "name": {"node"}, "steps": {"triples"},
                      "subgraph": {"triples"}}


def test_open_missing_create_twice_and_lock(tmp_path: Path) -> None:
    with pytest.raises(DatabaseNotFoundError):
        KG.open(tmp_path / "nothing")
    kg = KG.create(tmp_path / "db")
    try:
        with pytest.raises(DatabaseExistsError):
            KG.create(tmp_path / "db")
        with pytest.raises(DatabaseLockedError, match="one process"):
            _open_in_other_process(tmp_path / "db")
    finally:
        kg.close()
    reopened = KG.open(tmp_path / "db", read_only=True)
    reopened.close()


def _open_in_other_process(path: Path) -> None:
    import subprocess
    import sys

    code = ("import sys\nfrom localkg.store import KG\nfrom localkg.errors import DatabaseLockedError\n"
            f"try:\n    KG.open({str(path)!r}, read_only=True)\nexcept DatabaseLockedError as e:\n"
            "    print(e); sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    if done.returncode == 3:
        raise DatabaseLockedError(done.stdout.strip())
    raise AssertionError(f"second process opened a locked database: {done.stdout} {done.stderr}")


def _counts(kg: KG, entity: str) -> list[tuple[str, str, int]]:
    return [(r.relation, r.direction, r.count) for r in kg.relations(entity)]


@pytest.mark.parametrize("span", [1 << 20, 2])
def test_only_hubs_keep_a_relation_summary_and_later_loads_extend_it(tmp_path: Path, monkeypatch, span: int) -> None:
    """A node that passes hub_degree gets a summary counted from its edges when the load closes
    (replacing summary rows an older database kept for every node); later loads append to it.
    Every other node's relations are counted from its edges, so both read the same. Hubs are
    found a range of sequence numbers at a time: ranges of 2 find the same."""
    import localkg.store.writer as writer_module

    monkeypatch.setattr(writer_module, "update_span_for_pool", lambda buffer_pool_bytes: span)
    with KG.create(tmp_path / "db") as kg:
        kg.update_manifest(hub_degree=3)
        kg.add_triples([("x0", "r", "hub"), ("hub", "s", "y")])
        kg.execute("MATCH (n:Node {id: 'hub'}), (r:Relation {id: 'r'}) CREATE (n)-[:HasRel {dir: 'in', n: 7}]->(r)")
        assert _counts(kg, "hub") == [("r", "in", 1), ("s", "out", 1)]  # not a hub: its edges count
        kg.add_triples([(f"x{i}", "r", "hub") for i in range(1, 4)])
        summarised = "MATCH (n:Node)-[h:HasRel]->() RETURN n.id, count(h)"
        assert kg.execute(summarised).get_all() == [["hub", 2]]
        assert _counts(kg, "hub") == [("r", "in", 4), ("s", "out", 1)]
        kg.add_triples([("x9", "r", "hub"), ("hub", "t", "z"), ("x0", "q", "y")])
        assert kg.execute(summarised).get_all() == [["hub", 4]]  # appended, not recounted
        assert _counts(kg, "hub") == [("r", "in", 5), ("s", "out", 1), ("t", "out", 1)]
        assert _counts(kg, "x0") == [("q", "out", 1), ("r", "out", 1)]
        assert [r.count for r in kg.relations("hub", "out")] == [1, 1]


def test_paths_do_not_walk_through_hubs(tmp_path: Path) -> None:
    kg = KG.create(tmp_path / "db")
    try:
        kg.update_manifest(hub_degree=3)
        kg.add_triples([("a", "r", "hub"), ("hub", "r", "b")] + [(f"x{i}", "r", "hub") for i in range(5)]
                       + [("a", "s", "m"), ("m", "s", "b")])
        assert kg.node("hub").id == "hub"
        assert [str(p) for p in kg.paths("a", "b", max_hops=2)] == ["a —s→ m —s→ b"]
        assert len(kg.paths("a", "b", max_hops=2, through_hubs=True)) == 2
        assert [str(p) for p in kg.paths("a", "hub", max_hops=1)] == ["a —r→ hub"]  # a hub can be an end
    finally:
        kg.close()


def test_old_format_database_is_upgraded_on_open(tmp_path: Path) -> None:
    """A format-1 database (no hub flags, no sequence numbers, no hash sets) opens read-write,
    is upgraded, and takes appends, including updates of the nodes it already held."""
    import kuzu

    from localkg.store import schema

    db = tmp_path / "db"
    db.mkdir()
    old = kuzu.Database(str(db / schema.GRAPH_FILE))
    connection = kuzu.Connection(old)
    for statement in schema.DDL:
        connection.execute(statement.replace(", hub BOOLEAN DEFAULT false, seq INT64", ""))
    connection.execute("CREATE (:Node {id: 'a', name: 'a', kind: 'entity'})-[:Fact {rel: 'r'}]->"
                       "(:Node {id: 'b', name: 'b', kind: 'entity'})")
    connection.execute("CREATE (:Relation {id: 'r', label: 'r', description: '', facts: 1})")
    connection.close()
    old.close()
    (db / schema.MANIFEST_FILE).write_text('{"format": 1, "generation": 0}')
    with pytest.raises(DatabaseFormatError, match="open it once read-write"):
        KG.open(db, read_only=True)
    with KG.open(db) as kg:
        assert kg.manifest["format"] == schema.FORMAT_VERSION
        batch = FactBatch()
        batch.add_fact("b", "r", "c")
        batch.add_entity("b", name="Bee", explicit=True, aliases=["the b"])
        with kg.writer() as writer:
            writer.write(batch)
        assert kg.node("b").name == "Bee" and list(kg.node("b").aliases) == ["the b"]
        numbers = [row[0] for row in kg.execute("MATCH (n:Node) RETURN n.seq ORDER BY n.seq").get_all()]
        assert numbers == [0, 1, 2]
        assert [str(p) for p in kg.paths("a", "c", max_hops=2)] == ["a —r→ Bee —r→ c"]
