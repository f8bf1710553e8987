"""A dump load's child processes (its parser workers, multiprocessing's resource tracker) end when
the load does, a kill -9 of the loading process included (issue 27, item 3: they stayed alive,
blocked on a pipe, for as long as anyone watched)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def descendants(pid: int) -> set[int]:
    """The live processes below ``pid`` (from /proc; zombies count as ended)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    living = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            living.add(pid)
    return living


def test_killing_the_loading_process_ends_its_workers(tmp_path: Path, dumps) -> None:
    dump = tmp_path / "fb.nt"
    dumps.make_dump(dump, "freebase", 30_000)
    load = subprocess.Popen([sys.executable, "-c", "from localkg.cli import main; main()", "load", "freebase",
                             str(dump), "--db", str(tmp_path / "db"), "--workers", "2", "--chunk-mb", "1",
                             "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline, children = time.monotonic() + 120, set()
    while time.monotonic() < deadline and len(children) < 2 and load.poll() is None:
        children = descendants(load.pid)  # the two workers (and the resource tracker) once started
        time.sleep(0.05)
    assert load.poll() is None and len(children) >= 2, "the load ended before its workers started"
    os.kill(load.pid, signal.SIGKILL)
    load.wait()
    deadline = time.monotonic() + 20
    while alive(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = alive(children)
    for pid in left:  # leave no orphan behind, whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert not left, f"{len(left)} child processes outlived the killed load"
