"""Appending dump loads: a store loaded in two parts holds exactly the graph of one load of the
whole (issue 27, item 1: the second part used to lose a key from Kùzu's primary-key index and
leave the store stuck)."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main

SMALL = ["--workers", "1", "--batch-mb", "16", "--chunk-mb", "4", "--buffer-pool-mb", "256", "--quiet"]


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory, dumps) -> Path:
    """The reproduction of issue 27: its second part appends 115k nodes to a table of 88k."""
    path = tmp_path_factory.mktemp("append") / "fb.nt"
    dumps.make_dump(path, "freebase", 111_000, "--seed", "0")
    return path


def load(paths: list[Path], db: Path) -> None:
    for path in paths:
        result = CliRunner().invoke(main, ["load", "freebase", str(path), "--db", str(db), *SMALL])
        assert result.exit_code == 0, result.output + repr(result.exception)


def test_appending_the_second_part_of_a_dump_gives_the_graph_of_one_load(dump: Path, tmp_path: Path, dumps) -> None:
    load([dump], tmp_path / "whole")
    load(list(dumps.split_after(dump, 329_008, tmp_path)), tmp_path / "parts")
    assert dumps.contents(tmp_path / "parts") == dumps.contents(tmp_path / "whole")
