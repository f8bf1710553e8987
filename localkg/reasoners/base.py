"""The one interface every reasoner implements, and the registry that names them.

A reasoner gets a :class:`Context` (the store, and lazily the LLM runtime,
the relevance scorer and the entity linker) and a config of hyperparameters,
and answers ``answer(question, topic_entities=None) -> Result``. The base
class does the bookkeeping every method needs the same way: it links the
question when no topic entity is given, records every KG query and LLM call
into the result's trace, times the question, and turns the expected failures
(unknown entity, empty graph) into a "no answer found" result with a reason
instead of an exception.
"""
from __future__ import annotations

import importlib
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol, runtime_checkable

from localkg.errors import PromptTooLongError, UnknownEntityError, UnknownReasonerError
from localkg.reasoners.settings import NoSettings, parse_settings
from localkg.store.kg import KG, QueryLog
from localkg.store.model import Path

if TYPE_CHECKING:
    from localkg.llm import LLM


#: How the note of an LLM call a reasoner skipped begins: its prompt does not fit the model's context,
#: so the step fell back on the graph side. Any other failure of the model stops the question.
SKIPPED_CALL = "model call skipped"


def skipped_call(error: PromptTooLongError, fallback: str = "") -> str:
    """The note for a call skipped with ``error`` (which names the step), with what was done instead."""
    return f"{SKIPPED_CALL}: {error}" + (f"; {fallback}" if fallback else "")


@dataclass(frozen=True)
class Answer:
    """One ranked answer: a node id (entity or literal) and its display name."""

    id: str
    name: str
    score: float = 0.0


