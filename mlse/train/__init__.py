"""Training: the fine-tuning methods and the two-stage heads, under one trainer that knows no method.

:mod:`mlse.train.config` holds the configuration dataclasses (the command line and the app's Fine-tune tab build the
same ones); :func:`mlse.train.finetune.finetune` runs a fine-tune, :mod:`mlse.train.head_training` the Stage-1/Stage-2
heads, :mod:`mlse.train.methods` names each method's loss and teacher; :mod:`mlse.train.loop` is the loop they share.
Import from the module that defines a name, not from this package.
"""
