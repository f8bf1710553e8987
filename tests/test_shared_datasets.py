"""The tests read the shared datasets beside the checkout (``../shared``); where that folder is
missing, the tests that need it are skipped with the reason, and the others still run."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

NEEDS_SHARED = """
def test_reads_metaqa(shared):
    assert (shared / "metaqa").is_dir()


def test_makes_a_dump(dumps):
    pass


def test_needs_nothing():
    pass
"""


def test_without_the_shared_folder_the_tests_that_need_it_are_skipped_with_the_reason(tmp_path: Path) -> None:
    tests = tmp_path / "checkout" / "tests"  # nothing beside the checkout
    tests.mkdir(parents=True)
    shutil.copy(Path(__file__).with_name("conftest.py"), tests / "conftest.py")
    (tests / "test_needs_shared.py").write_text(NEEDS_SHARED)
    done = subprocess.run([sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", str(tests)],
                          cwd=tests.parent, capture_output=True, text=True, env={**os.environ, "COLUMNS": "1000"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 2 skipped" in done.stdout
    assert f"needs the shared datasets at {tmp_path / 'shared' / 'data'} (../shared/data beside the checkout)" in done.stdout
    assert f"needs the dump generator at {tmp_path / 'shared' / 'tools' / 'make_dump.py'}" in done.stdout
