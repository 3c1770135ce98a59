"""Why this score? Token-pair attributions of a model's cosine (integrated Jacobians), and the word alignment view.

- :func:`explain_pair` -> :class:`Explanation`: word x word matrix, cosine = its sum + reference terms + residual;
- :func:`align_tokens` -> :class:`Alignment`: each word's best match by contextual similarity (not an explanation);
- :func:`what_if` -> :class:`WhatIf`: an edit of the pair scored and explained, beside the predicted change.

Importing this package does not import torch; computing does.
"""

from mlse.explain.alignment import Alignment, align_tokens
from mlse.explain.edits import WhatIf, what_if
from mlse.explain.explanation import DEFAULT_RULE, DEFAULT_STEPS, Explanation, default_layer, explain_pair

__all__ = [
    "Alignment",
    "DEFAULT_RULE",
    "DEFAULT_STEPS",
    "Explanation",
    "WhatIf",
    "align_tokens",
    "default_layer",
    "explain_pair",
    "what_if",
]
