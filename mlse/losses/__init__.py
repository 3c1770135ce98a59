"""The fine-tuning losses, one module per method: the paper's formula as a pure function of embedding tensors (easy to
test on hand-made numbers), then a small ``nn.Module`` that embeds with the student and calls it.

``mse`` (Reimers & Gurevych), ``ema`` (Ham & Kim: the schedule, the update and the teacher), ``soft_contrastive``
(Park et al.: soft labels, bidirectional loss, TCM), ``contrastive`` (hard-label InfoNCE, no teacher); for scored
pairs (supervised STS, alone or added to a distillation loss) ``cosent`` (Su 2022) and ``angle`` (Li & Li 2023);
``common`` holds what they share. The Stage-1 and Stage-2 losses live beside their heads (:mod:`mlse.heads.stage1`,
:mod:`mlse.heads.stage2`).
"""
