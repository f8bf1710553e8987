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
from typing import TYPE_CHECKING, Any, Callable

import click

from localkg.errors import LocalKGError
from localkg.llm.options import llm_options

if TYPE_CHECKING:
    from localkg.loaders.report import LoadReport


RESUMABLE = "what was committed is kept: run the same command with --resume to continue"


def friendly_errors(command: Callable[..., Any] | None = None, *, interrupted: str = "") -> Any:
    """Turn localkg errors (and Ctrl-C) into one line on stderr and a non-zero exit.

    ``interrupted`` says what Ctrl-C leaves behind (``@friendly_errors(interrupted=...)``); by
    default a command with ``--resume`` says to continue with it, and any other only that it stopped.
    """
    if command is None:
        return functools.partial(friendly_errors, interrupted=interrupted)

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except LocalKGError as error:
            raise click.ClickException(str(error)) from None
        except KeyboardInterrupt:
            left = interrupted or (RESUMABLE if _offers_resume() else "")
            click.echo(f"interrupted; {left}" if left else "interrupted", err=True)
            sys.exit(130)

    return wrapper


def _offers_resume() -> bool:
    context = click.get_current_context(silent=True)
    return context is not None and any(param.name == "resume" for param in context.command.params)


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
        stats = kg.stats()
        counts = asdict(stats)
        counts["nodes"] = stats.nodes
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

    malformed = [p for p in params if "=" not in p]
    if malformed:
        raise click.BadParameter(f"{malformed[0]!r} is not NAME=VALUE", param_hint="--param")
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


@main.command()
@db_option()
@click.option("--repair", is_flag=True, help="Repair what the check finds: finish or drop an interrupted flush, "
              "apply pending updates, rebuild the hash sets, rebuild graph.kuzu when its primary-key index "
              "lost keys, rewrite a damaged manifest.")
@click.option("--full", is_flag=True, help="Look every id up by primary key (one COPY per table into a scratch "
              "table; opens the store for writing). Default: a sample, read-only.")
@click.option("--sample", type=click.IntRange(min=0), default=5_000, show_default=True,
              help="Ids per table looked up without --full (0: all, one query each).")
@click.option("--buffer-pool-mb", "buffer_pool_mb", type=click.IntRange(min=64), default=1024, show_default=True,
              help="Kùzu buffer pool for --repair.")
@friendly_errors
def check(db: Path, repair: bool, full: bool, sample: int, buffer_pool_mb: int) -> None:
    """Verify a store: the primary-key index agrees with the tables, no flush or update was left
    half done, the deduplication hash sets and the counts agree. One line per problem; exit 1
    while any remains (docs/loading.md, "Checking and repairing a store")."""
    from localkg.store.check import check_store, repair_store

    if not db.is_dir():
        raise LocalKGError(f"no localkg database at {db}")
    if repair:
        for action in repair_store(db, buffer_pool_mb << 20):
            click.echo(f"repaired: {action}")
    problems = check_store(db, sample, full=full or repair)
    for problem in problems:
        click.echo(f"problem: {problem}")
    if problems:
        sys.exit(1)
    click.echo(f"ok: {db} is sound")


@main.command()
@db_option()
@click.option("--out", "out", required=True, type=click.Path(path_type=Path),
              help="The backup's directory (must not exist yet); use it as a --db to restore.")
@friendly_errors
def backup(db: Path, out: Path) -> None:
    """Copy a store consistently, while readers may have it open (writers wait). The copy is a
    store of its own: restore by using it as --db, or by moving it in place of the damaged one."""
    from localkg.store.backup import backup_store

    report = backup_store(db, out)
    click.echo(f"backed up {report.source} to {report.target}: {report.files:,} files, "
               f"{report.bytes / 1e6:,.1f} MB")


# ---------------------------------------------------------------- loading
@main.group()
def load() -> None:
    """Load triples, a Freebase dump or a Wikidata dump into a database."""


def note_key_rebuild(db: Path) -> None:
    """Say so when this load must first rebuild the store's hash sets (an earlier localkg hashed
    their keys differently): one pass over what the store holds, before any line is read."""
    from localkg.store.dedupe import outdated_key_sets

    outdated = outdated_key_sets(db)
    if outdated:
        click.echo(f"note: {db} was written by an earlier localkg whose key hashes differ; its hash sets "
                   f"({', '.join(outdated)}) are rebuilt from the database first", err=True)


def print_load_report(report: "LoadReport", as_json: bool) -> None:
    """Print a load's report as a table or JSON."""
    data = report.to_json()
    if as_json:
        echo_json(data)
        return
    for key, value in data.items():
        if isinstance(value, dict):
            for reason, count in value.items():
                click.echo(f"{'':>20}  {count:>10,}  {reason}")
        elif isinstance(value, float):
            click.echo(f"{key:>20}: {value:.1f}")
        elif value != "":
            click.echo(f"{key:>20}: {value:,}" if isinstance(value, int) else f"{key:>20}: {value}")


