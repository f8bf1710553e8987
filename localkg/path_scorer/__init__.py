"""The path scorer: which relation paths a question asks for, learned from question–answer pairs
or from questions made from the store itself (``synthetic``).

``walk`` enumerates relation paths (sequences of (relation, direction)) from a
topic entity set by set and executes them; ``supervision`` labels every path
by how well its end set reproduces a question's gold answers; ``model`` is the
small scorer over a frozen sentence encoder; ``train`` fits it
(``localkg train paths``); ``checkpoint`` saves and checks it; ``ranking``
ranks a question's paths with it (``rank_paths``) for the ``learned-paths``
reasoner and for every reasoner's ``relations=trained`` setting.
"""
