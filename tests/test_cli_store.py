"""The store's commands through click's CliRunner: load triples, stats, query, demo, errors."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.errors import DatabaseFormatError
from localkg.store import KG


def run(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_every_command_has_help() -> None:
    for args in (["--help"], ["load", "--help"], ["load", "triples", "--help"], ["stats", "--help"],
                 ["query", "--help"], ["demo", "--help"]):
        result = run(*args)
        assert result.exit_code == 0 and "Usage:" in result.output


def test_load_then_stats_and_query(tmp_path: Path) -> None:
    data = tmp_path / "kb.txt"
    data.write_text("Top Hat|directed_by|Mark Sandrich\nTop Hat|starred_actors|Ginger Rogers\nbad line\n")
    db = str(tmp_path / "db")
    loaded = run("load", "triples", str(data), "--db", db, "--json")
    assert loaded.exit_code == 0
    summary = json.loads(loaded.stdout)
    assert (summary["lines_read"], summary["facts_loaded"], summary["rejected"]) == (3, 2, 1)
    stats = json.loads(run("stats", "--db", db, "--json").stdout)
    assert (stats["facts"], stats["entities"], stats["relations"]) == (2, 3, 2)
    rows = run("query", "--db", db, "--json", "MATCH (a:Node {id: $id})-[f:Fact]->(b) RETURN f.rel AS rel, b.name AS name "
               "ORDER BY rel", "--param", "id=Top Hat")
    assert json.loads(rows.stdout) == [{"rel": "directed_by", "name": "Mark Sandrich"},
                                       {"rel": "starred_actors", "name": "Ginger Rogers"}]


def test_query_refuses_writes_and_reports_bad_cypher(tmp_path: Path) -> None:
    KG.create(tmp_path / "db").close()
    refused = CliRunner().invoke(main, ["query", "--db", str(tmp_path / "db"), "MATCH (n) DETACH DELETE n"])
    assert refused.exit_code != 0 and "read-only" in refused.output
    broken = CliRunner().invoke(main, ["query", "--db", str(tmp_path / "db"), "MATCH (n RETURN n"])
    assert broken.exit_code != 0 and broken.output.startswith("Error: query failed")
    assert "Traceback" not in broken.output
    for extension in ("INSTALL json", "LOAD EXTENSION json"):
        refused = CliRunner().invoke(main, ["query", "--db", str(tmp_path / "db"), extension])
        assert refused.exit_code != 0 and "extensions" in refused.output


def test_query_runs_reads_whose_literals_hold_keywords(tmp_path: Path) -> None:
    """The store is opened read-only and Kùzu refuses writes: a title like 'Set Me Free' is no write."""
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Set Me Free", "release_year", "1999"), ("Create", "load", "Delete")])
    for cypher in ("MATCH (n:Node) WHERE n.name = 'Set Me Free' RETURN n.id",
                   "MATCH (n:Node) WHERE n.name IN ['Create', \"Delete\"] RETURN n.id ORDER BY n.id",
                   "MATCH (n:Node) WHERE n.name = 'INSTALL json' RETURN n.id"):
        result = CliRunner().invoke(main, ["query", "--db", str(tmp_path / "db"), "--json", cypher])
        assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == []


def test_query_param_without_equals_is_one_line(tmp_path: Path) -> None:
    KG.create(tmp_path / "db").close()
    result = CliRunner().invoke(main, ["query", "--db", str(tmp_path / "db"), "RETURN $foo", "--param", "foo"])
    assert result.exit_code == 2 and "'foo' is not NAME=VALUE" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_missing_database_and_max_rejects_are_one_line_errors(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["stats", "--db", str(tmp_path / "nope")])
    assert missing.exit_code != 0 and missing.stderr.count("\n") == 1 and "no localkg database" in missing.output
    data = tmp_path / "bad.txt"
    data.write_text("a|r|b\nx\ny\n")
    too_many = CliRunner().invoke(main, ["load", "triples", str(data), "--db", str(tmp_path / "db"),
                                         "--max-rejects", "1"])
    assert too_many.exit_code != 0 and "more than 1 lines rejected" in too_many.output


def test_locked_database_is_reported_clearly(tmp_path: Path) -> None:
    kg = KG.create(tmp_path / "db")
    try:
        done = subprocess.run([sys.executable, "-m", "localkg", "stats", "--db", str(tmp_path / "db")],
                              capture_output=True, text=True, timeout=120)
    finally:
        kg.close()
    assert done.returncode != 0
    assert "open in another process" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.model
def test_demo_builds_and_shows_the_evidence(tmp_path: Path) -> None:
    """The first run trains a path scorer from the demo graph alone and answers with it; the
    second finds it and trains nothing."""
    result = run("demo", "--db", str(tmp_path / "demo"))
    assert result.exit_code == 0
    assert "training a path scorer from the demo graph alone" in result.output
    assert (tmp_path / "demo" / "paths" / "scorer.pt").is_file()
    assert "4,428 facts" in result.output and "(reasoner: learned-paths)" in result.output
    assert "answer: " in result.output
    # the evidence walks from the topic to a movie she starred in, then to its director
    assert "Ginger Rogers —starred_actors⁻¹→" in result.output and "—directed_by→" in result.output
    again = run("demo", "--db", str(tmp_path / "demo"))
    assert again.exit_code == 0 and "training" not in again.output and "learned-paths" in again.output
    # a scorer in an older checkpoint format (from an earlier localkg) is trained again, not an error
    import torch

    scorer = tmp_path / "demo" / "paths" / "scorer.pt"
    payload = torch.load(scorer, weights_only=True)
    torch.save({**payload, "format": payload["format"] - 1}, scorer)
    stale = run("demo", "--db", str(tmp_path / "demo"))
    assert stale.exit_code == 0, stale.output
    assert "written by another localkg version: training it again" in stale.output
    assert "(reasoner: learned-paths)" in stale.output and "answer: " in stale.output


def test_stats_counts_once(tmp_path: Path, monkeypatch) -> None:
    """``stats`` runs its count queries once (it read ``KG.stats`` twice)."""
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
    calls = []
    counted = KG.stats
    monkeypatch.setattr(KG, "stats", lambda self: calls.append(1) or counted(self))
    result = CliRunner().invoke(main, ["stats", "--db", str(tmp_path / "db"), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["nodes"] == 2 and len(calls) == 1


def test_an_older_database_format_opened_read_only_is_its_own_error(tmp_path: Path) -> None:
    with KG.create(tmp_path / "db") as kg:
        kg.update_manifest(format=2)
    with pytest.raises(DatabaseFormatError, match="has database format 2; open it once read-write"):
        KG.open(tmp_path / "db", read_only=True)
    result = CliRunner().invoke(main, ["stats", "--db", str(tmp_path / "db")])
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "has database format 2" in result.output

