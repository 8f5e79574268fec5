"""The topic model (SPEC §11): any topic-word matrix; overlapping, unequal and Zipfian topics.

:class:`GeneralTopicModel` is the one topic-model type every function accepts. It has the paper's
document law (a uniform random ``tau``-subset of topics, or Dirichlet topic proportions) and token
layout (0 = [MASK], words ``1 .. n_words``, ``V1 = n_words + 1``) with any row-stochastic ``phi``
of shape ``(T, n_words)``:

.. math::  p_\\theta = \\phi^\\top \\theta \\quad (\\text{over the words}),\\qquad
           \\theta = \\tfrac{1}{\\tau} 1_S \\ (\\text{uniform-}\\tau)\\ \\text{or}\\ \\theta \\sim
           \\mathrm{Dir}(\\alpha).

Everything the population theory needs from the document law is ``E[theta]`` and
``E[theta theta^T]`` (:meth:`GeneralTopicModel.theta_moments`), in closed form for both laws. The
paper's symmetric model is the subclass :class:`~theorycheck.models.TopicModel`.
"""

from __future__ import annotations

import math
from dataclasses import FrozenInstanceError

import numpy as np

from .._memory import check_alloc
from .._validate import as_array, check_choice, check_int, check_real
from .layout import MAX_TOKENS, PRIORS

__all__ = ["GeneralTopicModel", "ROW_SUM_TOL"]

#: Largest allowed ``|sum_w phi[t, w] - 1|`` for a row of ``phi``; rows are then renormalised exactly.
ROW_SUM_TOL = 1e-8


_PHI_ALTERNATIVE = (
    "TopicModel(T, v, tau) (the paper's disjoint uniform topics, O(1) storage) or a smaller T x n_words "
    "(a general model stores phi dense, SPEC §11)"
)


def _check_phi_size(what: str, T: int, n_words: int, copies: int = 2) -> None:
    """Refuse (the memory guard's ``ValueError``) a dense ``phi`` of shape ``(T, n_words)`` that cannot fit,
    counting ``copies`` float64 arrays of that shape alive at once, before anything is allocated."""
    check_alloc(f"{what}: phi", (copies, T, n_words), alternative=_PHI_ALTERNATIVE)


def _check_phi(phi) -> np.ndarray:
    if isinstance(phi, np.ndarray | list | tuple):
        arr = as_array("phi", phi)
    else:
        raise TypeError(f"phi must be an array of shape (T, n_words), got {type(phi).__name__}")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise TypeError(f"phi must be a real array, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError("phi must be real, got a complex array")
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"phi must have shape (T, n_words) with T >= 1 and n_words >= 1, got shape {arr.shape}")
    _check_phi_size("GeneralTopicModel", *arr.shape)  # the float64 copy and its renormalised copy
    arr = arr.astype(np.float64)
    if not np.all(np.isfinite(arr)):
        raise ValueError("phi must be finite (no NaN or inf entries)")
    if np.any(arr < 0):
        t, w = np.argwhere(arr < 0)[0]
        raise ValueError(f"phi must be non-negative, got phi[{t}, {w}] = {float(arr[t, w])!r}")
    dev = np.abs(arr.sum(axis=1) - 1.0)
    if np.any(dev > ROW_SUM_TOL):
        t = int(np.argmax(dev))
        raise ValueError(
            f"phi rows must sum to 1 within {ROW_SUM_TOL:g} (row-stochastic), "
            f"got row {t} summing to {float(arr[t].sum())!r}"
        )
    unused = np.flatnonzero(arr.sum(axis=0) <= 0)
    if unused.size:
        raise ValueError(
            f"phi: every word must have positive probability in some topic; words (1-based tokens) "
            f"{(unused[:5] + 1).tolist()} are in no topic"
        )
    # Renormalise only rows off by more than rounding, so that an already normalised phi (e.g. from
    # ``to_dict``) is kept bit for bit and construction is idempotent.
    sums = arr.sum(axis=1, keepdims=True)
    off = np.abs(sums - 1.0) > 8 * np.finfo(np.float64).eps * arr.shape[1]
    arr = np.where(off, arr / sums, arr)
    arr.setflags(write=False)
    return arr


