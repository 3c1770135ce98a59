"""The fine-tuning losses, one module per method: the paper's formula as a pure function of embedding tensors (easy to
test on hand-made numbers), then a small ``nn.Module`` that embeds with the student and calls it.

Scored-pair losses (supervised STS) are ``cosent`` and ``angle``. The Stage-1 and Stage-2 losses live beside their
heads (:mod:`mlse.heads.stage1`, :mod:`mlse.heads.stage2`).
"""
