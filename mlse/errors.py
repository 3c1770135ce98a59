"""User-facing errors: the CLI and the app print their message in one line, never a traceback."""


class MlseError(Exception):
    """Base class for errors caused by the user's input or environment (not by a bug)."""


class DataError(MlseError):
    """A data file or directory is missing or malformed; the message names the file (and line)."""


class ModelNotFoundError(MlseError):
    """A model name could not be resolved or loaded; the message says what is available."""
