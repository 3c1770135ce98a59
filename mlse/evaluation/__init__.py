"""Evaluation: STS correlations, Tatoeba retrieval / xSIM, and BUCC-like bitext mining (pure numpy; faiss lazily).

The metric functions never see an encoder; :mod:`.runners` (import it directly) binds encoder, data and metrics.
"""

from mlse.encoders.protocol import cosine_predictions
from mlse.evaluation.mining import (
    MiningSplit,
    best_threshold,
    build_mining_task,
    evaluate_mining,
    mine_candidates,
    mining_prf,
)
from mlse.evaluation.retrieval import retrieval_accuracy, retrieval_errors, tatoeba_metrics, xsim_error
from mlse.evaluation.sts import average_scores, bootstrap_spearman, sts_metrics

__all__ = [
    "MiningSplit",
    "average_scores",
    "best_threshold",
    "bootstrap_spearman",
    "build_mining_task",
    "cosine_predictions",
    "evaluate_mining",
    "mine_candidates",
    "mining_prf",
    "retrieval_accuracy",
    "retrieval_errors",
    "sts_metrics",
    "tatoeba_metrics",
    "xsim_error",
]
