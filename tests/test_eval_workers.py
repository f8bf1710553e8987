"""``localkg eval --workers N``: worker processes on one machine (real store, real MiniLM; the
real GGUF for the LLM test). Same summary with 1 and 2 workers, resume after the parent was
killed (its workers gone with it), Ctrl-C and a dead worker stop the run cleanly, and a reasoner
that raises stops it naming the question."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.evaluation.harness import without_timing
from localkg.reasoners import base


def invoke(*args: object):
    return CliRunner().invoke(main, ["eval", *map(str, args)], catch_exceptions=False)


def summary_of(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def qids(out: Path) -> list[str]:
    return [json.loads(line)["qid"] for line in (out / "predictions.jsonl").read_text().splitlines()]


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def assert_gone(pids: list[int]) -> None:
    """Every process in ``pids`` exits within 30 s."""
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in pids):
        assert time.monotonic() < deadline, f"processes {[p for p in pids if alive(p)]} are still running"
        time.sleep(0.1)


def test_one_and_two_workers_give_the_same_summary(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    args = [questions, "--db", db, "--reasoner", "embed-path", "--sample", 10, "--seed", 5]
    one = invoke(*args, "--out", tmp_path / "one")
    two = invoke(*args, "--out", tmp_path / "two", "--workers", 2)
    assert one.exit_code == 0 and two.exit_code == 0, one.output + two.output
    assert sorted(qids(tmp_path / "one")) == sorted(qids(tmp_path / "two"))
    assert without_timing(summary_of(tmp_path / "one")) == without_timing(summary_of(tmp_path / "two"))
    assert summary_of(tmp_path / "two")["n"] == 10 and summary_of(tmp_path / "two")["hits@1"] > 0
    bad = invoke(*args, "--out", tmp_path / "bad", "--workers", "many")
    assert bad.exit_code == 1 and "--workers takes a positive number or auto" in bad.output


@pytest.mark.model
def test_llm_answers_do_not_depend_on_the_worker(metaqa_sample, tmp_path: Path) -> None:
    """The real GGUF with one llama.cpp thread per worker: greedy decoding of each prompt on its
    own, so which worker asks (and after which question) changes nothing."""
    questions, db = metaqa_sample
    args = [questions, "--db", db, "--reasoner", "io", "--sample", 4, "--seed", 1, "--llm-threads", 1]
    assert invoke(*args, "--out", tmp_path / "one").exit_code == 0
    assert invoke(*args, "--out", tmp_path / "two", "--workers", 2).exit_code == 0
    one, two = summary_of(tmp_path / "one"), summary_of(tmp_path / "two")
    assert one["llm_calls_per_q"] == 1 and one["model"] != "none"
    assert without_timing(one) == without_timing(two)


def start_two_worker_run(questions: Path, db: Path, out: Path, answered: int) -> subprocess.Popen:
    """A 2-worker CLI run in a child process, returned once ``answered`` predictions are written."""
    predictions = out / "predictions.jsonl"
    command = [sys.executable, "-c", "from localkg.cli import main; main()", "eval", str(questions), "--db", str(db),
               "--reasoner", "embed-path", "--out", str(out), "--workers", "2"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not (predictions.exists() and predictions.read_bytes().count(b"\n") >= answered):
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "the run wrote no predictions in time"
        time.sleep(0.05)
    return process


def test_resume_after_a_killed_two_worker_run(metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    out = tmp_path / "run"
    predictions = out / "predictions.jsonl"
    process = start_two_worker_run(questions, db, out, answered=3)
    workers = children(process.pid)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    process.stderr.close()
    assert_gone(workers)                                        # workers do not outlive the parent
    before = predictions.read_text(encoding="utf-8").splitlines()
    assert 3 <= len(before) < 40, "the run was not interrupted"

    resumed = invoke(questions, "--db", db, "--reasoner", "embed-path", "--out", out, "--resume")  # one worker now
    assert resumed.exit_code == 0, resumed.output
    after = predictions.read_text(encoding="utf-8").splitlines()
    assert after[:len(before)] == before                        # finished questions were not redone
    assert len(qids(out)) == 40 and len(set(qids(out))) == 40   # every question once, none twice
    assert summary_of(out)["n"] == 40


@pytest.mark.parametrize("stop", ["ctrl-c", "a worker crashes"])
def test_ctrl_c_or_a_dead_worker_stops_the_run_cleanly(stop, metaqa_sample, tmp_path: Path) -> None:
    questions, db = metaqa_sample
    out = tmp_path / "run"
    process = start_two_worker_run(questions, db, out, answered=2)
    workers = children(process.pid)
    if stop == "ctrl-c":
        os.kill(process.pid, signal.SIGINT)
    else:
        os.kill(max(workers), signal.SIGKILL)                 # the later-started process is a worker
    _, stderr = process.communicate(timeout=120)
    assert_gone(workers)
    assert "Traceback" not in stderr
    if stop == "ctrl-c":
        assert process.returncode == 130
        assert stderr.rstrip().splitlines()[-1].startswith("interrupted")   # the one line, after the progress bar
        assert "leaked" not in stderr and "resource_tracker" not in stderr  # the workers released what they made
        assert json.loads((out / "status.json").read_text())["state"] == "interrupted"
    else:
        assert process.returncode == 1
        assert "died (exit code -9) while answering question qa_dev:" in stderr and "--resume" in stderr
    kept = qids(out)                                            # every line complete, none twice
    assert 2 <= len(kept) < 40 and len(set(kept)) == len(kept)


RAISING_REASONER = """
    from localkg.reasoners.base import REASONERS, register
    from localkg.reasoners.baselines import EmbedPathReasoner

    REASONERS["raises-on-one"] = __name__


    @register
    class RaisesOnOne(EmbedPathReasoner):
        name = "raises-on-one"

        def solve(self, question, topics, result):
            if {topic!r} in question:
                raise RuntimeError("the reasoner broke")
            super().solve(question, topics, result)
"""


def test_a_reasoner_that_raises_stops_the_run_naming_the_question(metaqa_sample, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The reasoner is registered by the test's own module, which the workers import by name."""
    questions, db = metaqa_sample
    failing = questions.read_text().splitlines()[5]           # the sixth question of the file fails
    topic = failing.split("[")[1].split("]")[0]
    (tmp_path / "plugin").mkdir()
    (tmp_path / "plugin" / "raising_reasoner.py").write_text(textwrap.dedent(RAISING_REASONER.format(topic=topic)))
    monkeypatch.syspath_prepend(str(tmp_path / "plugin"))
    monkeypatch.setattr(base, "REASONERS", dict(base.REASONERS))   # the plugin's name leaves with the test
    monkeypatch.setattr(base, "REGISTRY", dict(base.REGISTRY))
    import raising_reasoner  # noqa: F401  (registers the reasoner in this process)

    out = tmp_path / "run"
    result = invoke(questions, "--db", db, "--reasoner", "raises-on-one", "--out", out, "--workers", 2)
    assert result.exit_code == 1
    message = result.output.strip().splitlines()[-1]
    assert message.startswith("Error: question qa_dev:6 (") and topic in message
    assert "RuntimeError: the reasoner broke at raising_reasoner.py:" in message and "--resume" in message
    assert "Traceback" not in result.output
    kept = qids(out)
    assert kept and len(kept) < 40 and len(set(kept)) == len(kept)   # what finished is kept
