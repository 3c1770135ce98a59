"""mlse: multilingual semantic textual similarity.

Importing the package is cheap: no gradio, umap, plotly, faiss or torch at import time. The public API
(``load_model``, ``read_pairs``, ``score_pairs``, ``write_scored``, ...) loads on first use. See docs/api.md.
"""

__version__ = "0.1.0"

from typing import TYPE_CHECKING

from mlse.errors import DataError, MlseError, ModelNotFoundError
from mlse.library_logs import quiet_library_notices

quiet_library_notices()  # before any model loads: drops sentence-transformers' "Default prompt name is set to ..."

# name -> module that defines it, imported on first access (PEP 562)
_LAZY = {
    "load_model": "mlse.models",
    "score_pairs": "mlse.api",
    "write_scored": "mlse.data.scored_file",
    "read_pairs": "mlse.data.user_files",
    "read_table": "mlse.data.user_files",
    "read_rows": "mlse.data.user_files",
    "UserTable": "mlse.data.user_files",
    "ModelPool": "mlse.serving.model_pool",
    "what_if": "mlse.explain",
}

__all__ = ["DataError", "MlseError", "ModelNotFoundError", "__version__", *_LAZY]

# the names of _LAZY, for type checkers and IDEs (tests/project/test_packaging.py keeps the two lists equal)
if TYPE_CHECKING:
    from mlse.api import score_pairs as score_pairs
    from mlse.data.scored_file import write_scored as write_scored
    from mlse.data.user_files import UserTable as UserTable
    from mlse.data.user_files import read_pairs as read_pairs
    from mlse.data.user_files import read_rows as read_rows
    from mlse.data.user_files import read_table as read_table
    from mlse.explain import what_if as what_if
    from mlse.models import load_model as load_model
    from mlse.serving.model_pool import ModelPool as ModelPool


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mlse' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
