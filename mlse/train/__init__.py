"""Training: the fine-tuning methods and the two-stage heads, under one trainer that knows no method.

Entry points: :func:`mlse.train.finetune.finetune` and :mod:`mlse.train.head_training`; configuration in
:mod:`mlse.train.config`. Import from the module that defines a name, not from this package.
"""
