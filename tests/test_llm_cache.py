"""``--llm-cache``: a call asked before is answered from the SQLite cache exactly as the real model
answers it, without running the model; any change to what the answer depends on misses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.llm import LLM
from localkg.llm.cache import ResponseCache
from localkg.llm.engine import Engine
from localkg.llm.framing import PROMPT_STYLE_ENV
from localkg.store import KG

pytestmark = pytest.mark.model

OPTIONS = ["Mark Sandrich", "George Stevens", "Fred Astaire"]
SCHEMA = {"type": "object", "properties": {"director": {"type": "string"}, "sure": {"type": "boolean"}},
          "required": ["director", "sure"]}


def ask_every_kind(model: LLM) -> list:
    return [
        model.generate("Top Hat is a film directed by", step="generate", max_tokens=6),
        model.choose("Who directed Top Hat?", OPTIONS, step="choose", k=2),
        model.score_options("Who directed Top Hat?", OPTIONS, step="score"),
        model.yes_no("Is Top Hat a film?", step="yes_no"),
        model.json("Who directed Top Hat?", SCHEMA, step="json", max_tokens=24),
    ]


def model_must_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def ran(*args, **kwargs):
        raise AssertionError("the model ran")

    for name in ("complete", "constrained", "next_logprobs"):
        monkeypatch.setattr(Engine, name, ran)


def recorded(model: LLM) -> list[tuple]:
    return [(c.step, c.prompt, c.output, c.prompt_tokens, c.completion_tokens) for c in model.calls]


def test_cached_answers_are_the_models_answers_without_running_it(tmp_path: Path, llm: LLM,
                                                                  monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "answers.sqlite"
    uncached = ask_every_kind(llm)
    filling = LLM(cache=ResponseCache(path))
    assert ask_every_kind(filling) == uncached
    assert not any(call.cached for call in filling.calls) and len(ResponseCache(path)) == 5

    model_must_not_run(monkeypatch)
    replaying = LLM(cache=ResponseCache(path))
    assert ask_every_kind(replaying) == uncached
    assert all(call.cached for call in replaying.calls)
    assert recorded(replaying) == recorded(filling)  # same prompts, outputs and token counts


def test_what_the_answer_depends_on_is_part_of_the_key(tmp_path: Path, llm: LLM, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "answers.sqlite"
    LLM(cache=ResponseCache(path)).choose("Who directed Top Hat?", OPTIONS, step="choose", k=2)
    model_must_not_run(monkeypatch)
    changed = [
        lambda: LLM(cache=ResponseCache(path)).choose("Who directed Top Hat?", OPTIONS, step="choose", k=1),
        lambda: LLM(cache=ResponseCache(path)).choose("Who directed Swing Time?", OPTIONS, step="choose", k=2),
        lambda: LLM(cache=ResponseCache(path)).choose("Who directed Top Hat?", OPTIONS[:2], step="choose", k=2),
        lambda: LLM(cache=ResponseCache(path), seed=1).choose("Who directed Top Hat?", OPTIONS, step="choose", k=2),
        lambda: LLM(cache=ResponseCache(path), prompt_style="completion").choose("Who directed Top Hat?", OPTIONS,
                                                                                step="choose", k=2),
    ]
    for call in changed:
        with pytest.raises(AssertionError, match="the model ran"):
            call()
    with monkeypatch.context() as environment:
        environment.setenv(PROMPT_STYLE_ENV, "completion")
        with pytest.raises(AssertionError, match="the model ran"):
            LLM(cache=ResponseCache(path)).choose("Who directed Top Hat?", OPTIONS, step="choose", k=2)
    # the step name is only a label: the same call from another step is a hit
    assert LLM(cache=ResponseCache(path)).choose("Who directed Top Hat?", OPTIONS, step="other", k=2)


def test_ask_with_llm_cache_replays_the_same_answer(tmp_path: Path):
    db = tmp_path / "db"
    with KG.create(db) as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers"),
                        ("Swing Time", "starred_actors", "Ginger Rogers")])
    command = ["ask", "which movies did Ginger Rogers star in", "--db", str(db), "--topic", "Ginger Rogers",
               "--n-ctx", "1024", "--json", "--trace", "--llm-cache", str(tmp_path / "answers.sqlite")]
    first, second = (json.loads(CliRunner().invoke(main, command, catch_exceptions=False).stdout) for _ in range(2))
    assert first["answers"] == second["answers"] and first["llm_calls"] == second["llm_calls"] > 0
    assert not any(call["cached"] for call in first["trace"]["llm"])
    assert all(call["cached"] for call in second["trace"]["llm"])
    assert first["prompt_tokens"] == second["prompt_tokens"]


def a_file_of_another_kind(folder: Path) -> Path:
    path = folder / "answers.tsv"
    path.write_text("question\tanswer\nwho directed Top Hat\tMark Sandrich\n")
    return path


def below_a_file(folder: Path) -> Path:
    (folder / "taken").write_text("a file where the cache's folder should be")
    return folder / "taken" / "answers.sqlite"


@pytest.mark.parametrize("place", [a_file_of_another_kind, below_a_file])
def test_an_unusable_cache_file_is_one_line_naming_it(tmp_path: Path, place):
    db = tmp_path / "db"
    with KG.create(db) as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
    cache = place(tmp_path)
    result = CliRunner().invoke(main, ["ask", "who directed Top Hat", "--db", str(db), "--topic", "Top Hat",
                                       "--reasoner", "tog", "--n-ctx", "1024", "--llm-cache", str(cache)])
    assert result.exit_code == 1 and "Traceback" not in result.output
    last = result.stderr.splitlines()[-1]  # after the embedder's loading bar
    assert last.startswith(f"Error: cannot use {cache} as the LLM cache: ") and "--llm-cache" in last
