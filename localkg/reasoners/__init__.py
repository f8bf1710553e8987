"""Graph reasoners, by name: :data:`REASONERS` maps each name to its module, which
:func:`get_reasoner` imports on first use (the module registers its class with ``@register``).
"""
from localkg.reasoners.base import REASONERS, Answer, Context, Reasoner, Result, get_reasoner, register

__all__ = ["REASONERS", "Answer", "Context", "Reasoner", "Result", "get_reasoner", "register"]
