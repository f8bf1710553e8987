"""The plan of a dump load (loaders/plan.py): the buffer pool sized to the machine, and `--plan`
on dumps generated with make_dump.py, checked against what the real load then does."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from localkg.cli import main
from localkg.loaders.freebase import freebase_format
from localkg.loaders.plan import (FLUSH_BASE_BYTES, FLUSHED_ROW_BYTES, LOAD_BASE_BYTES, MIN_POOL_BYTES,
                                  STORED_NODE_BYTES, choose_buffer_pool, peak_memory, plan_load)
from localkg.store.pool import POOL_BYTES_PER_FLUSHED_ROW

GIB = 1 << 30


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory, shared: Path) -> tuple[Path, dict]:
    """A 3,000-entity Freebase dump, and make_dump's summary of it (its true line count)."""
    out = tmp_path_factory.mktemp("plan") / "fb.nt.gz"
    made = subprocess.run([sys.executable, str(shared.parent / "tools" / "make_dump.py"), "freebase", "--entities",
                           "3000", "--out", str(out)], check=True, capture_output=True, text=True)
    return out, json.loads(made.stdout.strip().splitlines()[-1])


def test_pool_is_a_quarter_of_available_memory_when_the_data_needs_more() -> None:
    pool, reason = choose_buffer_pool(expected_rows=10**9, available_bytes=64 * GIB)
    assert pool == 16 * GIB and "quarter" in reason
    pool, _ = choose_buffer_pool(expected_rows=10**9, available_bytes=8 * GIB)
    assert pool == 2 * GIB


def test_pool_stops_at_what_one_flush_of_the_input_needs() -> None:
    rows = 20_000_000
    pool, reason = choose_buffer_pool(expected_rows=rows, available_bytes=64 * GIB)
    assert rows * POOL_BYTES_PER_FLUSHED_ROW <= pool < rows * POOL_BYTES_PER_FLUSHED_ROW + (1 << 20)
    assert "one flush" in reason
    assert choose_buffer_pool(expected_rows=1_000, available_bytes=64 * GIB)[0] == MIN_POOL_BYTES


def test_peak_is_the_store_or_the_largest_flush_whichever_costs_more() -> None:
    nodes, rows = 300_000_000, 1_000_000_000
    held_for_the_store = LOAD_BASE_BYTES + STORED_NODE_BYTES * nodes
    assert peak_memory(1 * GIB, nodes, rows) == held_for_the_store  # small flushes: the store's nodes dominate
    flush_rows = (64 * GIB) // POOL_BYTES_PER_FLUSHED_ROW
    assert peak_memory(64 * GIB, 1_000, rows) == FLUSH_BASE_BYTES + FLUSHED_ROW_BYTES * flush_rows
    assert peak_memory(64 * GIB, 1_000, 5_000) == LOAD_BASE_BYTES + STORED_NODE_BYTES * 1_000  # one small flush


def test_plan_of_a_generated_dump_matches_its_load(dump: tuple[Path, dict], tmp_path: Path) -> None:
    path, made = dump
    plan = plan_load([path], freebase_format(), available_bytes=64 * GIB)
    assert abs(plan.lines - made["lines"]) <= 0.02 * made["lines"]
    assert plan.buffer_pool_bytes == MIN_POOL_BYTES and plan.flushes == 1  # a small input needs little
    assert plan_load([path], freebase_format(), buffer_pool_bytes=64 << 20).buffer_pool_bytes == 64 << 20
    assert "warning" not in plan.describe()
    small = plan_load([path], freebase_format(), available_bytes=512 << 20)  # the load's base alone is more
    assert small.describe().splitlines()[-1].startswith("plan: warning: the peak is above the 512.0 MiB")

    loaded = CliRunner().invoke(main, ["load", "freebase", str(path), "--db", str(tmp_path / "db"), "--workers",
                                       "0", "--json"], catch_exceptions=False)
    assert loaded.exit_code == 0, loaded.output
    assert "plan: input" in loaded.stderr and f"{plan.lines:,} lines" in loaded.stderr
    report = json.loads(loaded.stdout)
    assert report["lines_read"] == made["lines"]
    assert abs(plan.facts - report["facts_loaded"]) <= 0.1 * report["facts_loaded"]