@load.command("triples")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@db_option(must_exist=False)
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "tsv", "csv", "psv", "nt", "ttl", "jsonl"]), help="Input format.")
@click.option("--names", type=click.Path(path_type=Path), help="id<TAB>name file (e.g. FB15k-237 entity2text.txt).")
@click.option("--max-rejects", type=click.IntRange(min=0), default=None,
              help="Fail when more lines than this are rejected.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@friendly_errors
def load_triples_command(paths: tuple[Path, ...], db: Path, fmt: str, names: Path | None, max_rejects: int | None,
                         as_json: bool) -> None:
    """Load custom triple files (appends to DB and deduplicates).

    Formats: tsv/csv/psv (head, relation, tail), N-Triples and Turtle (parsed
    with pyoxigraph), JSONL objects {"head","relation","tail"}; gzip and bzip2
    are read transparently. Malformed lines go to DB/rejects.tsv.
    """
    from localkg.loaders.triples import load_triples
    from localkg.store import KG

    note_key_rebuild(db)
    with KG.open(db, create=True) as kg:
        kg.record_source("triples", paths, *(["--names", str(names.resolve())] if names else []))
        report = load_triples(kg, paths, format=fmt, names=names, max_rejects=max_rejects)
    print_load_report(report, as_json)


# ---------------------------------------------------------------- demo
REASONER_HELP = ("Registered reasoner name (default: the best the store supports, learned-paths when it has a "
                 "trained path scorer, `localkg train paths`; else tog).")


@main.command()
@click.option("--db", "db", type=click.Path(path_type=Path), default=None,
              help="Where to build the demo database (default: the user cache directory).")
@click.option("--question", default=None, help="Ask this instead of the demo question (linked to the graph).")
@click.option("--reasoner", default=None, help=REASONER_HELP)
@friendly_errors
def demo(db: Path | None, question: str | None, reasoner: str | None) -> None:
    """Build the bundled movie graph (first use) and answer a question with its evidence."""
    from localkg.demo import DEMO_QUESTION, DEMO_TOPIC, ensure_demo_db
    from localkg.reasoners.base import Context, get_reasoner
    from localkg.store import KG

    path = ensure_demo_db(db, progress=True)
    _train_demo_scorer(path)
    reasoner = pick_reasoner(path, reasoner)
    reasoner_class = get_reasoner(reasoner)
    with KG.open(path) as kg:
        counts = kg.stats()
        click.echo(f"demo graph at {path}: {counts.entities:,} entities, {counts.facts:,} facts")
        asked = question or DEMO_QUESTION
        click.echo(f"question: {asked}  (reasoner: {reasoner})")
        result = reasoner_class(Context(kg)).answer(asked, None if question else [DEMO_TOPIC])
    print_answer(result, shown=5)


DEMO_EPOCHS = 10  # the demo's first run trains in about a minute on two cores
DEMO_TOPICS_PER_RELATION = 12


def _train_demo_scorer(path: Path) -> None:
    """On the demo's first run, a path scorer trained from the demo graph alone (no question-answer
    pairs: the store's own questions), so the demo answers as a store of the user's would."""
    from localkg.path_scorer.location import default_checkpoint

    if default_checkpoint(path).exists():
        if _demo_scorer_loads(path):
            return
        click.echo("the demo's path scorer was written by another localkg version: training it again", err=True)
    from localkg.path_scorer.supervision import SupervisionLimits
    from localkg.path_scorer.synthetic import SyntheticLimits
    from localkg.path_scorer.train import TrainConfig, train_from_files
    from localkg.store import KG

    click.echo("first run: training a path scorer from the demo graph alone (no question-answer pairs)", err=True)
    with KG.open(path, read_only=True) as kg:
        report = train_from_files(kg, None, TrainConfig(epochs=DEMO_EPOCHS), default_checkpoint(path),
                                  limits=SupervisionLimits(max_hops=2), progress=True,
                                  synthetic=SyntheticLimits(topics_per_relation=DEMO_TOPICS_PER_RELATION))
    click.echo(f"trained on {report.store_questions} questions made from the graph in {report.seconds:.0f} s", err=True)


def _demo_scorer_loads(path: Path) -> bool:
    """Whether the demo store's path scorer loads (one from an older checkpoint format does not)."""
    from localkg.errors import CheckpointError
    from localkg.path_scorer.checkpoint import load_checkpoint
    from localkg.path_scorer.location import default_checkpoint

    try:
        load_checkpoint(default_checkpoint(path))
    except CheckpointError:
        return False
    return True


# ---------------------------------------------------------------- evaluation (helper "eval")
class _RunByDefaultGroup(click.Group):
    """A group whose first argument, when it is not a subcommand, goes to ``run``: so
    ``localkg eval QUESTIONS --db DB`` runs an evaluation and ``localkg eval compare DIR...``
    compares runs (a questions file literally named ``compare`` or ``grid`` needs ``localkg eval run``)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = ["run", *args]
        return super().parse_args(ctx, args)


def fan_out_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--workers`` and ``--ray``, shared by ``eval run`` and ``eval grid`` (docs/evaluation.md)."""
    ray = click.option("--ray", "ray", is_flag=False, flag_value="local", default=None, metavar="[ADDRESS]",
                       help="Run the workers as Ray actors: alone, a local Ray runtime (dashboard off, ports on "
                            "127.0.0.1); auto or ray://HOST:PORT joins a cluster. Needs pip install "
                            "'localkg[ray]'; the store must be at the same path on every node.")
    command = ray(command)
    return click.option("--workers", default=None, metavar="N|auto",
                        help="Worker processes, each with its own store handle and model (--llm-threads "
                             "each); auto: cores // --llm-threads (Ray: the cluster's CPUs). Default 1 "
                             "(a grid: its [run] workers).")(command)


@main.group("eval", cls=_RunByDefaultGroup)
def eval_group() -> None:
    """Evaluate a reasoner on a questions file (`localkg eval QUESTIONS --db DB --reasoner NAME`),
    run a grid of evaluations (`localkg eval grid GRID.toml --out DIR`), or compare finished runs
    (`localkg eval compare DIR...`). Metric: docs/metrics.md; workers, Ray, grids: docs/evaluation.md."""


@eval_group.command("run")
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--db", "db", type=click.Path(path_type=Path),
              help="Database directory (not needed for per-question-subgraph files, --format rog).")
