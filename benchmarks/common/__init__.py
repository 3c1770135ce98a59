"""The helpers the benchmark scripts share, imported from here (``from benchmarks.common import ...``); no script
imports another. One module per job:

- :mod:`~benchmarks.common.machine`: the CPU, its vector-instruction flags, core count and load, as every result
  records them; :func:`renice` for timed comparisons.
- :mod:`~benchmarks.common.output`: where a run writes (``--out``, a temporary folder for ``--quick``, else the
  benchmark's default) and the ``--quick`` help text.
- :mod:`~benchmarks.common.app`: ``python app.py`` as a process: its environment, start, stop, the wait for its
  page, its models prepared beforehand and the models it ticks for a new visitor.
- :mod:`~benchmarks.common.api`: calling the running app over HTTP (queued and unqueued endpoints, the JSON route).
- :mod:`~benchmarks.common.load`: a round of concurrent clients against the app, and its latency summary.
- :mod:`~benchmarks.common.pairs`: the STS Multi MT test pairs the app benchmarks send; the students study's
  training batches (:func:`study_batches`).
- :mod:`~benchmarks.common.explain`: the pair sample and the convergence target of the two explain benchmarks.
- :mod:`~benchmarks.common.encoders`: encoders as the speed benchmarks time them.
- :mod:`~benchmarks.common.sts_scores`: a fine-tuned model's test Spearman per pair and their table.
- :mod:`~benchmarks.common.artifacts`: the sha256 of the files a result was computed from, and which changed since.

Importing it loads neither torch nor the app (tests/project/test_package_layout.py); what needs them imports
them when called.
"""

from benchmarks.common.api import JSON_PATH, ApiCaller, ApiError, direct_call, json_call
from benchmarks.common.app import (
    PAGE_TIMEOUT_S,
    app_env,
    default_models,
    prepare_models,
    start_app,
    stop_app,
    wait_for_page,
)
from benchmarks.common.encoders import Quiet, make_encoder, onnx_versions
from benchmarks.common.explain import EXPLAIN_LANG_PAIRS, EXPLAIN_TOLERANCE, cross_pairs
from benchmarks.common.load import BUSY_PAUSE_S, PROBE_EVERY_S, latency_summary, probe_queue, run_round
from benchmarks.common.machine import ISA_FLAGS, cpu_name, isa_flags, machine, renice
from benchmarks.common.output import QUICK_HELP, output_dir, output_file
from benchmarks.common.pairs import APP_LANG_PAIRS, distinct_pairs, study_batches, test_pairs
from benchmarks.common.sts_scores import TEST_PAIRS, spearman_table, test_scores
from mlse.serving.http_server import free_port

__all__ = [
    "APP_LANG_PAIRS",
    "BUSY_PAUSE_S",
    "EXPLAIN_LANG_PAIRS",
    "EXPLAIN_TOLERANCE",
    "ISA_FLAGS",
    "JSON_PATH",
    "PAGE_TIMEOUT_S",
    "PROBE_EVERY_S",
    "QUICK_HELP",
    "TEST_PAIRS",
    "ApiCaller",
    "ApiError",
    "Quiet",
    "app_env",
    "cpu_name",
    "cross_pairs",
    "default_models",
    "direct_call",
    "distinct_pairs",
    "study_batches",
    "free_port",
    "isa_flags",
    "json_call",
    "latency_summary",
    "machine",
    "make_encoder",
    "onnx_versions",
    "output_dir",
    "output_file",
    "prepare_models",
    "probe_queue",
    "renice",
    "run_round",
    "spearman_table",
    "start_app",
    "stop_app",
    "test_pairs",
    "test_scores",
    "wait_for_page",
]
