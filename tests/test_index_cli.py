"""`localkg index build` and `localkg link` through click's CliRunner (real Kùzu, MiniLM, FAISS)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.store import KG

TRIPLES = [("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers"),
           ("Swing Time", "starred_actors", "Ginger Rogers"), ("Swing Time", "directed_by", "George Stevens")]


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    """A small database, closed again so the command can open it (one process per database)."""
    path = tmp_path / "db"
    with KG.create(path) as kg:
        kg.add_triples(TRIPLES)
    return path


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_build_then_link(db: Path) -> None:
    built = invoke("index", "build", "--db", str(db), "--json")
    assert built.exit_code == 0, built.output
    reports = json.loads(built.stdout)
    assert {(r["kind"], r["added"], r["index_type"]) for r in reports} == {("entities", 5, "flat"),
                                                                          ("relations", 2, "flat")}

    linked = invoke("link", "what movies did [Ginger Rogerz] act in", "--db", str(db), "--json", "--k", "2")
    assert linked.exit_code == 0, linked.output
    candidates = json.loads(linked.stdout)
    assert candidates[0]["id"] == "Ginger Rogers" and candidates[0]["mention"] == "Ginger Rogerz"
    assert len(candidates) == 2 and "vector similarity" in candidates[0]["reason"]

    plain = invoke("link", "who directed Swing Time", "--db", str(db))
    assert plain.exit_code == 0 and plain.stdout.splitlines()[0].split("\t")[1] == "Swing Time"

    again = invoke("index", "build", "--db", str(db))
    assert again.exit_code == 0 and "entities: up to date" in again.stdout


def test_link_after_a_load_asks_for_an_index_update(db: Path) -> None:
    assert invoke("index", "build", "--db", str(db), "--what", "entities").exit_code == 0
    with KG.open(db) as kg:
        kg.add_triples([("Kitty Foyle", "starred_actors", "Ginger Rogers")])
    stale = invoke("link", "Kitty Foyle", "--db", str(db))
    assert stale.exit_code == 1
    assert f"localkg index build --db {db} --what entities" in stale.output

    updated = invoke("index", "build", "--db", str(db), "--what", "entities")
    assert updated.exit_code == 0
    assert "entities: embedded 1 names of 1 new entities, kept 5 vectors;" in updated.stdout
    assert json.loads(invoke("link", "Kitty Foyle", "--db", str(db), "--json").stdout)[0]["id"] == "Kitty Foyle"


def test_bad_options_are_refused_in_one_line(db: Path, tmp_path: Path) -> None:
    bad_type = invoke("index", "build", "--db", str(db), "--index-type", "bogus")
    assert bad_type.exit_code == 2 and "bogus" in bad_type.output
    no_model = invoke("index", "build", "--db", str(db), "--embed-model", str(tmp_path))
    assert no_model.exit_code == 1 and "not a sentence-transformers model directory" in no_model.output
    assert "Traceback" not in no_model.output
    missing = invoke("link", "anything", "--db", str(tmp_path / "nowhere"))
    assert missing.exit_code == 1 and "no localkg database" in missing.output


def test_a_full_text_index_kuzu_cannot_make_leaves_the_build_working(tmp_path: Path) -> None:
    """Kùzu 0.11.3: a CREATE_FTS_INDEX that runs out of buffer pool leaves half-made tables no
    later build can replace (a 5M-entity dump hit it at the default 1 GiB). The failure is one
    clear error, and index build goes on without that index, saying so; linking works."""
    from localkg.errors import FullTextIndexError
    from localkg.indexes import fulltext

    path = tmp_path / "db"
    with KG.create(path) as kg:  # enough labels to overflow a 16 MiB pool
        kg.add_triples([(f"entity number {i} of many words", "rel", f"other thing {i % 977}") for i in range(30_000)])
        kg.add_triples(TRIPLES)
    with KG.open(path, buffer_pool_bytes=16 << 20) as kg:
        with pytest.raises(FullTextIndexError, match="buffer pool \\(16 MiB\\) is too small"):
            fulltext.build_index(kg)

    built = invoke("index", "build", "--db", str(path), "--what", "entities", "--json")
    assert built.exit_code == 0, built.output
    [report] = json.loads(built.stdout)
    assert "half-made tables" in report["warning"] and report["added"] > 30_000
    linked = invoke("link", "who directed [Swing Time]", "--db", str(path), "--json", "--k", "1")
    assert linked.exit_code == 0 and json.loads(linked.stdout)[0]["id"] == "Swing Time"


def test_a_full_text_index_with_room_has_no_warning(db: Path) -> None:
    built = invoke("index", "build", "--db", str(db), "--what", "entities", "--buffer-pool-mb", "256", "--json")
    assert built.exit_code == 0, built.output
    assert json.loads(built.stdout)[0]["warning"] == ""
