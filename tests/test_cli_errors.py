"""Ordinary mistakes end in one clear line and a nonzero exit, never a traceback (issue 27, item 5);
and a --db path with a quote or a backslash simply works."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.store import KG


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def one_line_error(result) -> bool:
    return (result.exit_code != 0 and result.output.count("\n") == 1 and result.output.startswith("Error: ")
            and (result.exception is None or isinstance(result.exception, SystemExit)))


def test_a_db_that_names_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "kb.txt").write_text("a|r|b\n")
    (tmp_path / "afile").write_text("not a store")
    for args in (["load", "triples", str(tmp_path / "kb.txt")], ["stats"], ["check"]):
        result = run(*args, "--db", str(tmp_path / "afile"))
        assert one_line_error(result), result.output
        assert "afile" in result.output


def test_a_db_path_with_a_quote_and_a_backslash_loads(tmp_path: Path, dumps) -> None:
    db = tmp_path / "it's a \\ store" / "db"
    (tmp_path / "kb.txt").write_text("Top Hat|directed_by|Mark Sandrich\nTop Hat|starred_actors|Ginger Rogers\n")
    dump = tmp_path / "fb.nt"
    dumps.make_dump(dump, "freebase", 200)
    assert run("load", "triples", str(tmp_path / "kb.txt"), "--db", str(db)).exit_code == 0
    loaded = run("load", "freebase", str(dump), "--db", str(db), "--workers", "0", "--quiet")
    assert loaded.exit_code == 0, loaded.output
    with KG.open(db, read_only=True) as kg:
        assert kg.stats().facts > 2
    assert run("check", "--db", str(db), "--full").exit_code == 0


def test_a_model_that_is_not_gguf(tmp_path: Path) -> None:
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich")])
    junk = tmp_path / "model.gguf"
    junk.write_text("not a model")
    result = run("ask", "who directed Top Hat", "--db", str(tmp_path / "db"), "--reasoner", "io", "--model", str(junk))
    assert one_line_error(result) and "is not a GGUF model file" in result.output, result.output


@pytest.mark.model
def test_link_and_index_build_on_an_empty_store_need_no_traceback(tmp_path: Path) -> None:
    """Linking and the label table met an empty store with an ArrowInvalid; now they say what they found."""
    KG.create(tmp_path / "db").close()
    linked = run("link", "Top Hat", "--db", str(tmp_path / "db"))
    assert linked.exception is None and "entity" in linked.output.lower(), linked.output
    built = run("index", "build", "--db", str(tmp_path / "db"))
    assert built.exception is None and "0 vectors" in built.output, built.output
    asked = run("ask", "who directed Top Hat", "--db", str(tmp_path / "db"), "--reasoner", "io")
    assert asked.exception is None or isinstance(asked.exception, SystemExit), asked.output


def test_ctrl_c_offers_resume_only_to_a_command_that_has_it() -> None:
    import click

    from localkg.cli import friendly_errors

    @click.command()
    @click.option("--resume", is_flag=True)
    @friendly_errors
    def resumable(resume: bool) -> None:
        raise KeyboardInterrupt

    @click.command()
    @friendly_errors
    def plain() -> None:
        raise KeyboardInterrupt

    @click.command()
    @friendly_errors(interrupted="the checkpoint holds the last finished epoch")
    def explained() -> None:
        raise KeyboardInterrupt

    outputs = [CliRunner().invoke(command, []) for command in (resumable, plain, explained)]
    assert [result.exit_code for result in outputs] == [130, 130, 130]
    assert [result.output for result in outputs] == [
        "interrupted; what was committed is kept: run the same command with --resume to continue\n",
        "interrupted\n",
        "interrupted; the checkpoint holds the last finished epoch\n",
    ]
