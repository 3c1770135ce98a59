"""Past one process: ``embed``, ``score --engine ray`` and ``mine`` as one streaming pipeline of row chunks, run
in-process (the local engine) or by a pool of model-holding actors on Ray Data (the Ray engine), with sharded,
resumable output.

One job per module: :mod:`~mlse.scale.corpus` scans the texts and reads them back shard by shard,
:mod:`~mlse.scale.shards` plans chunks and keeps the output folder (atomic shards, the manifest, resume),
:mod:`~mlse.scale.pairs` reads a ``score`` job's pairs chunk by chunk and plans which texts each chunk encodes,
:mod:`~mlse.scale.work` is what a worker does with one chunk, :mod:`~mlse.scale.engine` runs chunks locally or on Ray
(:mod:`~mlse.scale.cluster` starts or joins the cluster), :mod:`~mlse.scale.search` builds and searches a neighbour
index over embedding shards, :mod:`~mlse.scale.margin` mines two folders of shards by ratio margin, and
:mod:`~mlse.scale.embed`, :mod:`~mlse.scale.score` and :mod:`~mlse.scale.mine` are the three commands' pipelines.
"""
