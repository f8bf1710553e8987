"""``localkg eval`` end to end: a MetaQA sample with embed-path (real store, real MiniLM
scorer, no LLM), resume after a killed run, the RoG fixture, ``eval compare`` and bad input; on
the path-movies store with its trained path scorer, a scorer that cannot be used, what a run
records of ``relations=auto`` and its checkpoints, and the default reasoner."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.datasets import read_questions, select_questions
from localkg.evaluation.metrics import Prediction, score_question
from localkg.path_scorer.location import default_checkpoint
from localkg.store import KG

FIXTURES = Path(__file__).parent / "fixtures"
PATH_QUESTIONS = FIXTURES / "path_questions.jsonl"
HEADLINE = {"n", "hits@1", "hit", "f1", "em_loose", "llm_calls_per_q", "prompt_tokens_per_q",
            "completion_tokens_per_q", "seconds_per_q"}


def invoke(*args: str):
    return CliRunner().invoke(main, ["eval", *map(str, args)], catch_exceptions=False)


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_eval_metaqa_sample(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    out = tmp_path / "run"
    result = invoke(questions, "--db", db, "--reasoner", "embed-path", "--sample", 8, "--seed", 3, "--out", out)
    assert result.exit_code == 0, result.output

    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == HEADLINE | {"dataset", "reasoner", "model", "topic_entities", "uses", "breakdowns"}
    assert all(isinstance(summary[key], (int, float)) for key in HEADLINE)
    assert summary["n"] == 8 and summary["reasoner"] == "embed-path" and summary["model"] == "none"
    assert summary["topic_entities"] == "gold" and summary["llm_calls_per_q"] == 0

    expected = [q.id for q in select_questions(read_questions(questions), 8, 3, None)]
    records = lines_of(out / "predictions.jsonl")
    assert [r["qid"] for r in records] == expected            # the seeded sample, in the order drawn
    for record in records:                                     # each line carries its own metric
        score = score_question([Prediction(a["id"], a["name"]) for a in record["answers"]], record["gold"])
        assert record["metrics"] == score.to_json()
        assert record["evidence"] and record["trace"]["kg"]
    assert summary["hits@1"] == pytest.approx(sum(r["metrics"]["hits@1"] for r in records) / 8)
    one_hop = summary["breakdowns"]["by_hop"]["1"]
    assert one_hop["hits@1"] >= 0.5                           # embed-path answers most one-hop questions
    assert set(summary["breakdowns"]["cost"]) == {"llm_calls", "prompt_tokens", "completion_tokens",
                                                  "kg_queries", "seconds"}

    report = (out / "report.md").read_text()
    assert "## Accuracy" in report and "em_loose (ToG-style)" in report and "## By question type" in report
    for plot in ("accuracy_by_hop.png", "cost_distribution.png"):
        assert plot in report and (out / plot).read_bytes()[:4] == b"\x89PNG"

    again = invoke(questions, "--db", db, "--reasoner", "embed-path", "--sample", 8, "--seed", 3, "--out", out)
    assert again.exit_code != 0 and "already holds predictions" in again.output
    other = invoke(questions, "--db", db, "--reasoner", "embed-path", "--sample", 8, "--seed", 4, "--out", out,
                   "--resume")
    assert other.exit_code != 0 and "different seed" in other.output


def test_resume_with_another_limit_answers_only_the_new_questions(metaqa_sample, tmp_path: Path) -> None:
    """--limit N is the first N of the sample in the order drawn, so a run grows (or is summarised
    shorter) by resuming with another limit; the questions answered before are not asked again."""
    questions, db = metaqa_sample
    out = tmp_path / "run"
    args = [questions, "--db", db, "--reasoner", "embed-path", "--sample", 8, "--seed", 3, "--out", out]
    assert invoke(*args, "--limit", 3).exit_code == 0
    first = lines_of(out / "predictions.jsonl")
    grown = invoke(*args, "--limit", 5, "--resume")
    assert grown.exit_code == 0, grown.output
    records = lines_of(out / "predictions.jsonl")
    expected = [q.id for q in select_questions(read_questions(questions), 8, 3, None)]
    assert [r["qid"] for r in records] == expected[:5] and records[:3] == first
    assert json.loads((out / "summary.json").read_text())["n"] == 5
    shorter = invoke(*args, "--limit", 2, "--resume")
    assert shorter.exit_code == 0, shorter.output
    assert len(lines_of(out / "predictions.jsonl")) == 5
    assert json.loads((out / "summary.json").read_text())["n"] == 2


def test_resume_after_a_killed_run(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    out = tmp_path / "run"
    predictions = out / "predictions.jsonl"
    command = [sys.executable, "-c", "from localkg.cli import main; main()", "eval", str(questions), "--db", str(db),
               "--reasoner", "embed-path", "--out", str(out)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 600
    while not (predictions.exists() and predictions.read_bytes().count(b"\n") >= 2):
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the run wrote no predictions in time"
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    process.stderr.close()
    before = predictions.read_text(encoding="utf-8").splitlines()
    assert 2 <= len(before) < 40, "the run was not interrupted"
    killed = CliRunner().invoke(main, ["eval", "compare", str(out), "--out", str(tmp_path / "cmp")])
    assert killed.exit_code == 0, killed.output
    assert f"| incomplete: {len(before)} of 40 answered, no summary" in killed.output
    with predictions.open("a", encoding="utf-8") as handle:   # what a kill in mid-write leaves behind
        handle.write('{"qid": "qa_dev:3', )

    result = invoke(questions, "--db", db, "--reasoner", "embed-path", "--out", out, "--resume")
    assert result.exit_code == 0, result.output
    after = predictions.read_text(encoding="utf-8").splitlines()
    qids = [json.loads(line)["qid"] for line in after]
    assert len(qids) == 40 and len(set(qids)) == 40              # every question once, none twice
    assert after[:len(before)] == before                        # finished questions were not redone
    assert json.loads((out / "summary.json").read_text())["n"] == 40


def test_eval_rog_fixture_without_db(tmp_path: Path) -> None:
    out = tmp_path / "rog"
    result = invoke(FIXTURES / "rog_tiny.jsonl", "--reasoner", "embed-path", "--out", out)
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n"] == 3 and summary["topic_entities"] == "gold"
    assert summary["hits@1"] >= 2 / 3
    first = lines_of(out / "predictions.jsonl")[0]
    assert first["answers"][0]["name"] == "Mark Sandrich"
    assert first["evidence"][0]["text"] == "Top Hat —film.film.directed_by→ Mark Sandrich"

    compared = CliRunner().invoke(main, ["eval", "compare", str(out), str(out), "--out", str(tmp_path / "cmp")])
    assert compared.exit_code == 0, compared.output
    assert compared.output.count("| embed-path |") == 2
    assert (tmp_path / "cmp" / "compare.png").read_bytes()[:4] == b"\x89PNG"
    assert "hits@1" in (tmp_path / "cmp" / "compare.md").read_text()


def test_bad_input_is_one_clear_line(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    no_db = invoke(questions, "--out", tmp_path / "a")
    assert no_db.exit_code == 1 and "--db is needed" in no_db.output
    bad_setting = invoke(questions, "--db", db, "--reasoner", "embed-path", "--set", "depth=2", "--out", tmp_path / "b")
    assert bad_setting.exit_code == 1 and "embed-path has no setting depth" in bad_setting.output
    not_a_setting = invoke(questions, "--db", db, "--set", "depth", "--out", tmp_path / "c")
    assert not_a_setting.exit_code == 2 and "KEY=VALUE" in not_a_setting.output
    no_reasoner = invoke(questions, "--db", db, "--reasoner", "oracle", "--out", tmp_path / "d")
    assert no_reasoner.exit_code == 1 and "no reasoner named 'oracle'" in no_reasoner.output
    no_runs = CliRunner().invoke(main, ["eval", "compare", str(tmp_path)])
    assert no_runs.exit_code == 1 and "holds no run" in no_runs.output


def test_the_first_n_of_a_sample_are_a_random_subset_not_the_first_types(tmp_path: Path) -> None:
    """Dataset files are grouped by question type (MetaQA's are); ``--limit`` must not then mean
    "the first types only"."""
    grouped = tmp_path / "grouped.txt"
    grouped.write_text("".join(f"what is {kind} of [X{i}]\tY{i}\n" for kind in ("a", "b") for i in range(500)))
    questions = read_questions(grouped)
    sample = select_questions(questions, 100, 0, None)
    first = select_questions(questions, 100, 0, 20)
    assert first == sample[:20] and {q.text.split()[2] for q in first} == {"a", "b"}
    assert select_questions(questions, 100, 0, None) == sample  # seeded: the same every time


def rows_of(table: str) -> list[str]:
    """The rows of an ``eval compare`` table, without its header."""
    return [line for line in table.splitlines() if line.startswith("| ")][1:]


@pytest.mark.parametrize("reasoner", ["learned-paths", "embed-path"])
@pytest.mark.parametrize("damage", ["truncated", "stale"])   # stale: an appending load added a relation
def test_a_path_scorer_that_cannot_be_used_fails_the_run_in_one_line(movie_store, tmp_path: Path, reasoner,
                                                                     damage) -> None:
    """Every question would fail the same way: the run stops before the first, with no summary
    that looks like a result, and ``eval compare`` lists it as failed."""
    message = "localkg train paths"    # the checkpoint's own error, which says how to make a usable one
    db = movie_store(scorer=True)
    checkpoint = default_checkpoint(db)
    if damage == "truncated":
        checkpoint.write_bytes(checkpoint.read_bytes()[:checkpoint.stat().st_size // 2])
    else:
        with KG.open(db) as kg:
            kg.add_triples([("Vertigo", "filmed_in", "San Francisco")])
    out = tmp_path / "run"
    result = invoke(PATH_QUESTIONS, "--db", db, "--reasoner", reasoner, "--limit", 3, "--out", out)
    assert result.exit_code == 1
    last = result.output.strip().splitlines()[-1]
    assert last.startswith("Error: cannot start the run: ") and message in last and "Traceback" not in result.output
    assert not (out / "summary.json").exists() and not (out / "report.md").exists()
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "failed" and message in status["error"]

    compared = CliRunner().invoke(main, ["eval", "compare", str(out), "--out", str(tmp_path / "cmp")])
    assert compared.exit_code == 0, compared.output
    (row,) = rows_of(compared.output)
    assert "| failed after 0 of 3 answered: cannot start the run: " in row and message in row
    assert f"| {reasoner} |" in row and "0.000" not in row             # no numbers that look like a result


def retrain(checkpoint: Path) -> None:
    """What `localkg train paths` does to the file, as far as a run can tell: another checkpoint
    of the same scorer at the same place (here only its training record differs)."""
    import torch

    payload = torch.load(checkpoint, weights_only=True)
    payload["meta"]["epochs_done"] += 1
    torch.save(payload, checkpoint)


def test_a_run_records_what_auto_settled_and_resume_refuses_another(movie_store, trained_paths,
                                                                      tmp_path: Path) -> None:
    """relations=auto is embed on a store without a path scorer and trained beside one: the run
    says which, with the checkpoint's fingerprint, and a resumed run may not mix the two."""
    import shutil

    db = movie_store(scorer=False)
    out = tmp_path / "embed"
    args = [PATH_QUESTIONS, "--db", db, "--reasoner", "embed-path", "--out", out]
    assert invoke(*args, "--limit", 2).exit_code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["uses"] == {"settings": {"relations": "embed"}, "checkpoints": {}}
    assert json.loads((out / "run.json").read_text())["uses"] == summary["uses"]
    assert "Settled when the run started: relations=embed; " in (out / "report.md").read_text()

    checkpoint = default_checkpoint(db)                     # `localkg train paths` writes the scorer
    checkpoint.parent.mkdir()
    shutil.copy(trained_paths[0], checkpoint)
    refused = invoke(*args, "--limit", 4, "--resume")
    assert refused.exit_code == 1
    assert "was run with relations=embed; no checkpoint" in refused.output
    assert f"now gives relations=trained; checkpoint {checkpoint.resolve()} (" in refused.output
    assert len(lines_of(out / "predictions.jsonl")) == 2    # nothing was asked with the other ranking

    trained = tmp_path / "trained"
    args = [PATH_QUESTIONS, "--db", db, "--reasoner", "embed-path", "--out", trained]
    assert invoke(*args, "--limit", 2).exit_code == 0
    uses = json.loads((trained / "summary.json").read_text())["uses"]
    assert uses["settings"] == {"relations": "trained"} and list(uses["checkpoints"]) == [str(checkpoint.resolve())]
    compared = CliRunner().invoke(main, ["eval", "compare", str(out), str(trained), "--out", str(tmp_path / "cmp")])
    assert compared.exit_code == 0, compared.output
    embed_row, trained_row = rows_of(compared.output)
    assert "| relations=embed; no checkpoint | finished |" in embed_row
    assert f"| relations=trained; checkpoint paths/scorer.pt ({uses['checkpoints'][str(checkpoint.resolve())]}) |" \
        in trained_row

    retrain(checkpoint)
    again = invoke(*args, "--limit", 3, "--resume")
    assert again.exit_code == 1 and "the answers would mix the two" in again.output
    assert len(lines_of(trained / "predictions.jsonl")) == 2


def test_without_a_reasoner_a_run_takes_the_best_the_store_supports_and_says_so(movie_store, tmp_path: Path) -> None:
    out = tmp_path / "trained"
    result = invoke(PATH_QUESTIONS, "--db", movie_store(scorer=True), "--limit", 2, "--set", "margin=0", "--out", out)
    assert result.exit_code == 0, result.output
    assert "reasoner: learned-paths (the default: " in result.stderr
    assert json.loads((out / "summary.json").read_text())["reasoner"] == "learned-paths"
    untrained = invoke(PATH_QUESTIONS, "--db", movie_store(scorer=False), "--set", "bogus=1", "--out", tmp_path / "u")
    assert untrained.exit_code == 1 and "tog has no setting bogus" in untrained.output
    assert "reasoner: tog (the default: " in untrained.stderr and "no trained path scorer" in untrained.stderr
