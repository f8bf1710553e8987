"""``localkg train paths`` through click's CliRunner, on the hand-built movie graph and its
JSONL question-answer pairs (real Kùzu, real MiniLM)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.path_scorer.checkpoint import load_checkpoint
from localkg.path_scorer.location import default_checkpoint

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def movies_db(tmp_path_factory) -> Path:
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    path = tmp_path_factory.mktemp("movies") / "db"
    with KG.create(path) as kg:
        load_triples(kg, [FIXTURES / "path_movies.tsv"], progress=False)
    return path


def test_train_paths_writes_a_checkpoint_beside_the_store(movies_db):
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--questions",
                                       str(FIXTURES / "path_questions.jsonl"), "--max-hops", "2", "--epochs", "2",
                                       "--exclude-sample", "5", "--threads", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["epochs"]) == 2
    assert report["supervision"]["questions"] == 50 and report["supervision"]["labelled"] == 50
    assert report["training_questions"] + report["held_out_questions"] == 50
    assert 0.0 <= report["epochs"][-1]["held_out_accuracy"] <= 1.0
    assert report["checkpoint"] == str(default_checkpoint(movies_db))
    _model, meta = load_checkpoint(default_checkpoint(movies_db), encoder="all-MiniLM-L6-v2")
    assert meta["max_hops"] == 2 and meta["epochs_done"] == 2
    assert "excluding the eval sample --sample 5 --seed 0" in meta["trained_on"]


def test_train_paths_says_in_one_line_when_nothing_can_be_learned(movies_db, tmp_path):
    questions = tmp_path / "nowhere.jsonl"
    questions.write_text(json.dumps({"question": "who directed Citizen Kane", "answers": ["Orson Welles"],
                                     "topic_entities": ["Top Hat"]}) + "\n")
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--questions", str(questions),
                                       "--out", str(tmp_path / "scorer.pt")])
    assert result.exit_code == 1
    assert "too few to train" in result.output and "1 whose paths reach no answer" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "scorer.pt").exists()


def test_ask_uses_the_trained_reasoner_when_the_store_has_a_checkpoint(movies_db, tmp_path):
    from localkg.cli import pick_reasoner

    assert pick_reasoner(tmp_path, None) == "tog"  # no checkpoint: today's default
    assert pick_reasoner(movies_db, "embed-path") == "embed-path"
    trained = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--questions",
                                        str(FIXTURES / "path_questions.jsonl"), "--max-hops", "2", "--epochs", "30",
                                        "--json"])
    assert trained.exit_code == 0, trained.output
    result = CliRunner().invoke(main, ["ask", "who directed Vertigo", "--db", str(movies_db), "--topic", "Vertigo",
                                       "--set", "llm_options=0", "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["reasoner"] == "learned-paths"
    assert [a["id"] for a in answer["answers"]] == ["Alfred Hitchcock"]
    assert answer["evidence"][0]["text"] == "Vertigo —directed_by→ Alfred Hitchcock"


def last_line(result) -> str:
    """The error line, after any progress bar the embedder's loading wrote to stderr."""
    return result.output.strip().splitlines()[-1]


def test_an_out_below_a_regular_file_is_refused_before_any_work(movies_db, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    out = blocker / "scorer.pt"
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--questions",
                                       str(FIXTURES / "path_questions.jsonl"), "--out", str(out)])
    assert result.exit_code == 1
    # one line and nothing else: no supervision progress, no epoch
    assert result.output == f"Error: cannot write the checkpoint to {out}: {blocker} is a file, not a folder; " \
                            "choose another place\n"


def test_a_save_synthetic_below_a_regular_file_is_refused_before_any_work(movies_db, tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    made = blocker / "made.jsonl"
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--save-synthetic", str(made),
                                       "--out", str(tmp_path / "scorer.pt")])
    assert result.exit_code == 1
    assert result.output == f"Error: cannot write the store's questions to {made}: {blocker} is a file, not a " \
                            "folder; choose another place\n"


def test_a_file_that_is_no_checkpoint_says_so_in_one_line_and_how_to_make_one(movies_db, tmp_path):
    garbage = tmp_path / "scorer.pt"
    garbage.write_text("not a checkpoint")
    result = CliRunner().invoke(main, ["ask", "who directed Vertigo", "--db", str(movies_db), "--topic", "Vertigo",
                                       "--reasoner", "learned-paths", "--set", f"checkpoint={garbage}"])
    assert result.exit_code == 1 and "weights_only" not in result.output
    assert last_line(result) == (f"Error: {garbage} is damaged or is not a path scorer checkpoint; make a new one "
                                 "with `localkg train paths`")


def test_after_a_load_adds_relations_the_checkpoint_says_the_store_changed_since_training(tmp_path):
    db = tmp_path / "db"
    runner = CliRunner()
    assert runner.invoke(main, ["load", "triples", str(FIXTURES / "path_movies.tsv"), "--db", str(db)]).exit_code == 0
    trained = runner.invoke(main, ["train", "paths", "--db", str(db), "--questions",
                                   str(FIXTURES / "path_questions.jsonl"), "--max-hops", "2", "--epochs", "1",
                                   "--threads", "1", "--json"])
    assert trained.exit_code == 0, trained.output
    more = tmp_path / "more.tsv"
    more.write_text("Vertigo\tfilmed_in\tSan Francisco\n")
    assert runner.invoke(main, ["load", "triples", str(more), "--db", str(db)]).exit_code == 0
    result = runner.invoke(main, ["ask", "who directed Vertigo", "--db", str(db), "--topic", "Vertigo",
                                  "--reasoner", "learned-paths", "--set", "llm_options=0"])
    assert result.exit_code == 1 and "another store" not in result.output
    assert last_line(result) == (f"Error: {db} has changed since {default_checkpoint(db)} was trained: load "
                                 "generation 1 then, 2 now, with 1 new relation (filmed_in) the scorer has not "
                                 f"learned; retrain with `localkg train paths --db {db}`")


def test_an_interrupted_training_says_what_its_checkpoint_holds_and_offers_no_resume(movies_db, tmp_path,
                                                                                     monkeypatch):
    import localkg.path_scorer.train

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt  # Ctrl-C during supervision or an epoch

    monkeypatch.setattr(localkg.path_scorer.train, "train_from_files", interrupted)
    result = CliRunner().invoke(main, ["train", "paths", "--db", str(movies_db), "--questions",
                                       str(FIXTURES / "path_questions.jsonl"), "--out", str(tmp_path / "scorer.pt")])
    assert result.exit_code == 130 and "--resume" not in result.output
    assert result.output.startswith("interrupted; the checkpoint holds the last finished epoch")
