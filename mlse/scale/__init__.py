"""Past one process: ``embed``, ``score --engine ray`` and ``mine`` as one streaming pipeline of row chunks, run
in-process (the local engine) or by a pool of model-holding actors on Ray Data (the Ray engine), with sharded,
resumable output.

One job per module: :mod:`~mlse.scale.corpus` reads the texts, :mod:`~mlse.scale.shards` plans chunks and keeps the
output folder (atomic shards, the manifest, resume), :mod:`~mlse.scale.work` is what a worker does with one chunk,
:mod:`~mlse.scale.engine` runs chunks locally or on Ray (:mod:`~mlse.scale.cluster` starts or joins the cluster),
:mod:`~mlse.scale.embed`, :mod:`~mlse.scale.score` and :mod:`~mlse.scale.mine` are the three pipelines and
:mod:`~mlse.scale.progress` prints how far they are.
"""
