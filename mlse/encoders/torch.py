"""The torch runtime: a sentence-transformers model loaded from a local folder on first use.

No torch import at module level: an encoder knows its identity (name + weight hash) without it, so a run whose
embeddings are all cached never loads the model. Memory: the word-embedding table is read row by row
(:func:`rows_from_file`; a memory map keeps touched rows' neighbours resident), and when the folder's tokenizer has
the pipeline :mod:`mlse.encoders.compact_tokenizer` reproduces, encoding goes through :class:`CompactRunner` (the
same ids from sentencepiece in exactly the batches ``SentenceTransformer.encode`` makes, so the vectors are
bit-identical). ``.model`` is still the ordinary ``SentenceTransformer``, loaded only when asked for.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import numpy as np

from mlse.encoders.catalogue import materialise
from mlse.encoders.compact_tokenizer import compact_tokenizer, padded
from mlse.encoders.identity import folder_fingerprint, text_prefix
from mlse.encoders.progress import progress_bar, show_bar
from mlse.encoders.protocol import Scoring
from mlse.encoders.registry import ModelSpec
from mlse.encoders.rows import RowFile, file_embedding, word_embedding
from mlse.encoders.text_cut import cut_groups, cut_texts, model_max_tokens, tokenizer_chars_per_token
from mlse.errors import ModelNotFoundError


class SentenceTransformerEncoder(Scoring):
    """A sentence-transformers model loaded from a local folder on first use."""

    def __init__(self, spec: ModelSpec, *, device: str | None = None, max_seq_length: int | None = None):
        self.spec = spec
        self.name = spec.name
        self.device = device
        self.max_seq_length = max_seq_length
        self._model = None
        self._runner: CompactRunner | None = None
        self._runner_checked = False
        self._chars_per_token: int | None = None
        self._lock = threading.Lock()

    @cached_property
    def path(self) -> Path:
        return materialise(self.spec)

    @cached_property
    def identity(self) -> str:
        suffix = f"@{self.max_seq_length}" if self.max_seq_length else ""
        return f"{self.name}:{folder_fingerprint(self.path)[:16]}{suffix}"

    @property
    def model(self):
        """The underlying ``SentenceTransformer`` (imports torch on first access), its word embeddings read from the
        weights file as needed (:func:`rows_from_file`)."""
        if self._model is None:
            model = load_sentence_transformer(self.path, device=self.device)
            rows_from_file(model, self.path)
            if self.max_seq_length:
                model.max_seq_length = self.max_seq_length
            self._model = model
        return self._model

    @property
    def dim(self) -> int:
        runner = self.compact_runner()
        st = runner.st if runner is not None else self.model
        return int(st.get_embedding_dimension())

    def compact_runner(self) -> CompactRunner | None:
        """The low-memory way to encode (see the module docstring), or None when this folder does not allow it."""
        with self._lock:
            if not self._runner_checked:
                self._runner = CompactRunner.load(self.path, device=self.device, max_seq_length=self.max_seq_length)
                self._runner_checked = True
            return self._runner

    def encode(
        self, texts: Sequence[str], *, normalize: bool = True, batch_size: int = 64, show_progress: bool | None = None
    ) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        show = show_bar(show_progress, len(texts))
        runner = self.compact_runner()
        st = runner.st if runner is not None else self.model
        max_tokens = runner.tokenizer.max_length if runner is not None else model_max_tokens(st)
        cut = cut_texts(texts, max_tokens, lambda: self.chars_per_token(runner))

        def run(part: list[str]) -> np.ndarray:  # [len(part), d]
            if runner is not None:
                return runner.encode(part, normalize=normalize, batch_size=batch_size, show_progress=show)
            emb = st.encode(part, batch_size=batch_size, show_progress_bar=show, normalize_embeddings=normalize)
            return np.ascontiguousarray(emb, dtype=np.float32)

        groups = cut_groups(texts, cut)  # texts cut to the full input apart: short ones are not padded to them
        if len(groups) == 1:
            return run(cut)
        out = np.empty((len(texts), int(st.get_embedding_dimension())), dtype=np.float32)  # [n, d]
        for rows in groups:
            out[rows] = run([cut[i] for i in rows])
        return out

    def chars_per_token(self, runner: CompactRunner | None = None) -> int:
        """``C`` of :mod:`mlse.encoders.text_cut` for this model's tokenizer (read once, when a long text comes)."""
        if self._chars_per_token is None:
            tokenizer = runner.tokenizer if runner is not None else self.model[0].tokenizer
            self._chars_per_token = tokenizer_chars_per_token(tokenizer)
        return self._chars_per_token


def load_sentence_transformer(path: Path, *, device: str | None = None, stand_in_tokenizer: bool = False):
    """Load a local folder with sentence-transformers; a folder without modules.json gets mean pooling.
    ``stand_in_tokenizer``: a four-token tokenizer instead of the folder's, for a caller that tokenises by itself
    (:class:`CompactRunner`); such a model's own ``encode`` gives nonsense."""
    from sentence_transformers import SentenceTransformer  # lazy: imports torch (seconds, hundreds of MB)

    device = default_device() if device is None else device
    extra = {}
    if stand_in_tokenizer:
        # with these, transformers parses no tokenizer.json (for e5, ~130 MB of added tokens alone)
        from tokenizers import Tokenizer, models  # lazy: only loading a model needs it

        stand_in = Tokenizer(models.WordLevel({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}, unk_token="<unk>"))
        extra = {"processor_kwargs": {"tokenizer_object": stand_in, "added_tokens_decoder": {}}}
    try:
        # Never run code shipped inside a model folder: a hub model (or a folder a user points at) could carry any.
        return SentenceTransformer(str(path), device=device, local_files_only=True, trust_remote_code=False, **extra)
    except (OSError, ValueError) as exc:
        raise ModelNotFoundError(f"could not load the model folder {path}: {exc}") from None


