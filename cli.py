"""The ``localkg`` command line: a thin click layer over the library.

Each command parses options, calls one library function and prints its
result; errors that a user can cause (``LocalKGError``) end the command with
one clear line and a non-zero exit, never a traceback.
"""
from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from localkg.errors import LocalKGError


def friendly_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn localkg errors (and Ctrl-C) into one line on stderr and a non-zero exit."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except LocalKGError as error:
            raise click.ClickException(str(error)) from None
        except KeyboardInterrupt:
            click.echo("interrupted; what was committed is kept (use --resume where offered)", err=True)
            sys.exit(130)

    return wrapper


def db_option(must_exist: bool = True) -> Callable[..., Any]:
    return click.option("--db", "db", required=True, type=click.Path(path_type=Path),
                        help="Database directory." + (" Must exist." if must_exist else " Created if missing."))


def echo_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="localkg")
def main() -> None:
    """localkg: an embedded, offline knowledge store and graph reasoner."""


# ---------------------------------------------------------------- store: stats, query
@main.command()
@db_option()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def stats(db: Path, as_json: bool) -> None:
    """Counts of entities, mediators, literals, facts, relations and labels."""
    from dataclasses import asdict

    from localkg.store import KG

    with KG.open(db, read_only=True) as kg:
        counts = asdict(kg.stats())
        counts["nodes"] = kg.stats().nodes
        counts["generation"] = kg.generation
    if as_json:
        echo_json(counts)
    else:
        for key, value in counts.items():
            click.echo(f"{key:>11}: {value:,}")


@main.command()
@db_option()
@click.argument("cypher")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="Query parameter (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print rows as JSON objects.")
@friendly_errors
def query(db: Path, cypher: str, params: tuple[str, ...], as_json: bool) -> None:
    """Run a read-only Cypher query (power users). Pass values with --param, never inline."""
    from localkg.store import KG

    parameters = dict(p.split("=", 1) for p in params)
    with KG.open(db, read_only=True) as kg:
        try:
            columns, rows = kg.query(cypher, parameters)
        except RuntimeError as error:
            raise LocalKGError(f"query failed: {str(error).splitlines()[0]}") from None
    if as_json:
        echo_json([dict(zip(columns, row)) for row in rows])
        return
    click.echo("\t".join(columns))
    for row in rows:
        click.echo("\t".join("" if v is None else str(v) for v in row))


# ---------------------------------------------------------------- loading
@main.group()
def load() -> None:
    """Load triples, a Freebase dump or a Wikidata dump into a database."""
