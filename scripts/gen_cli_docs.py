"""Write docs/cli.md from the commands' own ``--help`` (so the reference cannot drift).

Run ``python scripts/gen_cli_docs.py`` after changing a command; a test fails
when docs/cli.md is out of date.
"""
from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

DOCS = Path(__file__).resolve().parents[1] / "docs" / "cli.md"
HEADER = """# CLI reference

Generated from each command's `--help` by `python scripts/gen_cli_docs.py`;
do not edit by hand. Every command exits non-zero with one line on error.
"""


def command_paths(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group``, depth first, in alphabetical order."""
    paths = []
    for name in sorted(group.list_commands(click.Context(group))):
        command = group.get_command(click.Context(group), name)
        paths.append(prefix + (name,))
        if isinstance(command, click.Group):
            paths.extend(command_paths(command, prefix + (name,)))
    return paths


def render() -> str:
    from localkg.cli import main

    runner = CliRunner()
    sections = [HEADER]
    for path in [()] + command_paths(main):
        result = runner.invoke(main, [*path, "--help"], prog_name="localkg", terminal_width=100)
        title = " ".join(("localkg",) + path)
        sections.append(f"## `{title}`\n\n```\n{result.output.rstrip()}\n```\n")
    return "\n".join(sections)


if __name__ == "__main__":
    DOCS.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {DOCS}\n")
