"""``EvalConfig``: everything that decides what an evaluation run computes.

Its own module so that the harness, the worker pools and the answering code all read it from
one place below them, and none imports it back from the harness that uses them.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from localkg.llm.llm import DEFAULT_N_CTX

# ``--limit`` takes the first N of the questions in the order drawn, so a run resumed with another
# limit keeps every answer it has (the summary counts the first N); the other fields change answers.
RESUMABLE_CHANGES = ("limit",)


@dataclass
class EvalConfig:
    """Everything that decides what a run computes (and so must match on ``--resume``)."""

    questions: str
    reasoner: str
    out: str
    db: str | None = None
    format: str = "auto"
    limit: int | None = None
    sample: int | None = None
    seed: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    model: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    prompt_style: str | None = None
    n_gpu_layers: int = 0
    llm_threads: int | None = None
    llm_cache: str | None = None
    workers: int | None = 1  # None: ``auto``
    ray: str | None = None   # a Ray address (``local``, ``auto``, ``ray://HOST:PORT``): the workers as actors
    # What the reasoner settled on the store, set when the run starts (``answering.uses_record``).
    uses: dict[str, Any] | None = None

    def identity(self) -> dict[str, Any]:
        """The fields that define the run (not the output folder, nor how fast or where it runs),
        with what the reasoner settled on the store once the run has started."""
        values = asdict(self)
        for runtime_only in ("out", "n_gpu_layers", "llm_threads", "llm_cache", "workers", "ray"):
            values.pop(runtime_only)
        values["questions"] = str(Path(self.questions).resolve())
        values["db"] = str(Path(self.db).resolve()) if self.db else None
        values["model"] = str(Path(self.model).resolve()) if self.model else None
        return values