@click.option("--reasoner", default=None, help=REASONER_HELP)
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(["auto", "metaqa", "pathquestion", "worldcup", "tog", "rog", "mintaka",
                                 "simplequestions", "jsonl"]), help="Questions file format.")
@click.option("--limit", type=click.IntRange(min=1), help="Only the first N (selected) questions.")
@click.option("--sample", type=click.IntRange(min=1), help="A seeded random sample of N questions.")
@click.option("--seed", default=0, show_default=True, help="Seed of the sample and of the LLM.")
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Output folder (default: eval-runs/<reasoner>-<questions file>).")
@click.option("--resume", is_flag=True,
              help="Continue the run in --out, skipping answered questions (--limit may differ: "
                   "it grows or shortens the run).")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Reasoner setting (repeatable).")
@fan_out_options
@llm_options
@friendly_errors
def eval_run(questions: Path, db: Path | None, reasoner: str | None, fmt: str, limit: int | None, sample: int | None,
             seed: int, out: Path | None, resume: bool, settings: tuple[str, ...], workers: str, ray: str | None,
             model: Path | None, n_ctx: int, n_gpu_layers: int, llm_threads: int | None, prompt_style: str | None,
             llm_cache: Path | None) -> None:
    """Run REASONER over QUESTIONS; write predictions.jsonl, summary.json and report.md into --out."""
    from localkg.evaluation.config import EvalConfig
    from localkg.evaluation.harness import run_eval
    from localkg.evaluation.pools import resolve_workers

    parsed = parse_settings(settings)
    reasoner = pick_reasoner(db, reasoner)
    out = out or Path("eval-runs") / f"{reasoner}-{questions.parent.name}-{questions.stem}"
    config = EvalConfig(questions=str(questions), reasoner=reasoner, out=str(out), db=str(db) if db else None,
                        format=fmt, limit=limit, sample=sample, seed=seed, settings=parsed,
                        model=str(model) if model else None, n_ctx=n_ctx, prompt_style=prompt_style,
                        n_gpu_layers=n_gpu_layers, llm_threads=llm_threads,
                        llm_cache=str(llm_cache) if llm_cache else None, workers=resolve_workers(workers or "1"),
                        ray=ray)
    summary = run_eval(config, resume=resume)
    headline = {k: v for k, v in summary.items() if k != "breakdowns"}
    echo_json(headline)
    click.echo(f"report: {out / 'report.md'}", err=True)


@eval_group.command("grid")
@click.argument("grid", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder of the cells (OUT/<reasoner>/<questions>), compare.md and compare.png.")
@fan_out_options
@friendly_errors
def eval_grid(grid: Path, out: Path, workers: str | None, ray: str | None) -> None:
    """Run every cell of GRID (a TOML file: question files x models x reasoners x settings; see
    docs/evaluation.md), resuming finished and half-done cells, then compare them all."""
    from localkg.evaluation.grid import read_grid, run_grid
    from localkg.evaluation.report import compare_runs
    from localkg.evaluation.pools import resolve_workers

    cells = read_grid(grid, out)
    fan_out = {**({"workers": resolve_workers(workers)} if workers else {}), **({"ray": ray} if ray else {})}
    for number, (cell, summary) in enumerate(run_grid(cells, **fan_out), 1):
        click.echo(f"[{number}/{len(cells)}] {cell.name}: n={summary['n']} hits@1={summary['hits@1']:.3f}", err=True)
    click.echo(compare_runs([cell.config.out for cell in cells], out))


@eval_group.command("compare")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", "out", default=".", show_default=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder for compare.md and compare.png.")
@friendly_errors
def eval_compare(runs: tuple[Path, ...], out: Path) -> None:
    """One table across runs (a failed, interrupted or unfinished run is a row that says so, with
    no numbers) and one plot of the finished ones (accuracy vs LLM calls and tokens)."""
    from localkg.evaluation.report import compare_runs

    click.echo(compare_runs(runs, out))


