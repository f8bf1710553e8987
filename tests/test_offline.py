"""Offline by construction: an LLM call works with networking unavailable.

Two ways to take the network away from a fresh Python process (so that model
loading happens without network too): a socket guard that makes every
connection attempt raise, and, where the machine allows it, a network
namespace without interfaces (``unshare -n``). Each is first shown to block a
connection that succeeds without it, so the offline run proves something.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GUARD = textwrap.dedent("""
    import socket

    def _refuse(*args, **kwargs):
        raise OSError("network disabled by the offline test")

    socket.socket.connect = _refuse
    socket.socket.connect_ex = _refuse
    socket.create_connection = _refuse
    socket.getaddrinfo = _refuse
""")

PROBE = textwrap.dedent("""
    import socket, sys
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
        print("connected")
    except OSError as error:
        print("refused:", error)
""")

LLM_CALL = textwrap.dedent("""
    import json
    import os
    from localkg.llm import LLM

    llm = LLM(n_ctx=512)
    picks = llm.choose("Question: Who directed the film Top Hat?", ["Mark Sandrich", "Paris"], step="offline")
    print(json.dumps({"picks": picks, "call": llm.calls[-1].to_json(), "hf_offline": os.environ.get("HF_HUB_OFFLINE")}))
""")


@pytest.fixture()
def listener():
    """A local TCP server: a connection to it succeeds whenever networking is available."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


def run_python(code: str, *args: str, prefix: list[str] | None = None, quiet: bool = False) -> str:
    """Run ``code`` in a fresh interpreter; its last line of output. ``quiet``: stderr must be empty
    (llama.cpp's load-time log must not leak through)."""
    completed = subprocess.run([*(prefix or []), sys.executable, "-c", code, *args], capture_output=True, text=True,
                               timeout=600, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert completed.returncode == 0, completed.stderr[-2000:]
    if quiet:
        assert completed.stderr == ""
    return completed.stdout.strip().splitlines()[-1]


def network_namespace_available() -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-n", "true"], capture_output=True).returncode == 0


def check_llm_call(output: str) -> None:
    result = json.loads(output)
    assert len(result["picks"]) == 1 and result["picks"][0] in (0, 1)
    assert result["call"]["step"] == "offline" and result["call"]["prompt_tokens"] > 0
    assert result["hf_offline"] == "1"


def test_socket_guard_blocks_connections(listener: int):
    assert run_python(PROBE, str(listener)) == "connected"
    assert run_python(GUARD + PROBE, str(listener)).startswith("refused: network disabled")


@pytest.mark.model
def test_llm_call_under_socket_guard():
    check_llm_call(run_python(GUARD + LLM_CALL, quiet=True))


@pytest.mark.model
@pytest.mark.skipif(not network_namespace_available(), reason="unshare -n needs root or user namespaces")
def test_llm_call_in_a_network_namespace_without_interfaces(listener: int):
    assert run_python(PROBE, str(listener), prefix=["unshare", "-n"]).startswith("refused:")
    check_llm_call(run_python(LLM_CALL, prefix=["unshare", "-n"]))
