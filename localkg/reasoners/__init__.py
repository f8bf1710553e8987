"""Graph reasoners. Importing this package registers every reasoner by name.

Each reasoner lives in its own module and registers itself with
``@register``; ``get_reasoner(name)`` looks one up.
"""
from localkg.reasoners.base import REGISTRY, Answer, Context, Reasoner, Result, get_reasoner, register

__all__ = ["REGISTRY", "Answer", "Context", "Reasoner", "Result", "get_reasoner", "register"]

# One import per reasoner module (each registers itself).
from localkg.reasoners import baselines  # noqa: E402,F401  (io, cot, embed-path)
from localkg.reasoners import tog  # noqa: E402,F401  (tog: Think-on-Graph)
from localkg.reasoners import bpc  # noqa: E402,F401  (bpc: Bounded Path Context)
from localkg.reasoners import fog  # noqa: E402,F401  (fog: Foresight-over-Graph)
from localkg.reasoners import paths  # noqa: E402,F401  (paths: Paths-over-Graph)
from localkg.reasoners import plan  # noqa: E402,F401  (plan: Plan-on-Graph)
from localkg.reasoners import ppoga  # noqa: E402,F401  (ppoga: Predictive Plan-on-Graph with Action)
from localkg.reasoners import dtkg  # noqa: E402,F401  (dtkg: dual-track KG reasoner)
from localkg.reasoners import learned_paths  # noqa: E402,F401  (learned-paths: trained relation-path retriever)
