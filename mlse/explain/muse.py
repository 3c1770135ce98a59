"""``muse`` (USE multilingual v3) as an attributable backbone, through mlse's torch port of its network.

USE has no transformer layers (:mod:`mlse.encoders.use_torch`), so attribution is to the token embeddings only
(layer 0), differentiating the port's :func:`~mlse.encoders.use_torch.network` as it is. The reference: every token
replaced by ``<unk>`` (no padding token), BOS and EOS kept; an all-zero embedding would make the first LayerNorm's
derivative explode. The alignment view's contextual vectors are the per-token features just before pooling.
"""

from __future__ import annotations

import numpy as np

from mlse.errors import MlseError
from mlse.explain.words import TokenInfo


class UseBackbone:
    """``tokenize``, ``states``, ``tail`` and ``contextual`` of a :class:`mlse.encoders.use.UseEncoder` on torch."""

    n_layers = 0
    prefix = ""
    # ReLUs make the path's Jacobian piecewise constant, so the quadrature converges like 1/steps whatever the rule
    default_steps = 64
    default_rule = "midpoint"

    def __init__(self, encoder):
        from mlse.encoders.use_torch import UseTorchModel

        self.name = encoder.name
        encoder.token_ids(["."])  # loads the network (no reference to the encoder is kept: see backbones._made)
        model = getattr(encoder, "_model", None)
        if not isinstance(model, UseTorchModel):
            model = UseTorchModel(encoder.path / "weights.npz", table=encoder.table_file())
        self.model = model
        self.width = 1280
        import sentencepiece  # lazy: the package's tokenizer library

        self._sp = sentencepiece.SentencePieceProcessor(model_file=str(encoder.path / "sp.model"))

    def tokenize(self, text: str) -> TokenInfo:
        ids = [int(i) for i in self._sp.encode(text, out_type=int, add_bos=True, add_eos=True)]  # as UseEncoder
        pieces = [self._sp.id_to_piece(i) for i in ids]
        special = [t == 0 or t == len(ids) - 1 for t in range(len(ids))]  # BOS ... EOS
        return TokenInfo(text, tuple(ids), tuple(pieces), tuple(special), 0)

    def check_layer(self, layer: int) -> None:
        if layer != 0:
            raise MlseError(f"{self.name} has no layers to attribute from (a deep averaging network): use layer 0")

    def _embed(self, ids: list[int]):
        import torch  # lazy: only computing needs it

        m = self.model
        ids = np.asarray(ids, dtype=np.int64)
        chunk = torch.from_numpy(ids % 17)
        rows = torch.from_numpy(np.ascontiguousarray(m.table[ids])).float()
        return rows * m.scale[chunk, None] + m.lo[chunk, None]  # [T, 512] dequantised embeddings

    def states(self, tokens: TokenInfo, layer: int):
        self.check_layer(layer)
        unk = self._sp.unk_id()
        return self._embed(list(tokens.ids)), self._embed([i if s else unk for i, s in zip(tokens.ids, tokens.special)])

    def tail(self, z, layer: int = 0, capture: list | None = None):
        """[S, T, 512] token embeddings -> unit sentence vectors [S, d] (``capture``: gets the per-token features)."""
        import torch  # lazy: only computing needs it

        from mlse.encoders.use_torch import network, sentence_matrix, window_index

        copies, n = z.shape[0], z.shape[1]
        lengths = np.full(copies, n, dtype=np.int64)
        window = torch.from_numpy(window_index(lengths))
        owner = torch.from_numpy(sentence_matrix(lengths))  # [S, S*T]

        def pool(feats):  # [S*T, F] -> [S, F], as a product (vmap-friendly, unlike index_add_)
            if capture is not None:
                capture.append(feats)
            return owner @ feats

        flens = torch.full((copies, 1), float(n))
        return network(self.model.weights, z.reshape(copies * n, z.shape[-1]), window, pool, flens)

    def contextual(self, tokens: TokenInfo):
        import torch  # lazy: only computing needs it

        x, _ = self.states(tokens, 0)
        captured: list = []
        with torch.no_grad():
            self.tail(x.unsqueeze(0), 0, captured)
        return captured[0]  # [T, 1280]
