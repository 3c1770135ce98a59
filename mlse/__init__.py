"""mlse: multilingual semantic textual similarity.

Importing the package is cheap: no gradio, umap, plotly, faiss or torch at import time. The public API loads on
first use::

    import mlse
    model = mlse.load_model("me5-small")                      # calibrated as in the app
    table = mlse.read_pairs("pairs.tsv")                       # one reader for TSV, CSV, JSONL
    frame = mlse.score_pairs(table, ["me5-small", "muse"])     # a pandas DataFrame, two columns per model
"""

__version__ = "0.1.0"

from mlse.errors import DataError, MlseError, ModelNotFoundError
from mlse.library_logs import quiet_library_notices

quiet_library_notices()  # before any model loads: drops sentence-transformers' "Default prompt name is set to ..."

# name -> module that defines it, imported on first access (PEP 562)
_LAZY = {
    "load_model": "mlse.api",
    "score_pairs": "mlse.api",
    "pair_scores": "mlse.api",
    "read_pairs": "mlse.data.user_files",
    "read_table": "mlse.data.user_files",
    "read_rows": "mlse.data.user_files",
    "UserTable": "mlse.data.user_files",
    "ModelPool": "mlse.serving.model_pool",
}

__all__ = ["DataError", "MlseError", "ModelNotFoundError", "__version__", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mlse' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