def default_device() -> str:
    """cuda when a GPU is present, else cpu (``MLSE_DEVICE`` overrides)."""
    if os.environ.get("MLSE_DEVICE"):
        return os.environ["MLSE_DEVICE"]
    import torch  # lazy: only asked when no device is set

    return "cuda" if torch.cuda.is_available() else "cpu"


class CompactRunner:
    """A sentence-transformers model fed token ids from a :class:`~mlse.encoders.compact_tokenizer.CompactTokenizer`.
    ``encode`` repeats ``SentenceTransformer.encode`` step for step (same sort, batches, prompt, normalisation), so
    the vectors are the same to the bit."""

    def __init__(self, st, tokenizer, prefix: str):
        self.st, self.tokenizer, self.prefix = st, tokenizer, prefix
        self.pad_id = int(st[0].tokenizer.pad_token_id if st[0].tokenizer.pad_token_id is not None else 0)

    @classmethod
    def load(cls, path: Path, *, device: str | None = None, max_seq_length: int | None = None) -> CompactRunner | None:
        """The runner for the model folder at ``path``, or None when its tokenizer or modules do not allow one."""
        tokenizer_file = _first_module_dir(path) / "tokenizer.json"
        tokenizer = compact_tokenizer(tokenizer_file) if tokenizer_file.is_file() else None
        if tokenizer is None:
            return None
        st = load_sentence_transformer(path, device=device, stand_in_tokenizer=True)
        rows_from_file(st, path)
        if max_seq_length:
            st.max_seq_length = max_seq_length
        first = st[0]
        if (
            type(first).__name__ != "Transformer"
            or getattr(first, "can_flatten_inputs", False)
            or any(getattr(m, "include_prompt", True) is False for m in st)
        ):  # flattened (unpadded) batches or prompt-excluding pooling: encode() does more than this runner does
            return None
        tokenizer.max_length = int(st.max_seq_length)  # truncation as the model's own tokenizer call does it
        return cls(st, tokenizer, text_prefix(st))

    def encode(self, texts: list[str], *, normalize: bool, batch_size: int, show_progress: bool) -> np.ndarray:
        import torch  # lazy: torch costs seconds to import; only computing needs it

        order = np.argsort([-len(t) for t in texts])  # as sentence-transformers sorts (same call, same ties)
        out = np.empty((len(texts), int(self.st.get_embedding_dimension())), dtype=np.float32)  # [n, d]
        self.st.eval()
        with torch.inference_mode(), progress_bar(len(texts), "encode", show_progress) as bar:
            for start in range(0, len(texts), batch_size):
                rows = order[start : start + batch_size]
                ids, mask = padded(self.tokenizer.encode_ids([self.prefix + texts[i] for i in rows]), self.pad_id)
                features = {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask)}  # [b, T]
                features = {k: v.to(self.st.device) for k, v in features.items()}
                emb = self.st(features)["sentence_embedding"]  # [b, d]
                if normalize:
                    emb = torch.nn.functional.normalize(emb, p=2, dim=1)
                out[rows] = emb.float().cpu().numpy()
                bar.update(len(rows))
        return out


def rows_from_file(st, path: Path) -> bool:
    """Replace the word-embedding layer of an inference model by one that reads its rows from the safetensors file
    (:mod:`mlse.encoders.rows`); True when replaced. Only on the CPU, only when the file holds the layer's values
    (checked on three rows); never for training (the layer has no weight)."""
    model, embedding = word_embedding(st)
    weight = getattr(embedding, "weight", None)
    weights_file = _first_module_dir(path) / "model.safetensors"
    if weight is None or weight.dim() != 2 or weight.device.type != "cpu" or not weights_file.is_file():
        return False
    name = next((n for n, p in model.named_parameters() if p is weight), None)
    rows = _rows_named(weights_file, name, tuple(weight.shape)) if name else None
    if rows is None or rows.dtype != np.dtype(str(weight.dtype).removeprefix("torch.")):
        return False
    probe = np.array([0, weight.shape[0] // 2, weight.shape[0] - 1])
    if not np.array_equal(rows[probe], weight.detach()[probe].numpy()):
        return False
    model.set_input_embeddings(file_embedding(rows, embedding))
    return True


def _rows_named(weights_file: Path, name: str, shape: tuple[int, int]) -> RowFile | None:
    """The tensor saved under ``name`` or under a prefixed form of it (``bert.`` + name ...)."""
    header = RowFile.safetensors_header(weights_file)[1]  # tensor names (and "__metadata__", which no name matches)
    key = name if name in header else next((k for k in header if k.endswith("." + name)), None)
    rows = RowFile.from_safetensors(weights_file, key) if key else None
    return rows if rows is not None and rows.shape == shape else None


def _first_module_dir(path: Path) -> Path:
    """The folder of a sentence-transformers model's first module (the transformer and its tokenizer)."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        return path / str(modules[0].get("path", ""))
    except (OSError, ValueError, IndexError, KeyError, AttributeError):
        return path
