"""The command line, ``python -m mlse``: the entry point and its commands (:func:`mlse.cli.main.main`)."""
