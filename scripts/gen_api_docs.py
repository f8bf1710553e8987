"""Write docs/api.md from the public Python API's own signatures and docstrings (so it cannot drift).

Run ``python scripts/gen_api_docs.py`` after changing a documented signature or docstring; a
test fails when docs/api.md is out of date, and another runs the page's example.

What is documented is listed in :data:`SECTIONS`: the names a program calls, taken from the
packages' ``__all__`` and from what ``cli.py`` calls for each command. Private names (a leading
underscore) are never listed. The page is the same on every machine: members in source order,
no memory addresses, no absolute paths.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import sys
from pathlib import Path
from typing import Any, Callable, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "api.md"
WIDTH = 100  # a longer signature is written one parameter a line

HEADER = """# Python API

Generated from the signatures and docstrings of the public API by
`python scripts/gen_api_docs.py`; do not edit by hand (tests/test_api_docs.py
checks that it is current and runs the example below). The commands that call
each entry point are in [cli.md](cli.md); how the parts fit together is in
[architecture.md](architecture.md). Every error a caller can cause is a
`localkg.errors.LocalKGError` subclass ([Errors](#errors-localkgerrors)).

## Example

Open a store, add a few facts, query it, and answer a question. `embed-path`
needs no LLM (it follows the relation path most like the question), so this
runs without the GGUF model; an LLM reasoner (`tog`, or `learned-paths` once
`localkg train paths` has trained a path scorer) is built the same way and loads
the bundled model on its first call.
"""

#: The intro's example, run as a doctest (in a scratch directory) by tests/test_api_docs.py.
EXAMPLE = """\
>>> from localkg import KG
>>> from localkg.reasoners import Context, get_reasoner
>>> kg = KG.create("films.db")
>>> kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers"),
...                 ("Swing Time", "directed_by", "George Stevens"), ("Swing Time", "starred_actors", "Ginger Rogers")])
>>> kg.query("MATCH (f:Node)-[:Fact {rel: $rel}]->(d:Node) RETURN f.name, d.name ORDER BY f.name", {"rel": "directed_by"})
(['f.name', 'd.name'], [['Swing Time', 'George Stevens'], ['Top Hat', 'Mark Sandrich']])
>>> reasoner = get_reasoner("embed-path")(Context(kg))
>>> result = reasoner.answer("Who directed Top Hat?")  # no topic given: the question is linked to the graph
>>> [answer.name for answer in result.answers], str(result.evidence[0])
(['Mark Sandrich'], 'Top Hat —directed_by→ Mark Sandrich')
>>> kg.close()
"""


class Section(NamedTuple):
    """A part of the page: a title, a line saying what it is for, and the names it documents."""

    title: str
    intro: str
    names: tuple[str, ...] = ()
    render_extra: Callable[[], str] | None = None


def all_of(module: str, leave_out: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``module.__all__`` as dotted names, in its own order."""
    return tuple(f"{module}.{name}" for name in importlib.import_module(module).__all__ if name not in leave_out)


# ---------------------------------------------------------------- rendering one object
def format_annotation(annotation: Any) -> str:
    """A type hint as written in the source (``from __future__ import annotations`` keeps it a string)."""
    if isinstance(annotation, str):
        quoted = len(annotation) > 1 and annotation[0] == annotation[-1] and annotation[0] in "'\""
        return annotation[1:-1] if quoted else annotation  # a forward reference's quotes are not the type
    return inspect.formatannotation(annotation)


def format_parameter(parameter: inspect.Parameter) -> str:
    text = parameter.name
    if parameter.kind is parameter.VAR_POSITIONAL:
        text = "*" + text
    elif parameter.kind is parameter.VAR_KEYWORD:
        text = "**" + text
    if parameter.annotation is not parameter.empty:
        text += f": {format_annotation(parameter.annotation)}"
    if parameter.default is not parameter.empty:
        text += (" = " if parameter.annotation is not parameter.empty else "=") + format_default(parameter.default)
    return text


