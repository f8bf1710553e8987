"""`localkg check`: a sound store passes; a store left stuck by a lost primary key (what kuzu
0.11.3 did to appending loads before the writer copied in pieces), a damaged manifest and a
truncated graph are each reported in one line with exit 1, and `--repair` brings the stuck store
back to the graph of one clean load."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import localkg.store.copying as copying_module
from localkg.cli import main
from localkg.loaders.freebase import load_freebase
from localkg.store import KG

SMALL = dict(workers=0, progress=False, chunk_bytes=4 << 20, batch_bytes=16 << 20)
POOL = 256 << 20


def check(*args: str):
    return CliRunner().invoke(main, ["check", *args])


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory, dumps) -> tuple[Path, Path, Path]:
    """Issue 27's dump, and its two parts."""
    folder = tmp_path_factory.mktemp("check")
    dumps.make_dump(folder / "fb.nt", "freebase", 111_000, "--seed", "0")
    return (folder / "fb.nt", *dumps.split_after(folder / "fb.nt", 329_008, folder))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory, parts) -> Path:
    db = tmp_path_factory.mktemp("clean") / "db"
    with KG.open(db, create=True, buffer_pool_bytes=POOL) as kg:
        load_freebase(kg, [parts[0]], **SMALL)
    return db


def test_a_clean_load_is_sound(clean: Path) -> None:
    for args in ([], ["--full"]):
        result = check("--db", str(clean), *args)
        assert (result.exit_code, result.output) == (0, f"ok: {clean} is sound\n")


def test_a_store_stuck_on_a_lost_key_is_found_and_repaired(tmp_path: Path, parts, clean: Path, dumps,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "db"
    with KG.open(db, create=True, buffer_pool_bytes=POOL) as kg:
        load_freebase(kg, [parts[1]], **SMALL)
    monkeypatch.setattr(copying_module, "keyed_pieces", lambda held, rows: [(0, rows)] if rows else [])  # as before
    with pytest.raises(RuntimeError, match="Unable to find primary key value m.014691"):
        with KG.open(db, buffer_pool_bytes=POOL) as kg:
            load_freebase(kg, [parts[2]], **SMALL)
    monkeypatch.undo()

    sampled = check("--db", str(db))
    assert sampled.exit_code == 1 and "staged batches was interrupted" in sampled.output
    full = check("--db", str(db), "--full")
    assert full.exit_code == 1 and "Node: 1 of 202,934 ids looked up are in the table but not found by its " \
                                   "primary key (e.g. 'm.014691')" in full.output
    assert all(line.startswith("problem: ") for line in full.output.splitlines())
    repaired = check("--db", str(db), "--repair", "--buffer-pool-mb", "256")
    assert repaired.exit_code == 0, repaired.output
    assert "rebuilt graph.kuzu" in repaired.output and repaired.output.endswith(f"ok: {db} is sound\n")
    with KG.open(db, buffer_pool_bytes=POOL) as kg:
        assert load_freebase(kg, [parts[2]], resume=True, **SMALL).complete
    assert dumps.contents(db) == dumps.contents(clean)


@pytest.fixture()
def small(tmp_path: Path) -> Path:
    db = tmp_path / "db"
    with KG.create(db) as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers")])
    return db


def test_a_damaged_manifest_is_one_line_and_repaired(small: Path) -> None:
    (small / "manifest.json").write_text('{"format": 3, "generation":')
    found = check("--db", str(small))
    assert found.exit_code == 1 and found.output.startswith(f"problem: {small / 'manifest.json'} is damaged")
    stats = CliRunner().invoke(main, ["stats", "--db", str(small)])
    assert stats.exit_code == 1 and stats.output.count("\n") == 1 and "is damaged" in stats.output
    repaired = check("--db", str(small), "--repair")
    assert repaired.exit_code == 0 and "repaired: wrote manifest.json again" in repaired.output
    assert CliRunner().invoke(main, ["stats", "--db", str(small), "--json"]).exit_code == 0


def test_a_truncated_graph_is_one_line(small: Path) -> None:
    graph = small / "graph.kuzu"
    graph.write_bytes(graph.read_bytes()[:graph.stat().st_size // 2])
    for command in (["check"], ["stats"]):
        result = CliRunner().invoke(main, [*command, "--db", str(small)])
        assert result.exit_code == 1 and result.output.count("\n") == 1, result.output
        assert "graph.kuzu is damaged" in result.output and "localkg backup" in result.output
