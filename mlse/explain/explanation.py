"""``explain_pair``: which word pairs make up a model's cosine for two sentences (integrated Jacobians).

Moeller, Nikolaev & Padó, "An Attribution Method for Siamese Encoders" (EMNLP 2023, arXiv 2310.05703). With ``f`` the
encoder (pooling and L2 normalisation included) and references ``r_a``, ``r_b`` (:mod:`mlse.explain.transformer`,
:mod:`mlse.explain.muse`):

    f(a)·f(b) = Σ_ij A_ij  +  [f(a)·f(r_b) + f(r_a)·f(b) − f(r_a)·f(r_b)]  +  residual

with ``A = P_a Q_bᵀ`` (:mod:`mlse.explain.integrate`); ``residual`` is the score minus the other two (the identity holds
by construction) and shrinks as ``steps`` grows. The reference terms split into ``Σ_i u_i + Σ_j v_j + c`` with
``u_i = P_a[i]·f(r_b)``, ``v_j = f(r_a)·Q_b[j]``, ``c = f(r_a)·f(r_b)``; they are large for e5 models (a big shared
direction), so deleting a word acts like its *word total* ``Σ_j A_ij + u_i = P_a[i]·f(b)``, not like one cell.

``layer=L`` attributes to the hidden states after L layers (cheaper, fewer steps, but each state already mixes in its
context); ``layer=0`` to the word-piece embeddings. ``precision="auto"`` runs the directional derivatives in bfloat16
where the CPU computes it natively; ``"float32"`` suits convergence studies (bfloat16 rounding floors the residual).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

import numpy as np

from mlse.encoders.hardware import device_capabilities
from mlse.errors import MlseError
from mlse.explain.backbones import attributable, is_backbone
from mlse.explain.integrate import endpoints, token_contributions
from mlse.explain.words import merge_words

# Gauss-Legendre with 12 points at half the model's depth; muse (ReLU kinks, token embeddings only) sets its own.
DEFAULT_STEPS = 12
DEFAULT_RULE = "gauss"
DEFAULT_DEPTH_SHARE = 0.5
PRECISIONS = ("auto", "float32", "bfloat16")
SCORE_TOLERANCE = 1e-3  # the forward written out here must give the model's own cosine within this


def default_layer(backbone) -> int:
    return int(round(getattr(backbone, "n_layers", 0) * DEFAULT_DEPTH_SHARE))


def attribution_precision(backbone, requested: str) -> str:
    """``"float32"`` or ``"bfloat16"``: the precision of ``backbone``'s directional derivatives for ``requested``
    (``auto``: bfloat16 where the CPU computes it natively and the backbone has hand-written derivatives)."""
    if requested not in PRECISIONS:
        raise MlseError(f"unknown precision {requested!r}; expected one of {', '.join(PRECISIONS)}")
    written_out = callable(getattr(backbone, "tail_jvp", None))
    if requested == "bfloat16" and not written_out:
        raise MlseError("this model's attribution runs in float32 only (its derivatives are taken by dual numbers)")
    if requested == "auto":
        return "bfloat16" if written_out and device_capabilities("cpu").native_bf16 else "float32"
    return requested


@dataclass(frozen=True)
class Explanation:
    """A token-pair attribution of one model's cosine for two sentences (see the module docstring).

    ``matrix`` [len(words1), len(words2)]: the attribution of each word pair (the sum over the word's pieces);
    entries flagged in ``special1``/``special2`` are special tokens ([CLS], </s> ...) or the model's text prefix.
    ``score = matrix.sum() + reference_terms + residual`` exactly. ``token_matrix`` is the same before merging pieces.
    """

    model: str
    sentence1: str
    sentence2: str
    words1: tuple[str, ...]
    words2: tuple[str, ...]
    matrix: np.ndarray
    score: float
    reference_terms: float
    residual: float
    steps: int
    layer: int
    seconds: float
    rule: str = DEFAULT_RULE
    precision: str = "float32"
    special1: tuple[bool, ...] = ()
    special2: tuple[bool, ...] = ()
    tokens1: tuple[str, ...] = ()
    tokens2: tuple[str, ...] = ()
    token_matrix: np.ndarray | None = field(default=None, repr=False)
    word_of_token1: tuple[int, ...] = ()
    word_of_token2: tuple[int, ...] = ()
    forward_score: float = float("nan")  # f(a)·f(b) by the forward pass differentiated here
    spans1: tuple[tuple[int, int] | None, ...] = ()  # each word's (start, end) in sentence1; None for special entries
    spans2: tuple[tuple[int, int] | None, ...] = ()
    notes: tuple[str, ...] = ()  # what a reader must know (a sentence cut at the model's maximum length)
    token_terms1: np.ndarray | None = field(default=None, repr=False)  # u_i per word of sentence 1 (see above)
    token_terms2: np.ndarray | None = field(default=None, repr=False)  # v_j per word of sentence 2
    reference_constant: float = float("nan")  # c = f(r_a)·f(r_b)
    # each sentence's integrated contributions, kept so that an edit of one sentence re-attributes only that one
    sides: tuple = field(default=(), repr=False, compare=False)

    @property
    def attributed(self) -> float:
        """The sum of the matrix: the part of the score the token pairs account for."""
        return float(self.matrix.sum())

    @property
    def special_terms(self) -> float:
        """The part of :attr:`attributed` in rows or columns of special tokens and the prefix."""
        s1 = np.asarray(self.special1 or [False] * len(self.words1), dtype=bool)
        s2 = np.asarray(self.special2 or [False] * len(self.words2), dtype=bool)
        return float(self.matrix[s1[:, None] | s2[None, :]].sum())

    @property
    def word_totals1(self) -> np.ndarray:
        """Everything each word of sentence 1 contributes: its pairs (row sum) plus its own term ``u_i``."""
        terms = self.token_terms1 if self.token_terms1 is not None else np.zeros(len(self.words1))
        return self.matrix.sum(axis=1) + terms

    @property
    def word_totals2(self) -> np.ndarray:
        """Everything each word of sentence 2 contributes: its pairs (column sum) plus its own term ``v_j``."""
        terms = self.token_terms2 if self.token_terms2 is not None else np.zeros(len(self.words2))
        return self.matrix.sum(axis=0) + terms

    @property
    def relative_residual(self) -> float:
        """|residual| / |score − reference terms|: the share of what should be attributed that is not."""
        return abs(self.residual) / max(abs(self.score - self.reference_terms), 1e-12)

    def top_cells(self, k: int = 5, *, include_special: bool = False) -> list[tuple[int, int, float]]:
        """The ``k`` word pairs with the largest |attribution| as (row, column, value), largest first."""
        matrix = np.array(self.matrix, dtype=np.float64)
        if not include_special:
            if self.special1:
                matrix[np.asarray(self.special1, dtype=bool), :] = np.nan
            if self.special2:
                matrix[:, np.asarray(self.special2, dtype=bool)] = np.nan
        flat = np.where(np.isnan(matrix), -1.0, np.abs(matrix)).ravel()
        order = [int(i) for i in np.argsort(-flat, kind="stable") if flat[i] >= 0][: max(int(k), 0)]
        return [(i // matrix.shape[1], i % matrix.shape[1], float(self.matrix.flat[i])) for i in order]

    def top_pairs(self, k: int = 5, *, include_special: bool = False) -> list[tuple[str, str, float]]:
        """The ``k`` word pairs with the largest |attribution| as (word1, word2, value), largest first; special
        tokens and the prefix are left out unless ``include_special``."""
        return [(self.words1[i], self.words2[j], v) for i, j, v in self.top_cells(k, include_special=include_special)]

    def top_words(self, k: int = 3) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
        """Per sentence, the ``k`` non-special words with the largest word total (everything the word contributes,
        :attr:`word_totals1` / :attr:`word_totals2`) as (word, total), largest first."""
        out = []
        for words, special, totals in (
            (self.words1, self.special1, self.word_totals1),
            (self.words2, self.special2, self.word_totals2),
        ):
            keep = [i for i in range(len(words)) if not (special and special[i])]
            ranked = sorted(keep, key=lambda i: -float(totals[i]))[: max(int(k), 0)]
            out.append([(words[i], float(totals[i])) for i in ranked])
        return out[0], out[1]

    def words_only(self) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray]:
        """(words1, words2, matrix) without the special entries: what a heatmap of the sentences shows."""
        keep1 = [i for i in range(len(self.words1)) if not (self.special1 and self.special1[i])]
        keep2 = [j for j in range(len(self.words2)) if not (self.special2 and self.special2[j])]
        return (
            tuple(self.words1[i] for i in keep1),
            tuple(self.words2[j] for j in keep2),
            self.matrix[np.ix_(keep1, keep2)],
        )

    def to_dict(self) -> dict:
        """Everything as JSON-ready values (the matrices as nested lists)."""
        return {
            "model": self.model,
            "sentence1": self.sentence1,
            "sentence2": self.sentence2,
            "score": self.score,
            "attributed": self.attributed,
            "reference_terms": self.reference_terms,
            "residual": self.residual,
            "relative_residual": self.relative_residual,
            "special_terms": self.special_terms,
            "forward_score": self.forward_score,
            "steps": self.steps,
            "layer": self.layer,
            "rule": self.rule,
            "precision": self.precision,
            "seconds": self.seconds,
            "words1": list(self.words1),
            "words2": list(self.words2),
            "special1": list(self.special1),
            "special2": list(self.special2),
            "spans1": [None if s is None else list(s) for s in self.spans1],
            "spans2": [None if s is None else list(s) for s in self.spans2],
            "matrix": np.asarray(self.matrix, dtype=float).tolist(),
            "tokens1": list(self.tokens1),
            "tokens2": list(self.tokens2),
            "word_of_token1": list(self.word_of_token1),
            "word_of_token2": list(self.word_of_token2),
            "token_matrix": None if self.token_matrix is None else np.asarray(self.token_matrix, dtype=float).tolist(),
            "top_pairs": [list(p) for p in self.top_pairs(10)],
            "notes": list(self.notes),
            "token_terms1": None if self.token_terms1 is None else np.asarray(self.token_terms1, dtype=float).tolist(),
            "token_terms2": None if self.token_terms2 is None else np.asarray(self.token_terms2, dtype=float).tolist(),
            "reference_constant": self.reference_constant,
            "word_totals1": self.word_totals1.tolist(),
            "word_totals2": self.word_totals2.tolist(),
        }


def check_sentences(*texts) -> None:
    """MlseError naming the first of ``texts`` (sentence 1, 2) that is not text or is empty."""
    for which, text in enumerate(texts, 1):
        if not isinstance(text, str):
            raise MlseError(f"sentence {which} must be text, got {type(text).__name__}")
        if not text.strip():
            raise MlseError(f"sentence {which} is empty: give two sentences to explain")


def _merge_matrix(word_of_token: tuple[int, ...], n_words: int) -> np.ndarray:
    merge = np.zeros((n_words, len(word_of_token)))  # [words, tokens]
    merge[list(word_of_token), np.arange(len(word_of_token))] = 1.0
    return merge


@dataclass(frozen=True)
class Side:
    """One sentence's attribution at one setting: what it read (``tokens``), each token's integrated contribution
    ``parts`` [T, d] to ``embedding − reference``, and the setting; it depends on that sentence alone (``reuse``)."""

    text: str
    tokens: object  # TokenInfo
    parts: np.ndarray
    embedding: np.ndarray
    reference: np.ndarray
    setting: tuple  # (layer, steps, rule, precision)


def _side(backbone, text: str, setting: tuple, reuse) -> Side:
    """``text``'s :class:`Side` at ``setting``: taken from ``reuse`` (an Explanation of the same backbone) when it
    holds it, else computed."""
    for kept in getattr(reuse, "sides", ()) or ():
        if kept.text == text and kept.setting == setting:
            return kept
    layer, steps, rule, precision = setting
    tokens = backbone.tokenize(text)
    tail = partial(backbone.tail, layer=layer)
    jvp = None
    if callable(getattr(backbone, "tail_jvp", None)):
        jvp = partial(backbone.tail_jvp, layer=layer, precision=precision)
    x, r = backbone.states(tokens, layer)
    parts = token_contributions(
        tail, x, r, steps=steps, rule=rule, width=int(getattr(backbone, "width", 0)), jvp=jvp
    )  # [T, d]
    fx, fr = endpoints(tail, x, r)
    return Side(text, tokens, parts, fx, fr, setting)


def explain_pair(
    model,
    sentence1: str,
    sentence2: str,
    *,
    steps: int | None = None,
    layer: int | None = None,
    rule: str | None = None,
    precision: str = "auto",
    reuse: Explanation | None = None,
) -> Explanation:
    """Attribute ``model``'s cosine of two sentences to their word pairs (see the module docstring).

    ``model``: a loaded model (``mlse.load_model``, the app's encoders) whose computing encoder is a torch
    sentence-transformers model or muse (others raise an MlseError saying why), or a backbone object.
    ``steps``: quadrature points (default :data:`DEFAULT_STEPS`, muse 64); ``layer``: 0 for the word-piece
    embeddings, up to the model's depth (default :func:`default_layer`); ``rule``: ``gauss`` or ``midpoint`` (a
    Riemann sum; default gauss, muse midpoint); ``precision``: ``auto``, ``float32`` or ``bfloat16`` (the
    directional derivatives' products, see the module docstring). ``reuse``: an explanation by the same model whose
    sentence(s) and setting recur here: their attribution is taken from it instead of recomputed (the same numbers;
    what :func:`mlse.explain.what_if` uses after an edit of one sentence).
    """
    check_sentences(sentence1, sentence2)
    backbone = attributable(model)
    steps = getattr(backbone, "default_steps", DEFAULT_STEPS) if steps is None else steps
    rule = getattr(backbone, "default_rule", DEFAULT_RULE) if rule is None else rule
    layer = default_layer(backbone) if layer is None else layer
    precision = attribution_precision(backbone, precision)
    if hasattr(backbone, "check_layer"):
        backbone.check_layer(layer)
    name = str(getattr(model, "name", getattr(backbone, "name", "model")))
    if reuse is not None and reuse.model != name:
        reuse = None  # another model's attributions are never mixed in
    started = time.perf_counter()
    sides = tuple(_side(backbone, text, (layer, steps, rule, precision), reuse) for text in (sentence1, sentence2))
    tokens = [side.tokens for side in sides]
    parts = [side.parts for side in sides]
    fa, ra, fb, rb = sides[0].embedding, sides[0].reference, sides[1].embedding, sides[1].reference
    forward_score = float(fa @ fb)
    score = forward_score if is_backbone(model) else model_cosine(model, sentence1, sentence2, forward_score)
    reference_terms = float(fa @ rb + ra @ fb - ra @ rb)
    token_matrix = parts[0] @ parts[1].T  # [T1, T2]
    words = [merge_words(tok) for tok in tokens]
    merges = [_merge_matrix(w.word_of_token, len(w.labels)) for w in words]
    matrix = merges[0] @ token_matrix @ merges[1].T  # [W1, W2]
    return Explanation(
        model=name,
        sentence1=sentence1,
        sentence2=sentence2,
        words1=words[0].labels,
        words2=words[1].labels,
        matrix=matrix,
        score=score,
        reference_terms=reference_terms,
        residual=float(score - token_matrix.sum() - reference_terms),
        steps=int(steps),
        layer=int(layer),
        seconds=time.perf_counter() - started,
        rule=rule,
        precision=precision,
        special1=words[0].special,
        special2=words[1].special,
        tokens1=tokens[0].pieces,
        tokens2=tokens[1].pieces,
        token_matrix=token_matrix,
        word_of_token1=words[0].word_of_token,
        word_of_token2=words[1].word_of_token,
        forward_score=forward_score,
        spans1=words[0].spans,
        spans2=words[1].spans,
        token_terms1=merges[0] @ (parts[0] @ rb),
        token_terms2=merges[1] @ (parts[1] @ ra),
        reference_constant=float(ra @ rb),
        notes=tuple(
            f"sentence {i} is longer than the model reads ({len(tok.ids)} tokens): its last words are not in the matrix"
            for i, (tok, w) in enumerate(zip(tokens, words), 1)
            if w.truncated
        ),
        sides=sides,
    )


def model_cosine(model, sentence1: str, sentence2: str, forward_score: float) -> float:
    """The model's own cosine of the pair (what the app shows), after checking that the forward pass differentiated
    here gives the same number."""
    emb = np.asarray(model.encode([sentence1, sentence2]), dtype=np.float64)  # [2, d], unit rows
    cosine = float(np.clip(emb[0] @ emb[1], -1.0, 1.0))
    if abs(cosine - forward_score) > SCORE_TOLERANCE:
        raise MlseError(
            f"{getattr(model, 'name', 'model')}: the forward pass used for attribution gives "
            f"{forward_score:.4f}, the model {cosine:.4f}; this model's architecture is not reproduced "
            "faithfully, so it is not explained"
        )
    return cosine
