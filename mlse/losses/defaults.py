"""The fine-tuning losses' option values, without torch: the configuration and the command line read them here."""

from __future__ import annotations

# Park et al.'s released code (train.py --tau default); the soft- and the hard-label contrastive losses share it.
DEFAULT_TEMPERATURE = 0.1
# Park et al.'s soft labels: the anchor language's teacher similarities, or the mean of both languages' (Eqs. 4-5).
LABEL_MODES = ("priority", "average")
