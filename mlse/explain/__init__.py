"""Why this score? Token-pair attributions of a model's cosine (integrated Jacobians), and the word alignment view.

- :func:`explain_pair` -> :class:`Explanation`: the word x word matrix whose sum, plus the reference terms, is the
  model's cosine up to a measured residual (Moeller, Nikolaev & Padó, EMNLP 2023);
- :func:`align_tokens` -> :class:`Alignment`: each word's best match by contextual token similarity (instant; not an
  explanation of the score);
- :func:`what_if` -> :class:`WhatIf`: an edit of the pair (words dropped, a sentence rewritten) scored as ``mlse score``
  scores it, explained again, and its change of the score beside the change the explanation predicted.

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
