"""Trainable heads on frozen embeddings (scikit-learn conventions), and the scorer that wraps them around a backbone."""
