"""Where sentence-transformers keeps its module classes and its transformers model, across its versions 5 and 6."""


def st_modules():
    """sentence-transformers' module classes (``Dense``, ``Pooling``, ...): their home moved in version 6."""
    try:
        from sentence_transformers.sentence_transformer import modules
    except ImportError:  # sentence-transformers 5
        from sentence_transformers import models as modules
    return modules


def set_hf_model(transformer, model) -> None:
    """Replace the transformers model inside a sentence-transformers ``Transformer`` module.

    sentence-transformers 6 keeps it in ``.model`` behind a read-only ``auto_model`` property; 5 in ``.auto_model``.
    """
    slot = "model" if isinstance(getattr(type(transformer), "auto_model", None), property) else "auto_model"
    setattr(transformer, slot, model)
