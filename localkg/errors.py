"""Exceptions raised by localkg.

Every error a user can cause has its own class so that the CLI can print one
clear line and library callers can catch precisely what they expect.
"""


class LocalKGError(Exception):
    """Base class of every error localkg raises on purpose."""


class DatabaseNotFoundError(LocalKGError):
    """The path given as a database holds no localkg database."""


class DatabaseFormatError(LocalKGError):
    """The database was written in an older format that a read-only open cannot upgrade."""


class DatabaseExistsError(LocalKGError):
    """``KG.create`` was asked to create a database where one already is."""


class DatabaseLockedError(LocalKGError):
    """Another process has the database open for writing, or this process wants to write while
    others read it (Kùzu allows one writing process, or any number of read-only ones)."""


class DatabaseDamagedError(LocalKGError):
    """A store's files cannot be read: a truncated ``graph.kuzu``, a damaged ``manifest.json``."""


class BackupError(LocalKGError):
    """A backup cannot be made where asked (the target exists), or its copy differs from the store."""


class LoadError(LocalKGError):
    """A file could not be loaded (unreadable, truncated, wrong format)."""


class TooManyRejectsError(LoadError):
    """More lines were rejected than ``--max-rejects`` allows."""


class ResumeError(LoadError):
    """``--resume`` found a checkpoint that belongs to another load (other files or options)."""


class BufferPoolFullError(LoadError):
    """A write did not fit Kùzu's buffer pool; what it staged waits for a writer with a larger one."""


class UnknownEntityError(LocalKGError):
    """An entity id that is not in the store was asked for."""


class ReadOnlyQueryError(LocalKGError):
    """A query given to ``localkg query`` would have changed the database."""


class IndexMissingError(LocalKGError):
    """An embedding index was needed but has not been built."""


class StaleIndexError(LocalKGError):
    """An embedding index is older than the graph it indexes."""


class ModelNotFoundError(LocalKGError):
    """No model file at the given path, and no bundled model installed."""


class ModelChecksumError(LocalKGError):
    """An assembled model file does not have the SHA-256 it should have (a damaged or partial file)."""


class ModelLoadError(LocalKGError):
    """llama.cpp could not load a GGUF file (a damaged one, or a model it cannot run) or create its context."""


class PromptTooLongError(LocalKGError):
    """A prompt plus its output budget does not fit the model's context window.

    Callers shrink the prompt with ``LLM.fit_options`` (dropping the lowest-ranked
    candidates) or pass a larger ``n_ctx``; the runtime never truncates silently.
    """


class UnsupportedSchemaError(LocalKGError):
    """A JSON schema uses a construct whose output length the LLM runtime cannot bound."""


class LLMSettingsError(LocalKGError):
    """LLM settings that cannot work (an unknown prompt style, a chat style for a model without a chat template)."""


class SettingsError(LocalKGError):
    """A reasoner setting that does not exist, or a value it does not allow."""


class UnknownReasonerError(LocalKGError):
    """No reasoner has that name."""


class DatasetError(LocalKGError):
    """A questions file could not be read: unknown format, or a malformed line or record."""


class EvaluationError(LocalKGError):
    """An evaluation run cannot start or continue (its output folder holds another run, say)."""


class WorkerError(EvaluationError):
    """A question failed in an evaluation worker, or a worker died or could not open the store;
    the run stops with its finished predictions kept."""


class IndexBuildError(LocalKGError):
    """An index cannot be built as asked (unknown index type, too few vectors to train it)."""


class FullTextIndexError(IndexBuildError):
    """Kùzu could not create the full-text index (most often: its buffer pool is too small for
    the labels). ``index build`` goes on without it, since the linker does not use it."""


class IndexMismatchError(LocalKGError):
    """An index was built with another embedding model than the one asked to search it."""


class TrainingDataError(LocalKGError):
    """Questions given for training a scorer carry no usable supervision (no gold path, no example)."""


class CheckpointError(LocalKGError):
    """A trained-scorer checkpoint is missing, damaged, or was made with another encoder."""