@dataclass
class Result:
    """What a reasoner returns for one question, with everything needed to audit it."""

    question: str
    answers: list[Answer] = field(default_factory=list)
    evidence: list[Path] = field(default_factory=list)
    topic_entities: list[str] = field(default_factory=list)
    llm_calls: list[dict[str, Any]] = field(default_factory=list)
    kg_queries: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    reasoner: str = ""

    @property
    def answered(self) -> bool:
        """Whether the reasoner gave any answer."""
        return bool(self.answers)

    @property
    def skipped_llm_calls(self) -> list[str]:
        """The notes of the LLM calls skipped because their prompts do not fit the context."""
        return [note for note in self.notes if note.startswith(SKIPPED_CALL)]

    @property
    def prompt_tokens(self) -> int:
        """Prompt tokens of every LLM call made for this question."""
        return sum(int(call.get("prompt_tokens", 0)) for call in self.llm_calls)

    @property
    def completion_tokens(self) -> int:
        """Tokens the LLM generated for this question."""
        return sum(int(call.get("completion_tokens", 0)) for call in self.llm_calls)

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of ``localkg ask --json`` and of each line of ``predictions.jsonl``."""
        return {
            "question": self.question,
            "reasoner": self.reasoner,
            "topic_entities": self.topic_entities,
            "answers": [{"id": a.id, "name": a.name, "score": a.score} for a in self.answers],
            "evidence": [path_to_json(path) for path in self.evidence],
            "notes": self.notes,
            "llm_calls": len(self.llm_calls),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "kg_queries": len(self.kg_queries),
            "seconds": round(self.seconds, 4),
            "trace": {"llm": self.llm_calls, "kg": self.kg_queries},
        }


def path_to_json(path: Path) -> dict[str, Any]:
    """A path as ids and names, plus its readable rendering."""
    return {
        "text": str(path),
        "steps": [
            {"head": asdict(step.triple.head), "relation": step.triple.relation, "tail": asdict(step.triple.tail),
             "forward": step.forward}
            for step in path.steps
        ],
    }


@dataclass
class Context:
    """What a reasoner may use. The LLM, scorer and linker are built on first use.

    ``llm``, ``scorer`` and ``linker`` may be passed in (a test passes a scripted model; the
    harness passes one shared model for a whole run) or built lazily from the factories.
    """

    kg: KG
    llm_factory: Callable[[], "LLM"] | None = None
    scorer_factory: Callable[[], Any] | None = None
    linker_factory: Callable[[], Any] | None = None
    _llm: Any = None
    _scorer: Any = None
    _linker: Any = None
    _llm_calls_before: int = 0

    @property
    def llm(self) -> "LLM":
        """The LLM (the factory's, else the bundled model), built on first use, so a reasoner that
        never calls it never loads it."""
        if self._llm is None:
            if self.llm_factory is None:
                from localkg.llm import LLM

                self._llm = LLM()
            else:
                self._llm = self.llm_factory()
            # A factory may hand back a shared model that has already answered other questions.
            self._llm_calls_before = len(self._llm.calls)
        return self._llm

    @property
    def scorer(self) -> Any:
        """The relevance scorer (``localkg.indexes.scoring.RelevanceScorer``)."""
        if self._scorer is None:
            if self.scorer_factory is None:
                from localkg.indexes.scoring import RelevanceScorer

                self._scorer = RelevanceScorer()
            else:
                self._scorer = self.scorer_factory()
        return self._scorer

    @property
    def linker(self) -> Any:
        """The entity linker (``localkg.indexes.linking.EntityLinker``)."""
        if self._linker is None:
            if self.linker_factory is None:
                from localkg.indexes.linking import EntityLinker

                self._linker = EntityLinker(self.kg)
            else:
                self._linker = self.linker_factory()
        return self._linker


@dataclass(frozen=True)
class Uses:
    """What a reasoner settled on its store when it was built: the value each ``auto`` setting
    took (``relations``: ``embed`` or ``trained``) and the trained checkpoint files it reads. An
    evaluation records it, so a run says what it measured and a resumed run cannot mix two."""

    settings: dict[str, str] = field(default_factory=dict)
    checkpoints: tuple[FsPath, ...] = ()

    def __or__(self, other: "Uses") -> "Uses":
        return Uses({**self.settings, **other.settings}, tuple(dict.fromkeys(self.checkpoints + other.checkpoints)))


@runtime_checkable
class SettlesOnStore(Protocol):
    """A part of a reasoner that settles something on the store when it is built (the relation
    ranking, the answer-distance head): it says what in :meth:`uses`."""

    def uses(self) -> Uses: ...


class Reasoner(ABC):
    """Base class: subclasses set ``name`` and ``Settings`` (a frozen dataclass of typed settings
    with defaults) and implement :meth:`solve`; ``self.settings`` is the validated instance."""

    name: ClassVar[str] = ""
    Settings: ClassVar[type] = NoSettings
    uses_llm: ClassVar[bool] = True
    uses_graph: ClassVar[bool] = True   # False: the question is answered without topic entities (not linked)

    def __init__(self, context: Context, **overrides: Any):
        self.context = context
        self.settings = parse_settings(self.name, self.Settings, overrides)

    @property
    def kg(self) -> KG:
        """The store the reasoner answers from (``context.kg``)."""
        return self.context.kg

    def uses(self) -> Uses:
        """What this reasoner settled on its store (:class:`Uses`), gathered from the parts it
        holds that settle something; a reasoner that settles more itself adds its own."""
        settled = Uses()
        for part in vars(self).values():
            if isinstance(part, SettlesOnStore):
                settled = settled | part.uses()
        return settled

    @property
    def llm(self) -> "LLM":
        """The context's LLM, built on first use."""
        return self.context.llm

    def answer(self, question: str, topic_entities: list[str] | None = None) -> Result:
        """Answer ``question``; link it first when no topic entities are given. Never raises for
        an unknown entity or an empty graph: the result then has no answers and says why."""
        result = Result(question=question, reasoner=self.name)
        started = time.perf_counter()
        log = QueryLog()
        previous_log, self.kg.log = self.kg.log, log
        llm_mark = self._llm_mark()
        try:
            topics = list(topic_entities or []) if topic_entities or not self.uses_graph else self._link(question, result)
            result.topic_entities = topics
            known = [t for t in topics if self.kg.has_node(t)] if self.uses_graph else topics
            if not known and self.uses_graph:
                result.notes.append("no answer found: no topic entity of the question is in the graph"
                                    if topics else "no answer found: no topic entity could be linked")
            else:
                self.solve(question, known, result)
                if not result.answers and not any(n.startswith("no answer found") for n in result.notes):
                    result.notes.append("no answer found: the search ended without a candidate")
        except UnknownEntityError as error:
            result.answers = []
            result.notes.append(f"no answer found: {error}")
        finally:
            self.kg.log = previous_log
            result.kg_queries = log.entries
            result.llm_calls = self._llm_calls_since(llm_mark)
            result.seconds = time.perf_counter() - started
        return result

    def _link(self, question: str, result: Result) -> list[str]:
        candidates = self.context.linker.link(question, k=1)
        return [candidates[0].id] if candidates else []

    def _llm_mark(self) -> int | None:
        llm = self.context._llm
        return len(llm.calls) if llm is not None else None

    def _llm_calls_since(self, mark: int | None) -> list[dict[str, Any]]:
        """Calls made for this question; ``mark`` is None when the model was first built during it."""
        llm = self.context._llm
        if llm is None:
            return []
        if mark is None:
            mark = self.context._llm_calls_before
        return [call.to_json() if hasattr(call, "to_json") else dict(call) for call in llm.calls[mark:]]

    @abstractmethod
    def solve(self, question: str, topics: list[str], result: Result) -> None:
        """Fill ``result.answers``, ``result.evidence`` and ``result.notes`` for known topic entities."""


#: Every reasoner's name and the module that defines it, imported on first use (so naming
#: ``io`` never imports the torch that ``fog`` needs).
REASONERS: dict[str, str] = {
    "io": "localkg.reasoners.baselines",
    "cot": "localkg.reasoners.baselines",
    "embed-path": "localkg.reasoners.baselines",
    "tog": "localkg.reasoners.tog",
    "bpc": "localkg.reasoners.bpc",
    "fog": "localkg.reasoners.fog",
    "paths": "localkg.reasoners.paths",
    "plan": "localkg.reasoners.plan",
    "ppoga": "localkg.reasoners.ppoga",
    "dtkg": "localkg.reasoners.dtkg",
    "learned-paths": "localkg.reasoners.learned_paths",
}

REGISTRY: dict[str, type[Reasoner]] = {}


def register(cls: type[Reasoner]) -> type[Reasoner]:
    """Class decorator: the reasoner class its module defines for a name in :data:`REASONERS`."""
    if REASONERS.get(cls.name) != cls.__module__:
        raise UnknownReasonerError(f"reasoner {cls.name!r} of {cls.__module__} is not listed in REASONERS")
    REGISTRY[cls.name] = cls
    return cls


def get_reasoner(name: str) -> type[Reasoner]:
    """The reasoner class named ``name``, importing its module the first time."""
    if name not in REASONERS:
        raise UnknownReasonerError(f"no reasoner named {name!r}; available: {', '.join(sorted(REASONERS))}")
    importlib.import_module(REASONERS[name])
    return REGISTRY[name]
