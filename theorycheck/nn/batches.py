"""Masked batches in the two forms the transformer evaluates (SPEC §2.1, §2.2, §3.1, §4.0).

- :class:`CountBatch` (token-count form): exact for a position-free one-layer model. A query
  group ``(context g, query token a)`` attends over key tokens ``b`` with weights
  ``K[g, b] e^{S[a, b]} / sum_b' K[g, b'] e^{S[a, b']}``; ``O(E V1)`` instead of ``O(N^2)`` per document.
- :class:`PositionBatch` (position form, any depth): one row per position, or one row per
  distinct token of a document with its count as key weight (:meth:`CountBatch.to_positions`,
  exact without positional encodings).

Builders: :func:`count_batch`, :func:`position_batch`, :func:`merged_batch`, :func:`make_batch`
(the form a :class:`~theorycheck.nn.ModelConfig` asks for) and :func:`population_batch`
(the exact N -> inf population, contexts from :mod:`theorycheck.population._contexts`).
Losses are ``sum_e sum_x Y[e, x] l(o_e, x)`` over the loss entries ``e``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from .._memory import check_alloc
from .._validate import check_choice, check_int
from ..models import GeneralTopicModel, Masking
from ..population import population_contexts
from ._factored_kernels import KeyFactors
from .config import ModelConfig
from .layers import Groups

#: relative tolerance of ``K = key_coef @ key_basis`` checked by :class:`CountBatch`
_FACTOR_RTOL = 1e-12

__all__ = [
    "CountBatch",
    "PositionBatch",
    "count_batch",
    "position_batch",
    "merged_batch",
    "make_batch",
    "population_batch",
]


@dataclass
class CountBatch:
    """A batch in token-count form (exact for position-free one-layer models).

    ``G`` contexts (documents, or topic sets for the population) and ``E`` query groups. Build one with
    :func:`count_batch` (masked documents) or :func:`population_batch` (the exact population).

    Parameters
    ----------
    K : ndarray, shape (G, V1)
        Key weights per context: counts of each key token (or its N -> inf density).
    ctx : ndarray of int, shape (E,)
        Context of each query group (sorted).
    qtok : ndarray of int, shape (E,)
        Input token of the query.
    weight : ndarray, shape (E,)
        Total loss weight of the group (``sum(Y[e])``).
    Y : ndarray, shape (E, V1)
        Weighted target counts: the loss is ``sum_e sum_x Y[e, x] l(o_e, x)``.
    key_coef, key_basis : ndarray, shapes (G, r) and (r, V1), optional
        Non-negative factors with ``K = key_coef @ key_basis`` (e.g. the population's
        ``m_S = [theta_S, 1] [a Phi; c]``, SPEC §11.5): a one-layer, one-head model with the
        identity decoder then evaluates the batch by the fused route of
        ``theorycheck.nn._factored_kernels`` (:meth:`key_factors`), given also the target factors.
    target_coef, target_basis : ndarray, shapes (G, s) and (V1, s, V1), optional
        Non-negative factors of the targets, ``Y[e] = sum_t target_coef[ctx[e], t]
        target_basis[qtok[e], t]`` (the population's ``theta_S`` and per-topic targets).

    Other Parameters
    ----------------
    _P_ctx, _P_q : None
        Internal: the sparse context and query-token scatter matrices, built on first use; leave unset.

    Raises
    ------
    ValueError
        Only some of the four factor arrays given, or factors of the wrong shapes, negative, or not
        reproducing ``K`` and ``Y`` to ``1e-12`` relative.

    See Also
    --------
    count_batch : The batch of masked documents.
    population_batch : The exact N -> inf population as a ``CountBatch``.
    PositionBatch : The position form (any depth); :meth:`to_positions` converts.
    Transformer : Evaluates a ``CountBatch`` exactly (one layer).

    References
    ----------
    SPEC §3.1 (attention over token counts, exact without positional encodings), §2.2 (the loss), §4.0,
    §11.5 (the population and its factors).

    Examples
    --------
    >>> from theorycheck.nn import count_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])  # the original words
    >>> b = count_batch(inputs, selected, targets, V1=7)
    >>> b.K  # key counts per document
    array([[1., 2., 1., 0., 0., 0., 0.],
           [0., 0., 0., 2., 1., 0., 0.]])
    >>> b.ctx, b.qtok, b.weight  # query groups (document, query token) and their loss weights
    (array([0, 0, 1]), array([0, 1, 3]), array([0.25, 0.25, 0.5 ]))
    >>> b.to_positions().tokens  # one row per distinct token of a document
    array([[ 0,  1,  2],
           [ 3,  4, -1]])
    """

    K: np.ndarray
    ctx: np.ndarray
    qtok: np.ndarray
    weight: np.ndarray
    Y: np.ndarray
    key_coef: np.ndarray | None = field(default=None, repr=False)
    key_basis: np.ndarray | None = field(default=None, repr=False)
    target_coef: np.ndarray | None = field(default=None, repr=False)
    target_basis: np.ndarray | None = field(default=None, repr=False)
    _P_ctx: object = field(default=None, repr=False)
    _P_q: object = field(default=None, repr=False)

    def __post_init__(self):
        self._collapsed = None
        self._factors: KeyFactors | None = None
        given = [x is not None for x in (self.key_coef, self.key_basis, self.target_coef, self.target_basis)]
        if any(given) and not all(given):
            raise ValueError("pass all of key_coef, key_basis, target_coef, target_basis, or none")
        if all(given):
            _check_factors(self)

    @property
    def factored(self) -> bool:
        """Whether the batch carries key and target factors (:meth:`key_factors`)."""
        return self.key_coef is not None

    def key_factors(self) -> KeyFactors | None:
        """The index of the fused route (built on first use), or ``None`` without factors."""
        if self._factors is None and self.factored:
            self._factors = KeyFactors.build(
                self.key_coef, self.key_basis, self.ctx, self.qtok, self.Y, self.weight,
                self.target_coef, self.target_basis,
            )  # fmt: skip
        return self._factors

    def _scatter(self, which: str):
        """The sparse ``(G, E)`` context (``which="ctx"``) or ``(V1, E)`` query-token scatter matrix,
        built on first use (a merged batch that only goes to positions never needs them)."""
        attr = "_P_ctx" if which == "ctx" else "_P_q"
        if getattr(self, attr) is None:
            E = self.ctx.shape[0]
            idx, n = (self.ctx, self.K.shape[0]) if which == "ctx" else (self.qtok, self.K.shape[1])
            setattr(self, attr, sp.csr_matrix((np.ones(E), (idx, np.arange(E))), shape=(n, E)))
        return getattr(self, attr)

    @property
    def groups(self) -> Groups:
        """Query groups for the count path of ``theorycheck.nn.layers.attention_forward``."""
        return Groups(qtok=self.qtok, ctx=self.ctx, P_q=self._scatter("q"))

    def context_sum(self, A):
        """Rows of ``A`` (E, ...) summed per context, shape (G, ...)."""
        return self._scatter("ctx") @ A

    def token_sum(self, A):
        """Rows of ``A`` (E, ...) summed per query token, shape (V1, ...)."""
        return self._scatter("q") @ A

    def to_positions(self) -> PositionBatch:
        """The same batch as a :class:`PositionBatch` with one row per distinct token of a context.

        Row ``(g, j)`` holds a token ``t`` that is a key of context ``g`` (``K[g, t] > 0``) or a
        query of it; its key weight is ``K[g, t]``. Without positional encodings every position
        holding ``t`` in ``g`` has the representation of that row at every layer, so the loss and
        all gradients equal those of the position batch exactly, at any depth. The cost per
        context is ``O(U^2)`` for ``U`` distinct tokens instead of ``O(N^2)``.
        """
        G, V1 = self.K.shape
        present = self.K > 0
        present[self.ctx, self.qtok] = True
        g_idx, tok = np.nonzero(present)  # row-major: sorted by context, then token
        U = present.sum(axis=1)
        start = np.concatenate(([0], np.cumsum(U)[:-1]))
        pos = np.arange(g_idx.size) - start[g_idx]
        width = int(U.max()) if G else 0
        tokens = np.full((G, width), -1, dtype=np.int64)
        tokens[g_idx, pos] = tok
        key_weight = np.zeros((G, width))
        key_weight[g_idx, pos] = self.K[g_idx, tok]
        row = np.full((G, V1), -1, dtype=np.int64)
        row[g_idx, tok] = pos
        return PositionBatch(
            tokens=tokens,
            key_valid=key_weight > 0,
            qdoc=self.ctx.copy(),
            qpos=row[self.ctx, self.qtok],
            weight=self.weight,
            Y=self.Y,
            key_weight=key_weight,
        )

    def per_context(self):
        """``(Y_g, w_g)`` summed over the query groups of each context, shapes (G, V1), (G,).

        Used when the output does not depend on the query token (uniform attention, no residual):
        the loss is linear in the targets, so groups of one context merge exactly.
        """
        if self._collapsed is None:
            P = self._scatter("ctx")
            self._collapsed = (np.asarray(P @ self.Y), np.asarray(P @ self.weight))
        return self._collapsed


def _check_factors(b: CountBatch) -> None:
    """``K = key_coef @ key_basis`` and ``Y[e] = target_coef[ctx[e]] @ target_basis[qtok[e]]`` (shapes,
    signs, and values to ``_FACTOR_RTOL`` relative)."""
    G, V1 = b.K.shape
    U, R = np.asarray(b.key_coef, dtype=np.float64), np.asarray(b.key_basis, dtype=np.float64)
    Th, B = np.asarray(b.target_coef, dtype=np.float64), np.asarray(b.target_basis, dtype=np.float64)
    if U.ndim != 2 or R.ndim != 2 or U.shape[0] != G or R.shape != (U.shape[1], V1):
        raise ValueError(
            f"key_coef and key_basis must have shapes (G, r) and (r, V1) with (G, V1) = {(G, V1)}, "
            f"got {U.shape} and {R.shape}"
        )
    if Th.ndim != 2 or Th.shape[0] != G or B.shape != (V1, Th.shape[1], V1):
        raise ValueError(
            f"target_coef and target_basis must have shapes (G, s) and (V1, s, V1) with (G, V1) = {(G, V1)}, "
            f"got {Th.shape} and {B.shape}"
        )
    for name, M in (("key_coef", U), ("key_basis", R), ("target_coef", Th), ("target_basis", B)):
        if np.any(M < 0):
            raise ValueError(f"{name} must be non-negative")
    for name, approx, exact in (
        ("key_coef @ key_basis", U @ R, b.K),
        ("the factored targets", np.einsum("es,esx->ex", Th[b.ctx], B[b.qtok]), b.Y),
    ):
        err = float(np.max(np.abs(approx - exact), initial=0.0))
        if err > _FACTOR_RTOL * max(float(np.max(np.abs(exact), initial=0.0)), np.finfo(float).tiny):
            raise ValueError(f"{name} must equal the batch's arrays (to {_FACTOR_RTOL:g} relative), off by {err:.3g}")


@dataclass
class PositionBatch:
    """A batch in position form (general path, any depth).

    A row usually is one position of a document. Rows may also stand for several identical
    positions (``key_weight`` > 1, see :meth:`CountBatch.to_positions`): without positional
    encodings identical tokens of one document have identical representations at every layer,
    so merging them is exact. Build one with :func:`position_batch` (one row per position),
    :func:`merged_batch` or :meth:`CountBatch.to_positions` (one row per distinct token).

    Parameters
    ----------
    tokens : ndarray of int, shape (B, N)
        Input tokens (masked documents), ``-1`` for padding.
    key_valid : ndarray of bool, shape (B, N)
        Which positions may be attended to (not padding; not selected if ``mask_keys``).
    qdoc, qpos : ndarray of int, shape (E,)
        Document and position of each loss entry.
    weight : ndarray, shape (E,)
        Total loss weight of each entry (``sum(Y[e])``).
    Y : ndarray, shape (E, V1)
        Weighted targets as in :class:`CountBatch`.
    key_weight : ndarray, shape (B, N), optional
        Multiplicity of each row as a key (default: ``key_valid`` as 0/1).

    See Also
    --------
    position_batch : One row per position.
    merged_batch : One row per distinct token (exact, cheaper).
    CountBatch : The token-count form of one-layer models.

    References
    ----------
    SPEC §3.1, §3.2 (the model has no positional encoding, so identical tokens merge exactly).

    Examples
    --------
    A model of two layers gives the same loss on one row per position and on one row per distinct
    token:

    >>> from theorycheck.nn import ModelConfig, Transformer, merged_batch, position_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])  # the original words
    >>> pos = position_batch(inputs, selected, targets, V1=7)
    >>> merged = merged_batch(inputs, selected, targets, V1=7)
    >>> pos.tokens.shape, merged.tokens.shape, merged.key_w
    ((2, 4), (2, 3), array([[1., 2., 1.],
           [2., 1., 0.]]))
    >>> model = Transformer(ModelConfig(V1=7, n_layers=2, init_scale=0.5, count_based="never"), seed=0)
    >>> round(model.loss(pos), 10), round(model.loss(merged), 10)
    (3.6324234377, 3.6324234377)
    """

    tokens: np.ndarray
    key_valid: np.ndarray
    qdoc: np.ndarray
    qpos: np.ndarray
    weight: np.ndarray
    Y: np.ndarray
    key_weight: np.ndarray | None = None

    @property
    def key_w(self) -> np.ndarray:
        """Key multiplicities (B, N) as floats: ``key_weight`` if given, else ``key_valid`` as 0/1.

        A row of weight ``k`` acts exactly as ``k`` identical key positions: its softmax logit
        gets ``+ log k`` (weight 0: not a key)."""
        if self.key_weight is not None:
            return self.key_weight
        return self.key_valid.astype(np.float64)


def _entry_weights(selected, average):
    """Per-selected-position weight: per-document mean then batch mean, or token mean."""
    B = selected.shape[0]
    n_sel = selected.sum(axis=1)
    if average == "document":
        docs_with = np.count_nonzero(n_sel)
        w_doc = np.where(n_sel > 0, 1.0 / np.maximum(n_sel, 1), 0.0) / max(docs_with, 1)
        return w_doc
    if average == "token":
        return np.full(B, 1.0 / max(int(n_sel.sum()), 1))
    raise ValueError(f"average must be 'document' or 'token', got {average!r}")


#: ``(B + E) x V1`` arrays alive at once while a batch is built (counts and their float copy, ``Y`` and its copy):
#: the memory guard's estimate, ``B`` documents and ``E`` selected positions.
_BATCH_ARRAYS = 3


def _check_masked(inputs, selected, targets, V1, what: str = "batch"):
    V1 = check_int("V1", V1, low=2)
    inputs = np.asarray(inputs)
    selected = np.asarray(selected, dtype=bool)
    targets = np.asarray(targets)
    if inputs.ndim != 2 or selected.shape != inputs.shape or targets.shape != inputs.shape:
        raise ValueError(
            f"inputs, selected and targets must be 2-d arrays of one shape, got {inputs.shape}, "
            f"{selected.shape}, {targets.shape}"
        )
    rows = inputs.shape[0] + int(selected.sum())  # documents + selected positions: rows over the V1 tokens
    check_alloc(f"{what}: the batch's (documents + selected positions) x V1 arrays", (_BATCH_ARRAYS, rows, V1))
    if inputs.size and (inputs.max() >= V1 or inputs.min() < -1):
        raise ValueError(f"inputs must be tokens in [0, {V1 - 1}] or -1 (padding)")
    if np.any(selected & (inputs < 0)):
        raise ValueError("selected marks a padding position (inputs == -1)")
    tsel = targets[selected]
    if tsel.size and (tsel.min() < 1 or tsel.max() >= V1):
        raise ValueError(f"targets at selected positions must be words in [1, {V1 - 1}]")
    return inputs.astype(np.int64), selected, targets.astype(np.int64)


def count_batch(
    inputs: np.ndarray,
    selected: np.ndarray,
    targets: np.ndarray,
    V1: int,
    *,
    mask_keys: bool = False,
    average: str = "document",
) -> CountBatch:
    """Token-count form of a masked batch (see :class:`CountBatch`).

    Parameters
    ----------
    inputs : ndarray of int, shape (B, N)
        Masked input tokens (0 = [MASK]), ``-1`` padding.
    selected : ndarray of bool, shape (B, N)
        Positions in the loss.
    targets : ndarray of int, shape (B, N)
        Original tokens (used at selected positions).
    V1 : int
        Vocabulary size ``T v + 1``, ``V1 >= 2`` (token 0 is [MASK]).
    mask_keys : bool
        Count only unselected positions as keys (official code).
    average : {"document", "token"}
        ``"document"``: mean over the selected positions of each document, then over documents
        (theory); ``"token"``: mean over all selected positions of the batch (official code).

    Returns
    -------
    CountBatch
        Key counts ``K[b, t]`` of each document and one query group per (document, query token), with
        targets ``Y[e, x]`` = the summed weights of its selected positions whose original word is ``x``
        (the weights sum to 1 over the batch when a position is selected).

    Raises
    ------
    ValueError
        Arrays of different shapes or not 2-d, tokens outside ``[0, V1 - 1]`` (or ``-1``), a selected
        padding position, a target outside ``[1, V1 - 1]`` at a selected position, an unknown
        ``average``, or arrays beyond the memory guard.

    See Also
    --------
    position_batch : The position form of the same batch.
    make_batch : The form a model configuration asks for.
    theorycheck.sampling.mask_documents : Masked documents (``inputs``, ``selected``, ``targets``).

    References
    ----------
    SPEC §2.1 (masking), §2.2 (document and token averages), §3.1 (attention over token counts).

    Examples
    --------
    >>> from theorycheck.nn import count_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])  # the original words
    >>> b = count_batch(inputs, selected, targets, V1=7)
    >>> b.Y[:, 1:5]  # document 0: [MASK] was word 2, a kept 1; document 1: a selected 3
    array([[0.  , 0.25, 0.  , 0.  ],
           [0.25, 0.  , 0.  , 0.  ],
           [0.  , 0.  , 0.5 , 0.  ]])
    >>> count_batch(inputs, selected, targets, V1=7, average="token").weight  # three selected positions
    array([0.33333333, 0.33333333, 0.33333333])
    >>> count_batch(inputs, selected, targets, V1=7, mask_keys=True).K[0]  # selected positions are no keys
    array([0., 1., 1., 0., 0., 0., 0.])
    """
    check_choice("average", average, ("document", "token"))
    inputs, selected, targets = _check_masked(inputs, selected, targets, V1, "count_batch")
    B, N = inputs.shape
    keys = (inputs >= 0) & (~selected if mask_keys else True)
    k_doc, k_pos = np.nonzero(keys)
    K = np.bincount(k_doc * V1 + inputs[k_doc, k_pos], minlength=B * V1).reshape(B, V1).astype(np.float64)
    w_doc = _entry_weights(selected, average)
    d_idx, p_idx = np.nonzero(selected)
    q = inputs[d_idx, p_idx]
    tg = targets[d_idx, p_idx]
    code = d_idx * V1 + q
    uniq, inv = np.unique(code, return_inverse=True)
    E = uniq.size
    # Y[inv[i], tg[i]] += w: bincount adds in the order of i, as np.add.at did (the same sums)
    Y = np.bincount(inv * V1 + tg, weights=w_doc[d_idx], minlength=E * V1).astype(np.float64, copy=False)
    Y = Y.reshape(E, V1)  # (float64 also when nothing is selected: bincount of no index is int64)
    return CountBatch(
        K=K, ctx=(uniq // V1).astype(np.int64), qtok=(uniq % V1).astype(np.int64), weight=Y.sum(axis=1), Y=Y
    )


def merged_batch(
    inputs: np.ndarray,
    selected: np.ndarray,
    targets: np.ndarray,
    V1: int,
    *,
    mask_keys: bool = False,
    average: str = "document",
) -> PositionBatch:
    """:class:`PositionBatch` with one row per distinct token of each document (key weight =
    its count as a key); exact for any depth. Arguments as :func:`count_batch`.

    Parameters
    ----------
    inputs, selected, targets : ndarray, shape (B, N)
        Masked input tokens (``-1`` padding), positions in the loss, original tokens.
    V1 : int
        Vocabulary size, ``V1 >= 2``.
    mask_keys : bool
        Count only unselected positions as keys.
    average : {"document", "token"}
        How the loss averages over the selected positions.

    Returns
    -------
    PositionBatch
        ``count_batch(...).to_positions()``: ``U`` rows per document for its ``U`` distinct tokens,
        key weights = their counts.

    Raises
    ------
    ValueError
        As :func:`count_batch`.

    See Also
    --------
    count_batch : The token-count form (one layer).
    position_batch : One row per position (the reference).
    CountBatch.to_positions : The conversion.

    References
    ----------
    SPEC §3.2 (identical tokens of a document merge exactly).

    Examples
    --------
    >>> from theorycheck.nn import merged_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])  # the original words
    >>> b = merged_batch(inputs, selected, targets, V1=7)
    >>> b.tokens, b.key_w
    (array([[ 0,  1,  2],
           [ 3,  4, -1]]), array([[1., 2., 1.],
           [2., 1., 0.]]))
    """
    return count_batch(inputs, selected, targets, V1, mask_keys=mask_keys, average=average).to_positions()


def make_batch(
    cfg: ModelConfig,
    inputs: np.ndarray,
    selected: np.ndarray,
    targets: np.ndarray,
    *,
    average: str = "document",
) -> CountBatch | PositionBatch:
    """The batch form ``cfg.batch_form`` of a :class:`~theorycheck.nn.ModelConfig` asks for
    (``mask_keys`` from ``cfg``).

    Parameters
    ----------
    cfg : ModelConfig
        The model: its ``batch_form`` (``"count"``, ``"merged"`` or ``"position"``), ``V1`` and ``mask_keys``.
    inputs, selected, targets : ndarray, shape (B, N)
        Masked input tokens (``-1`` padding), positions in the loss, original tokens.
    average : {"document", "token"}
        How the loss averages over the selected positions.

    Returns
    -------
    CountBatch or PositionBatch
        :func:`count_batch`, :func:`merged_batch` or :func:`position_batch` of the arguments.

    Raises
    ------
    ValueError
        As :func:`count_batch`.

    See Also
    --------
    ModelConfig : Its ``count_based`` switch chooses the form.
    DataStream : Calls ``make_batch`` for every step.

    Examples
    --------
    >>> from theorycheck.nn import ModelConfig, make_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])  # the original words
    >>> for cfg in (ModelConfig(V1=7), ModelConfig(V1=7, n_layers=2), ModelConfig(V1=7, count_based="never")):
    ...     print(cfg.batch_form, type(make_batch(cfg, inputs, selected, targets)).__name__)
    count CountBatch
    merged PositionBatch
    position PositionBatch
    """
    builders: dict[str, Callable[..., CountBatch | PositionBatch]] = {
        "count": count_batch,
        "merged": merged_batch,
        "position": position_batch,
    }
    build = builders[cfg.batch_form]
    return build(inputs, selected, targets, cfg.V1, mask_keys=cfg.mask_keys, average=average)


def position_batch(
    inputs: np.ndarray,
    selected: np.ndarray,
    targets: np.ndarray,
    V1: int,
    *,
    mask_keys: bool = False,
    average: str = "document",
) -> PositionBatch:
    """Position form of a masked batch (see :class:`PositionBatch`); arguments as :func:`count_batch`.

    Parameters
    ----------
    inputs, selected, targets : ndarray, shape (B, N)
        Masked input tokens (``-1`` padding), positions in the loss, original tokens.
    V1 : int
        Vocabulary size, ``V1 >= 2``.
    mask_keys : bool
        Hide selected positions from the keys.
    average : {"document", "token"}
        How the loss averages over the selected positions.

    Returns
    -------
    PositionBatch
        One row per position; one loss entry per selected position, ``Y[e]`` = its weight on its
        original word.

    Raises
    ------
    ValueError
        As :func:`count_batch`.

    See Also
    --------
    count_batch : The token-count form (one layer).
    merged_batch : One row per distinct token (exact, cheaper).

    References
    ----------
    SPEC §2.1 (masking), §2.2 (the loss), §3.1 (the model).

    Examples
    --------
    A one-layer model gives the same loss on the position form and on token counts:

    >>> from theorycheck.nn import ModelConfig, Transformer, count_batch, position_batch
    >>> inputs = np.array([[1, 0, 2, 1], [3, 4, 3, -1]])  # V1 = 7: [MASK] = 0, words 1..6; -1 pads
    >>> selected = np.array([[False, True, False, True], [True, False, False, False]])
    >>> targets = np.array([[1, 2, 2, 1], [3, 4, 3, -1]])  # the original words
    >>> pos = position_batch(inputs, selected, targets, V1=7)
    >>> pos.qdoc, pos.qpos, pos.weight
    (array([0, 0, 1]), array([1, 3, 0]), array([0.25, 0.25, 0.5 ]))
    >>> model = Transformer(ModelConfig(V1=7, init_V="identity", init_scale=0.5), seed=0)
    >>> round(model.loss(pos), 12), round(model.loss(count_batch(inputs, selected, targets, V1=7)), 12)
    (0.502756368873, 0.502756368873)
    """
    check_choice("average", average, ("document", "token"))
    inputs, selected, targets = _check_masked(inputs, selected, targets, V1, "position_batch")
    key_valid = (inputs >= 0) & (~selected if mask_keys else True)
    w_doc = _entry_weights(selected, average)
    d_idx, p_idx = np.nonzero(selected)
    E = d_idx.size
    Y = np.zeros((E, V1))
    Y[np.arange(E), targets[d_idx, p_idx]] = w_doc[d_idx]
    return PositionBatch(
        tokens=inputs,
        key_valid=key_valid,
        qdoc=d_idx.astype(np.int64),
        qpos=p_idx.astype(np.int64),
        weight=Y.sum(axis=1),
        Y=Y,
    )


def population_batch(tm: GeneralTopicModel, mk: Masking, *, mask_keys: bool = False) -> CountBatch:
    """Exact infinite-document population (N -> inf) as a weighted :class:`CountBatch` (SPEC §4.0).

    Every ``tau``-subset ``S`` is one context with key density ``m_S`` (``p_S`` if ``mask_keys``);
    its query groups and target weights are those of
    :func:`theorycheck.population.population_contexts` (SPEC §2.1 masking). The loss of a one-layer
    model on this batch is its exact population MLM loss (for uniform attention,
    :func:`theorycheck.population.value_loss`).

    Parameters
    ----------
    tm : TopicModel or GeneralTopicModel
        The topic model (the prior ``"uniform-tau"``: a finite set of contexts).
    mk : Masking
        The masking.
    mask_keys : bool
        Hide selected positions from the keys (key density ``p_S`` instead of ``m_S``).

    Returns
    -------
    CountBatch
        One context per topic set, with key and target factors (the fused route of one-layer models);
        the weights sum to 1.

    See Also
    --------
    theorycheck.population.population_contexts : The contexts and weights.
    theorycheck.population.value_loss : The closed form of the loss under uniform attention.
    Transformer : Its loss on this batch is the population loss.

    References
    ----------
    SPEC §4.0 (the N -> inf reduction), §2.1 (masking), §11.4, §11.5 (general topic-word matrices).

    Examples
    --------
    >>> from theorycheck import Masking, TopicModel
    >>> from theorycheck.nn import population_batch
    >>> b = population_batch(TopicModel(T=3, v=2, tau=2), Masking())
    >>> b.K.shape, b.factored, round(float(b.weight.sum()), 12)  # C(3, 2) = 3 topic sets
    ((3, 7), True, 1.0)
    >>> mk = Masking()  # a = 1 - p_m (1 - p_c) shown, r = p_m p_r random, q = p_m (1 - p_c - p_r) [MASK]
    >>> a, r, q = 1 - mk.p_m * (1 - mk.p_c), mk.p_m * mk.p_r, mk.p_m * (1 - mk.p_c - mk.p_r)
    >>> np.allclose(b.K[0], [q] + [a / 4 + r / 6] * 4 + [r / 6] * 2)  # topic set {0, 1}: words 1..4
    True
    """
    pc = population_contexts(tm, mk, mask_keys=mask_keys)
    return CountBatch(
        K=pc.K, ctx=pc.ctx, qtok=pc.qtok, weight=pc.weight, Y=pc.Y, key_coef=pc.key_coef, key_basis=pc.key_basis,
        target_coef=pc.target_coef, target_basis=pc.target_basis,
    )  # fmt: skip
