"""Past one process: ``embed``, ``score --engine ray`` and ``mine`` as one streaming pipeline of row chunks, run
in-process (the local engine) or by a pool of model-holding actors on Ray Data (the Ray engine), with sharded,
resumable output.

See docs/scale.md.
"""
