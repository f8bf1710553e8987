"""Custom-KG ingest: every format, append + dedupe, rejects accounting, bad files, interrupted loads."""
from __future__ import annotations

import bz2
import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localkg.errors import LoadError, TooManyRejectsError
from localkg.loaders.report import LoadReport
from localkg.loaders.triples import load_triples
from localkg.store import KG
from localkg.store.model import CVT, LITERAL


@pytest.fixture()
def kg(tmp_path: Path):
    store = KG.create(tmp_path / "db")
    yield store
    store.close()


def accounted(report: LoadReport) -> bool:
    return report.lines_read == (report.facts_loaded + report.duplicates + report.attributes + report.skipped
                                 + report.rejected)


def test_metaqa_pipe_separated(kg: KG, shared: Path, tmp_path: Path) -> None:
    sample = tmp_path / "kb-sample.txt"
    lines = (shared / "metaqa" / "kb.txt").read_text(encoding="utf-8").splitlines()[:2000]
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = load_triples(kg, [sample], progress=False)
    assert (report.lines_read, report.facts_loaded, report.rejected) == (2000, 2000, 0)
    head, relation, tail = lines[0].split("|")
    assert tail in {n.id for n in kg.neighbors(head, relation, "out")}


@pytest.mark.parametrize("kb, facts", [("2H-kb.txt", None), ("WC2014.txt", None), ("PQL2-KB.txt", None)])
def test_pathquestion_and_worldcup_tab_separated(kg: KG, shared: Path, kb: str, facts: None) -> None:
    path = shared / "pathquestion" / kb
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    report = load_triples(kg, [path], progress=False)
    assert accounted(report) and report.rejected == 0
    assert report.facts_loaded + report.duplicates == len(lines)
    assert kg.stats().facts == report.facts_loaded
    head, relation, tail = lines[0].split("\t")
    assert tail in {n.id for n in kg.neighbors(head, relation, "out")}


def test_worldcup_fact(kg: KG, shared: Path) -> None:
    load_triples(kg, [shared / "pathquestion" / "WC2014.txt"], progress=False)
    assert "AS_Monaco" in {n.id for n in kg.neighbors("JOAO_MOUTINHO", "plays_in_club", "out")}


