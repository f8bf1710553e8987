"""localkg: an embedded, fully offline knowledge store and graph reasoner.

Importing localkg makes the Hugging Face libraries offline: no code path of
localkg downloads anything; models come from installed packages or local paths.
"""
import os as _os

_os.environ.setdefault("HF_HUB_OFFLINE", "1")
_os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
_os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from localkg.errors import LocalKGError  # noqa: E402
from localkg.store import KG  # noqa: E402

__version__ = "0.1.0"
__all__ = ["KG", "LocalKGError", "__version__"]
