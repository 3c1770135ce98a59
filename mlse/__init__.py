"""mlse: multilingual semantic textual similarity.

Importing the package is cheap: no gradio, umap, plotly, faiss or torch at import time.
"""

__version__ = "0.1.0"

from mlse.errors import DataError, MlseError, ModelNotFoundError

__all__ = ["DataError", "MlseError", "ModelNotFoundError", "__version__"]
