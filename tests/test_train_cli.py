"""``localkg train fog`` through click's CliRunner, on a real PathQuestion store and questions."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.fog.checkpoint import load_checkpoint
from localkg.fog.location import default_checkpoint


@pytest.fixture(scope="module")
def pq_db(tmp_path_factory, shared) -> Path:
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    path = tmp_path_factory.mktemp("pq") / "db"
    with KG.create(path) as kg:
        load_triples(kg, [shared / "pathquestion" / "2H-kb.txt"], progress=False)
    return path


def test_train_fog_writes_a_checkpoint_that_loads(pq_db, shared, tmp_path):
    out = tmp_path / "scorer.pt"
    result = CliRunner().invoke(main, ["train", "fog", "--db", str(pq_db), "--questions",
                                       str(shared / "pathquestion" / "PQ-2H.txt"), "--sample", "12",
                                       "--exclude-sample", "200", "--epochs", "2", "--lr", "1e-3", "--out", str(out),
                                       "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["epochs"]) == 2 and report["examples"] + report["validation_examples"] == 12
    model, meta = load_checkpoint(out, encoder="all-MiniLM-L6-v2")
    assert meta["epochs_done"] == 2 and meta["train_config"]["lr"] == 1e-3
    assert "excluding the eval sample --sample 200 --seed 0" in meta["trained_on"]


def test_train_fog_default_location_is_beside_the_graph(pq_db, shared):
    result = CliRunner().invoke(main, ["train", "fog", "--db", str(pq_db), "--questions",
                                       str(shared / "pathquestion" / "PQ-2H.txt"), "--sample", "4", "--epochs", "1"])
    assert result.exit_code == 0, result.output
    assert default_checkpoint(pq_db).is_file()
    assert f"checkpoint: {default_checkpoint(pq_db)}" in result.output


def test_questions_without_gold_paths_end_with_one_clear_line(pq_db, tmp_path):
    questions = tmp_path / "plain.jsonl"
    questions.write_text(json.dumps({"question": "who is the spouse of x", "answers": ["y"],
                                     "topic_entities": ["ludwig_ii_of_bavaria"]}) + "\n")
    result = CliRunner().invoke(main, ["train", "fog", "--db", str(pq_db), "--questions", str(questions)])
    assert result.exit_code != 0
    assert "no gold path" in result.output and "Traceback" not in result.output


def test_an_out_below_a_regular_file_is_refused_before_any_work(pq_db, shared, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    out = blocker / "scorer.pt"
    result = CliRunner().invoke(main, ["train", "fog", "--db", str(pq_db), "--questions",
                                       str(shared / "pathquestion" / "PQ-2H.txt"), "--out", str(out)])
    assert result.exit_code == 1
    assert result.output == f"Error: cannot write the checkpoint to {out}: {blocker} is a file, not a folder; " \
                            "choose another place\n"
