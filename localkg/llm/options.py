"""The LLM settings every command that runs a model offers, as one click decorator.

``@llm_options`` adds ``--model``, ``--n-ctx``, ``--n-gpu-layers``,
``--llm-threads``, ``--prompt-style`` and ``--llm-cache``; the command passes the values to
:func:`llm_factory`, which returns a factory (``Context(llm_factory=...)``)
so the model is still loaded only when a reasoner first needs it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import click

from localkg.llm.cache import ResponseCache
from localkg.llm.framing import STYLES
from localkg.llm.llm import DEFAULT_N_CTX, LLM

OPTION_NAMES = ("model", "n_ctx", "n_gpu_layers", "llm_threads", "prompt_style", "llm_cache")


def llm_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the LLM settings to a click command (values arrive under the names in ``OPTION_NAMES``)."""
    decorators = [
        click.option("--model", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
                     help="GGUF model file (default: $LOCALKG_MODEL, else the bundled Gemma 3 270M)."),
        click.option("--n-ctx", "n_ctx", type=click.IntRange(min=256), default=DEFAULT_N_CTX, show_default=True,
                     help="Context window in tokens; longer prompts drop their lowest-ranked options."),
        click.option("--n-gpu-layers", "n_gpu_layers", type=int, default=0, show_default=True,
                     help="Layers to offload to a GPU (-1: all; needs a GPU build of llama-cpp-python)."),
        click.option("--llm-threads", "llm_threads", type=click.IntRange(min=1), default=None,
                     help="CPU threads for llama.cpp (default: llama-cpp-python's, half the CPUs)."),
        click.option("--prompt-style", "prompt_style", type=click.Choice(STYLES), default=None,
                     help="completion (base models), chat (the GGUF's chat template) or auto (default)."),
        click.option("--llm-cache", "llm_cache", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="SQLite file of earlier answers: a call asked before (same model, settings and "
                          "prompt) is answered from it, exactly as the model would (docs/llm.md)."),
    ]
    for decorator in reversed(decorators):
        command = decorator(command)
    return command


def llm_factory(model: Path | None = None, n_ctx: int = DEFAULT_N_CTX, n_gpu_layers: int = 0,
                llm_threads: int | None = None, prompt_style: str | None = None, llm_cache: Path | None = None,
                seed: int = 0) -> Callable[[], LLM]:
    """A function that builds the ``LLM`` these settings describe (loading stays lazy)."""
    return lambda: LLM(model_path=model, n_ctx=n_ctx, n_gpu_layers=n_gpu_layers, n_threads=llm_threads,
                       seed=seed, prompt_style=prompt_style,
                       cache=ResponseCache(llm_cache) if llm_cache is not None else None)
