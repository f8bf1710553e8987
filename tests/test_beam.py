"""The one beam search: what it proposes, keeps and walks, on a small relation tree in plain Python.

The search knows no graph, so the tree here is its whole input; the reasoners' and the path
scorer's use of it run on real stores in test_baselines.py and test_path_ranking.py.
"""
from __future__ import annotations

from localkg.beam import beam_search

#: Which hops follow which path, and a score for each path (higher is better).
TREE = {(): ["a", "b", "c"], ("a",): ["x", "y"], ("b",): ["z"], ("c",): [], ("a", "x"): [], ("a", "y"): [],
        ("b", "z"): []}
SCORES = {("a",): 0.9, ("b",): 0.5, ("c",): 0.7, ("a", "x"): 0.2, ("a", "y"): 0.8, ("b", "z"): 0.95}


def extend(layer: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    return [path + (hop,) for path in layer for hop in TREE[path]]


def score(paths: list[tuple[str, ...]]) -> list[float]:
    return [SCORES[path] for path in paths]


def test_keeps_the_best_width_and_extends_only_them() -> None:
    walked: list[tuple[str, ...]] = []

    def advance(path: tuple[str, ...], _score: float) -> tuple[str, ...]:
        walked.append(path)
        return path

    layers = list(beam_search((), extend, score, advance, depth=3, width=2))
    assert [kept for _candidates, _scores, kept in layers] == [[("a",), ("c",)], [("a", "y"), ("a", "x")]]
    assert layers[1][0] == [("a", "x"), ("a", "y")]  # b's extension is never proposed: b was not kept
    assert walked == [("a",), ("c",), ("a", "y"), ("a", "x")]
    assert len(layers) == 2  # the third depth proposes nothing


def test_an_extension_that_reaches_nothing_gives_its_place_to_the_next() -> None:
    def advance(path: tuple[str, ...], given: float) -> tuple[str, ...] | None:
        assert given == SCORES[path]
        return None if path == ("a",) else path

    first = next(beam_search((), extend, score, advance, depth=1, width=2))
    assert first[2] == [("c",), ("b",)]


def test_nothing_kept_ends_the_search() -> None:
    layers = list(beam_search((), extend, score, lambda _path, _score: None, depth=3, width=2))
    assert len(layers) == 1 and layers[0][2] == []
