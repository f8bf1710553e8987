"""`localkg load freebase`: the real first lines of the dump, generated dumps, literals, filters,
damaged lines and truncated files, on the real Kùzu store."""
from __future__ import annotations

import gzip
import json
import re
import subprocess
import sys
from pathlib import Path

import pyoxigraph
import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.errors import LoadError, TooManyRejectsError
from localkg.loaders.freebase import PredicateFilter, freebase_id, load_freebase
from localkg.store import KG

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
FREEBASE = SHARED / "data" / "freebase_rdf"
MAKE_DUMP = SHARED / "tools" / "make_dump.py"
NS = "http://rdf.freebase.com/ns/"


def make_dump(out: Path, entities: int, *extra: str) -> dict:
    done = subprocess.run([sys.executable, str(MAKE_DUMP), "freebase", "--entities", str(entities), "--out",
                           str(out), *extra], check=True, capture_output=True, text=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def read_lines(path: Path) -> list[bytes]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        return handle.read().split(b"\n")[:-1]


def accounted(report) -> int:
    return (report.facts_loaded + report.duplicates + report.attributes + report.filtered + report.skipped
            + report.rejected)


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("fb") / "fb.nt.gz"
    make_dump(path, 400)
    return path


@pytest.fixture(scope="module")
def generated_kg(tmp_path_factory: pytest.TempPathFactory, generated: Path):
    """The generated dump loaded in 32 KiB chunks, so names often arrive in a later chunk than the
    edges that first mention a node (their aliases and types are then added to a stored node)."""
    kg = KG.create(tmp_path_factory.mktemp("fbdb") / "db")
    report = load_freebase(kg, [generated], workers=0, progress=False, chunk_bytes=32 << 10, batch_bytes=32 << 10)
    yield kg, report
    kg.close()


def test_real_head_of_the_dump_is_schema_and_bookkeeping(tmp_path: Path) -> None:
    with KG.create(tmp_path / "db") as kg:
        report = load_freebase(kg, [FREEBASE / "fb-rdf-10k-head.nt"], workers=0, progress=False)
        assert report.lines_read == 10_000 and report.rejected == 0
        assert report.filtered_by_reason["type.*"] >= 9_945  # every type.type.instance line
        assert report.facts_loaded == 0
        assert accounted(report) == report.lines_read
        assert kg.stats().facts == 0


def test_every_line_of_a_generated_dump_is_accounted_for(generated_kg) -> None:
    kg, report = generated_kg
    assert report.complete and report.rejected == 0 and report.chunks > 8
    assert accounted(report) == report.lines_read
    for pattern in ("type.*", "owl:*", "common.*", "kg.*"):
        assert report.filtered_by_reason[pattern] > 0
    assert report.filtered_by_reason["type.object.name in another language"] > 0
    assert kg.stats().facts == report.facts_loaded


def test_names_aliases_descriptions_and_types_are_attributes(generated: Path, generated_kg) -> None:
    kg, _ = generated_kg
    names, aliases, descriptions, types = {}, {}, {}, {}
    for raw in read_lines(generated):
        s, p, o, _ = raw.decode().split("\t")
        subject, predicate = freebase_id(s[1:-1]), freebase_id(p[1:-1])
        if not subject.startswith("m."):
            continue
        if predicate == "type.object.name" and o.endswith("@en"):
            names[subject] = o[1:-4]
        elif predicate == "common.topic.alias":
            aliases.setdefault(subject, []).append(o[1:-4])
        elif predicate == "common.topic.description":
            descriptions[subject] = o[1:-4].encode().decode("unicode_escape").encode("latin-1").decode()
        elif predicate == "type.object.type":
            types.setdefault(subject, []).append(freebase_id(o[1:-1]))
    assert len(names) == 400
    for mid, name in names.items():
        record = kg.node(mid)
        assert record.name == name and record.kind == "entity"
        assert set(aliases.get(mid, [])) <= set(record.aliases)
        assert record.types == tuple(types[mid])
        if mid in descriptions:
            assert record.description == descriptions[mid]
    assert not kg.find(next(iter(names.values())) + " zzz")
    for relation in ("type.object.name", "common.topic.alias", "type.object.type", "type.type.instance"):
        assert all(r[0] != relation for r in kg.relation_catalogue())


def test_unnamed_machine_ids_become_cvt_nodes_that_steps_hop_through(generated: Path, generated_kg) -> None:
    kg, report = generated_kg
    marriages = [raw.decode().split("\t") for raw in read_lines(generated) if b"people.person.spouse_s" in raw]
    assert marriages and report.details["cvt_nodes_marked"] == len(marriages)
    person, _, cvt, _ = marriages[0]
    person, cvt = freebase_id(person[1:-1]), freebase_id(cvt[1:-1])
    assert kg.node(cvt).kind == "cvt" and kg.node(cvt).types == ("people.marriage",)
    moves = [path for path in kg.steps(person) if len(path) == 2]
    assert any(path.steps[0].triple.tail.id == cvt and path.relations[1] == "people.marriage.from"
               for path in moves)
    assert kg.stats().cvts == len(marriages)


def test_literals_are_nodes_with_value_datatype_and_language(tmp_path: Path) -> None:
    lines = [
        f'<{NS}m.01>\t<{NS}type.object.name>\t"Ann"@en\t.',
        f'<{NS}m.01>\t<{NS}people.person.date_of_birth>\t"1961-08-04"^^<http://www.w3.org/2001/XMLSchema#date>\t.',
        f'<{NS}m.01>\t<{NS}people.person.height_meters>\t"1.85"^^<http://www.w3.org/2001/XMLSchema#float>\t.',
        f'<{NS}m.01>\t<{NS}base.x.count>\t"42"^^<http://www.w3.org/2001/XMLSchema#int>\t.',
        f'<{NS}m.01>\t<{NS}base.x.flag>\t"true"^^<http://www.w3.org/2001/XMLSchema#boolean>\t.',
        f'<{NS}m.01>\t<{NS}base.x.motto>\t"Paris \\"vaut\\" bien\\tune messe"@fr\t.',
        f'<{NS}m.01>\t<{NS}base.x.note>\t"caf\\u00E9"\t.',
    ]
    source = tmp_path / "lit.nt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with KG.create(tmp_path / "db") as kg:
        report = load_freebase(kg, [source], workers=0, progress=False)
        assert report.facts_loaded == 6 and report.attributes == 1
        tails = {t.relation: t.tail.id for t in kg.triples("m.01")}
        assert tails["people.person.date_of_birth"] == '"1961-08-04"^^xsd:date'
        assert tails["people.person.height_meters"] == '"1.85"^^xsd:float'
        assert tails["base.x.count"] == '"42"^^xsd:int'
        assert tails["base.x.flag"] == '"true"^^xsd:boolean'
        assert tails["base.x.motto"] == '"Paris \\"vaut\\" bien\tune messe"@fr'
        assert tails["base.x.note"] == '"café"'
        date = kg.node('"1961-08-04"^^xsd:date')
        assert (date.kind, date.value, date.datatype, date.lang) == ("literal", "1961-08-04", "xsd:date", "")
        motto = kg.node(tails["base.x.motto"])
        assert (motto.value, motto.lang) == ('Paris "vaut" bien\tune messe', "fr")


def test_relation_labels_come_from_schema_names_else_from_the_id(generated_kg) -> None:
    kg, report = generated_kg
    labels = {relation: label for relation, label, _, _ in kg.relation_catalogue()}
    assert labels["people.person.place_of_birth"] == "place of birth"  # the schema line's name
    assert labels["people.marriage.spouse"] == "spouse"  # no schema line: relation_label
    assert report.details["relations_labelled"] >= 15


def test_other_languages_only_when_asked(tmp_path: Path) -> None:
    lines = [f'<{NS}m.01>\t<{NS}type.object.name>\t"Munich"@en\t.',
             f'<{NS}m.01>\t<{NS}type.object.name>\t"München"@de\t.',
             f'<{NS}m.02>\t<{NS}type.object.name>\t"Köln"@de\t.',
             f'<{NS}m.03>\t<{NS}type.object.name>\t"Colour"@en-GB\t.',
             f'<{NS}m.01>\t<{NS}location.location.contains>\t<{NS}m.02>\t.',
             f'<{NS}m.01>\t<{NS}location.location.contains>\t<{NS}m.03>\t.']
    source = tmp_path / "names.nt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with KG.create(tmp_path / "en") as kg:
        load_freebase(kg, [source], workers=0, progress=False)
        assert kg.node("m.01").name == "Munich" and kg.node("m.01").aliases == ()
        assert kg.node("m.02").kind == "cvt"  # no English name at all
        assert kg.node("m.03").name == "Colour"  # a regional variant stands in
    with KG.create(tmp_path / "en-de") as kg:
        load_freebase(kg, [source], langs=["en", "de"], workers=0, progress=False)
        assert kg.node("m.01").name == "Munich" and kg.node("m.01").aliases == ("München",)
        assert kg.node("m.02").name == "Köln" and kg.node("m.02").kind == "entity"
        assert [n.id for n in kg.find("münchen")] == ["m.01"]


def test_filter_is_a_file_and_can_be_replaced(tmp_path: Path) -> None:
    default = PredicateFilter.read()
    assert default.match("type.type.instance") == "type.*" and default.match("owl:sameAs") == "owl:*"
    assert default.match("people.person.place_of_birth") is None
    keep_all = tmp_path / "none.txt"
    keep_all.write_text("# keep everything\n")
    with KG.create(tmp_path / "db") as kg:
        report = load_freebase(kg, [FREEBASE / "fb-rdf-10k-head.nt"], filter_path=keep_all, workers=0,
                               progress=False)
        assert report.filtered_by_reason == {"schema object attribute": 6}  # types of schema objects
        assert any(r[0] == "type.type.instance" for r in kg.relation_catalogue())
        with pytest.raises(LoadError, match="cannot read the filter file"):
            load_freebase(kg, [FREEBASE / "fb-rdf-10k-head.nt"], filter_path=tmp_path / "missing.txt")


def _valid_by_pyoxigraph(line: bytes) -> bool:
    try:
        return len(list(pyoxigraph.parse(line + b"\n", format=pyoxigraph.RdfFormat.N_TRIPLES))) == 1
    except SyntaxError:
        return False


def test_damaged_lines_are_rejected_with_line_and_reason_and_good_lines_load(tmp_path: Path) -> None:
    source = tmp_path / "bad.nt.gz"
    summary = make_dump(source, 300, "--corrupt", "0.05", "--seed", "3")
    assert summary["corrupted"] > 50
    with KG.create(tmp_path / "db") as kg:
        report = load_freebase(kg, [source], workers=0, progress=False)
        assert report.complete and accounted(report) == report.lines_read
        assert set(report.rejected_by_reason) <= {"blank line", "invalid UTF-8", "missing terminator",
                                                  "truncated line", "bad escape", "malformed term",
                                                  "malformed IRI", "malformed literal suffix",
                                                  "unescaped quote in literal", "malformed language tag"}
        assert {"blank line", "invalid UTF-8", "missing terminator", "truncated line"} <= set(report.rejected_by_reason)
        lines = read_lines(source)
        rows = [row.split("\t") for row in (tmp_path / "db" / "rejects.tsv").read_text().splitlines()[1:]]
        rejected = {int(row[1]) for row in rows}
        assert len(rows) == report.rejected
        for number in rejected:  # an independent parser agrees each rejected line is broken
            assert not lines[number - 1].strip() or not _valid_by_pyoxigraph(lines[number - 1])
        filter_ = PredicateFilter.read()
        facts = set()
        for number, raw in enumerate(lines, start=1):
            if not raw.strip() or not _valid_by_pyoxigraph(raw):
                continue
            assert number not in rejected  # every good line is used
            s, p, o = raw.decode().split("\t")[:3]
            predicate = freebase_id(p[1:-1])
            if filter_.match(predicate) is None and predicate not in (
                    "type.object.name", "common.topic.alias", "common.topic.description", "type.object.type"):
                facts.add((s, p, o))
        assert kg.stats().facts == len(facts)


def test_truncated_gzip_loads_what_it_can_then_resume_does_not_duplicate(tmp_path: Path, generated: Path) -> None:
    data = generated.read_bytes()
    small = {"chunk_bytes": 64 << 10, "batch_bytes": 64 << 10}
    truncated = tmp_path / "cut.nt.gz"
    truncated.write_bytes(data[: len(data) * 2 // 3])
    with KG.create(tmp_path / "db") as kg:
        with pytest.raises(LoadError, match=r"truncated or corrupt after line (\d+)") as caught:
            load_freebase(kg, [truncated], workers=0, progress=False, **small)
        last_line = int(re.search(r"after line (\d+)", str(caught.value)).group(1))
        loaded = kg.stats()
        assert loaded.facts > 0 and last_line > 1000
        with pytest.raises(LoadError, match="truncated"):
            load_freebase(kg, [truncated], resume=True, workers=0, progress=False, **small)
        assert kg.stats() == loaded
        truncated.write_bytes(data)  # the download completed: resume finishes the same load
        report = load_freebase(kg, [truncated], resume=True, workers=0, progress=False, **small)
        assert report.complete and report.resumed
        complete = kg.stats()
    with KG.create(tmp_path / "fresh") as kg:
        load_freebase(kg, [generated], workers=0, progress=False)
        assert kg.stats() == complete


def test_worker_processes_give_the_same_graph(tmp_path: Path, generated: Path, generated_kg) -> None:
    kg_one, report_one = generated_kg
    with KG.create(tmp_path / "db") as kg:
        report = load_freebase(kg, [generated], workers=2, progress=False, chunk_bytes=64 << 10, batch_bytes=64 << 10)
        assert kg.stats() == kg_one.stats()
        assert (report.lines_read, report.facts_loaded, report.filtered) == (
            report_one.lines_read, report_one.facts_loaded, report_one.filtered)
        assert kg.relation_catalogue() == kg_one.relation_catalogue()


def test_cli_load_freebase_prints_the_report(tmp_path: Path, generated: Path) -> None:
    result = CliRunner().invoke(main, ["load", "freebase", str(generated), "--db", str(tmp_path / "db"),
                                       "--workers", "0", "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["complete"] and report["facts_loaded"] > 0 and report["rejected"] == 0
    text = CliRunner().invoke(main, ["load", "freebase", str(generated), "--db", str(tmp_path / "db"),
                                     "--workers", "0", "--quiet"])
    assert text.exit_code == 0 and "duplicates" in text.output
    missing = CliRunner().invoke(main, ["load", "freebase", str(tmp_path / "nope.nt"), "--db", str(tmp_path / "db")])
    assert missing.exit_code != 0 and "Traceback" not in missing.output


def test_cli_load_opens_the_database_with_the_loads_pool_capped_arenas_and_system_arrow_allocator(
        tmp_path: Path, generated: Path, monkeypatch) -> None:
    import platform

    import pyarrow as pa

    from localkg.loaders import memory
    from localkg.store import KG

    opened: list[int] = []
    real_open = KG.open.__func__

    def spy(cls, *args, **kwargs):
        opened.append(kwargs.get("buffer_pool_bytes"))
        return real_open(cls, *args, **kwargs)

    monkeypatch.setattr(KG, "open", classmethod(spy))
    arrow_pool = pa.default_memory_pool()
    try:
        result = CliRunner().invoke(main, ["load", "freebase", str(generated), "--db", str(tmp_path / "db"),
                                           "--workers", "0", "--json", "--quiet", "--buffer-pool-mb", "96"])
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(arrow_pool)
    assert result.exit_code == 0, result.output
    assert opened == [96 << 20] and json.loads(result.output)["facts_loaded"] > 0
    if platform.system() == "Linux" and platform.libc_ver()[0] == "glibc":
        assert memory.limit_allocator_arenas() and memory._glibc() is not None


def test_a_program_opens_its_store_for_loading_as_the_cli_does(tmp_path: Path) -> None:
    """`localkg load` opens its store with the library's ``open_for_loading``, so a program that
    loads gets the same set-up: Arrow on the system allocator (glibc's arenas capped before Kùzu
    starts) and the load's own buffer pool."""
    import pyarrow as pa

    from localkg.loaders.memory import open_for_loading

    arrow_pool = pa.default_memory_pool()
    try:
        pa.set_memory_pool(pa.mimalloc_memory_pool())
        with open_for_loading(tmp_path / "db", 96 << 20) as kg:
            assert pa.default_memory_pool().backend_name == "system" and kg.buffer_pool_bytes == 96 << 20
    finally:
        pa.set_memory_pool(arrow_pool)


@pytest.mark.parametrize("name", ["localkg.loaders.ntriples", "localkg.loaders.freebase"])
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0


ODD_LINES = [
    '<http://rdf.freebase.com/ns/m.01> <http://rdf.freebase.com/ns/film.film.genre> <http://rdf.freebase.com/ns/m.02> .',
    '<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/common.topic.alias>\t"tab\tinside"@en\t.',
    "", "\t\t\t", "\t\t\t.", "<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/film.film.genre>",
    '<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/film.film.genre>\t<http://rdf.freebase.com/ns/m.03>\t. ',
    '<http://rdf.freebase.com/ns/m.01>\t<http://rdf.freebase.com/ns/film.film.genre>\t<http://rdf.freebase.com/ns/m.03>\t.\t',
]


def _lines_split_one_by_one(chunk):
    """The reference: each line through split_lines and split_triple."""
    from localkg.loaders.ntriples import BadLine, split_triple
    from localkg.loaders.parallel import ChunkResult, split_lines
    from localkg.store.batch import FactBatch

    result, rows = ChunkResult(FactBatch()), []
    for number, line in split_lines(chunk, result):
        try:
            rows.append((number, *split_triple(line)))
        except BadLine as error:
            result.reject(number, str(error), line)
    return rows, sorted(result.rejects), result.lines


def test_arrows_split_of_a_chunk_agrees_with_the_line_by_line_split(tmp_path: Path) -> None:
    from localkg.loaders.parallel import Chunk, ChunkResult
    from localkg.loaders.rows import split_rows
    from localkg.store.batch import FactBatch

    source = tmp_path / "bad.nt"
    make_dump(source, 200, "--corrupt", "0.05", "--seed", "4")
    lines = [line for line in source.read_bytes().split(b"\n") if b"\xff" not in line]  # one chunk Arrow splits
    lines[7:7] = [line.encode() for line in ODD_LINES]
    for data in (b"\n".join(lines), b"\n".join(lines) + b"\n", b"\n".join(lines + [b"\xff\xfe bad"])):
        chunk = Chunk(0, 0, 11, data, len(data), 0, 0)
        result = ChunkResult(FactBatch())
        rows = split_rows(chunk, result)
        got = list(zip(rows.numbers.tolist(), *(c.to_pylist() for c in (rows.subjects, rows.predicates, rows.objects))))
        expected_rows, expected_rejects, expected_lines = _lines_split_one_by_one(chunk)
        assert got == expected_rows
        assert sorted(result.rejects) == expected_rejects and len(expected_rejects) > 20
        assert result.lines == expected_lines
        written = data.split(b"\n")
        assert all(rows.line(i) == written[number - 11].decode() for i, number in enumerate(rows.numbers.tolist()))


def test_object_terms_parsed_in_columns_agree_with_term_value(tmp_path: Path) -> None:
    import pyarrow as pa

    from localkg.loaders.freebase import NAMESPACE, freebase_id, short_datatype
    from localkg.loaders.object_terms import ObjectTerms, _parse_other

    source = tmp_path / "bad.nt"
    make_dump(source, 200, "--corrupt", "0.05", "--seed", "5")
    terms = {line.split("\t")[2] for line in source.read_bytes().decode("utf-8", "replace").split("\n")
             if line.count("\t") == 3}
    terms |= {'"x"^^<http://www.w3.org/2001/XMLSchema#string>', '"x"', '""', '"7"^^<http://example.org/dt>',
              '"a\\"b"@en', '"a\\qb"', '"line\\nbreak"@en-GB', '"bad"@en_', '"x"^^<bad iri>', "</m.0abc>",
              "<http://www.w3.org/2002/07/owl#Thing>", "<http://rdf.freebase.com/ns/m.0\\u0041>", "_:b1",
              "<http://rdf.freebase.com/ns/has space>", '"unterminated', "plain", "<>", '"1"^^<>'}
    terms = sorted(terms)
    parsed = ObjectTerms.parse(pa.array(terms, pa.string()), NAMESPACE, freebase_id, short_datatype)
    columns = [c.to_pylist() for c in (parsed.node_id, parsed.value, parsed.lang, parsed.datatype)]
    assert len(terms) > 1000 and len(parsed.bad) > 10
    for position, term in enumerate(terms):
        expected = _parse_other(term, freebase_id, short_datatype)
        if isinstance(expected, Exception):
            assert parsed.bad.get(position) == str(expected), term
        else:
            assert position not in parsed.bad, term
            assert (*(c[position] for c in columns), bool(parsed.literal[position])) == expected, term


def test_cvt_marking_in_small_ranges_marks_the_same_nodes(tmp_path: Path, generated: Path, generated_kg,
                                                         monkeypatch) -> None:
    """The CVT pass walks the nodes a range of sequence numbers at a time; ranges of 50 must mark
    exactly what the default range does."""
    import localkg.store.writer as writer_module

    monkeypatch.setattr(writer_module, "update_span_for_pool", lambda buffer_pool_bytes: 50)
    reference, report = generated_kg
    with KG.create(tmp_path / "db") as kg:
        ranged = load_freebase(kg, [generated], workers=0, progress=False, chunk_bytes=32 << 10, batch_bytes=32 << 10)
        assert ranged.details["cvt_nodes_marked"] == report.details["cvt_nodes_marked"] > 0
        cvts = "MATCH (n:Node) WHERE n.kind = 'cvt' RETURN n.id ORDER BY n.id"
        assert kg.execute(cvts).get_all() == reference.execute(cvts).get_all()


def rejects_rows(db: Path) -> list[tuple[str, str, str]]:
    """The rejects file's rows as (line, reason, raw), without the run."""
    rows = (db / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(row.split("\t")[1:4]) for row in rows]


def facts(kg: KG) -> set[tuple[str, str, str]]:
    return set(map(tuple, kg.execute("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id").get_all()))


def test_max_rejects_stops_at_reject_n_plus_1_keeping_only_the_batches_before_it(tmp_path: Path) -> None:
    """--max-rejects 5 stops at the sixth reject: the batch that holds it is not written (nor
    anything after it), the batches before are, the message says what the store holds and how to go
    on, rejects.tsv ends with that reject, and --resume with a larger limit finishes the load."""
    source = tmp_path / "bad.nt"
    make_dump(source, 3000, "--corrupt", "0.01", "--seed", "6")
    with KG.create(tmp_path / "all" / "db") as reference:
        load_freebase(reference, [source], workers=0, progress=False, chunk_bytes=32 << 10)
        everything = facts(reference)
    sixth = rejects_rows(tmp_path / "all" / "db")[5]
    db = tmp_path / "db"
    with KG.create(db) as kg:
        with pytest.raises(TooManyRejectsError) as stopped:
            load_freebase(kg, [source], workers=0, progress=False, max_rejects=5, chunk_bytes=8 << 10,
                          batch_bytes=16 << 10)
        through = json.loads((db / "checkpoints" / "freebase.json").read_text())["position"]["line"]
        assert 0 < through < int(sixth[0])  # the last batch written ends before the line that stopped the load
        (tmp_path / "head.nt").write_bytes(b"".join(line + b"\n" for line in read_lines(source)[:through]))
        with KG.create(tmp_path / "head" / "db") as head:
            load_freebase(head, [tmp_path / "head.nt"], workers=0, progress=False)
            assert facts(kg) == facts(head)  # without the CVT marks and labels of the end, not yet run
        assert rejects_rows(db) == rejects_rows(tmp_path / "all" / "db")[:6]
        assert (f"stopped at {source}:{sixth[0]} ({sixth[1]}) before writing the batch that holds it, so the store "
                f"holds the {len(facts(kg)):,} new facts of the lines up to {source}:{through} and nothing of the "
                "lines after") in str(stopped.value)
        assert "--resume and a larger --max-rejects" in str(stopped.value)
        finished = load_freebase(kg, [source], resume=True, workers=0, progress=False, chunk_bytes=8 << 10,
                                 batch_bytes=16 << 10)
        assert finished.complete and facts(kg) == everything


def test_cli_max_rejects_in_a_dump_of_one_batch_writes_nothing(tmp_path: Path) -> None:
    """The reported case: a small dump (one batch) with --max-rejects 5 wrote the whole file
    (tests/test_load_wikidata.py checks `load wikidata` the same way)."""
    source = tmp_path / "bad.nt"
    make_dump(source, 1000, "--corrupt", "0.05", "--seed", "6")
    stopped = CliRunner().invoke(main, ["load", "freebase", str(source), "--db", str(tmp_path / "db"), "--workers",
                                        "0", "--max-rejects", "5", "--quiet"])
    assert stopped.exit_code == 1 and "Traceback" not in stopped.output
    with KG.open(tmp_path / "db") as kg:
        assert kg.stats().facts == 0
    assert len(rejects_rows(tmp_path / "db")) == 6
    message = stopped.stderr.strip().splitlines()[-1]
    assert message.startswith("Error: more than 5 lines rejected") and "the store holds nothing of this load" in message


@pytest.mark.parametrize("line_end", [b"\n", b"\r\n"])  # split by Arrow's reader, or line by line
def test_a_nul_character_in_any_kept_term_is_a_reject_with_its_line(tmp_path: Path, line_end: bytes) -> None:
    """A NUL became an id; now it is a reject, raw or written ``\\u0000``, in a subject, predicate,
    object or attribute."""
    lines = [f"<{NS}m.01>\t<{NS}people.person.spouse>\t<{NS}m.02>\t.".encode(),
             f"<{NS}m.0\x00>\t<{NS}people.person.spouse>\t<{NS}m.02>\t.".encode(),
             f"<{NS}m.01>\t<{NS}people.person\x00>\t<{NS}m.02>\t.".encode(),
             f"<{NS}m.01>\t<{NS}people.person.spouse>\t<{NS}m.0\\u0000>\t.".encode(),
             f'<{NS}m.01>\t<{NS}type.object.name>\t"Ann\\u0000"@en\t.'.encode(),
             f'<{NS}m.01>\t<{NS}people.person.nickname>\t"x\x00y"\t.'.encode(),
             f'<{NS}m.02>\t<{NS}type.object.name>\t"Bob"@en\t.'.encode()]
    source = tmp_path / "nul.nt"
    source.write_bytes(b"".join(line + line_end for line in lines))
    with KG.create(tmp_path / "db") as kg:
        report = load_freebase(kg, [source], workers=0, progress=False)
        texts = kg.execute("MATCH (n:Node) RETURN n.id, n.name, n.value").get_all()
        relations = [row[0] for row in kg.relation_catalogue()]
    assert report.rejected_by_reason == {"NUL character": 5} and report.facts_loaded == 1
    assert [int(row[0]) for row in rejects_rows(tmp_path / "db")] == [2, 3, 4, 5, 6]
    assert not any("\x00" in text for row in texts for text in row if text)
    assert not any("\x00" in relation for relation in relations)
