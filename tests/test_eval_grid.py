"""``localkg eval grid``: a 2-cell grid (embed-path at two beam widths on a MetaQA sample; real
store and MiniLM) runs both cells over one open store, resumes, and ends with the compare table."""
from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from localkg.cli import main
from localkg.evaluation import answering

GRID = """
[run]
sample = 6
seed = 4

[[questions]]
name = "sample"
path = "{questions}"
db = "{db}"

[[reasoners]]
name = "embed-path"
settings = [{{ beam = 3 }}, {{ beam = 1 }}]
"""


def test_a_two_cell_grid_shares_the_store_resumes_and_compares(metaqa_sample, tmp_path: Path, monkeypatch) -> None:
    questions, db = metaqa_sample
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(questions=questions, db=db))
    opened = []
    real_open = answering.KG.open
    monkeypatch.setattr(answering.KG, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))

    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["eval", "grid", str(grid), "--out", str(out)])
    assert result.exit_code == 0, result.output
    cells = [out / "embed-path-beam=3" / "sample", out / "embed-path-beam=1" / "sample"]
    for cell, beam in zip(cells, ("3", "1")):
        assert json.loads((cell / "summary.json").read_text())["n"] == 6
        assert json.loads((cell / "run.json").read_text())["settings"] == {"beam": beam}
    assert len(opened) == 1                                    # both cells were answered over one open store
    assert result.output.count("| embed-path |") == 2 and (out / "compare.png").read_bytes()[:4] == b"\x89PNG"

    before = [(cell / "predictions.jsonl").read_text() for cell in cells]
    again = CliRunner().invoke(main, ["eval", "grid", str(grid), "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert [(cell / "predictions.jsonl").read_text() for cell in cells] == before   # finished cells cost nothing


def test_a_bad_grid_is_one_clear_line(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(questions=questions, db=db).replace("seed = 4", "seeds = 4"))
    result = CliRunner().invoke(main, ["eval", "grid", str(grid), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and "[run]: unknown key 'seeds'" in result.output
    grid.write_text(GRID.format(questions=questions, db=db).replace("beam = 1", "width = 1"))
    result = CliRunner().invoke(main, ["eval", "grid", str(grid), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and "embed-path has no setting width" in result.output


def test_a_missing_questions_file_is_one_line_before_any_cell_runs(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    grid = tmp_path / "grid.toml"
    grid.write_text(GRID.format(questions=questions, db=db) + f"""
[[questions]]
name = "gone"
path = "{tmp_path / 'no-such-questions.txt'}"
db = "{db}"
""")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["eval", "grid", str(grid), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output.strip() == (f"Error: {grid}: [[questions]] gone: no questions file at "
                                     f"{tmp_path / 'no-such-questions.txt'}")
    assert not out.exists()                                    # not even the first cell ran


def test_a_grid_without_reasoners_runs_the_best_each_store_supports(movie_store, tmp_path: Path) -> None:
    from localkg.evaluation.grid import read_grid

    grid = tmp_path / "grid.toml"
    grid.write_text("".join(f"""
[[questions]]
name = "{name}"
path = "{Path(__file__).parent / 'fixtures' / 'path_questions.jsonl'}"
db = "{movie_store(scorer=trained)}"
""" for name, trained in (("trained", True), ("untrained", False))))
    cells = read_grid(grid, tmp_path / "out")
    assert [(cell.name, cell.config.reasoner) for cell in cells] == [("learned-paths/trained", "learned-paths"),
                                                                      ("tog/untrained", "tog")]


def test_the_shipped_grid_of_the_results_table_reads(shared: Path) -> None:
    """docs/grids/results.toml stays valid as reasoners change: every reasoner and setting known,
    every question file there, one cell per row of docs/results.md's table."""
    from localkg.evaluation.grid import read_grid

    cells = read_grid(Path(__file__).parents[1] / "docs" / "grids" / "results.toml", "runs")
    assert len(cells) == 91
    pinned = [cell for cell in cells if cell.config.reasoner not in ("io", "cot", "fog", "learned-paths")]
    assert pinned and all(cell.config.settings.get("relations") == "embed" for cell in pinned)
    assert sum(cell.config.reasoner == "learned-paths" for cell in cells) == 12
    assert all(Path(cell.config.questions).is_file() for cell in cells)
    assert {cell.config.sample for cell in cells} == {200} and {cell.config.seed for cell in cells} == {0}