# ---------------------------------------------------------------- indexes and linking (helper "indexes")
@main.group("index")
def index_group() -> None:
    """Embedding indexes (FAISS) and the full-text index of a database."""


@index_group.command("build")
@db_option()
@click.option("--what", type=click.Choice(["entities", "relations", "all"]), default="all", show_default=True,
              help="Which index to build or bring up to date.")
@click.option("--embed-model", "embed_model", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A local sentence-transformers model directory (default: bundled all-MiniLM-L6-v2).")
@click.option("--index-type", type=click.Choice(["auto", "flat", "hnsw", "ivfpq"]), default="auto",
              show_default=True, help="auto: exact flat below 200,000 vectors, IVF-PQ above (docs/indexes.md).")
@click.option("--entity-encoder", type=click.Choice(["static", "transformer"]), default="static",
              show_default=True, help="Entities: static token vectors distilled from the model (cached, fast) "
                                      "or the transformer itself; relations always use the transformer.")
@click.option("--device", default=None, help="torch device of the transformer and of a first distillation "
                                             "(default: cuda when available, else cpu).")
@click.option("--rebuild", is_flag=True, help="Re-embed everything instead of adding what is new.")
@click.option("--checkpoint-every", "checkpoint", type=click.IntRange(min=1), default=50_000, show_default=True,
              help="Save progress every N vectors, so an interrupted build resumes there.")
@click.option("--buffer-pool-mb", type=click.IntRange(min=64), default=None,
              help="Kùzu's buffer pool (default: a quarter of the available memory, at least 1024).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def index_build(db: Path, what: str, embed_model: Path | None, index_type: str, entity_encoder: str,
                device: str | None, rebuild: bool, checkpoint: int, buffer_pool_mb: int | None, as_json: bool) -> None:
    """Build the indexes, or add only the entities loaded since the last build."""
    from localkg.indexes.build import ENTITIES, RELATIONS, build_indexes, make_encoder
    from localkg.loaders.plan import available_memory_bytes
    from localkg.store import KG

    entities = make_encoder(entity_encoder, embed_model, device) if what != RELATIONS else None
    relations = make_encoder("transformer", embed_model, device) if what != ENTITIES else None
    # Kùzu's full-text index over a dump's labels needs far more than the store's default 1 GiB pool
    pool = buffer_pool_mb << 20 if buffer_pool_mb else max(1 << 30, available_memory_bytes() // 4)
    with KG.open(db, buffer_pool_bytes=pool) as kg:
        reports = build_indexes(kg, what, relations, index_type, rebuild, progress=True,
                                checkpoint_vectors=checkpoint, entity_embedder=entities)
    if as_json:
        echo_json([r.to_json() for r in reports])
        return
    for r in reports:
        click.echo(f"{r.kind}: {r.describe()}")


@main.command()
@click.argument("text")
@db_option()
@click.option("--k", "k", type=click.IntRange(min=1), default=5, show_default=True, help="Candidates to show.")
@click.option("--embed-model", "embed_model", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="The model the entity index was built with (or distilled from), when not the bundled one.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@friendly_errors
def link(text: str, db: Path, k: int, embed_model: Path | None, as_json: bool) -> None:
    """Entities TEXT is about: exact names, full-text search and the vector index, merged."""
    from dataclasses import asdict

    from localkg.indexes.build import entity_encoder_of
    from localkg.indexes.linking import EntityLinker
    from localkg.store import KG

    with KG.open(db, read_only=True) as kg:
        linker = EntityLinker(kg, entity_encoder_of(kg, embed_model) if embed_model else None)
        candidates = linker.link(text, k=k)
    if as_json:
        echo_json([asdict(c) for c in candidates])
        return
    if not candidates:
        click.echo("no entity found")
    for c in candidates:
        click.echo(f"{c.score:.3f}\t{c.id}\t{c.name}\t{c.reason}")


# ---------------------------------------------------------------- training (helper "fog")
@main.group("train")
def train_group() -> None:
    """Train the learned parts of reasoners (the relation-path scorer, the FoG foresight scorer)."""


#: Training writes its checkpoint after every epoch (atomically), and the reasoners use whatever is there.
TRAINING_INTERRUPTED = ("the checkpoint holds the last finished epoch (or what it held before, if none finished); "
                        "train again for the full number of epochs")


@train_group.command("fog")
@db_option()
@click.option("--questions", "questions", required=True, multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Questions with gold paths (PathQuestion, WC2014, MetaQA with its _qtype file); repeatable.")
@click.option("--format", "fmt", default="auto", show_default=True, help="Questions format (see localkg eval).")
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="Checkpoint to write (default: DB/fog/scorer.pt, where `fog` looks).")
@click.option("--epochs", type=click.IntRange(min=1), default=5, show_default=True)
@click.option("--lr", type=float, default=1e-3, show_default=True,
              help="AdamW learning rate (paper: 1e-5, too slow for a few minutes of CPU training).")
@click.option("--weight-decay", type=float, default=1e-3, show_default=True)
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--kappa", type=click.IntRange(min=1), default=10, show_default=True,
              help="Negatives per positive, from the 1-hop neighbourhood of the gold paths.")
@click.option("--far-kappa", "far_kappa", type=click.IntRange(min=0), default=10, show_default=True,
              help="Negatives per positive from the rest of the question's neighbourhood (0: the paper's "
                   "near negatives only).")
@click.option("--sample", type=click.IntRange(min=1), help="Train on a seeded sample of N questions per file.")
@click.option("--exclude-sample", "exclude_sample", type=click.IntRange(min=1),
              help="Leave out the questions `localkg eval --sample N --seed S` asks (keep evaluation unseen).")
@click.option("--exclude-seed", "exclude_seed", type=int, default=0, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None, help="torch device (default: cuda when available, else cpu).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for torch (default: torch's choice; "
              "1 is faster on a machine busy with other work).")
@click.option("--json", "as_json", is_flag=True, help="Print the training report as JSON.")
@friendly_errors(interrupted=TRAINING_INTERRUPTED)
def train_fog(db: Path, questions: tuple[Path, ...], fmt: str, out: Path | None, epochs: int, lr: float,
              weight_decay: float, batch_size: int, kappa: int, far_kappa: int,
              sample: int | None, exclude_sample: int | None,
              exclude_seed: int, seed: int, device: str | None, threads: int | None, as_json: bool) -> None:
    """Train the FoG foresight triple scorer on questions with gold paths (frozen encoder)."""
    import torch

    from localkg.fog.location import default_checkpoint
    from localkg.fog.supervision import SupervisionLimits
    from localkg.datasets import TrainingSet
    from localkg.fog.train import TrainConfig, train_from_files
    from localkg.store import KG

    if threads:
        torch.set_num_threads(threads)
    config = TrainConfig(epochs=epochs, lr=lr, weight_decay=weight_decay, batch_size=batch_size, seed=seed,
                         device=device)
    selection = TrainingSet([str(q) for q in questions], fmt, sample, exclude_sample, exclude_seed)

    def show(epoch: Any) -> None:
        if not as_json:
            held_out = epoch.held_out
            click.echo(f"epoch {epoch.epoch}: train loss {epoch.train_loss:.4f}, held-out loss "
                       f"{held_out.validation_loss:.4f}, positives {held_out.positive_score:.3f} / negatives "
                       f"{held_out.negative_score:.3f}, recall@tau_p {held_out.recall_at_tau_p:.3f}, best triple on "
                       f"a gold path {held_out.top1_positive:.3f}, answer distance {held_out.distance_accuracy:.3f}",
                       err=True)

    with KG.open(db, read_only=True) as kg:
        target = out or default_checkpoint(kg.path)
        limits = SupervisionLimits(kappa=kappa, far_kappa=far_kappa)
        report = train_from_files(kg, selection, config, target, limits=limits, progress=not as_json, on_epoch=show)
    if as_json:
        echo_json(report.to_json())
    else:
        click.echo(f"trained on {report.examples} examples ({report.skipped} questions gave none) on "
                   f"{report.device}; checkpoint: {report.checkpoint}")


@train_group.command("paths")
@db_option()
@click.option("--questions", "questions", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Questions with answers (any format `localkg eval` reads; JSONL: question, answers, "
                   "optional topic_entities); repeatable. Without: train from the store's own questions alone.")
@click.option("--store-questions/--no-store-questions", "store_questions", default=None,
              help="Train on questions made from the store itself (every relation, both directions, every "
                   "path length up to --max-hops), beside --questions. Default: only when no --questions are given.")
@click.option("--topics-per-relation", "topics_per_relation", type=click.IntRange(min=1), default=24,
              show_default=True, help="Store questions: topics drawn per relation and direction.")
@click.option("--pair-weight", "pair_weight", type=click.FloatRange(min=0, min_open=True), default=3.0,
              show_default=True, help="How many store questions one of your --questions pairs weighs.")
@click.option("--save-synthetic", "save_synthetic", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the store's questions as JSONL (read, edit, then train on them with --questions).")
@click.option("--format", "fmt", default="auto", show_default=True, help="Questions format (see localkg eval).")
@click.option("--max-hops", "max_hops", type=click.IntRange(1, 4), default=3, show_default=True,
              help="Longest relation path searched for.")
@click.option("--sample", type=click.IntRange(min=1), help="Train on a seeded sample of N questions per file.")
@click.option("--exclude-sample", "exclude_sample", type=click.IntRange(min=1),
              help="Leave out the questions `localkg eval --sample N --seed S` asks (keep evaluation unseen).")
@click.option("--exclude-seed", "exclude_seed", type=int, default=0, show_default=True)
@click.option("--out", "out", type=click.Path(dir_okay=False, path_type=Path),
              help="Checkpoint to write (default: DB/paths/scorer.pt, where the reasoners look).")
@click.option("--epochs", type=click.IntRange(min=1), default=20, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--device", default=None, help="torch device (default: cuda when available, else cpu).")
@click.option("--threads", type=click.IntRange(min=1), help="CPU threads for torch (default: torch's choice; "
              "1 is faster on a machine busy with other work).")
@click.option("--json", "as_json", is_flag=True, help="Print the training report as JSON.")
@friendly_errors(interrupted=TRAINING_INTERRUPTED)
def train_paths(db: Path, questions: tuple[Path, ...], store_questions: bool | None, topics_per_relation: int,
                pair_weight: float, save_synthetic: Path | None, fmt: str, max_hops: int, sample: int | None,
                exclude_sample: int | None, exclude_seed: int, out: Path | None, epochs: int, seed: int,
                device: str | None, threads: int | None, as_json: bool) -> None:
    """Learn which relation paths questions ask for: from question-answer pairs, from questions
    made from the store itself, or both (docs/training.md)."""
    import torch

    from localkg.datasets import TrainingSet
    from localkg.path_scorer.location import default_checkpoint
    from localkg.path_scorer.supervision import SupervisionLimits
    from localkg.path_scorer.synthetic import SyntheticLimits
    from localkg.path_scorer.train import TrainConfig, train_from_files
    from localkg.store import KG

    if threads:
        torch.set_num_threads(threads)
    if store_questions is None:
        store_questions = not questions
    if not questions and not store_questions:
        raise click.UsageError("--no-store-questions needs --questions: there would be nothing to train on")
    config = TrainConfig(epochs=epochs, seed=seed, device=device)
    selection = TrainingSet([str(q) for q in questions], fmt, sample, exclude_sample, exclude_seed) if questions else None
    synthetic = SyntheticLimits(topics_per_relation=topics_per_relation) if store_questions else None

    def show(epoch: Any) -> None:
        if not as_json:
            click.echo(f"epoch {epoch.epoch}: train loss {epoch.train_loss:.4f}, held-out loss "
                       f"{epoch.held_out.held_out_loss:.4f}, held-out accuracy@1 "
                       f"{epoch.held_out.held_out_accuracy:.3f}", err=True)

    with KG.open(db, read_only=True) as kg:
        report = train_from_files(kg, selection, config, out or default_checkpoint(kg.path),
                                  limits=SupervisionLimits(max_hops=max_hops), progress=not as_json, on_epoch=show,
                                  synthetic=synthetic, pair_weight=pair_weight, save_synthetic=save_synthetic)
    if as_json:
        echo_json(report.to_json())
        return
    supervision = report.supervision
    gold = (f"; best path = the dataset's gold path for {supervision.gold_accuracy:.3f} of {supervision.gold_named}"
            if supervision.gold_named else "")
    made = f"{report.store_questions} questions made from the store" if synthetic else ""
    pairs = (f"labelled {supervision.labelled - report.store_questions} of {supervision.questions} question-answer "
             f"pairs ({supervision.skipped_no_path} reach no answer, {supervision.skipped_no_topic} have no topic in "
             f"the store){gold}" if selection else "")
    click.echo(f"trained on {' and '.join(part for part in (pairs, made) if part)}; {report.seconds:.0f} s on "
               f"{report.device}; checkpoint: {report.checkpoint}")


# ---------------------------------------------------------------- dump loading (helper "dumps")
def _dump_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by `load freebase` and `load wikidata`."""
    for option in reversed([
        click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False,
                                                                          path_type=Path)),
        db_option(must_exist=False),
        click.option("--lang", default="en", show_default=True,
                     help="Name languages, comma-separated, first preferred (e.g. en,fr); others are dropped."),
        click.option("--resume", is_flag=True, help="Continue an interrupted load of the same files and options."),
        click.option("--workers", type=click.IntRange(min=0), default=None,
                     help="Parser processes (default: all cores; 0 parses in the main process)."),
        click.option("--max-rejects", type=click.IntRange(min=0), default=None,
                     help="Fail when more lines than this are rejected."),
        click.option("--chunk-mb", type=click.IntRange(min=1), default=16, show_default=True,
                     help="Text per chunk a worker parses."),
        click.option("--batch-mb", type=click.IntRange(min=1), default=64, show_default=True,
                     help="Text per staged write (one checkpoint each)."),
        click.option("--buffer-pool-mb", type=click.IntRange(min=64), default=None,
                     help="Kùzu buffer pool while loading; a flush copies as many rows as it holds "
                          "(queries open the database with their own). Default: a quarter of the available "
                          "memory, at most what one flush of the whole input needs."),
        click.option("--plan", "plan_only", is_flag=True,
                     help="Print the plan (lines, flushes, memory, disk; from a sample of the dump) and stop."),
        click.option("--json", "as_json", is_flag=True, help="Print the report as JSON."),
        click.option("--quiet", is_flag=True, help="No progress bar."),
    ]):
        command = option(command)
    return command


def _plan_load(paths: tuple[Path, ...], fmt: Any, buffer_pool_mb: int | None, plan_only: bool, as_json: bool,
               quiet: bool) -> Any:
    """The load's plan (loaders/plan.py), printed (to stderr before a load, unless ``--quiet``);
    None when ``--plan`` asked for the plan alone."""
    from localkg.loaders.plan import plan_load

    plan = plan_load(paths, fmt, None if buffer_pool_mb is None else buffer_pool_mb << 20)
    if plan_only:
        echo_json(plan.to_json()) if as_json else click.echo(plan.describe())
        return None
    if not quiet:
        click.echo(plan.describe(), err=True)
    return plan


@load.command("freebase")
@_dump_options
@click.option("--filter", "filter_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Predicate filter file replacing the default (loaders/data/freebase_filter.txt).")
@friendly_errors
def load_freebase_command(paths: tuple[Path, ...], db: Path, lang: str, resume: bool, workers: int | None,
                          max_rejects: int | None, chunk_mb: int, batch_mb: int, buffer_pool_mb: int | None,
                          plan_only: bool, as_json: bool, quiet: bool, filter_path: Path | None) -> None:
    """Load the Freebase RDF dump (freebase-rdf-latest.gz; .gz, .bz2 or plain).

    Names, aliases, descriptions and types become node attributes; bookkeeping
    predicates are filtered; unnamed machine ids become CVT (mediator) nodes.
    See docs/loading.md.
    """
    from localkg.loaders.freebase import freebase_format, load_freebase
    from localkg.loaders.memory import open_for_loading

    plan = _plan_load(paths, freebase_format(lang.split(","), filter_path), buffer_pool_mb, plan_only, as_json, quiet)
    if plan is None:
        return
    note_key_rebuild(db)
    with open_for_loading(db, plan.buffer_pool_bytes) as kg:
        kg.record_source("freebase", paths, "--lang", lang,
                        *(["--filter", str(filter_path.resolve())] if filter_path else []))
        report = load_freebase(kg, paths, langs=lang.split(","), filter_path=filter_path, resume=resume,
                               workers=workers, max_rejects=max_rejects, progress=not quiet,
                               chunk_bytes=chunk_mb << 20, batch_bytes=batch_mb << 20)
    print_load_report(report, as_json)


@load.command("wikidata")
@_dump_options
@click.option("--ranks", type=click.Choice(["truthy", "all"]), default="truthy", show_default=True,
              help="truthy: preferred statements, else normal ones; all: every rank.")
@click.option("--qualifiers", is_flag=True, help="Statements with qualifiers become statement (CVT) nodes.")
@click.option("--format", "fmt", type=click.Choice(["auto", "json", "truthy-nt"]), default="auto",
              show_default=True, help="The JSON dump or the truthy N-Triples dump.")
@friendly_errors
def load_wikidata_command(paths: tuple[Path, ...], db: Path, lang: str, resume: bool, workers: int | None,
                          max_rejects: int | None, chunk_mb: int, batch_mb: int, buffer_pool_mb: int | None,
                          plan_only: bool, as_json: bool, quiet: bool, ranks: str, qualifiers: bool, fmt: str) -> None:
    """Load a Wikidata dump (latest-all.json.gz/.bz2, or latest-truthy.nt.gz with --format truthy-nt).

    Items become nodes with labels, aliases and descriptions; claims become
    facts; properties label the relation catalogue. See docs/loading.md.
    """
    from localkg.loaders.memory import open_for_loading
    from localkg.loaders.wikidata import load_wikidata, wikidata_format

    dump_format = wikidata_format(paths, lang.split(","), ranks, qualifiers, fmt)
    plan = _plan_load(paths, dump_format, buffer_pool_mb, plan_only, as_json, quiet)
    if plan is None:
        return
    note_key_rebuild(db)
    with open_for_loading(db, plan.buffer_pool_bytes) as kg:
        kg.record_source("wikidata", paths, "--lang", lang, "--ranks", ranks, "--format", fmt,
                        *(["--qualifiers"] if qualifiers else []))
        report = load_wikidata(kg, paths, langs=lang.split(","), ranks=ranks, qualifiers=qualifiers, format=fmt,
                               resume=resume, workers=workers, max_rejects=max_rejects, progress=not quiet,
                               chunk_bytes=chunk_mb << 20, batch_bytes=batch_mb << 20)
    print_load_report(report, as_json)


# ---------------------------------------------------------------- asking (helper "reasoners I")
def pick_reasoner(db: Path | None, name: str | None) -> str:
    """The reasoner named, else the best the store supports (``localkg.reasoners.default``, one
    policy for ``ask``, ``eval``, ``eval grid`` and ``demo``), named on stderr."""
    if name:
        return name
    from localkg.reasoners.default import default_reasoner

    chosen = default_reasoner(db)
    click.echo(f"reasoner: {chosen.name} (the default: {chosen.reason}; --reasoner names another)", err=True)
    return chosen.name


def parse_settings(settings: tuple[str, ...]) -> dict[str, str]:
    """``--set KEY=VALUE`` pairs as a dict (the reasoner turns each value into its setting's type)."""
    parsed = {}
    for setting in settings:
        key, sep, value = setting.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {setting!r}", param_hint="--set")
        parsed[key.strip()] = value.strip()
    return parsed


def ask_json(result: Any, trace: bool) -> dict[str, Any]:
    """The ``localkg ask --json`` object: ``Result.to_json``, whose ``trace`` (every LLM call and
    every KG query) only with ``--trace``."""
    data = result.to_json()
    if not trace:
        del data["trace"]
    return data


def print_answer(result: Any, trace: bool = False, shown: int = 10) -> None:
    """The answers with their evidence paths, the cost, and with ``trace`` every step taken."""
    if result.answers:
        paths = {path.end.id: path for path in result.evidence if path.steps}
        for answer in result.answers[:shown]:
            click.echo(f"answer: {answer.name}" + (f"  [{answer.id}]" if answer.id and answer.id != answer.name else ""))
            if answer.id in paths:
                click.echo(f"  evidence: {paths[answer.id]}")
        if len(result.answers) > shown:
            click.echo(f"... and {len(result.answers) - shown} more answers")
    else:
        reason = next((note for note in result.notes if note.startswith("no answer found")), "no answer found")
        click.echo(reason)
    click.echo(f"({result.reasoner}: {len(result.llm_calls)} LLM calls, {result.prompt_tokens}+"
               f"{result.completion_tokens} tokens, {len(result.kg_queries)} graph queries, {result.seconds:.1f} s)")
    if trace:
        for note in result.notes:
            click.echo(f"note: {note}")
        for number, call in enumerate(result.llm_calls, 1):
            click.echo(f"--- LLM call {number}: {call['step']} ({call['prompt_tokens']}+{call['completion_tokens']} "
                       f"tokens, {call['seconds']:.2f} s)")
            click.echo(call["prompt"])
            click.echo(f">>> {call['output']}")
        for query_log in result.kg_queries:
            arguments = ", ".join(f"{k}={v!r}" for k, v in query_log["arguments"].items())
            click.echo(f"kg: {query_log['primitive']}({arguments}) -> {query_log['rows']} rows, "
                       f"{query_log['seconds'] * 1000:.1f} ms")


@main.command()
@click.argument("question")
@db_option()
@click.option("--reasoner", default=None, help=REASONER_HELP)
@click.option("--topic", "topics", multiple=True, metavar="ID",
              help="Topic entity id (repeatable); without it the question is linked to the graph.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Reasoner setting (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")
@click.option("--trace", is_flag=True, help="Also print every LLM call and graph query.")
@llm_options
@friendly_errors
def ask(question: str, db: Path, reasoner: str | None, topics: tuple[str, ...], settings: tuple[str, ...], as_json: bool,
        trace: bool, model: Path | None, n_ctx: int, n_gpu_layers: int, llm_threads: int | None,
        prompt_style: str | None, llm_cache: Path | None) -> None:
    """Answer QUESTION from the graph in --db, with the evidence path of each answer."""
    from localkg.llm.options import llm_factory
    from localkg.reasoners.base import Context, get_reasoner
    from localkg.store import KG

    reasoner_class = get_reasoner(pick_reasoner(db, reasoner))
    with KG.open(db, read_only=True) as kg:
        context = Context(kg, llm_factory=llm_factory(model, n_ctx, n_gpu_layers, llm_threads, prompt_style,
                                                          llm_cache))
        result = reasoner_class(context, **parse_settings(settings)).answer(question, list(topics) or None)
    if as_json:
        echo_json(ask_json(result, trace))
    else:
        print_answer(result, trace)
    warn_of_skipped_calls(result, n_ctx)


def warn_of_skipped_calls(result: Any, n_ctx: int) -> None:
    """One line on stderr when LLM calls were skipped because their prompts do not fit the context
    (a question longer than it skips them all): the answer then rests on the graph side alone,
    which the notes say but the plain output would not."""
    skipped = len(result.skipped_llm_calls)
    if skipped:
        calls = f"{skipped} LLM calls" if skipped > 1 else "1 LLM call"
        click.echo(f"warning: {calls} skipped, their prompts longer than the {n_ctx}-token context: the graph side "
                   "alone decided those steps; shorten the question or raise --n-ctx", err=True)