def _check_alpha(alpha, T: int) -> np.ndarray:
    a = np.asarray(alpha, dtype=np.float64) if not isinstance(alpha, str) else None
    if a is None or a.ndim > 1 or (a.ndim == 1 and a.shape != (T,)):
        raise ValueError(f"alpha must be a real number > 0 or a vector of T={T} numbers > 0, got {alpha!r}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alpha must be > 0 and finite (Dirichlet concentration), got {alpha!r}")
    out = np.broadcast_to(a, (T,)).astype(np.float64)
    out.setflags(write=False)
    return out


class GeneralTopicModel:
    """Documents from any row-stochastic topic-word matrix ``phi`` (SPEC §11).

    Parameters
    ----------
    phi : array_like, shape (T, n_words)
        ``phi[t, w-1] = p(word w | topic t)``; non-negative, each row sums to 1 within
        :data:`ROW_SUM_TOL` (then renormalised), every word in some topic.
    prior : {"uniform-tau", "dirichlet"}
        ``"uniform-tau"``: ``theta = 1_S / tau`` for a uniformly random ``tau``-subset ``S``;
        ``"dirichlet"``: ``theta ~ Dirichlet(alpha)``.
    tau : int, optional
        ``1 <= tau <= T``; required iff ``prior="uniform-tau"``.
    alpha : float or array_like of shape (T,), optional
        Dirichlet concentration (symmetric or a vector), ``> 0``; required iff ``prior="dirichlet"``.

    Raises
    ------
    ValueError
        If ``phi`` is not 2-D, has a negative or non-finite entry, a row whose sum is off 1 by more
        than :data:`ROW_SUM_TOL`, or a word in no topic; if ``tau`` is missing or outside ``[1, T]``
        (uniform-tau) or ``alpha`` is missing or not ``> 0`` (Dirichlet), or the unused one is passed.
    TypeError
        If ``phi`` is not a real array.

    See Also
    --------
    TopicModel : The paper's symmetric special case, with closed forms (SPEC §1).
    Masking : The BERT-style masking applied to the documents (SPEC §2.1).
    theorycheck.population.moments : The population moments ``Sigma``, ``C`` of any topic model.

    Notes
    -----
    The document law enters the population theory only through ``E[theta]`` and
    ``E[theta theta^T]`` (:meth:`theta_moments`). Constructors for the families of SPEC §11:
    :meth:`overlapping`, :meth:`zipf`, :meth:`unequal`, :meth:`from_topic_model`, :meth:`from_lda`.

    References
    ----------
    SPEC §11.1 (the model), §11.2 (its moments).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, TopicModel
    >>> g = GeneralTopicModel.overlapping(T=4, v=3, eps=0.2, tau=2)
    >>> g.T, g.n_words, g.V1
    (4, 12, 13)
    >>> bool(np.allclose(g.phi.sum(axis=1), 1.0))  # rows of phi are word laws
    True

    Uniform-tau moments: ``E[theta_i^2] = 1/(tau T)`` and ``E[theta_i theta_j] = (tau-1)/(tau T (T-1))``:

    >>> m1, m2 = g.theta_moments()
    >>> m1
    array([0.25, 0.25, 0.25, 0.25])
    >>> round(float(m2[0, 0]), 12), round(float(m2[0, 1]), 12)
    (0.125, 0.041666666667)

    The paper's model as a plain general model (``phi`` materialised):

    >>> h = GeneralTopicModel.from_topic_model(TopicModel(T=2, v=2, tau=1))
    >>> h.phi
    array([[0.5, 0.5, 0. , 0. ],
           [0. , 0. , 0.5, 0.5]])
    """

    _phi: np.ndarray
    _prior: str
    _tau: int | None
    _alpha: np.ndarray | None

    def __init__(self, phi, prior: str = "uniform-tau", tau: int | None = None, alpha=None):
        check_choice("prior", prior, PRIORS)
        object.__setattr__(self, "_phi", _check_phi(phi))
        T = self._phi.shape[0]
        if prior == "uniform-tau":
            if tau is None:
                raise ValueError(f"tau is required for prior='uniform-tau' (an integer in [1, T={T}])")
            if alpha is not None:
                raise ValueError("alpha is only used with prior='dirichlet'; pass alpha=None")
            object.__setattr__(self, "_tau", check_int("tau", tau, low=1, high=T))
            object.__setattr__(self, "_alpha", None)
        else:
            if tau is not None:
                raise ValueError("tau is not used with prior='dirichlet'; pass tau=None")
            if alpha is None:
                raise ValueError("alpha is required for prior='dirichlet' (a number > 0 or a vector of T numbers > 0)")
            object.__setattr__(self, "_tau", None)
            object.__setattr__(self, "_alpha", _check_alpha(alpha, T))
        object.__setattr__(self, "_prior", prior)
        if self._phi.shape[1] + 1 > MAX_TOKENS:
            raise ValueError(f"n_words must be < 2**31 - 1, got {self._phi.shape[1]}")

    def __setattr__(self, name, value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}: {type(self).__name__} is immutable")

    # ----- attributes -----------------------------------------------------------------
    phi = property(lambda self: self._phi, doc="Topic-word matrix, shape ``(T, n_words)`` (read-only).")
    prior = property(lambda self: self._prior, doc="``'uniform-tau'`` or ``'dirichlet'``.")
    tau = property(lambda self: self._tau, doc="Topics per document (uniform-tau prior), else None.")
    alpha = property(lambda self: self._alpha, doc="Dirichlet concentration vector ``(T,)``, else None.")
    concentration = property(
        lambda self: self._alpha,
        doc="Dirichlet concentration as a vector ``(T,)`` for every model type (``alpha`` of the paper's "
        "model is a number), else None.",
    )
    T = property(lambda self: self._phi.shape[0], doc="Number of topics.")
    n_words = property(lambda self: self._phi.shape[1], doc="Number of words.")
    V1 = property(lambda self: self._phi.shape[1] + 1, doc="Number of tokens including [MASK].")

    @property
    def n_topic_sets(self):
        """``C(T, tau)`` for the uniform-tau prior (``inf`` for the Dirichlet prior)."""
        return math.inf if self._tau is None else math.comb(self.T, self._tau)

    def __repr__(self) -> str:
        law = f"tau={self._tau}" if self._tau is not None else f"alpha={np.asarray(self._alpha).tolist()}"
        return f"GeneralTopicModel(T={self.T}, n_words={self.n_words}, prior={self._prior!r}, {law})"

    def __eq__(self, other) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        same_alpha = (self._alpha is None and other._alpha is None) or (
            self._alpha is not None and other._alpha is not None and np.array_equal(self._alpha, other._alpha)
        )
        return (
            self._prior == other._prior
            and self._tau == other._tau
            and same_alpha
            and np.array_equal(self._phi, other._phi)
        )

    def __hash__(self) -> int:
        alpha = None if self._alpha is None else self._alpha.tobytes()
        return hash((self._phi.shape, self._phi.tobytes(), self._prior, self._tau, alpha))

    # ----- document law ---------------------------------------------------------------
    def theta_moments(self) -> tuple[np.ndarray, np.ndarray]:
        """``(E[theta], E[theta theta^T])`` of the document law, shapes ``(T,)`` and ``(T, T)``.

        Uniform-tau: ``E[theta] = 1/T``, ``E[theta_i^2] = 1/(tau T)``,
        ``E[theta_i theta_j] = (tau - 1)/(tau T (T - 1))`` (i != j).
        Dirichlet(alpha), ``alpha_0 = sum alpha``: ``E[theta] = alpha/alpha_0``,
        ``E[theta theta^T] = (alpha alpha^T + diag(alpha))/(alpha_0 (alpha_0 + 1))``.

        Returns
        -------
        m1 : ndarray, shape (T,)
            ``E[theta]``, summing to 1.
        M2 : ndarray, shape (T, T)
            ``E[theta theta^T]``, symmetric PSD, entries summing to 1 (SPEC §11.2).
        """
        T = self.T
        if self._tau is not None:  # uniform-tau (tau is set iff this prior; validated at construction)
            tau = self._tau
            off = (tau - 1) / (tau * T * (T - 1)) if T > 1 else 0.0
            M2 = np.full((T, T), off)
            np.fill_diagonal(M2, 1.0 / (tau * T))
            return np.full(T, 1.0 / T), M2
        a = self.concentration
        a0 = float(a.sum())
        return a / a0, (np.outer(a, a) + np.diag(a)) / (a0 * (a0 + 1.0))

    def topic_token_matrix(self) -> np.ndarray:
        """``Phi`` of shape ``(T, V1)``: row ``t`` is topic t's word law over tokens (column 0, [MASK], is 0).

        Returns
        -------
        Phi : ndarray, shape (T, V1)
            ``[0 | phi]``: rows sum to 1.
        """
        out = np.zeros((self.T, self.V1))
        out[:, 1:] = self.phi
        return out

    def word_density(self, theta) -> np.ndarray:
        """``p_theta = phi^T theta`` over tokens, shape ``(..., V1)`` (entry 0 is 0); ``theta``: ``(..., T)``.

        Parameters
        ----------
        theta : array_like, shape (..., T)
            Topic proportions (not checked to be a probability vector; any leading shape).

        Returns
        -------
        p : ndarray, shape (..., V1)
            The word law of each ``theta`` over tokens, ``p[..., 0] = 0``.

        Raises
        ------
        ValueError
            If the last dimension of ``theta`` is not ``T``.
        """
        th = np.asarray(theta, dtype=np.float64)
        if th.shape[-1:] != (self.T,):
            raise ValueError(f"theta must have last dimension T={self.T}, got shape {th.shape}")
        out = np.zeros(th.shape[:-1] + (self.V1,))
        out[..., 1:] = th @ self.phi
        return out

    # ----- word topics ----------------------------------------------------------------
    def dominant_topic(self) -> np.ndarray:
        """Each word's most likely topic ``argmax_t phi[t, w]`` (ties: the smallest t), shape ``(n_words,)``.

        Returns
        -------
        topics : ndarray of int, shape (n_words,)
            The dominant topic of words ``1 .. n_words`` (0-based topics).
        """
        return np.argmax(self.phi, axis=0)

    def token_topics(self) -> np.ndarray:
        """Dominant topic of every token ``0 .. V1-1`` (``-1`` for [MASK]); matches ``TopicModel.token_topics``.

        Returns
        -------
        topics : ndarray of int, shape (V1,)
            ``-1`` for [MASK], then :meth:`dominant_topic`.
        """
        return np.concatenate([[-1], self.dominant_topic()])

    # ----- constructors ----------------------------------------------------------------
    @classmethod
    def from_topic_model(cls, tm: GeneralTopicModel) -> GeneralTopicModel:
        """A plain :class:`GeneralTopicModel` with ``tm``'s ``phi`` and document law (``phi`` materialised).

        For the paper's model ``phi[t] = 1_{topic t} / v``: the generic routes then run on it, with
        none of the paper model's closed-form fast paths (the reference they are tested against).

        Parameters
        ----------
        tm : GeneralTopicModel or TopicModel
            The model to copy.

        Returns
        -------
        GeneralTopicModel
            Same ``phi``, prior, ``tau`` and concentration, of the exact type :class:`GeneralTopicModel`.

        Raises
        ------
        TypeError
            If ``tm`` is not a topic model.
        """
        if not isinstance(tm, GeneralTopicModel):
            raise TypeError(f"tm must be a TopicModel or a GeneralTopicModel, got {type(tm).__name__}")
        return GeneralTopicModel(tm.phi, prior=tm.prior, tau=tm.tau, alpha=tm.concentration)

    @classmethod
    def overlapping(
        cls, T: int, v: int, eps: float | None = None, *, n_shared: int | None = None, **law
    ) -> GeneralTopicModel:
        """Overlapping topics over ``T v`` words; exactly one of ``eps`` or ``n_shared``.

        ``eps`` in [0, 1]: each topic mixed with the uniform word law,
        ``phi = (1 - eps) phi_disjoint + eps 1/(T v)`` (``eps = 0`` is the paper's model).
        ``n_shared`` in [0, v]: topic ``t`` is uniform over its own ``v`` words and the first
        ``n_shared`` words of topic ``t + 1`` (cyclically; ``T >= 2``).
        ``law``: ``prior``, ``tau``, ``alpha`` as in the constructor.

        Parameters
        ----------
        T : int, T >= 1
            Number of topics.
        v : int, v >= 1
            Own words per topic (``T v`` words in all).
        eps : float, 0 <= eps <= 1, optional
            Weight of the uniform word law in every topic.
        n_shared : int, 0 <= n_shared <= v, optional
            Words shared with the next topic (needs ``T >= 2``).
        **law
            ``prior``, ``tau``, ``alpha``: the document law, as in the constructor.

        Returns
        -------
        GeneralTopicModel
            The model with the overlapping ``phi``.

        Raises
        ------
        ValueError
            If both or neither of ``eps`` and ``n_shared`` are given, a size or ``eps`` is out of range,
            or the document law is invalid.
        """
        T = check_int("T", T, low=1)
        v = check_int("v", v, low=1)
        if (eps is None) == (n_shared is None):
            raise ValueError("pass exactly one of eps (mixing with the uniform law) or n_shared (shared words)")
        _check_phi_size("GeneralTopicModel.overlapping", T, T * v, copies=4)
        base = np.kron(np.eye(T), np.full((1, v), 1.0 / v))
        if eps is not None:
            eps = check_real("eps", eps, low=0.0, high=1.0)
            return GeneralTopicModel((1.0 - eps) * base + eps / (T * v), **law)
        if T < 2:
            raise ValueError(f"n_shared needs T >= 2 topics (a neighbour to share with), got T={T}")
        n_shared = check_int("n_shared", n_shared, low=0, high=v)
        support = (base > 0).astype(np.float64)
        for t in range(T):
            nb = (t + 1) % T
            support[t, nb * v : nb * v + n_shared] = 1.0
        return GeneralTopicModel(support / support.sum(axis=1, keepdims=True), **law)

    @classmethod
    def zipf(cls, T: int, v: int, s: float, **law) -> GeneralTopicModel:
        """Disjoint topics of ``v`` words with Zipfian frequencies ``phi[t, k] ∝ (k + 1)^(-s)``, ``s >= 0``.

        Parameters
        ----------
        T : int, T >= 1
            Number of topics.
        v : int, v >= 1
            Words per topic.
        s : float, s >= 0
            Zipf exponent (``s = 0`` is the paper's uniform topics).
        **law
            ``prior``, ``tau``, ``alpha``: the document law, as in the constructor.

        Returns
        -------
        GeneralTopicModel
            The model with Zipfian topics.
        """
        T = check_int("T", T, low=1)
        v = check_int("v", v, low=1)
        s = check_real("s", s, low=0.0)
        _check_phi_size("GeneralTopicModel.zipf", T, T * v, copies=3)
        w = np.arange(1, v + 1, dtype=np.float64) ** (-s)
        return GeneralTopicModel(np.kron(np.eye(T), (w / w.sum())[None, :]), **law)

    @classmethod
    def unequal(cls, sizes, **law) -> GeneralTopicModel:
        """Disjoint topics of ``sizes[t] >= 1`` words each, uniform inside a topic.

        Parameters
        ----------
        sizes : sequence of int
            Words of each topic, each ``>= 1`` (``T = len(sizes)``, ``n_words = sum(sizes)``).
        **law
            ``prior``, ``tau``, ``alpha``: the document law, as in the constructor.

        Returns
        -------
        GeneralTopicModel
            The model with topics of unequal sizes.
        """
        sizes = [check_int(f"sizes[{i}]", s, low=1) for i, s in enumerate(np.atleast_1d(sizes).tolist())]
        if not sizes:
            raise ValueError("sizes must list at least one topic size")
        _check_phi_size("GeneralTopicModel.unequal", len(sizes), sum(sizes), copies=3)
        phi = np.zeros((len(sizes), sum(sizes)))
        start = 0
        for t, s in enumerate(sizes):
            phi[t, start : start + s] = 1.0 / s
            start += s
        return GeneralTopicModel(phi, **law)

    @classmethod
    def from_lda(cls, fit, *, prior: str = "dirichlet", tau=None, alpha=0.1, floor: float = 0.0) -> GeneralTopicModel:
        """From a fitted LDA: a :class:`theorycheck.realdata.topics.TopicFit`, an object with ``components_``
        (scikit-learn) or a ``(T, n_words)`` array of non-negative weights (rows are normalised).

        ``floor >= 0`` is added to every weight before normalising (keeps every word in some topic).
        Default law: Dirichlet(``alpha`` = 0.1), the paper's experiments.

        Parameters
        ----------
        fit : TopicFit, estimator with ``components_``, or array_like of shape (T, n_words)
            The fitted topic-word weights (finite, non-negative).
        prior : {"dirichlet", "uniform-tau"}
            The document law of the model.
        tau : int, optional
            Topics per document (``prior="uniform-tau"``).
        alpha : float or array_like of shape (T,), default 0.1
            Dirichlet concentration (``prior="dirichlet"``).
        floor : float, floor >= 0
            Added to every weight before normalising.

        Returns
        -------
        GeneralTopicModel
            ``phi`` the row-normalised weights.

        Raises
        ------
        ValueError
            If the weights are not a finite non-negative 2-D array, a topic has zero total weight, a word
            is in no topic, ``floor < 0``, or the document law is invalid.
        """
        weights = getattr(fit, "phi", None)
        if weights is None:
            weights = getattr(fit, "components_", fit)
        shape = np.shape(weights)
        if len(shape) == 2:  # the copies below (weights, + floor, / rows), then the constructor's two
            _check_phi_size("GeneralTopicModel.from_lda", shape[0], shape[1], copies=5)
        w = np.array(weights, dtype=np.float64)
        if w.ndim != 2:
            raise ValueError(f"fit must give a (T, n_words) topic-word matrix, got shape {w.shape}")
        floor = check_real("floor", floor, low=0.0)
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("fit: topic-word weights must be finite and non-negative")
        w = w + floor
        rows = w.sum(axis=1, keepdims=True)
        if np.any(rows <= 0):
            raise ValueError("fit: every topic needs a positive total weight")
        if prior == "dirichlet":
            return GeneralTopicModel(w / rows, prior=prior, alpha=alpha)
        return GeneralTopicModel(w / rows, prior=prior, tau=tau)

    # ----- serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict:
        """The model as a JSON-serialisable dict (``phi`` as nested lists), inverse of :meth:`from_dict`."""
        alpha = None if self._alpha is None else self._alpha.tolist()
        return {"phi": self._phi.tolist(), "prior": self._prior, "tau": self._tau, "alpha": alpha}

    @classmethod
    def from_dict(cls, d: dict) -> GeneralTopicModel:
        """The model of a dict from :meth:`to_dict` (construction is idempotent: ``phi`` is kept bit for bit)."""
        return cls(d["phi"], prior=d.get("prior", "uniform-tau"), tau=d.get("tau"), alpha=d.get("alpha"))
