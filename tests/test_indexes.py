"""FAISS indexes of a database: build, incremental update after an append, resume, stale and missing."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from localkg.errors import IndexBuildError, IndexMismatchError, IndexMissingError, StaleIndexError
from localkg.indexes.build import (ENTITIES, RELATIONS, build_entity_index, build_indexes, index_directory,
                                   open_index)
from localkg.indexes.vector_index import (FLAT_LIMIT, IndexMeta, VectorIndex, bytes_per_vector,
                                          choose_index_type)
from localkg.store import KG

FIRST = [("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers"),
         ("Top Hat", "starred_actors", "Fred Astaire"), ("Swing Time", "directed_by", "George Stevens"),
         ("Swing Time", "starred_actors", "Ginger Rogers"), ("Top Hat", "release_year", "1935")]
SECOND = [("Kitty Foyle", "starred_actors", "Ginger Rogers"), ("Kitty Foyle", "directed_by", "Sam Wood"),
          ("Shall We Dance", "directed_by", "Mark Sandrich")]


@pytest.fixture(scope="module")
def embedder(scorer):
    return scorer.embedder


@pytest.fixture()
def kg(tmp_path: Path):
    kg = KG.create(tmp_path / "db")
    kg.add_triples(FIRST)
    yield kg
    kg.close()


def test_build_writes_index_and_meta(kg: KG, embedder) -> None:
    reports = build_indexes(kg, "all", embedder, progress=False)
    assert [(r.kind, r.index_type, r.added) for r in reports] == [(ENTITIES, "flat", 7), (RELATIONS, "flat", 3)]
    meta = json.loads((index_directory(kg, ENTITIES) / "meta.json").read_text())
    assert meta["kind"] == "entities" and meta["model"] == "all-MiniLM-L6-v2" and meta["dim"] == 384
    assert meta["count"] == 7 and meta["generation"] == kg.generation and meta["complete"] is True
    assert meta["index_type"] == "flat" and meta["bytes_per_vector"] == 4 * 384

    index = open_index(kg, ENTITIES)
    (hits,) = index.search(embedder.encode(["ginger rogers"]), 2)
    assert hits[0][0] == "Ginger Rogers" and hits[0][2] > 0.99
    relations = open_index(kg, RELATIONS)
    (best, *_), = relations.search(embedder.encode(["who directed it"]), 1)
    assert best[0] == "directed_by" and best[1] == "directed by"


def test_second_build_is_a_no_op(kg: KG, embedder) -> None:
    build_indexes(kg, "all", embedder, progress=False)
    again = build_indexes(kg, "all", embedder, progress=False)
    assert all(r.up_to_date and r.added == 0 for r in again)


def test_missing_index_says_how_to_build_it(kg: KG) -> None:
    with pytest.raises(IndexMissingError, match=r"localkg index build --db .* --what entities"):
        open_index(kg, ENTITIES)


def test_append_makes_index_stale_and_rebuild_embeds_only_new_entities(kg: KG, embedder) -> None:
    build_indexes(kg, ENTITIES, embedder, progress=False)
    before = open_index(kg, ENTITIES).ids.to_pylist()
    kg.add_triples(SECOND)
    with pytest.raises(StaleIndexError,
                       match=r"generation 1 .* generation 2 .*`localkg index build --db .* --what entities`"):
        open_index(kg, ENTITIES)

    report = build_entity_index(kg, embedder, progress=False)
    assert report.added == 3 and report.total == 10  # Kitty Foyle, Sam Wood, Shall We Dance
    index = open_index(kg, ENTITIES)
    ids = index.ids.to_pylist()
    assert ids[:len(before)] == before and sorted(ids[len(before):]) == ["Kitty Foyle", "Sam Wood", "Shall We Dance"]
    assert index.meta.generation == kg.generation and index.meta.parts == 2
    (hits,) = index.search(embedder.encode(["Kitty Foyle"]), 1)
    assert hits[0][0] == "Kitty Foyle"


def test_aliases_get_their_own_vectors(tmp_path: Path, embedder) -> None:
    from localkg.store.batch import FactBatch

    with KG.create(tmp_path / "db") as kg:
        with kg.writer() as writer:
            batch = FactBatch()
            batch.add_fact("m.01", "film.film.directed_by", "m.02")
            batch.add_entity("m.01", name="Top Hat")
            batch.add_entity("m.02", name="Mark Sandrich", aliases=["Mark R. Sandrich", "mark sandrich"])
            writer.write(batch)
        build_entity_index(kg, embedder, progress=False)
        index = open_index(kg, ENTITIES)
        assert sorted(zip(index.ids.to_pylist(), index.texts.to_pylist())) == [
            ("m.01", "Top Hat"), ("m.02", "Mark R. Sandrich"), ("m.02", "Mark Sandrich")]
        (hits,) = index.search(embedder.encode(["Mark R. Sandrich"]), 1)
        assert hits[0][:2] == ("m.02", "Mark R. Sandrich")


def test_interrupted_build_refuses_to_serve_then_resumes(kg: KG, embedder) -> None:
    kg.add_triples(SECOND)

    class InterruptedEmbedder:
        """The real model, interrupted (as by Ctrl-C) on its second batch."""

        model_name, model_path, dim = embedder.model_name, embedder.model_path, embedder.dim
        calls = 0

        def encode(self, texts, batch_size=64, progress=False):
            InterruptedEmbedder.calls += 1
            if InterruptedEmbedder.calls == 2:
                raise KeyboardInterrupt
            return embedder.encode(texts, batch_size, progress)

    import localkg.indexes.build as build

    chunk, build.ENCODE_CHUNK = build.ENCODE_CHUNK, 4
    try:
        with pytest.raises(KeyboardInterrupt):
            build_entity_index(kg, InterruptedEmbedder(), progress=False, checkpoint_vectors=4)
        with pytest.raises(IndexMissingError, match="interrupted"):
            open_index(kg, ENTITIES)
        saved = VectorIndex.load(index_directory(kg, ENTITIES)).meta.count
        assert saved == 4
        report = build_entity_index(kg, embedder, progress=False)
    finally:
        build.ENCODE_CHUNK = chunk
    assert report.resumed and report.added == 10 - saved and report.total == 10
    ids = open_index(kg, ENTITIES).ids.to_pylist()
    assert len(ids) == len(set(ids)) == 10


def test_index_of_another_model_is_refused(kg: KG, embedder) -> None:
    build_indexes(kg, ENTITIES, embedder, progress=False)
    with pytest.raises(IndexMismatchError, match="all-MiniLM-L6-v2"):
        open_index(kg, ENTITIES, model_name="some-other-model")


def test_changing_index_type_needs_rebuild(kg: KG, embedder) -> None:
    build_indexes(kg, ENTITIES, embedder, progress=False)
    with pytest.raises(IndexBuildError, match="--rebuild"):
        build_entity_index(kg, embedder, index_type="hnsw", progress=False)
    report = build_entity_index(kg, embedder, index_type="hnsw", rebuild=True, progress=False)
    assert report.index_type == "hnsw" and report.added == 7
    (hits,) = open_index(kg, ENTITIES).search(embedder.encode(["Swing Time"]), 1)
    assert hits[0][0] == "Swing Time"
    with pytest.raises(IndexBuildError, match="unknown index type"):
        build_entity_index(kg, embedder, index_type="bogus", rebuild=True, progress=False)


def test_ivfpq_needs_enough_vectors_to_train(kg: KG, embedder) -> None:
    with pytest.raises(IndexBuildError, match="needs at least .* use --index-type flat"):
        build_entity_index(kg, embedder, index_type="ivfpq", progress=False)


def test_index_type_by_size_and_memory_per_vector() -> None:
    assert choose_index_type(FLAT_LIMIT - 1) == "flat" and choose_index_type(FLAT_LIMIT) == "ivfpq"
    assert choose_index_type(10, "hnsw") == "hnsw"
    assert [bytes_per_vector(t, 384) for t in ("flat", "hnsw", "ivfpq")] == [1536, 1792, 56]


def test_ivfpq_index_saves_loads_and_finds_near_duplicates(tmp_path: Path) -> None:
    """Real FAISS IVF-PQ on random unit vectors (no model needed to check the persistence)."""
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((1500, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    meta = IndexMeta(kind="entities", model="m", model_path="", dim=32, index_type="ivfpq")
    index = VectorIndex.create(tmp_path / "ix", meta, expected_vectors=100)  # 8 lists: quick to train
    index.index.train(vectors)
    ids = [f"n{i}" for i in range(len(vectors))]
    index.add(vectors[:1000], ids[:1000], ids[:1000])
    index.save(generation=3, complete=False)
    index.add(vectors[1000:], ids[1000:], ids[1000:])
    index.save(generation=3, complete=True)

    loaded = VectorIndex.load(tmp_path / "ix")
    assert loaded.meta.count == 1500 and loaded.meta.parts == 2 and loaded.meta.bytes_per_vector == 4 + 8
    noisy = vectors[[5, 1200]] + 0.05 * rng.standard_normal((2, 32)).astype(np.float32)
    hits = loaded.search(noisy / np.linalg.norm(noisy, axis=1, keepdims=True), 5)
    assert "n5" in [h[0] for h in hits[0]] and "n1200" in [h[0] for h in hits[1]]
