"""Prompt templates as data: one TOML file per reasoner or service in this folder.

Keeping prompts out of code means they can be read, compared with the papers
and changed in one place. Templates use ``str.format`` fields.
"""
from __future__ import annotations

import tomllib
from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=None)
def load(name: str) -> dict[str, str]:
    """The templates of ``name.toml`` as a dict of template name to text."""
    text = resources.files(__package__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def render(name: str, template: str, **fields: object) -> str:
    """Fill one template of ``name.toml`` with ``fields``."""
    return load(name)[template].format(**fields)
