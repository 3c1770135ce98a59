"""The benchmarks: scripts that time and measure the library and the app, each run from the repository root as
``python -m benchmarks.NAME`` (``--help`` for its options, ``--quick`` for a seconds-long run on tiny inputs).

Each script is one module with a ``main``; the helpers they share live in :mod:`benchmarks.common`, and a script's own
helper modules are named ``benchmarks/_<script>_*.py``. No script imports another
(tests/project/test_package_layout.py).
"""
