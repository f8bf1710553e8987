"""The entity index's static encoder (indexes/static_embedding.py): distilled offline from the bundled
MiniLM weights into the cache, recorded in the index, extended with only the new entities after an
appending dump load, and finding misspelt names as the transformer does."""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.indexes.build import ENTITIES, RELATIONS, build_indexes, embedder_for, index_directory
from localkg.indexes.static_embedding import StaticEmbedder
from localkg.indexes.vector_index import VectorIndex

DISTILL_OFFLINE = textwrap.dedent("""
    import json, socket, sys
    attempts = []

    def refuse(*args, **kwargs):
        attempts.append(repr(args[1:] if args and isinstance(args[0], socket.socket) else args)[:200])
        raise OSError("network disabled by the offline test")

    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    socket.getaddrinfo = refuse

    from localkg.indexes.static_embedding import StaticEmbedder
    encoder = StaticEmbedder()
    vectors = encoder.encode(["Ginger Rogers", "Ginger Rogerss", "Mark Sandrich"])
    print(json.dumps({"distilled": encoder.distilled, "directory": str(encoder.directory), "dim": encoder.dim,
                      "misspelt": float(vectors[0] @ vectors[1]), "other": float(vectors[0] @ vectors[2]),
                      "attempts": attempts}))
""")


def test_distilled_offline_from_the_bundled_weights_into_the_cache(tmp_path: Path) -> None:
    env = {**os.environ, "LOCALKG_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "2"}
    for key in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        env.pop(key, None)  # import localkg sets them; the guard below catches anything that still tries
    runs = [json.loads(subprocess.run([sys.executable, "-c", DISTILL_OFFLINE], env=env, capture_output=True,
                                      text=True, check=True).stdout.strip().splitlines()[-1]) for _ in range(2)]
    first, second = runs
    assert first["distilled"] and not second["distilled"]  # made on first use, then read from the cache
    assert first["attempts"] == [] and second["attempts"] == []
    assert Path(first["directory"]).parent == tmp_path / "cache" / "models"
    assert (Path(first["directory"]) / "embeddings.npy").is_file()
    assert first["dim"] == 256 and first["misspelt"] > 0.8 > first["other"]


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


def test_static_vectors_find_misspelt_names_as_well_as_minilm(static: StaticEmbedder, scorer) -> None:
    """Doubled last letter, as bench/linking.py misspells: the right name is the nearest of 3,000."""
    lines = (Path(__file__).parents[1].parent / "shared" / "data" / "metaqa" / "kb.txt").read_text(
        encoding="utf-8").splitlines()
    names = sorted({part for line in lines[:20_000] for part in line.split("|")[::2]})
    names = random.Random(0).sample(names, 3_000)
    queries = random.Random(1).sample(range(len(names)), 200)
    found = {}
    for label, encoder in (("static", static), ("minilm", scorer.embedder)):
        vectors = encoder.encode(names)
        asked = encoder.encode([names[i] + names[i][-1] for i in queries])
        found[label] = sum(names[int(np.argmax(vectors @ q))] == names[i] for q, i in zip(asked, queries)) / 200
    assert found["static"] >= 0.9 and found["static"] >= found["minilm"] - 0.03, found


def test_each_index_records_its_encoder(tmp_path: Path, static: StaticEmbedder) -> None:
    from localkg.store import KG

    with KG.create(tmp_path / "db") as kg:
        kg.add_triples([("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers")])
        build_indexes(kg, "all", progress=False)
        entities = VectorIndex.load(index_directory(kg, ENTITIES))
        relations = VectorIndex.load(index_directory(kg, RELATIONS))
    assert (entities.meta.model, entities.meta.extra["encoder"]) == ("all-MiniLM-L6-v2-static", "static")
    assert entities.meta.extra["weights"] == static.fingerprint and entities.meta.dim == static.dim
    assert (relations.meta.model, relations.meta.extra["encoder"]) == ("all-MiniLM-L6-v2", "transformer")
    assert isinstance(embedder_for(entities), StaticEmbedder)


def make_dump(shared: Path, out: Path, entities: int, seed: int) -> None:
    subprocess.run([sys.executable, str(shared.parent / "tools" / "make_dump.py"), "freebase", "--entities",
                    str(entities), "--seed", str(seed), "--out", str(out)], check=True, capture_output=True)


def test_build_after_an_appending_load_embeds_only_the_new_entities(shared: Path, tmp_path: Path) -> None:
    db = tmp_path / "db"
    first, second = tmp_path / "a.nt.gz", tmp_path / "b.nt.gz"
    make_dump(shared, first, 1_000, seed=1)  # ids are numbered from 0: the second dump adds 500 entities
    make_dump(shared, second, 1_500, seed=1)
    runner = CliRunner()

    def run(*args: str):
        result = runner.invoke(main, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result

    run("load", "freebase", str(first), "--db", str(db), "--workers", "0", "--quiet")
    built = json.loads(run("index", "build", "--db", str(db), "--what", "entities", "--json").stdout)[0]
    assert built["kept"] == 0 and built["new_entities"] == 1_000 and built["model"] == "all-MiniLM-L6-v2-static"

    run("load", "freebase", str(second), "--db", str(db), "--workers", "0", "--quiet")
    from localkg.store import KG

    with KG.open(db, read_only=True) as kg:
        entities = kg.stats().entities
    again = run("index", "build", "--db", str(db), "--what", "entities")
    line = again.stdout.strip()
    new = entities - built["new_entities"]
    assert new > 0 and line.startswith(f"entities: embedded ") and f" of {new:,} new entities, kept " \
        f"{built['total']:,} vectors;" in line and "all-MiniLM-L6-v2-static" in line
    assert "up to date" in run("index", "build", "--db", str(db), "--what", "entities").stdout
