"""Linking works with no network at all: the model, the indexes and Kùzu's FTS extension are local.

Two guards: in-process, ``socket.connect`` raises for the whole test (model loading included);
and in a subprocess under ``unshare -n`` (a network namespace with no interfaces), which also
catches native code that would bypass Python's socket module.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from localkg.store import KG

TRIPLES = [("Top Hat", "directed_by", "Mark Sandrich"), ("Top Hat", "starred_actors", "Ginger Rogers"),
           ("Kitty Foyle", "starred_actors", "Ginger Rogers")]


class NetworkUsed(AssertionError):
    pass


@pytest.fixture()
def no_network(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    attempts: list[tuple] = []

    def refuse(self, address, *args, **kwargs):
        attempts.append(address)
        raise NetworkUsed(f"network access attempted: {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: refuse(None, address))
    return attempts


def test_socket_guard_really_blocks(no_network: list[tuple]) -> None:
    with pytest.raises(NetworkUsed):
        socket.create_connection(("127.0.0.1", 9))
    assert no_network


def test_model_load_index_build_and_linking_without_network(tmp_path: Path, no_network: list[tuple]) -> None:
    from localkg.indexes.build import build_indexes
    from localkg.indexes.embedding import Embedder
    from localkg.indexes.linking import EntityLinker

    embedder = Embedder()  # a fresh load: config, tokenizer and weights all read from site-packages
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples(TRIPLES)
        build_indexes(kg, "all", embedder, progress=False)
        candidates = EntityLinker(kg, embedder).link("what movies did Ginger Rodgers act in", k=2)
    assert candidates[0].id == "Ginger Rogers"
    assert no_network == []


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux unshare")
def test_link_command_in_a_network_namespace(tmp_path: Path) -> None:
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"unshare -n not permitted here: {probe.stderr.decode().strip()}")
    with KG.create(tmp_path / "db") as kg:
        kg.add_triples(TRIPLES)
    localkg = ["unshare", "-n", sys.executable, "-c", "from localkg.cli import main; main()"]
    build = subprocess.run([*localkg, "index", "build", "--db", str(tmp_path / "db")],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr
    linked = subprocess.run([*localkg, "link", "--db", str(tmp_path / "db"), "--json", "who directed [Top Hat]"],
                            capture_output=True, text=True, timeout=600)
    assert linked.returncode == 0, linked.stderr
    assert json.loads(linked.stdout)[0]["id"] == "Top Hat"
