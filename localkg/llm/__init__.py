"""The local LLM runtime: a GGUF model through llama.cpp, with structured helpers that always parse.

``LLM`` is the real model (the bundled Gemma 3 270M unless ``model_path`` or
``LOCALKG_MODEL`` names another GGUF); ``ScriptedLLM`` replays scripted
outputs for tests of how a reasoner reacts to them. Both record every call
as an ``LLMCall``. See docs/llm.md.
"""
from localkg.llm.base import LanguageModel
from localkg.llm.calls import LLMCall
from localkg.llm.llm import DEFAULT_N_CTX, LLM
from localkg.llm.scripted import ScriptedLLM

__all__ = ["DEFAULT_N_CTX", "LLM", "LLMCall", "LanguageModel", "ScriptedLLM"]
