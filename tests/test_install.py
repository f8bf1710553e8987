"""An editable install and a wheel install of a copy of this checkout both give a working ``localkg``.

Each install goes into a scratch virtual environment that sees the installed
dependencies but not the ``localkg`` this test run imports, so an install that
misses ``localkg.cli``, ``localkg.loaders`` or ``localkg.indexes`` fails here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

CHECKOUT = Path(__file__).resolve().parents[1]
OWN_NAMES = ("localkg", "__editable__", "_editable_impl_localkg", "_localkg")
CHECK = ("import localkg.cli, localkg.loaders.triples, localkg.indexes.build, localkg.prompts;"
         "print(localkg.cli.__file__); print(localkg.loaders.__file__)")


def copy_checkout(target: Path) -> Path:
    """The files git tracks or would track, as they stand in the working tree (links kept as links)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=CHECKOUT, capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, copy = CHECKOUT / name, target / name
        if not source.exists() and not source.is_symlink():
            continue  # deleted in the working tree, not yet committed
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    return target


def dependencies_without_localkg(target: Path) -> Path:
    """A folder of links to every installed distribution except this project's own files."""
    target.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OWN_NAMES) and entry.suffix != ".pth":
            (target / entry.name).symlink_to(entry)
    return target


def scratch_env(path: Path, dependencies: Path) -> Path:
    """A virtual environment without pip whose only extra path is ``dependencies``; returns its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = subprocess.run([str(path / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    (Path(site) / "_dependencies.pth").write_text(f"{dependencies}\n")
    return path / "bin"


def install(bin_dir: Path, *args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index", *args], check=True, capture_output=True)


def clean_environment() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.mark.slow
@pytest.mark.parametrize("editable", [True, False], ids=["editable", "wheel"])
def test_install_gives_a_working_cli(tmp_path: Path, editable: bool) -> None:
    source = copy_checkout(tmp_path / "checkout")
    bin_dir = scratch_env(tmp_path / "env", dependencies_without_localkg(tmp_path / "deps"))
    install(bin_dir, *(["--editable", str(source)] if editable else [str(source)]))

    help_text = subprocess.run([str(bin_dir / "localkg"), "--help"], capture_output=True, text=True,
                               cwd=tmp_path, env=clean_environment(), check=True).stdout
    assert help_text.startswith("Usage: localkg")
    cli_file, loaders_file = subprocess.run([str(bin_dir / "python"), "-c", CHECK], capture_output=True, text=True,
                                            cwd=tmp_path, env=clean_environment(), check=True).stdout.split()
    if editable:
        assert Path(cli_file).resolve() == source / "cli.py"
        assert Path(loaders_file) == source / "loaders" / "__init__.py"
    else:
        assert Path(cli_file).parent.parent == Path(loaders_file).parent.parent.parent
        assert not Path(cli_file).is_symlink()


def package_names(folder: Path, name: str) -> set[str]:
    """``name`` and every package below it, from the ``__init__.py`` files under ``folder``."""
    return {".".join([name, *init.parent.relative_to(folder).parts]) for init in folder.rglob("__init__.py")}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """setuptools installs only the packages pyproject.toml lists; a new subpackage must join the list."""
    settings = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = package_names(CHECKOUT / "localkg", "localkg")
    for name, folder in settings["package-dir"].items():
        found |= package_names(CHECKOUT / folder, name)
    assert set(settings["packages"]) == found


def test_the_package_cli_is_the_top_level_cli_py() -> None:
    # localkg/cli.py links to the design card's top-level cli.py: one file, never two copies that
    # drift (an in-place edit such as `sed -i` replaces the link with a copy)
    assert (CHECKOUT / "localkg" / "cli.py").is_symlink()
    assert (CHECKOUT / "localkg" / "cli.py").resolve() == (CHECKOUT / "cli.py").resolve()