def test_csv_with_header_and_quoted_commas(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.csv"
    path.write_text('head,relation,tail\n"Smith, John",born_in,Paris\nParis,capital_of,France\n', encoding="utf-8")
    report = load_triples(kg, [path], progress=False)
    assert (report.lines_read, report.facts_loaded, report.skipped) == (3, 2, 1)
    assert [n.id for n in kg.neighbors("Smith, John", "born_in")] == ["Paris"]


def test_jsonl_with_a_bad_line(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.jsonl"
    path.write_text('{"head": "a", "relation": "r", "tail": "b"}\n{"head": "a", "relation": "r"}\n'
                    'not json\n{"head": "b", "relation": "r", "tail": "c"}\n', encoding="utf-8")
    report = load_triples(kg, [path], progress=False)
    assert (report.lines_read, report.facts_loaded, report.rejected) == (4, 2, 2)
    assert accounted(report)


def test_ntriples_with_literals_labels_and_blank_nodes(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.nt"
    path.write_text(
        '<http://ex.org/Paris> <http://www.w3.org/2000/01/rdf-schema#label> "Paris"@en .\n'
        '<http://ex.org/Paris> <http://ex.org/population> "2148000"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
        '<http://ex.org/Paris> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex.org/City> .\n'
        '<http://ex.org/Paris> <http://ex.org/twinned> _:t1 .\n'
        '_:t1 <http://ex.org/with> <http://ex.org/Rome> .\n'
        '<http://ex.org/Paris> <http://ex.org/broken> "unterminated .\n', encoding="utf-8")
    report = load_triples(kg, [path], progress=False)
    assert (report.lines_read, report.facts_loaded, report.attributes, report.rejected) == (6, 3, 2, 1)
    paris = kg.node("http://ex.org/Paris")
    assert (paris.name, paris.types) == ("Paris", ("http://ex.org/City",))
    population = kg.neighbors("http://ex.org/Paris", "http://ex.org/population")
    assert [(n.kind, n.name) for n in population] == [(LITERAL, "2148000")]
    assert kg.node(population[0].id).datatype == "xsd:integer"
    moves = kg.steps("http://ex.org/Paris")
    assert any(len(m) == 2 and m.steps[0].target.kind == CVT and m.end.id == "http://ex.org/Rome" for m in moves)


def test_real_freebase_lines_as_ntriples(kg: KG, shared: Path, tmp_path: Path) -> None:
    head = (shared / "freebase_rdf" / "fb-rdf-10k-head.nt").read_text(encoding="utf-8").splitlines()[:500]
    path = tmp_path / "fb.nt"
    path.write_text("\n".join(head) + "\n", encoding="utf-8")
    report = load_triples(kg, [path], format="nt", progress=False)
    assert accounted(report) and report.lines_read == 500
    assert report.facts_loaded > 0


def test_turtle_document(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.ttl"
    path.write_text(
        "@prefix ex: <http://ex.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        "@prefix skos: <http://www.w3.org/2004/02/skos/core#> .\n"
        'ex:tokyo rdfs:label "Tokyo" ; skos:altLabel "Edo" ;\n  ex:country ex:japan ;\n'
        '  ex:founded "1457-01-01"^^<http://www.w3.org/2001/XMLSchema#date> .\n'
        'ex:japan rdfs:label "Japan" .\n', encoding="utf-8")
    report = load_triples(kg, [path], progress=False)
    assert (report.facts_loaded, report.attributes) == (2, 3)
    assert [n.id for n in kg.find("edo")] == ["http://ex.org/tokyo"]
    assert [n.name for n in kg.neighbors("http://ex.org/tokyo", "http://ex.org/country")] == ["Japan"]
    founded = kg.neighbors("http://ex.org/tokyo", "http://ex.org/founded")
    assert founded[0].id == '"1457-01-01"^^xsd:date'


def test_turtle_syntax_error_is_one_clear_error_and_keeps_the_statements_before_it(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "bad.ttl"
    path.write_text("@prefix ex: <http://ex.org/> .\n" + "".join(f"ex:a{i} ex:b ex:c .\n" for i in range(6))
                    + "ex:a ex:b \n", encoding="utf-8")
    with pytest.raises(LoadError, match="Turtle syntax error.*the 6 statements before it were loaded"):
        load_triples(kg, [path], progress=False)
    assert kg.stats().facts == 6


def test_progress_of_a_compressed_file_counts_its_compressed_bytes(kg: KG, shared: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar's total is the file's size, so it counts the file's (compressed) bytes, not the text."""
    import localkg.loaders.triples as triples_module
    from tqdm import tqdm

    bars = []

    class Recorded(tqdm):
        def close(self) -> None:
            bars.append((self.n, self.total))
            super().close()

    monkeypatch.setattr(triples_module, "tqdm", Recorded)
    path = tmp_path / "kb.txt.gz"
    path.write_bytes(gzip.compress((shared / "metaqa" / "kb.txt").read_bytes()))
    load_triples(kg, [path], format="psv", batch_lines=20_000, progress=True)
    assert set(bars) == {(path.stat().st_size, path.stat().st_size)}  # (close runs twice: with, then del)


def test_truncated_gzip_keeps_every_complete_line(kg: KG, shared: Path, tmp_path: Path) -> None:
    """MetaQA's kb.txt gzipped and cut in half: every complete line before the cut is loaded."""
    whole = gzip.compress((shared / "metaqa" / "kb.txt").read_bytes())
    path = tmp_path / "kb.txt.gz"
    path.write_bytes(whole[: len(whole) // 2])
    complete = 0
    with gzip.open(path, "rb") as handle:
        try:
            for _ in handle:
                complete += 1
        except EOFError:
            pass
    assert complete > 60_000
    with pytest.raises(LoadError, match=f"truncated or corrupt.*the {complete:,} lines read before it were loaded"):
        load_triples(kg, [path], format="psv", progress=False)
    assert kg.stats().facts == complete


def test_byte_order_mark_and_quoted_newlines_never_corrupt_ids(kg: KG, tmp_path: Path) -> None:
    """A UTF-8 BOM is dropped (a header after it is still a header); a CSV field with a newline
    inside quotes cannot be read line by line: both of its lines are rejected, nothing corrupted."""
    bom = "\ufeff"
    (tmp_path / "a.csv").write_text(f'{bom}head,relation,tail\nalpha,r,beta\nx,"multi\nline",y\ngamma,r,delta\n',
                                    encoding="utf-8")
    (tmp_path / "b.tsv").write_text(f"{bom}alpha\tr2\tbeta\n", encoding="utf-8")
    (tmp_path / "c.nt").write_text(f"{bom}<http://e/alpha> <http://e/r> <http://e/beta> .\n", encoding="utf-8")
    (tmp_path / "d.ttl").write_text(f"{bom}@prefix e: <http://e/> .\ne:alpha e:s e:beta .\n", encoding="utf-8")
    report = load_triples(kg, [tmp_path / name for name in ("a.csv", "b.tsv", "c.nt", "d.ttl")], progress=False)
    ids = {row[0] for row in kg.execute("MATCH (n:Node) RETURN n.id").get_all()}
    assert ids == {"alpha", "beta", "gamma", "delta", "http://e/alpha", "http://e/beta"}
    assert (report.facts_loaded, report.rejected, report.skipped) == (5, 2, 1)
    rejected = (kg.path / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [line.split("\t")[1] for line in rejected] == ["3", "4"]
    assert all("cannot span lines" in line for line in rejected)


def test_ntriples_reject_reasons_carry_no_false_line_number(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "bad.nt"
    path.write_text("<http://e/a> <http://e/r> <http://e/b> .\n<a> <b> c .\n", encoding="utf-8")
    load_triples(kg, [path], progress=False)
    row = (kg.path / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1].split("\t")
    assert row[1] == "2" and "line 1" not in row[2]


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress])
def test_compressed_files(kg: KG, tmp_path: Path, compress) -> None:
    path = tmp_path / "kb.txt.z"
    path.write_bytes(compress(b"a|r|b\nb|r|c\n"))
    report = load_triples(kg, [path], format="psv", progress=False)
    assert report.facts_loaded == 2


def test_append_deduplicates(kg: KG, tmp_path: Path) -> None:
    first = tmp_path / "one.tsv"
    second = tmp_path / "two.tsv"
    first.write_text("a\tr\tb\nb\tr\tc\na\tr\tb\n", encoding="utf-8")
    second.write_text("b\tr\tc\nc\tr\td\n", encoding="utf-8")
    one = load_triples(kg, [first], progress=False)
    assert (one.facts_loaded, one.duplicates) == (2, 1)
    two = load_triples(kg, [second], progress=False)
    assert (two.facts_loaded, two.duplicates) == (1, 1)
    again = load_triples(kg, [first, second], progress=False)
    assert (again.facts_loaded, again.duplicates) == (0, 5)
    assert kg.stats().facts == 3 and kg.stats().nodes == 4
    assert [(r.relation, r.direction, r.count) for r in kg.relations("b")] == [("r", "in", 1), ("r", "out", 1)]
    assert kg.relation_catalogue() == [("r", "r", "", 3)]


def test_summary_counts_add_up_across_batches(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.tsv"
    rows = [f"e{i}\tr{i % 3}\te{i + 1}" for i in range(250)] + ["e0\tr0\te1", "broken line", ""]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    report = load_triples(kg, [path], batch_lines=40, progress=False)
    assert (report.lines_read, report.facts_loaded, report.duplicates, report.rejected, report.skipped) == (253, 250, 1, 1, 1)
    assert accounted(report)
    assert sum(r.count for r in kg.relations("e5")) == 2


def test_rejects_file_has_line_numbers_and_reasons(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.psv"
    path.write_bytes(b"a|r|b\nonly|two\n\xff\xfe|r|x\na|r||\nc|r|d\n")
    report = load_triples(kg, [path], progress=False)
    assert (report.facts_loaded, report.rejected) == (2, 3)
    assert accounted(report)
    rows = [line.split("\t") for line in (kg.path / "rejects.tsv").read_text(encoding="utf-8").splitlines()]
    assert rows[0] == ["source", "line", "reason", "raw", "run"]
    assert [(row[1], row[2]) for row in rows[1:]] == [
        ("2", "expected 3 fields separated by '|', found 2"), ("3", "invalid UTF-8"), ("4", "expected 3 fields separated by '|', found 4")]
    assert report.rejected_by_reason["invalid UTF-8"] == 1
    first_run = {row[4] for row in rows[1:]}
    time.sleep(1.1)
    load_triples(kg, [path], progress=False)  # the same rejects again: another run, told apart
    rows = [line.split("\t") for line in (kg.path / "rejects.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 7 and len(first_run) == 1 and {row[4] for row in rows[4:]}.isdisjoint(first_run)


def test_max_rejects_stops_with_a_clear_error(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.psv"
    path.write_text("a|r|b\nbad\nbad\nbad\n", encoding="utf-8")
    with pytest.raises(TooManyRejectsError, match="more than 2 lines rejected"):
        load_triples(kg, [path], max_rejects=2, progress=False)


def test_max_rejects_stops_at_reject_n_plus_1_keeping_only_the_batches_before_it(kg: KG, tmp_path: Path) -> None:
    """As in the dump loaders (one mechanism, loaders/rejects.py): --max-rejects 1 stops at the
    second reject; the batch that holds it (line 6's fact too; batches are ``batch_lines`` lines
    read) is not written, the batches before are, and the message says so and how to go on."""
    path = tmp_path / "kg.psv"
    path.write_text("a|r|b\nc|r|d\ne|r|f\nbad\nbad\ng|r|h\n", encoding="utf-8")
    with pytest.raises(TooManyRejectsError) as stopped:
        load_triples(kg, [path], max_rejects=1, batch_lines=2, progress=False)
    stored = set(map(tuple, kg.execute("MATCH (a:Node)-[f:Fact]->(b:Node) RETURN a.id, f.rel, b.id").get_all()))
    assert stored == {("a", "r", "b"), ("c", "r", "d"), ("e", "r", "f")}
    rows = [line.split("\t") for line in (kg.path / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    assert [row[1] for row in rows] == ["4", "5"]
    assert (f"more than 1 lines rejected (--max-rejects 1): the load stopped at {path}:5 (expected 3 fields "
            f"separated by '|', found 1) before writing the batch that holds it, so the store holds the 3 new facts "
            f"of the lines up to {path}:4 and nothing of the lines after") in str(stopped.value)
    assert "fix the file and load it again" in str(stopped.value)
    with pytest.raises(TooManyRejectsError, match="the store holds nothing of this load"):
        load_triples(kg, [path], max_rejects=0, progress=False)


def test_a_nul_character_in_any_field_is_a_reject_with_its_line(kg: KG, tmp_path: Path) -> None:
    """A NUL became an id (a node whose id is a lone NUL); now it is a reject reason in every
    format, raw or written as an escape."""
    files = {
        "kg.tsv": b"a\tr\tb\n\x00\tr\tb\na\tr\x00\tb\n",
        "kg.csv": b"a,r,b\na,r,\"x\x00\"\n",
        "kg.psv": b"a|r|b\na|r|b\x00\n",
        "kg.jsonl": b'{"head": "a", "relation": "r", "tail": "b"}\n{"head": "a", "relation": "r", "tail": "\\u0000"}\n'
                    b'{"head": "a", "relation": "r", "tail": "\x00"}\n',
        "kg.nt": b'<http://e/a> <http://e/r> <http://e/b> .\n<http://e/a> <http://e/r> "x\\u0000y" .\n'
                 b'<http://e/a> <http://www.w3.org/2000/01/rdf-schema#label> "x\x00" .\n',
        "kg.ttl": b'@prefix e: <http://e/> .\ne:a e:r e:b .\ne:a e:r "x\\u0000y" .\n',
    }
    expected = {"kg.tsv": [2, 3], "kg.csv": [2], "kg.psv": [2], "kg.jsonl": [2, 3], "kg.nt": [2, 3], "kg.ttl": [2]}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        report = load_triples(kg, [tmp_path / name], progress=False)
        assert report.rejected_by_reason.get("NUL character") == len(expected[name]), name
        rows = [line.split("\t") for line in (kg.path / "rejects.tsv").read_text(encoding="utf-8").splitlines()[1:]]
        assert [int(row[1]) for row in rows if row[0].endswith(name)] == expected[name]
    names = tmp_path / "names.txt"
    names.write_text("a\tThe \x00 A\n", encoding="utf-8")
    with pytest.raises(LoadError, match="names.txt:1: a NUL character"):
        load_triples(kg, [tmp_path / "kg.tsv"], names=names, progress=False)
    texts = kg.execute("MATCH (n:Node) RETURN n.id, n.name, n.value").get_all()
    assert not any("\x00" in text for row in texts for text in row if text)


def test_truncated_gzip_and_missing_file(kg: KG, tmp_path: Path) -> None:
    whole = gzip.compress(("\n".join(f"a{i}|r|b{i}" for i in range(5000)) + "\n").encode())
    path = tmp_path / "cut.psv.gz"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(LoadError, match="truncated or corrupt"):
        load_triples(kg, [path], format="psv", progress=False)
    with pytest.raises(LoadError, match="no such file"):
        load_triples(kg, [tmp_path / "missing.tsv"], progress=False)


def test_lost_key_sets_are_rebuilt_from_the_database(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.tsv"
    path.write_text("a\tr\tb\nb\tr\tc\n", encoding="utf-8")
    load_triples(kg, [path], progress=False)
    shutil.rmtree(kg.path / "keys")  # as if the process died between commit and saving the keys
    again = load_triples(kg, [path], progress=False)
    assert (again.facts_loaded, again.duplicates) == (0, 2)
    assert kg.stats().facts == 2


def test_killed_load_leaves_an_openable_database_and_resumes(tmp_path: Path, shared: Path) -> None:
    db = tmp_path / "db"
    source = shared / "fb15k237" / "train.txt"
    code = ("from localkg.store import KG\nfrom localkg.loaders.triples import load_triples\n"
            f"kg = KG.create({str(db)!r})\n"
            f"load_triples(kg, [{str(source)!r}], batch_lines=5000, progress=False)\n")
    process = subprocess.Popen([sys.executable, "-c", code])
    facts_keys = db / "keys" / "facts"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (facts_keys.exists() and any(facts_keys.glob("run-*.npy"))):
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    with KG.open(db) as kg:
        with kg.writer():
            pass  # a writer that opens flushes what the killed load had staged
        partial = kg.stats().facts
        assert 0 < partial < 272_115
        resumed = load_triples(kg, [source], progress=False)
        assert resumed.facts_loaded == 272_115 - partial
        assert kg.stats().facts == 272_115


@pytest.mark.parametrize("crash_at", ["copying Fact:1", "staged:2"])
def test_the_run_after_a_killed_load_reports_what_it_added(tmp_path: Path, crash_at: str) -> None:
    """A load killed in its flush (or after staging) leaves its batches staged; the next load of
    the same file sees them into the store, and they are this load's facts, not duplicates (was:
    facts_loaded 0 after a recovered flush of the whole file)."""
    from localkg.store.crashpoints import ENV

    db, source = tmp_path / "db", tmp_path / "kg.tsv"
    source.write_text("".join(f"e{i}\tr{i % 7}\te{i + 1}\n" for i in range(3000)), encoding="utf-8")
    code = ("from localkg.store import KG\nfrom localkg.loaders.triples import load_triples\n"
            f"with KG.open({str(db)!r}, create=True) as kg:\n"
            f"    load_triples(kg, [{str(source)!r}], batch_lines=1000, progress=False)\n")
    killed = subprocess.run([sys.executable, "-c", code], env={**os.environ, ENV: crash_at}, capture_output=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    with KG.open(db) as kg:
        rerun = load_triples(kg, [source], batch_lines=1000, progress=False)
        assert (rerun.facts_loaded, rerun.duplicates, rerun.nodes_added) == (3000, 0, 3001)
        assert kg.stats().facts == 3000


def test_summary_is_json_serialisable(kg: KG, tmp_path: Path) -> None:
    path = tmp_path / "kg.tsv"
    path.write_text("a\tr\tb\n", encoding="utf-8")
    assert json.loads(json.dumps(load_triples(kg, [path], progress=False).to_json()))["facts_loaded"] == 1
