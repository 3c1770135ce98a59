"""A sentence-transformers BERT / XLM-R model as an attributable backbone: its tokens, its states at any layer, and
the rest of its network from there to the unit sentence vector, as torch functions ``torch.func`` can transform.

The forward pass is written out from the model's own modules (the attribution runs it from a middle layer under
``vmap`` and forward-mode AD): BERT, RoBERTa and XLM-R with absolute positions, then Pooling, Dense and Normalize;
others are refused. The reference (Moeller et al.): sentence tokens replaced by padding, special tokens, prefix and
positions kept; at layer L > 0, that sequence's hidden state there.
"""

from __future__ import annotations

import math

from mlse.encoders.identity import text_prefix
from mlse.errors import MlseError
from mlse.explain.transformer_jvp import merge_heads, pool, pooling_modes, split_heads, tail_jvp
from mlse.explain.words import TokenInfo

ARCHITECTURES = ("bert", "roberta", "xlm-roberta")
POOLING = ("cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")


class TransformerBackbone:
    """``tokenize``, ``states``, ``tail`` and ``contextual`` of a loaded sentence-transformers model (see
    :mod:`mlse.explain.integrate` for how they are used)."""

    def __init__(self, st, *, name: str, tokenizer=None, prefix: str | None = None):
        self.name = name
        self.st = st
        self.hf = getattr(st[0], "auto_model", None) or getattr(st[0], "model", None)
        self._compact = tokenizer
        self.prefix = text_prefix(st) if prefix is None else prefix
        self._check()
        config = self.hf.config
        self.layers = list(self.hf.encoder.layer)
        self.n_layers = len(self.layers)
        self.heads = int(config.num_attention_heads)
        self.width = int(config.intermediate_size)
        self.pad_id = int(config.pad_token_id if config.pad_token_id is not None else 0)
        emb = self.hf.embeddings
        self._position_offset = int(getattr(emb, "padding_idx", self.pad_id)) + 1 if config.model_type != "bert" else 0

    @classmethod
    def from_encoder(cls, encoder) -> TransformerBackbone:
        """The backbone of a :class:`mlse.encoders.torch.SentenceTransformerEncoder` (its already loaded model)."""
        runner = encoder.compact_runner()
        if runner is not None:
            return cls(runner.st, name=encoder.name, tokenizer=runner.tokenizer, prefix=runner.prefix)
        return cls(encoder.model, name=encoder.name)

    # -- checks -----------------------------------------------------------------------------------------------------
    def _check(self) -> None:
        config = getattr(self.hf, "config", None)
        kind = getattr(config, "model_type", type(self.hf).__name__)
        if kind not in ARCHITECTURES or not hasattr(self.hf, "encoder") or not hasattr(self.hf, "embeddings"):
            raise MlseError(f"{self.name}: explaining needs a BERT, RoBERTa or XLM-R encoder; this one is {kind!r}")
        if getattr(config, "position_embedding_type", "absolute") not in (None, "absolute"):
            raise MlseError(f"{self.name}: position embeddings {config.position_embedding_type!r} are not supported")
        if getattr(config, "is_decoder", False) or getattr(config, "add_cross_attention", False):
            raise MlseError(f"{self.name}: a decoder cannot be explained here")
        for module in list(self.st)[1:]:
            kind = type(module).__name__
            if kind == "Pooling":
                if any(m not in POOLING for m in pooling_modes(module)) or not getattr(module, "include_prompt", True):
                    raise MlseError(
                        f"{self.name}: pooling {module.pooling_mode!r} (include_prompt="
                        f"{getattr(module, 'include_prompt', True)}) is not supported"
                    )
            elif kind not in ("Dense", "Normalize"):
                raise MlseError(f"{self.name}: the module {kind} after the transformer is not supported")

    # -- tokens -----------------------------------------------------------------------------------------------------
    def tokenize(self, text: str) -> TokenInfo:
        full = self.prefix + text
        if self._compact is not None:
            ids = list(self._compact.encode_ids([full])[0])
            n_bos, n_eos = len(self._compact.bos), len(self._compact.eos)
            special = [i < n_bos or i >= len(ids) - n_eos for i in range(len(ids))]
            pieces = self._sentencepiece_pieces(ids)
        else:
            prepare = getattr(self.st, "preprocess", None) or self.st.tokenize  # ST >= 6 names it preprocess
            ids = [int(i) for i in prepare([full])["input_ids"][0].tolist()]
            tok = self.st[0].tokenizer
            specials = set(tok.all_special_ids) - {tok.unk_token_id}
            special = [i in specials for i in ids]
            pieces = tok.convert_ids_to_tokens(ids)
        return TokenInfo(full, tuple(ids), tuple(pieces), tuple(special), len(self.prefix))

    def _sentencepiece_pieces(self, ids: list[int]) -> list[str]:
        model = getattr(self._compact, "_model", None)  # the compact tokenizer's sentencepiece model
        if model is None:
            raise MlseError(f"{self.name}: the token names of this tokenizer are not available")
        return [model.id_to_piece(i) for i in ids]

    def reference_ids(self, tokens: TokenInfo) -> list[int]:
        prefix = prefix_mask(tokens)
        return [i if (s or p) else self.pad_id for i, s, p in zip(tokens.ids, tokens.special, prefix)]

    # -- forward pieces ---------------------------------------------------------------------------------------------
    def word_embeddings(self, ids: list[int]):
        import torch  # lazy: only computing needs it

        with torch.no_grad():
            return self.hf.get_input_embeddings()(torch.tensor(ids, dtype=torch.long)).float()  # [T, H]

    def states(self, tokens: TokenInfo, layer: int):
        """(x, r) [T, H]: the sentence's and the reference's representation at ``layer`` (0: word embeddings)."""
        import torch  # lazy: only computing needs it

        self.check_layer(layer)
        both = torch.stack([self.word_embeddings(list(tokens.ids)), self.word_embeddings(self.reference_ids(tokens))])
        if layer > 0:
            both = self._hidden(both, layer)
        return both[0], both[1]

    def _hidden(self, words, layer: int):
        """Word embeddings [..., T, H] -> the hidden states after ``layer`` layers (no gradient)."""
        import torch  # lazy: only computing needs it

        with torch.no_grad():
            h = self.embed(words)
            for block in self.layers[:layer]:
                h = self.block(block, h)
        return h

    def check_layer(self, layer: int) -> None:
        if not isinstance(layer, int) or not 0 <= layer <= self.n_layers:
            raise MlseError(
                f"{self.name}: layer must be 0 (the word embeddings) to {self.n_layers} (the last layer's "
                f"output), got {layer!r}"
            )

    def embed(self, words, *, layer_norm: bool = True):
        """Word embeddings [..., T, H] -> the embedding layer's output (positions and token type added, LayerNorm;
        without ``layer_norm``: the LayerNorm's input, for :mod:`mlse.explain.transformer_jvp`)."""
        import torch  # lazy: only computing needs it

        emb = self.hf.embeddings
        n = words.shape[-2]
        positions = torch.arange(n) + self._position_offset
        h = words + emb.position_embeddings(positions) + emb.token_type_embeddings(torch.zeros(n, dtype=torch.long))
        return emb.LayerNorm(h) if layer_norm else h

    def block(self, block, h):
        """One transformer layer on [..., T, H] (a single unpadded sentence: no attention mask)."""
        import torch  # lazy: only computing needs it

        attention = block.attention.self
        q, k, v = (split_heads(m(h), self.heads) for m in (attention.query, attention.key, attention.value))
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h.shape[-1] // self.heads), dim=-1)
        context = merge_heads(weights @ v)  # [..., T, H]
        out = block.attention.output
        h = out.LayerNorm(out.dense(context) + h)
        inner = block.intermediate.intermediate_act_fn(block.intermediate.dense(h))
        return block.output.LayerNorm(block.output.dense(inner) + h)

    def head(self, tokens):
        """Token states after the last layer [S, T, H] -> unit sentence vectors [S, d]."""
        import torch  # lazy: only computing needs it

        out = tokens
        for module in list(self.st)[1:]:
            kind = type(module).__name__
            if kind == "Pooling":
                out = torch.cat([pool(tokens, m) for m in pooling_modes(module)], dim=-1)
            elif kind == "Dense":
                value = module.activation_function(module.linear(out))
                if getattr(module, "use_residual", False):
                    value = value + (out if module.in_features == module.out_features else module.residual(out))
                out = value
        return torch.nn.functional.normalize(out, dim=-1)

    def tail(self, z, layer: int):
        """[S, T, H] at ``layer`` -> unit sentence vectors [S, d]."""
        h = self.embed(z) if layer == 0 else z
        for block in self.layers[layer:]:
            h = self.block(block, h)
        return self.head(h)

    def tail_jvp(self, z, dz, layer: int, precision: str = "float32"):
        """Derivatives [C, S, d] of :meth:`tail` at ``z`` [S, T, H] along ``dz`` [C, S, T, H]
        (:mod:`mlse.explain.transformer_jvp`)."""
        return tail_jvp(self, z, dz, layer, precision)

    def contextual(self, tokens: TokenInfo):
        """The last layer's token states [T, H] of the sentence (no gradient)."""
        return self._hidden(self.word_embeddings(list(tokens.ids)), self.n_layers)


def prefix_mask(tokens: TokenInfo) -> list[bool]:
    """Which tokens belong to the model's text prefix: those before the first token of the sentence itself, found by
    tokenising the text (e5's prefix ends in a space, so its pieces never merge with the sentence's)."""
    if not tokens.prefix_chars:
        return [False] * len(tokens.ids)
    from mlse.explain.words import piece_spans

    spans = piece_spans(tokens.text, list(tokens.pieces), list(tokens.special))
    if spans is None:
        raise MlseError("could not find the model's text prefix among its tokens")
    return [s is not None and s[0] < tokens.prefix_chars for s in spans]
