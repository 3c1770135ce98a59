"""Loss functions as pure functions of embeddings (easy to test on hand-made tensors)."""
