"""The examples in docstrings run as written."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["localkg.store.kg", "localkg.store.pool", "localkg.store.copying", "localkg.store.batch", "localkg.store.labels", "localkg.store.schema", "localkg.loaders.triples",
           "localkg.loaders.freebase", "localkg.loaders.parallel", "localkg.loaders.ntriples", "localkg.loaders.wikidata",
           "localkg.loaders.rejects",
           "localkg.text", "localkg.store.keyset", "localkg.indexes.label_table",
           "localkg.reasoners.fog", "localkg.reasoners.distance"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
