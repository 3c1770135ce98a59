"""Trainable heads on frozen embeddings (scikit-learn conventions)."""
