"""Answer one question of an evaluation run, in whichever process the fan-out puts it.

An :class:`Answerer` holds what answering needs: a read-only store handle, the LLM and the
relevance scorer, and the reasoners built from them. It keeps them while consecutive
questions share them, so a grid's cells over one store and one model reuse one worker's
handles instead of reloading them; a question of another store or model replaces them. The
in-process run, each local worker process and each Ray actor own one Answerer.
"""
from __future__ import annotations

import hashlib
import tempfile
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from localkg.errors import CheckpointError, LocalKGError, PromptTooLongError, WorkerError
from localkg.datasets import resolve_topics
from localkg.evaluation.metrics import Prediction, score_question
from localkg.reasoners.base import Context, Reasoner, Result, Uses, get_reasoner
from localkg.reasoners.settings import parse_settings
from localkg.store.kg import KG

if TYPE_CHECKING:
    from localkg.datasets import Question
    from localkg.evaluation.config import EvalConfig

# The EvalConfig fields that decide which LLM a worker builds.
LLM_FIELDS = ("model", "n_ctx", "n_gpu_layers", "llm_threads", "prompt_style", "llm_cache", "seed")
# The localkg errors that concern one question (its prompt does not fit the model's context): it is
# scored unanswered and the run goes on. Any other (a checkpoint, index or model that cannot be
# used) would fail every question the same way, so it stops the run instead of scoring zeros.
QUESTION_ERRORS = (PromptTooLongError,)
FINGERPRINT_BYTES = 1 << 20


class Services:
    """The LLM and the relevance scorer of one run's settings, each built on first use and
    shared by every question (and every scratch store of a per-question-subgraph dataset)."""

    def __init__(self, config: "EvalConfig"):
        self.config = config
        self._llm: Any = None
        self._scorer: Any = None

    def llm(self) -> Any:
        if self._llm is None:
            from localkg.llm.options import llm_factory

            config = self.config
            self._llm = llm_factory(Path(config.model) if config.model else None, config.n_ctx, config.n_gpu_layers,
                                    config.llm_threads, config.prompt_style,
                                    Path(config.llm_cache) if config.llm_cache else None, config.seed)()
        return self._llm

    def scorer(self) -> Any:
        if self._scorer is None:
            from localkg.indexes.scoring import RelevanceScorer

            self._scorer = RelevanceScorer()
        return self._scorer

    def warm_up(self, with_llm: bool) -> None:
        """Load the models before the first question, so its wall time is its own."""
        self.scorer().embedder  # the property loads the model
        if with_llm:
            self.llm()

    @property
    def model_name(self) -> str:
        """The LLM's name once it has been used, else "none"."""
        return self._llm.model_name if self._llm is not None else "none"

    def context(self, kg: KG) -> Context:
        return Context(kg, llm_factory=self.llm, scorer_factory=self.scorer)


def check_settings(config: "EvalConfig") -> None:
    """Refuse an unknown reasoner or setting before any worker starts (the reasoner's own error);
    what a reasoner needs from its store (a checkpoint) is checked when a worker opens it."""
    reasoner = get_reasoner(config.reasoner)
    parse_settings(reasoner.name, reasoner.Settings, config.settings)