def format_default(value: Any) -> str:
    """A default as the source writes it where that is short: ``Limits()`` for a dataclass's own defaults."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        try:
            if value == type(value)():
                return f"{type(value).__name__}()"
        except TypeError:  # a dataclass with required fields
            pass
    return repr(value)


def format_signature(name: str, signature: inspect.Signature, drop_first: bool = False,
                     returns_shown: bool = True) -> str:
    """``name(parameters) -> return``, one parameter a line when it would be longer than :data:`WIDTH`;
    private parameters (a leading underscore) left out."""
    parameters = [parameter for parameter in list(signature.parameters.values())[1 if drop_first else 0:]
                  if not parameter.name.startswith("_")]
    parts, seen_keyword_only = [], False
    for parameter in parameters:
        if parameter.kind is parameter.KEYWORD_ONLY and not seen_keyword_only:
            parts.append("*")
        seen_keyword_only = seen_keyword_only or parameter.kind in (parameter.KEYWORD_ONLY, parameter.VAR_POSITIONAL)
        parts.append(format_parameter(parameter))
        if parameter.kind is parameter.POSITIONAL_ONLY and (
                parameter is parameters[-1] or parameters[parameters.index(parameter) + 1].kind
                is not parameter.POSITIONAL_ONLY):
            parts.append("/")
    returns = ("" if signature.return_annotation is signature.empty or not returns_shown
               else f" -> {format_annotation(signature.return_annotation)}")
    one_line = f"{name}({', '.join(parts)}){returns}"
    if len(one_line) <= WIDTH:
        return one_line
    return f"{name}(\n" + "".join(f"    {part},\n" for part in parts) + f"){returns}"


ROLE = re.compile(r":(?:class|meth|func|data|mod|attr|exc):`~?([^`]+)`")


def docstring_markdown(obj: Any) -> str:
    """The docstring as Markdown: Sphinx roles as code, doctest examples as code blocks."""
    doc = inspect.getdoc(obj) if _own_doc(obj) else None
    if not doc:
        return ""
    out, in_example = [], False
    for line in ROLE.sub(r"`\1`", doc).splitlines():
        starts_example = line.lstrip().startswith(">>>")
        if starts_example and not in_example:
            out.append("```pycon")
            in_example = True
        elif in_example and not line.strip():
            out.append("```")
            in_example = False
        out.append(line)
    if in_example:
        out.append("```")
    return "\n".join(out)


def _own_doc(obj: Any) -> bool:
    """Whether ``obj`` has a docstring of its own (not one inherited from a base or from object)."""
    target = obj.fget if isinstance(obj, property) else obj
    own = getattr(target, "__dict__", {}).get("__doc__") if inspect.isclass(target) else getattr(target, "__doc__", None)
    return bool(own) and not (inspect.isclass(target) and dataclasses.is_dataclass(target)
                              and own.startswith(f"{target.__name__}("))


def code_block(text: str) -> str:
    return f"```python\n{text}\n```"


def render_function(heading: str, func: Callable[..., Any], display: str, drop_first: bool = False,
                    decorator: str = "") -> str:
    signature = format_signature(display, inspect.signature(func), drop_first)
    parts = [heading, code_block(decorator + signature)]
    doc = docstring_markdown(func)
    return "\n\n".join(parts + ([doc] if doc else []))


def render_property(heading: str, prop: property, display: str) -> str:
    annotation = inspect.signature(prop.fget).return_annotation
    returns = "" if annotation is inspect.Signature.empty else f" -> {format_annotation(annotation)}"
    doc = docstring_markdown(prop)
    return "\n\n".join([heading, code_block(f"@property\n{display}{returns}")] + ([doc] if doc else []))


def class_members(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties ``cls`` defines itself, in source order."""
    members = []
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, (property, classmethod, staticmethod)) or inspect.isfunction(value):
            members.append((name, value))
    return members


