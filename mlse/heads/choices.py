"""The values the heads' options take, without torch: the command line and the app offer them before a head loads."""

from __future__ import annotations

NONLINEARITIES = ("identity", "sigmoid", "tanh")  # Stage 2's f of the cosine (mlse.heads.stage2)