class Answerer:
    """Answers questions of any run, keeping the store, models and reasoners of the last one."""

    def __init__(self) -> None:
        self._db: str | None = None
        self._kg: KG | None = None
        self._llm_key: tuple[Any, ...] | None = None
        self._services: Services | None = None
        self._reasoners: dict[tuple[Any, ...], Reasoner] = {}

    def open(self, config: "EvalConfig") -> None:
        """Open the run's store and load its models (a no-op when they are the ones held)."""
        llm_key = tuple(getattr(config, name) for name in LLM_FIELDS)
        if llm_key != self._llm_key:
            self._services, self._llm_key, self._reasoners = Services(config), llm_key, {}
        self._services.warm_up(get_reasoner(config.reasoner).uses_llm)  # type: ignore[union-attr]
        if config.format != "rog" and config.db != self._db:
            self.close_store()
            self._kg, self._db, self._reasoners = KG.open(config.db, read_only=True), config.db, {}

    def prepare(self, config: "EvalConfig") -> dict[str, Any]:
        """Open the run's store and models and build its reasoner: what the reasoner settled on
        the store (:func:`uses_record`). A per-question-subgraph run builds it on an empty store."""
        self.open(config)
        if config.format != "rog":
            return uses_record(self._reasoner(config, self._kg).uses())  # type: ignore[arg-type]
        with scratch_store() as kg:
            return uses_record(self._build(config, kg).uses())

    def answer(self, config: "EvalConfig", question: "Question") -> dict[str, Any]:
        """The question's predictions.jsonl line.

        Any failure but one of :data:`QUESTION_ERRORS` raises :class:`WorkerError` naming the
        question (and, for a bug, where it failed): the run stops.
        """
        self.open(config)
        try:
            if config.format == "rog":
                return self._answer_in_scratch_store(config, question)
            return self._answer_with(self._reasoner(config, self._kg), self._kg, question)  # type: ignore[arg-type]
        except Exception as error:  # noqa: BLE001  (any failure of a reasoner is reported with its question)
            raise WorkerError(describe_failure(question, error)) from error

    def close_store(self) -> None:
        if self._kg is not None:
            self._kg.close()
        self._kg, self._db = None, None

    def close(self) -> None:
        self.close_store()
        self._services, self._llm_key, self._reasoners = None, None, {}

    def _reasoner(self, config: "EvalConfig", kg: KG) -> Reasoner:
        key = (config.reasoner, tuple(sorted(config.settings.items())))
        if key not in self._reasoners:
            self._reasoners[key] = self._build(config, kg)
        return self._reasoners[key]

    def _build(self, config: "EvalConfig", kg: KG) -> Reasoner:
        return get_reasoner(config.reasoner)(self._services.context(kg), **config.settings)  # type: ignore[union-attr]

    def _answer_in_scratch_store(self, config: "EvalConfig", question: "Question") -> dict[str, Any]:
        """A per-question-subgraph question: its own graph goes into a fresh store in a temporary folder."""
        with scratch_store() as kg:
            kg.add_triples(tuple(t) for t in question.meta["graph"])
            return self._answer_with(self._build(config, kg), kg, question)

    def _answer_with(self, reasoner: Reasoner, kg: KG, question: "Question") -> dict[str, Any]:
        topics = resolve_topics(kg, question)
        try:
            result = reasoner.answer(question.text, topics or None)
        except QUESTION_ERRORS as error:
            result = Result(question=question.text, reasoner=reasoner.name, topic_entities=topics,
                            notes=[f"no answer found: error: {error}"])
        score = score_question([Prediction(a.id, a.name) for a in result.answers], question.answers)
        return {
            "qid": question.id,
            "gold": question.answers,
            "hop": question.hop,
            "qtype": question.qtype,
            "topic_source": "gold" if topics else "linked",
            "model": self._services.model_name if reasoner.uses_llm else "none",  # type: ignore[union-attr]
            **result.to_json(),
            "metrics": score.to_json(),
        }


@contextmanager
def scratch_store() -> Iterator[KG]:
    """An empty store in a temporary folder, gone afterwards (a per-question-subgraph question's)."""
    with tempfile.TemporaryDirectory(prefix="localkg-eval-") as folder:
        kg = KG.create(Path(folder) / "db", buffer_pool_bytes=256 << 20)
        try:
            yield kg
        finally:
            kg.close()


def fingerprint(path: Path) -> str:
    """A cheap identity of a checkpoint file: its size and the SHA-256 of its first MiB (a
    retrained scorer differs there: the file starts with its weights' layout and its meta)."""
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}, which the reasoner's settings name")
    with path.open("rb") as handle:
        head = handle.read(FINGERPRINT_BYTES)
    return f"{hashlib.sha256(head).hexdigest()[:16]}-{path.stat().st_size}"


def uses_record(uses: Uses) -> dict[str, Any]:
    """:class:`Uses` as a run records it: the settled settings, and each checkpoint's fingerprint
    by its absolute path."""
    return {"settings": dict(sorted(uses.settings.items())),
            "checkpoints": {str(path.resolve()): fingerprint(path) for path in uses.checkpoints}}


def describe_failure(question: "Question", error: BaseException) -> str:
    """One line: the question and the error; for a bug (not a localkg error) also its type and
    the innermost place it was raised."""
    if isinstance(error, LocalKGError):
        cause = str(error)
    else:
        frames = traceback.extract_tb(error.__traceback__)
        place = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        cause = f"{type(error).__name__}: {error}{place}"
    return (f"question {question.id} ({question.text[:80]!r}) failed: {cause}; "
            "the finished predictions are kept (rerun with --resume once it is fixed)")