def render_class(dotted: str, cls: type) -> str:
    short = cls.__name__
    keyword = "exception" if issubclass(cls, BaseException) else "class"
    signature = format_signature(short, inspect.signature(cls), returns_shown=False)
    parts = [f"### `{dotted}`", code_block(f"{keyword} {signature}")]
    doc = docstring_markdown(cls)
    if doc:
        parts.append(doc)
    for name, member in class_members(cls):
        heading = f"#### `{short}.{name}`"
        display = f"{short}.{name}"
        if isinstance(member, property):
            parts.append(render_property(heading, member, display))
        elif isinstance(member, classmethod):
            parts.append(render_function(heading, member.__func__, display, drop_first=True, decorator="@classmethod\n"))
        elif isinstance(member, staticmethod):
            parts.append(render_function(heading, member.__func__, display, decorator="@staticmethod\n"))
        else:
            parts.append(render_function(heading, member, display, drop_first=True))
    return "\n\n".join(parts)


def resolve(dotted: str) -> Any:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(f"cannot import {dotted}")


def render_object(dotted: str) -> str:
    obj = resolve(dotted)
    if inspect.isclass(obj):
        return render_class(dotted, obj)
    if callable(obj):
        return render_function(f"### `{dotted}`", obj, obj.__name__)
    raise TypeError(f"{dotted} is neither a class nor a function")