def test_plan_option_prints_the_plan_and_loads_nothing(dump: tuple[Path, dict], tmp_path: Path) -> None:
    path, made = dump
    db = tmp_path / "db"
    shown = CliRunner().invoke(main, ["load", "freebase", str(path), "--db", str(db), "--plan"],
                               catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["plan"] * 5
    assert "lines" in lines[0] and "flush" in lines[2] and "peak memory" in lines[3] and "disk" in lines[3]
    assert not db.exists()
    as_json = CliRunner().invoke(main, ["load", "freebase", str(path), "--db", str(db), "--plan", "--json",
                                        "--buffer-pool-mb", "128"], catch_exceptions=False)
    planned = json.loads(as_json.stdout)
    assert planned["buffer_pool_bytes"] == 128 << 20 and planned["pool_reason"] == "--buffer-pool-mb"
    assert abs(planned["lines"] - made["lines"]) <= 0.02 * made["lines"]
    assert not db.exists()


def test_plan_of_a_wikidata_dump(shared: Path, tmp_path: Path) -> None:
    out = tmp_path / "wd.json.gz"
    made = subprocess.run([sys.executable, str(shared.parent / "tools" / "make_dump.py"), "wikidata", "--entities",
                           "500", "--out", str(out)], check=True, capture_output=True, text=True)
    lines = json.loads(made.stdout.strip().splitlines()[-1])["lines"]
    shown = CliRunner().invoke(main, ["load", "wikidata", str(out), "--db", str(tmp_path / "db"), "--plan",
                                      "--json"], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    planned = json.loads(shown.stdout)
    assert abs(planned["lines"] - lines) <= 0.02 * lines and planned["facts"] > 0 and planned["nodes"] >= 500


def test_each_format_plans_with_its_own_measured_rate_or_says_it_has_none(shared: Path, tmp_path: Path,
                                                                          dump: tuple[Path, dict]) -> None:
    """The Wikidata plan quoted the Freebase lines/s (and a JSON line is a whole entity)."""
    def time_line(*arguments: str) -> str:
        shown = CliRunner().invoke(main, ["load", *arguments, "--db", str(tmp_path / "db"), "--plan"],
                                   catch_exceptions=False)
        assert shown.exit_code == 0, shown.output
        return shown.stdout.splitlines()[4]

    freebase = time_line("freebase", str(dump[0]))
    out = tmp_path / "wd.json"
    subprocess.run([sys.executable, str(shared.parent / "tools" / "make_dump.py"), "wikidata", "--entities", "200",
                    "--out", str(out)], check=True, capture_output=True)
    wikidata = time_line("wikidata", str(out))
    rates = [re.search(r"rate of ([\d,]+) lines/s", line) for line in (freebase, wikidata)]
    assert all(rates) and rates[0].group(1) != rates[1].group(1), (freebase, wikidata)
    assert freebase.startswith("plan: the whole load at") and wikidata.startswith("plan: the whole load at")
    truthy = tmp_path / "truthy.nt"
    truthy.write_text("<http://www.wikidata.org/entity/Q2> <http://www.wikidata.org/prop/direct/P31> "
                      "<http://www.wikidata.org/entity/Q1> .\n", encoding="utf-8")
    assert time_line("wikidata", str(truthy)) == (
        "plan: no load rate has been measured for the truthy-nt format, so no time estimate")
    assert json.loads(CliRunner().invoke(main, ["load", "wikidata", str(truthy), "--db", str(tmp_path / "db"),
                                                "--plan", "--json"]).stdout)["seconds_2_cores"] is None


def _tree_rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants (the load's parser workers)."""
    try:
        with open(f"/proc/{pid}/statm") as handle:
            total = int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            children = [int(child) for child in handle.read().split()]
    except (OSError, ValueError):
        return 0
    return total + sum(_tree_rss_bytes(child) for child in children)


def test_planned_peak_is_within_a_quarter_of_the_measured_one(shared: Path, tmp_path: Path) -> None:
    """The plan's memory line against a real load's peak (the load and its workers, sampled every
    50 ms) on a 300,000-entity dump, 2.7M lines: big enough for the store's cost to show, small enough
    for the suite. docs/benchmarks.md has the same at 1.25M and 5M entities."""
    path = tmp_path / "fb.nt.gz"
    subprocess.run([sys.executable, str(shared.parent / "tools" / "make_dump.py"), "freebase", "--entities",
                    "300000", "--out", str(path)], check=True, capture_output=True)
    plan = plan_load([path], freebase_format())
    load = subprocess.Popen([sys.executable, "-m", "localkg", "load", "freebase", str(path), "--db",
                             str(tmp_path / "db"), "--quiet", "--buffer-pool-mb", str(plan.buffer_pool_bytes >> 20)])
    peak = 0
    while load.poll() is None:
        peak = max(peak, _tree_rss_bytes(load.pid))
        time.sleep(0.05)
    assert load.returncode == 0
    assert 0.75 * peak <= plan.peak_memory_bytes <= 1.25 * peak, (plan.peak_memory_bytes, peak)
