"""`localkg load wikidata`: real Wikidata records (Q42, P279, the 2015 dump excerpt, Wikidata
Toolkit mock dumps), generated dumps, every value type, ranks, qualifiers, the truthy N-Triples
dump and damaged lines, on the real Kùzu store."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.errors import LoadError, TooManyRejectsError
from localkg.loaders.wikidata import load_wikidata
from localkg.store import KG

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
WIKIDATA = SHARED / "data" / "wikidata_json"
MAKE_DUMP = SHARED / "tools" / "make_dump.py"


def make_dump(out: Path, entities: int, *extra: str) -> dict:
    done = subprocess.run([sys.executable, str(MAKE_DUMP), "wikidata", "--entities", str(entities), "--out",
                           str(out), *extra], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def dump_entities(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line.strip().rstrip(",")) for line in handle if line.strip() not in ("[", "]", "")]


def write_dump(path: Path, entities: list[dict]) -> Path:
    path.write_text("[\n" + ",\n".join(json.dumps(e) for e in entities) + "\n]\n", encoding="utf-8")
    return path


def snak(prop: str, kind: str, value, snaktype: str = "value") -> dict:
    if snaktype != "value":
        return {"snaktype": snaktype, "property": prop}
    return {"snaktype": "value", "property": prop, "datavalue": {"type": kind, "value": value}}


def statement(prop: str, kind: str, value, rank: str = "normal", qualifiers: dict | None = None,
              snaktype: str = "value", sid: str = "") -> dict:
    st = {"mainsnak": snak(prop, kind, value, snaktype), "type": "statement", "rank": rank,
          "id": sid or f"Q1${prop}-{abs(hash(json.dumps(value, sort_keys=True))) % 10**8}"}
    if qualifiers:
        st["qualifiers"] = qualifiers
    return st


def item(qid: str, label: str, claims: list[dict], **extra) -> dict:
    grouped: dict[str, list] = {}
    for st in claims:
        grouped.setdefault(st["mainsnak"]["property"], []).append(st)
    return {"type": "item", "id": qid, "labels": {"en": {"language": "en", "value": label}}, "claims": grouped,
            **extra}


@pytest.fixture(scope="module")
def fixture_kg(tmp_path_factory: pytest.TempPathFactory):
    kg = KG.create(tmp_path_factory.mktemp("wd") / "db")
    report = load_wikidata(kg, [WIKIDATA / "assembled_dump_format_fixture.json"], workers=0, progress=False)
    yield kg, report
    kg.close()


def test_douglas_adams_from_the_real_record(fixture_kg) -> None:
    kg, report = fixture_kg
    assert report.complete and report.rejected == 0
    assert report.details["items"] == 1 and report.details["properties"] == 2
    assert report.skipped_by_reason == {"array bracket": 2}
    adams = kg.node("Q42")
    assert adams.name == "Douglas Adams" and adams.kind == "entity"
    assert "Douglas Noël Adams" in adams.aliases and adams.description
    assert adams.types == ("Q5",)
    tails = {}
    for triple in kg.triples("Q42"):
        if triple.head.id == "Q42":
            tails.setdefault(triple.relation, set()).add(triple.tail.id)
    assert tails["P31"] == {"Q5"}
    assert tails["P569"] == {'"1952-03-11"^^xsd:date'}
    assert tails["P2048"] == {'"1.96"^^wd:Q11573'}  # height in metres: the unit travels with the value
    assert '"Douglas Adams"@en' in tails["P1559"]
    assert tails["P214"] == {'"113230702"'}  # an external id
    height = kg.node('"1.96"^^wd:Q11573')
    assert (height.kind, height.value, height.datatype) == ("literal", "1.96", "wd:Q11573")


def test_properties_fill_the_relation_catalogue(fixture_kg) -> None:
    kg, _ = fixture_kg
    catalogue = {r[0]: (r[1], r[2]) for r in kg.relation_catalogue()}
    assert catalogue["P279"][0] == "subclass of" and catalogue["P279"][1]
    assert catalogue["P31"][0] == "instance of"
    assert not kg.has_node("P279")  # a property is a relation, not an entity


def test_truthy_ranks_by_default_every_rank_when_asked(tmp_path: Path, fixture_kg) -> None:
    kg, report = fixture_kg
    record = dump_entities(WIKIDATA / "assembled_dump_format_fixture.json")[0]
    deprecated = [st for sts in record["claims"].values() for st in sts if st["rank"] == "deprecated"]
    assert report.filtered_by_reason["deprecated rank"] == len(deprecated) > 0
    assert report.filtered_by_reason["normal rank beside a preferred one"] > 0
    with KG.create(tmp_path / "all") as every:
        all_report = load_wikidata(every, [WIKIDATA / "assembled_dump_format_fixture.json"], ranks="all",
                                   workers=0, progress=False)
        assert all_report.filtered == 0
        assert every.stats().facts > kg.stats().facts


def test_generated_dump_keeps_exactly_the_truthy_item_statements(tmp_path: Path) -> None:
    source = tmp_path / "wd.json.gz"
    make_dump(source, 300)
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, [source], workers=0, progress=False)
        assert report.complete and report.rejected == 0
        assert report.details["items"] == 300 and report.details["properties"] == 16
        assert report.lines_read == 300 + 16 + 2
        expected, novalue = set(), 0
        for entity in dump_entities(source):
            for prop, statements in entity.get("claims", {}).items():
                preferred = [s for s in statements if s["rank"] == "preferred"]
                chosen = preferred or [s for s in statements if s["rank"] == "normal"]
                for st in chosen:
                    main_snak = st["mainsnak"]
                    if main_snak["snaktype"] != "value":
                        novalue += 1
                    elif main_snak["datavalue"]["type"] == "wikibase-entityid":
                        expected.add((entity["id"], prop, main_snak["datavalue"]["value"]["id"]))
        loaded = {(h, r, t) for h, r, t in kg.execute(
            "MATCH (a:Node)-[f:Fact]->(b:Node) WHERE b.kind = 'entity' RETURN a.id, f.rel, b.id").get_all()}
        assert loaded == expected
        assert report.skipped_by_reason.get("novalue", 0) + report.skipped_by_reason.get("somevalue", 0) == novalue
        assert kg.relation_catalogue()[0][1] in {"instance of", "country", "cast member", "spouse", "place of birth",
                                                 "director", "subclass of", "country of citizenship"}


def test_every_value_type(tmp_path: Path) -> None:
    claims = [
        statement("P31", "wikibase-entityid", {"entity-type": "item", "numeric-id": 5}),  # 2015 style, no "id"
        statement("P1647", "wikibase-entityid", {"entity-type": "property", "id": "P279"}),
        statement("P214", "string", "113230702"),
        statement("P569", "time", {"time": "+1952-03-11T00:00:00Z", "precision": 11, "timezone": 0}),
        statement("P570", "time", {"time": "+00000002001-05-00T00:00:00Z", "precision": 10}),
        statement("P571", "time", {"time": "-0500-00-00T00:00:00Z", "precision": 7}),
        statement("P585", "time", {"time": "+2020-01-02T13:14:15Z", "precision": 14}),
        statement("P1082", "quantity", {"amount": "+1234", "unit": "1"}),
        statement("P2048", "quantity", {"amount": "-1.5", "unit": "http://www.wikidata.org/entity/Q11573"}),
        statement("P1476", "monolingualtext", {"text": "Le Titre", "language": "fr"}),
        statement("P625", "globecoordinate", {"latitude": 52.5, "longitude": 13.25,
                                              "globe": "http://www.wikidata.org/entity/Q2"}),
        statement("P626", "globecoordinate", {"latitude": 4.5, "longitude": 137.4,
                                              "globe": "http://www.wikidata.org/entity/Q111"}),
        statement("P40", "wikibase-entityid", None, snaktype="novalue"),
        statement("P41", "wikibase-entityid", None, snaktype="somevalue"),
        statement("P42", "future-type", {"x": 1}),
    ]
    source = write_dump(tmp_path / "types.json", [item("Q1", "Universe", claims)])
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, [source], workers=0, progress=False)
        tails = {t.relation: t.tail.id for t in kg.triples("Q1")}
        assert tails == {
            "P31": "Q5", "P1647": "P279", "P214": '"113230702"',
            "P569": '"1952-03-11"^^xsd:date', "P570": '"2001-05"^^xsd:gYearMonth', "P571": '"-0500"^^xsd:gYear',
            "P585": '"2020-01-02T13:14:15Z"^^xsd:dateTime', "P1082": '"1234"^^xsd:decimal',
            "P2048": '"-1.5"^^wd:Q11573', "P1476": '"Le Titre"@fr',
            "P625": '"Point(13.25 52.5)"^^geo:wktLiteral',
            "P626": '"<http://www.wikidata.org/entity/Q111> Point(137.4 4.5)"^^geo:wktLiteral',
        }
        assert report.skipped_by_reason["novalue"] == 1 and report.skipped_by_reason["somevalue"] == 1
        assert report.skipped_by_reason["unsupported value type future-type"] == 1
        assert kg.node('"Le Titre"@fr').lang == "fr"


def test_qualifiers_make_statement_nodes_that_steps_hop_through(tmp_path: Path) -> None:
    marriage = statement("P26", "wikibase-entityid", {"entity-type": "item", "id": "Q2"}, sid="Q1$marriage",
                         qualifiers={"P580": [snak("P580", "time", {"time": "+1991-11-25T00:00:00Z", "precision": 11})],
                                     "P582": [snak("P582", "time", None, "somevalue")]})
    born = statement("P19", "wikibase-entityid", {"entity-type": "item", "id": "Q3"})
    source = write_dump(tmp_path / "q.json", [item("Q1", "Ann", [marriage, born]), item("Q2", "Bob", []),
                                              item("Q3", "Cambridge", [])])
    with KG.create(tmp_path / "plain") as kg:
        load_wikidata(kg, [source], workers=0, progress=False)
        assert {(t.relation, t.tail.id) for t in kg.triples("Q1")} == {("P26", "Q2"), ("P19", "Q3")}
    with KG.create(tmp_path / "qualified") as kg:
        report = load_wikidata(kg, [source], qualifiers=True, workers=0, progress=False)
        assert report.details["statement_nodes"] == 1 and report.details["qualifiers"] == 1
        assert report.skipped_by_reason["qualifier somevalue"] == 1
        assert kg.node("Q1$marriage").kind == "cvt"
        moves = {str(path) for path in kg.steps("Q1")}
        assert "Ann —P26→ (mediator) —P26→ Bob" in moves
        assert "Ann —P26→ (mediator) —P580→ 1991-11-25" in moves
        assert "Ann —P19→ Cambridge" in moves


def test_real_2015_excerpt_and_toolkit_mock_dumps(tmp_path: Path) -> None:
    files = [WIKIDATA / "sample-dump-20150815.json.gz", WIKIDATA / "wdtk-mock-dump-for-testing.json",
             WIKIDATA / "wdtk-mock-dump-with-bugs.json", WIKIDATA / "wdtk-wbgetentities-Q6-Q42-P31.json"]
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, files, workers=0, progress=False)
        assert report.complete and report.rejected == 0
        assert report.filtered_by_reason["lexeme entity"] == 1 and report.filtered_by_reason["missing entity"] == 1
        assert ("P31", "Q1454986") in {(t.relation, t.tail.id) for t in kg.triples("Q1")}  # numeric-id only
        assert kg.node("Q42").name == "Douglas Adams"  # from the wbgetentities response
        mock = kg.node("Q1")
        assert mock.kind == "entity"
        counts = kg.stats()
    with KG.create(tmp_path / "de") as kg:
        load_wikidata(kg, [WIKIDATA / "wdtk-mock-dump-for-testing.json"], langs=["de"], workers=0, progress=False)
        universe = kg.node("Q1")
        assert universe.name == "Universum" and "Kosmos" in universe.aliases
    assert counts.facts > 100


def test_truthy_ntriples_dump(tmp_path: Path) -> None:
    wd, wdt = "http://www.wikidata.org/entity/", "http://www.wikidata.org/prop/direct/"
    lines = [
        f'<{wd}Q31> <http://www.w3.org/2000/01/rdf-schema#label> "Belgium"@en .',
        f'<{wd}Q31> <http://schema.org/name> "Belgium"@en .',
        f'<{wd}Q31> <http://www.w3.org/2000/01/rdf-schema#label> "Belgique"@fr .',
        f'<{wd}Q31> <http://www.w3.org/2004/02/skos/core#altLabel> "Kingdom of Belgium"@en .',
        f'<{wd}Q31> <http://schema.org/description> "country in western Europe"@en .',
        f'<{wd}Q31> <{wdt}P31> <{wd}Q6256> .',
        f'<{wd}Q31> <{wdt}P1082> "+11584008"^^<http://www.w3.org/2001/XMLSchema#decimal> .',
        f'<{wd}Q31> <{wdt}P36> <http://www.wikidata.org/.well-known/genid/abc> .',
        f'<{wd}Q31> <http://wikiba.se/ontology#statements> "300"^^<http://www.w3.org/2001/XMLSchema#integer> .',
        f'<{wd}P31> <http://www.w3.org/2000/01/rdf-schema#label> "instance of"@en .',
        f'<https://en.wikipedia.org/wiki/Belgium> <http://schema.org/about> <{wd}Q31> .',
        f'<{wd}Q31> <{wdt}P17> <{wd}Q31>',
    ]
    source = tmp_path / "truthy.nt.gz"
    with gzip.open(source, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, [source], workers=0, progress=False)
        assert report.lines_read == len(lines) and report.rejected_by_reason == {"missing terminator": 1}
        assert report.facts_loaded == 2 and report.skipped_by_reason == {"somevalue": 1}
        belgium = kg.node("Q31")
        assert belgium.name == "Belgium" and belgium.aliases == ("Kingdom of Belgium",)
        assert belgium.description == "country in western Europe"
        assert dict((r[0], r[1]) for r in kg.relation_catalogue())["P31"] == "instance of"
        assert (report.facts_loaded + report.duplicates + report.attributes + report.filtered + report.skipped
                + report.rejected) == report.lines_read
        with pytest.raises(LoadError, match="neither qualifiers nor ranks"):
            load_wikidata(kg, [source], qualifiers=True)


def test_damaged_lines_are_rejected_and_the_rest_loads(tmp_path: Path) -> None:
    source = tmp_path / "bad.json.gz"
    summary = make_dump(source, 300, "--corrupt", "0.08", "--seed", "5")
    assert summary["corrupted"] > 10
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, [source], workers=0, progress=False)
        assert report.rejected > 0 and set(report.rejected_by_reason) <= {
            "blank line", "invalid UTF-8", "truncated line", "invalid JSON"}
        entities = report.details["items"] + report.details["properties"] + report.filtered_by_reason.get(
            "missing entity", 0)
        assert report.lines_read == entities + report.skipped_by_reason["array bracket"] + report.rejected
        rows = (tmp_path / "db" / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]
        assert len(rows) == report.rejected
        raw = gzip.open(source).read().split(b"\n")
        for row in rows:  # each rejected line really is not a JSON entity line
            line = raw[int(row.split("\t")[1]) - 1].strip().rstrip(b",")
            with pytest.raises(ValueError):
                json.loads(line.decode("utf-8"))


def test_cli_load_wikidata(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["load", "wikidata", str(WIKIDATA / "assembled_dump_format_fixture.json"),
                                       "--db", str(tmp_path / "db"), "--workers", "0", "--qualifiers", "--json",
                                       "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["details"]["items"] == 1 and report["complete"]
    wrong = CliRunner().invoke(main, ["load", "wikidata", str(WIKIDATA / "assembled_dump_format_fixture.json"),
                                      "--db", str(tmp_path / "db"), "--ranks", "best"])
    assert wrong.exit_code != 0


def test_docstring_examples() -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module("localkg.loaders.wikidata"))
    assert result.attempted > 0 and result.failed == 0


def dump_with_bad_lines(path: Path, items: int, bad_every: int) -> Path:
    """A JSON dump of ``items`` items (each Qn with one fact to Q1), a line of garbage after every
    ``bad_every``-th."""
    lines = ["["]
    for number in range(2, items + 2):
        lines.append(json.dumps(item(f"Q{number}", f"item {number}", [statement("P31", "wikibase-entityid",
                                                                                {"id": "Q1"})])) + ",")
        if number % bad_every == 0:
            lines.append("{not json")
    lines[-1] = lines[-1].rstrip(",")
    path.write_text("\n".join(lines + ["]"]) + "\n", encoding="utf-8")
    return path


def test_max_rejects_stops_at_reject_n_plus_1_keeping_only_the_batches_before_it(tmp_path: Path) -> None:
    """As in `load freebase` (one mechanism, loaders/rejects.py): the third reject stops a load
    with --max-rejects 2 before the batch that holds it; the batches before stay."""
    source = dump_with_bad_lines(tmp_path / "bad.json", 120, 20)
    raw = source.read_text(encoding="utf-8").splitlines()
    bad = [number for number, line in enumerate(raw, 1) if line == "{not json"]
    db = tmp_path / "db"
    with KG.create(db) as kg:
        with pytest.raises(TooManyRejectsError) as stopped:
            load_wikidata(kg, [source], workers=0, progress=False, max_rejects=2, chunk_bytes=2 << 10,
                          batch_bytes=2 << 10)
        through = json.loads((db / "checkpoints" / "wikidata.json").read_text())["position"]["line"]
        assert bad[1] < through < bad[2]
        stored = {row[0] for row in kg.execute("MATCH (a:Node)-[f:Fact]->() RETURN a.id").get_all()}
        assert stored == {json.loads(line.rstrip(","))["id"] for line in raw[:through] if line.startswith('{"type"')}
    rows = (db / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [int(row.split("\t")[1]) for row in rows] == bad[:3]
    assert (f"stopped at {source}:{bad[2]} (invalid JSON) before writing the batch that holds it, so the store holds "
            f"the {len(stored):,} new facts of the lines up to {source}:{through}") in str(stopped.value)


def test_cli_max_rejects_in_a_dump_of_one_batch_writes_nothing(tmp_path: Path) -> None:
    source = dump_with_bad_lines(tmp_path / "bad.json", 120, 20)
    stopped = CliRunner().invoke(main, ["load", "wikidata", str(source), "--db", str(tmp_path / "db"), "--workers",
                                        "0", "--max-rejects", "2", "--quiet"])
    assert stopped.exit_code == 1 and "Traceback" not in stopped.output
    with KG.open(tmp_path / "db") as kg:
        assert kg.stats().facts == 0
    assert len((tmp_path / "db" / "rejects.tsv").read_text().splitlines()) == 1 + 3
    assert "the store holds nothing of this load" in stopped.stderr.strip().splitlines()[-1]


def test_a_nul_character_in_a_kept_field_is_a_reject_with_its_line(tmp_path: Path) -> None:
    """A NUL (``\\u0000`` in JSON, or a raw byte) in anything the load keeps rejects the line; in
    a label of a language the load drops, it does not."""
    entities = [item("Q2", "fine", [statement("P31", "wikibase-entityid", {"id": "Q1"})]),
                item("Q3\u0000", "nul id", []),
                item("Q4", "nul\u0000label", []),
                item("Q5", "nul value", [statement("P1448", "string", "a\u0000b")]),
                item("Q6", "nul elsewhere", [], descriptions={"de": {"language": "de", "value": "x\u0000y"}})]
    source = write_dump(tmp_path / "nul.json", entities)
    with source.open("ab") as handle:
        handle.write(b'{"type": "item", "id": "Q7", "labels": {"en": {"language": "en", "value": "raw\x00"}}}\n')
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, [source], workers=0, progress=False)
        ids = {row[0] for row in kg.execute("MATCH (n:Node) RETURN n.id").get_all()}
        values = [v for row in kg.execute("MATCH (n:Node) RETURN n.name, n.value").get_all() for v in row if v]
    assert report.rejected_by_reason == {"NUL character": 4}
    rows = [row.split("\t") for row in (tmp_path / "db" / "rejects.tsv").read_text().splitlines()[1:]]
    assert [int(row[1]) for row in rows] == [3, 4, 5, 8]
    assert {"Q2", "Q6"} <= ids and not any("\x00" in text for text in ids | set(values))


def test_a_nul_character_in_the_truthy_dump_is_a_reject_with_its_line(tmp_path: Path) -> None:
    source = tmp_path / "truthy.nt"
    source.write_bytes(b"<http://www.wikidata.org/entity/Q2> <http://www.wikidata.org/prop/direct/P31> "
                       b"<http://www.wikidata.org/entity/Q1> .\n"
                       b"<http://www.wikidata.org/entity/Q3> <http://www.wikidata.org/prop/direct/P1448> "
                       b"\"a\\u0000b\" .\n"
                       b"<http://www.wikidata.org/entity/Q4> <http://www.w3.org/2000/01/rdf-schema#label> "
                       b"\"raw\x00\"@en .\n")
    with KG.create(tmp_path / "db") as kg:
        report = load_wikidata(kg, [source], workers=0, progress=False)
        ids = {row[0] for row in kg.execute("MATCH (n:Node) RETURN n.id").get_all()}
    assert report.rejected_by_reason == {"NUL character": 2} and report.facts_loaded == 1
    rows = [row.split("\t") for row in (tmp_path / "db" / "rejects.tsv").read_text().splitlines()[1:]]
    assert [int(row[1]) for row in rows] == [2, 3] and not any("\x00" in node for node in ids)