# ---------------------------------------------------------------- tables
def table_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def first_line(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring as one line (a first sentence may wrap)."""
    doc = inspect.getdoc(obj) or ""
    paragraph = doc.split("\n\n")[0]
    return ROLE.sub(r"`\1`", " ".join(line.strip() for line in paragraph.splitlines()))


def error_table() -> str:
    """Every exception of ``localkg.errors`` in source order: its base and when it is raised."""
    from localkg import errors

    rows = ["| class | base | raised when |", "|---|---|---|"]
    for name, value in vars(errors).items():
        if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == errors.__name__:
            base = value.__bases__[0].__name__
            rows.append(f"| `{name}` | `{base}` | {table_cell(first_line(value))} |")
    return "\n".join(rows)


def reasoner_table() -> str:
    """Every registered reasoner in the registry's order: its name, its class and what it does."""
    from localkg.reasoners.base import REASONERS, get_reasoner

    rows = ["| name | class | what it does | may call the LLM |", "|---|---|---|---|"]
    for name in REASONERS:
        cls = get_reasoner(name)
        rows.append(f"| `{name}` | `{cls.__module__}.{cls.__name__}` | {table_cell(first_line(cls))} | "
                    f"{'yes' if cls.uses_llm else 'no'} |")
    return "\n".join(rows)


# ---------------------------------------------------------------- the page
SECTIONS = (
    Section("The store: `localkg.KG`",
            "A store is a directory holding a Kùzu database; `KG` opens it (read-write, or read-only beside "
            "other readers), answers the primitives reasoners use, runs Cypher, and writes in bulk.",
            ("localkg.KG",)),
    Section("Store values and the bulk writer (`localkg.store`)",
            "What the primitives return, and the batches a bulk load writes through `KG.writer()` "
            "(`localkg.store.__all__`).",
            all_of("localkg.store", leave_out=("KG",))),
    Section("Backup and check (`localkg.store.backup`, `localkg.store.check`)",
            "What `localkg backup` and `localkg check` call.",
            ("localkg.store.backup.backup_store", "localkg.store.backup.BackupReport",
             "localkg.store.check.check_store", "localkg.store.check.repair_store")),
    Section("Errors (`localkg.errors`)",
            "Every error a caller can cause, with the class to catch; the CLI prints each as one line.",
            render_extra=error_table),
    Section("Loading (`localkg.loaders`)",
            "What `localkg load triples | freebase | wikidata` call: open the store for loading, plan a dump's "
            "load, load, and read the report.",
            ("localkg.loaders.triples.load_triples", "localkg.loaders.memory.open_for_loading",
             "localkg.loaders.freebase.load_freebase", "localkg.loaders.freebase.freebase_format",
             "localkg.loaders.wikidata.load_wikidata", "localkg.loaders.wikidata.wikidata_format",
             "localkg.loaders.plan.plan_load", "localkg.loaders.report.LoadReport")),
    Section("Indexes, linking and relevance (`localkg.indexes`)",
            "What `localkg index build` and `localkg link` call, and the search behind them.",
            ("localkg.indexes.build.build_indexes", "localkg.indexes.build.make_encoder",
             "localkg.indexes.build.entity_encoder_of", "localkg.indexes.build.BuildReport",
             "localkg.indexes.build.open_index", "localkg.indexes.vector_index.VectorIndex",
             "localkg.indexes.linking.EntityLinker", "localkg.indexes.linking.LinkCandidate",
             "localkg.indexes.scoring.RelevanceScorer", "localkg.indexes.embedding.Embedder")),
    Section("Reasoners (`localkg.reasoners`)",
            "`get_reasoner(name)` returns a reasoner class; build it with a `Context` and its settings "
            "(`get_reasoner(name)(Context(kg), **settings)`, the settings of each in "
            "[reasoners.md](reasoners.md)) and call `answer`. `default_reasoner` is the choice "
            "`localkg ask` makes when none is named; `Context(kg, llm_factory=...)` gives a reasoner "
            "another model than the bundled one.",
            all_of("localkg.reasoners", leave_out=("REASONERS",))
            + ("localkg.reasoners.default.default_reasoner", "localkg.llm.LLM"),
            render_extra=reasoner_table),
    Section("Questions (`localkg.datasets`)",
            "KGQA question files for evaluation and training (`localkg.datasets.__all__`).",
            all_of("localkg.datasets")),
    Section("Evaluation (`localkg.evaluation`)",
            "What `localkg eval run | grid | compare` call: run one evaluation from an `EvalConfig`, "
            "a grid of them, and compare finished runs.",
            ("localkg.evaluation.config.EvalConfig", "localkg.evaluation.harness.run_eval",
             "localkg.evaluation.grid.read_grid", "localkg.evaluation.grid.run_grid",
             "localkg.evaluation.grid.Cell", "localkg.evaluation.report.compare_runs")),
    Section("Training (`localkg.path_scorer`, `localkg.fog`, `localkg.training`)",
            "What `localkg train paths` and `localkg train fog` call. A scorer saved at `default_checkpoint(db)` "
            "is the one the reasoners find beside the store.",
            ("localkg.path_scorer.train.train_from_files", "localkg.path_scorer.train.TrainConfig",
             "localkg.path_scorer.train.TrainReport", "localkg.path_scorer.supervision.SupervisionLimits",
             "localkg.path_scorer.synthetic.SyntheticLimits", "localkg.path_scorer.location.default_checkpoint",
             "localkg.fog.train.train_from_files", "localkg.fog.train.TrainConfig", "localkg.fog.train.TrainReport",
             "localkg.fog.supervision.SupervisionLimits", "localkg.fog.location.default_checkpoint",
             "localkg.training.loop.RunSettings", "localkg.training.loop.EpochReport")),
)


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")


def render_section(section: Section) -> str:
    parts = [f"## {section.title}", section.intro]
    if section.render_extra is not None:
        parts.append(section.render_extra())
    parts.extend(render_object(name) for name in section.names)
    return "\n\n".join(parts)


def contents() -> str:
    return "\n".join(f"* [{section.title}](#{anchor(section.title)})" for section in SECTIONS)


def render() -> str:
    page = "\n\n".join([HEADER.rstrip(), f"```pycon\n{EXAMPLE.rstrip()}\n```", "## Contents", contents()]
                       + [render_section(section) for section in SECTIONS]) + "\n"
    check_portable(page)
    return page


def check_portable(page: str) -> None:
    """Refuse a page that would differ between machines: a memory address or a local path in it."""
    address = re.search(r"\bat 0x[0-9a-fA-F]+", page)
    if address:
        raise ValueError(f"docs/api.md would hold a memory address: {page[address.start() - 80:address.end()]!r}")
    for local in {str(ROOT), str(Path.home()), sys.prefix}:
        if local in page:
            raise ValueError(f"docs/api.md would hold the local path {local}")


if __name__ == "__main__":
    DOCS.write_text(render(), encoding="utf-8")
    sys.stdout.write(f"wrote {DOCS}\n")
