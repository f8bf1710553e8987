"""``localkg ask`` through click's CliRunner: the readable answer with its evidence, --json, --trace,
--topic, --set, linking, and the "no answer found" case; ``localkg demo`` answers with a reasoner."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.store import KG

MOVIES = [
    ("Top Hat", "directed_by", "Mark Sandrich"),
    ("Top Hat", "starred_actors", "Ginger Rogers"),
    ("Top Hat", "starred_actors", "Fred Astaire"),
    ("Swing Time", "starred_actors", "Ginger Rogers"),
    ("Swing Time", "directed_by", "George Stevens"),
]


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("ask") / "db"
    with KG.create(path) as kg:
        kg.add_triples(MOVIES)
    return path


def ask(*args: str):
    return CliRunner().invoke(main, ["ask", *args], catch_exceptions=False)


def test_json_is_the_result_shape_without_the_trace(db):
    result = ask("who directed Top Hat", "--db", str(db), "--topic", "Top Hat", "--reasoner", "embed-path", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data) == ["question", "reasoner", "topic_entities", "answers", "evidence", "notes", "llm_calls",
                          "prompt_tokens", "completion_tokens", "kg_queries", "seconds"]
    assert data["question"] == "who directed Top Hat" and data["topic_entities"] == ["Top Hat"]
    assert {k: v for k, v in data["answers"][0].items() if k != "score"} == {"id": "Mark Sandrich",
                                                                             "name": "Mark Sandrich"}
    assert data["evidence"][0]["text"] == "Top Hat —directed_by→ Mark Sandrich"
    assert data["evidence"][0]["steps"][0]["relation"] == "directed_by"
    assert data["llm_calls"] == 0 and data["prompt_tokens"] == 0 and data["completion_tokens"] == 0
    assert data["seconds"] > 0


@pytest.mark.model
def test_tog_with_the_real_model_prints_the_answer_and_its_evidence_path(db):
    result = ask("which movies did Ginger Rogers star in", "--db", str(db), "--topic", "Ginger Rogers",
                 "--n-ctx", "1024")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert {"answer: Top Hat", "answer: Swing Time"} <= set(lines)
    assert "  evidence: Ginger Rogers —starred_actors⁻¹→ Top Hat" in lines
    assert "LLM calls" in lines[-1]


@pytest.mark.model
def test_trace_shows_every_llm_call_and_graph_query(db):
    text = ask("who directed Top Hat", "--db", str(db), "--topic", "Top Hat", "--trace", "--n-ctx", "1024").stdout
    assert "--- LLM call 1: sufficient-1" in text and ">>> " in text
    assert "kg: relations(entity='Top Hat'" in text
    as_json = json.loads(ask("who directed Top Hat", "--db", str(db), "--topic", "Top Hat", "--trace", "--json",
                             "--n-ctx", "1024").stdout)
    assert as_json["llm_calls"] == len(as_json["trace"]["llm"]) >= 1
    assert as_json["trace"]["kg"][0]["primitive"]
    assert any(note.startswith("depth 1: beam") for note in as_json["notes"])


@pytest.mark.model
def test_set_overrides_a_setting_and_unknown_settings_are_refused(db):
    narrow = json.loads(ask("who starred in Top Hat", "--db", str(db), "--topic", "Top Hat", "--set", "depth=1",
                            "--set", "max_tails=1", "--json", "--trace", "--n-ctx", "1024").stdout)
    assert [call["step"] for call in narrow["trace"]["llm"]][0] == "sufficient-1"
    assert len(narrow["answers"]) == 1
    refused = CliRunner().invoke(main, ["ask", "q", "--db", str(db), "--topic", "Top Hat", "--set", "bogus=1"])
    assert refused.exit_code != 0 and "tog has no setting bogus" in refused.output
    malformed = CliRunner().invoke(main, ["ask", "q", "--db", str(db), "--set", "width"])
    assert malformed.exit_code != 0 and "expected KEY=VALUE" in malformed.output


@pytest.mark.parametrize("setting, message", [
    ("width=three", "Error: tog setting width: expected a whole number, got 'three'"),
    ("prune=magic", "Error: tog setting prune: expected one of embed, llm, hybrid, got 'magic'"),
    ("skip_reverse=ture", "Error: tog setting skip_reverse: expected true or false, got 'ture'"),
    ("depth=-3", "Error: tog setting depth: expected a whole number at least 1, got -3"),
    ("width=0", "Error: tog setting width: expected a whole number at least 1, got 0"),
])
def test_a_bad_setting_value_is_one_line_and_a_nonzero_exit(db, setting, message):
    refused = CliRunner().invoke(main, ["ask", "q", "--db", str(db), "--topic", "Top Hat", "--reasoner", "tog",
                                        "--set", setting])
    assert refused.exit_code == 1 and refused.output.strip() == message


@pytest.mark.parametrize("content, message", [
    (b"not a model at all", "is not a GGUF model file"),
    (b"GGUF" + bytes(200), "llama.cpp could not load"),  # the magic of a GGUF, then nothing of one
], ids=["not-gguf", "truncated-gguf"])
def test_a_model_that_cannot_be_loaded_stops_ask_in_one_line(db, tmp_path, content, message):
    model = tmp_path / "garbage.gguf"
    model.write_bytes(content)
    result = CliRunner().invoke(main, ["ask", "who directed Top Hat", "--db", str(db), "--topic", "Top Hat",
                                       "--reasoner", "tog", "--model", str(model)])
    assert result.exit_code == 1 and result.stdout == "" and "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]  # after the embedder's loading bar
    assert last.startswith("Error: ") and message in last


@pytest.mark.model
def test_a_question_longer_than_the_context_says_on_stderr_that_the_llm_calls_were_skipped(db):
    question = "who directed Top Hat " + "and I really do wonder about it " * 60
    result = CliRunner().invoke(main, ["ask", question, "--db", str(db), "--topic", "Top Hat", "--reasoner", "tog",
                                       "--n-ctx", "256"])
    assert result.exit_code == 0, result.output
    assert "(tog: 0 LLM calls" in result.stdout
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "LLM calls skipped" in warnings[0] and "256-token context" in warnings[0]


def test_without_a_topic_the_question_is_linked(db):
    result = ask("who directed Top Hat", "--db", str(db), "--reasoner", "embed-path", "--json")
    assert json.loads(result.stdout)["answers"][0]["id"] == "Mark Sandrich"


def test_an_unknown_topic_says_why_there_is_no_answer(db):
    result = ask("who directed Nowhere", "--db", str(db), "--topic", "Nowhere")
    assert result.exit_code == 0
    assert result.stdout.startswith("no answer found: no topic entity of the question is in the graph")


def test_a_missing_database_is_one_clear_error(tmp_path):
    result = CliRunner().invoke(main, ["ask", "q", "--db", str(tmp_path / "none")])
    assert result.exit_code != 0 and "no localkg database" in result.output and "Traceback" not in result.output


def test_without_a_reasoner_ask_takes_the_default_policy_s_and_names_it(db):
    """tog on a store without a trained path scorer (learned-paths beside one: test_train_paths_cli.py)."""
    refused = CliRunner().invoke(main, ["ask", "q", "--db", str(db), "--topic", "Top Hat", "--set", "bogus=1"])
    assert refused.exit_code == 1 and "tog has no setting bogus" in refused.output
    assert refused.stderr.startswith(f"reasoner: tog (the default: {db} has no trained path scorer")


@pytest.mark.model
def test_demo_answers_its_question_with_a_reasoner_and_the_evidence(tmp_path):
    result = CliRunner().invoke(main, ["demo", "--db", str(tmp_path / "demo")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    # the first run trained a path scorer from the demo graph, so the policy picks learned-paths
    assert "(reasoner: learned-paths)" in result.output and "reasoner: learned-paths (the default: " in result.stderr
    evidence = [line for line in result.output.splitlines() if line.startswith("  evidence: ")]
    assert evidence and all(line.startswith("  evidence: Ginger Rogers —starred_actors⁻¹→ ") for line in evidence)
    assert all("—directed_by→" in line for line in evidence)
