"""The paper's symmetric topic model (SPEC §1): ``T`` disjoint topics of ``v`` equally likely words.

It is the special case of :class:`~theorycheck.models.GeneralTopicModel` with
``phi[t] = 1_{topic t} / v``, stored as O(1) numbers: ``phi`` is materialised (and checked against
the memory guard) only when a generic route asks for it, so ``T = 1000, v = 100`` works through the
closed forms. The closed forms themselves are registered, one per formula, as fast paths of the
generic functions (``functools.singledispatch`` on this class).
"""

from __future__ import annotations

import math
from functools import cached_property

import numpy as np

from .._memory import check_alloc
from .._validate import check_choice, check_int, check_real
from .general import GeneralTopicModel
from .layout import MAX_TOKENS, PRIORS, token_topic

__all__ = ["TopicModel"]

_FIELDS = ("T", "v", "tau", "prior", "alpha")
#: where each field is stored (``alpha``, a number here, is kept apart from the base's vector ``_alpha``)
_STORE = {"T": "_T", "v": "_v", "tau": "_tau", "prior": "_prior", "alpha": "_alpha_value"}


class TopicModel(GeneralTopicModel):
    """The topic model generating documents (SPEC §1).

    Parameters
    ----------
    T : int
        Number of topics, ``T >= 1``.
    v : int
        Words per topic, ``v >= 1``. Topics have disjoint supports.
    tau : int, optional
        Topics per document for ``prior="uniform-tau"``: a document draws a uniformly random
        ``tau``-subset ``S`` of the topics (``1 <= tau <= T``) and its words i.i.d. uniformly
        from the ``tau*v`` words of ``S``, so ``p_S(w) = 1/(tau v)`` on ``W_S``.
        Must be omitted (``None``) for the Dirichlet prior.
    prior : {"uniform-tau", "dirichlet"}
        ``"dirichlet"`` is the LDA variant of the paper's experiments: topic proportions
        ``theta ~ Dirichlet(alpha 1_T)``, ``p_theta(w) = theta_{t(w)} / v`` (SPEC §1.2).
    alpha : float, optional
        Symmetric Dirichlet concentration, ``alpha > 0``; required iff ``prior="dirichlet"``.
        (:attr:`concentration` is the same as a vector of length ``T``, as for any topic model.)

    Raises
    ------
    ValueError
        If ``T`` or ``v`` is not an integer ``>= 1``, ``tau`` is missing or outside ``[1, T]`` for the
        uniform-tau prior, ``alpha`` is missing or not ``> 0`` for the Dirichlet prior, the unused one of
        ``tau`` / ``alpha`` is passed, ``prior`` is not one of the two laws, or ``T*v + 1 > 2**31 - 1``.
    TypeError
        If ``T``, ``v`` or ``tau`` is not an integer (booleans and non-integral floats are rejected) or
        ``alpha`` is not a real number.

    See Also
    --------
    GeneralTopicModel : The base class, any row-stochastic topic-word matrix (SPEC §11).
    Masking : The BERT-style masking applied to the documents (SPEC §2.1).
    theorycheck.population.value_loss : The population loss of a value matrix under this model.
    theorycheck.sampling.sample_documents : Draws finite documents from the model.

    Notes
    -----
    Immutable, compared and hashed by its five fields. A subclass of
    :class:`~theorycheck.models.GeneralTopicModel`: every function that accepts a topic model
    accepts it, and uses its closed forms where they exist. Tokens: 0 is [MASK], words are
    ``1 .. T*v``, word ``w`` has topic ``(w - 1) // v`` (0-based), ``V1 = T*v + 1``.

    References
    ----------
    SPEC §1.1 (the uniform-tau model and its moments), §1.2 (the Dirichlet variant); Li, Li and
    Risteski, *How Do Transformers Learn Topic Structure: Towards a Mechanistic Understanding*,
    ICML 2023, arXiv:2303.04245, Section 3.

    Examples
    --------
    >>> from theorycheck import TopicModel
    >>> tm = TopicModel(T=4, v=3, tau=2)
    >>> tm.V1, tm.n_words, tm.n_topic_sets
    (13, 12, 6)
    >>> tm.topic_of([0, 1, 3, 4, 12])  # [MASK] has topic -1
    array([-1,  0,  0,  1,  3])

    ``E||p||^2 = 1/(tau v)`` and the uniform-attention minimum of the squared loss is ``1 - 1/(tau v)``:

    >>> round(tm.expected_p_norm2(), 12), round(tm.min_value_loss(), 12)
    (0.166666666667, 0.833333333333)

    The Dirichlet variant: ``E||p||^2 = (alpha + 1)/((T alpha + 1) v)``, here ``1.5/9``:

    >>> round(TopicModel(T=4, v=3, prior="dirichlet", alpha=0.5).expected_p_norm2(), 12), round(1.5 / 9, 12)
    (0.166666666667, 0.166666666667)
    """

    _T: int
    _v: int
    _alpha_value: float | None

    def __init__(self, T: int, v: int, tau: int | None = None, prior: str = "uniform-tau", alpha: float | None = None):
        check_choice("prior", prior, PRIORS)
        T = check_int("T", T, low=1)
        v = check_int("v", v, low=1)
        if prior == "uniform-tau":
            if tau is None:
                raise ValueError("tau is required for prior='uniform-tau' (an integer in [1, T])")
            tau = check_int("tau", tau, low=1, high=T)
            if alpha is not None:
                raise ValueError("alpha is only used with prior='dirichlet'; pass alpha=None")
        else:
            if tau is not None:
                raise ValueError("tau is not used with prior='dirichlet'; pass tau=None")
            if alpha is None:
                raise ValueError("alpha is required for prior='dirichlet' (a real number > 0)")
            alpha = check_real("alpha", alpha, low=0.0, low_open=True)
        if T * v + 1 > MAX_TOKENS:
            raise ValueError(f"T*v must be < 2**31 - 1, got T*v = {T * v}")
        for name, value in zip(_FIELDS, (T, v, tau, prior, alpha)):
            object.__setattr__(self, _STORE[name], value)

    # ----- fields and the token layout ---------------------------------------------------
    T = property(lambda self: self._T, doc="Number of topics.")
    v = property(lambda self: self._v, doc="Words per topic.")
    alpha = property(lambda self: self._alpha_value, doc="Symmetric Dirichlet concentration (a number), else None.")

    @property
    def concentration(self) -> np.ndarray | None:
        """Dirichlet concentration as a vector ``alpha 1_T`` (``None`` for the uniform-tau prior)."""
        if self._alpha_value is None:
            return None
        out = np.full(self._T, float(self._alpha_value))
        out.setflags(write=False)
        return out

    @property
    def n_words(self) -> int:
        """Number of words ``T*v``."""
        return self._T * self._v

    @property
    def V1(self) -> int:
        """Number of tokens including [MASK]: ``T*v + 1``."""
        return self._T * self._v + 1

    @cached_property
    def phi(self) -> np.ndarray:
        """``phi = kron(I_T, 1_v^T / v)``, shape ``(T, T*v)`` (read-only), materialised on first use.

        The closed forms never need it; a generic route that does is checked against the memory
        guard first (``theorycheck._memory.check_alloc``).
        """
        check_alloc(
            "TopicModel.phi (the generic route's topic-word matrix)",
            (self._T, self.n_words),
            alternative="the paper model's closed forms (population and solvers use them by default)",
        )
        out = np.kron(np.eye(self._T), np.full((1, self._v), 1.0 / self._v))
        out.setflags(write=False)
        return out

    def topic_of(self, tokens) -> np.ndarray:
        """Topic (0-based) of each token; ``-1`` for [MASK] (token 0).

        Parameters
        ----------
        tokens : array_like of int
            Tokens ``0 .. T*v`` (not checked), any shape.

        Returns
        -------
        topics : ndarray of int, same shape as ``tokens``
            ``(w - 1) // v`` for a word, ``-1`` for [MASK] (:func:`~theorycheck.models.token_topic`).
        """
        return token_topic(tokens, self._v)

    def token_topics(self) -> np.ndarray:
        """Topic of every token ``0 .. V1-1`` (``-1`` for [MASK]); shape ``(V1,)``.

        Returns
        -------
        topics : ndarray of int, shape (V1,)
            ``topic_of(arange(V1))``.
        """
        return self.topic_of(np.arange(self.V1))

    def dominant_topic(self) -> np.ndarray:
        """Topic of every word ``1 .. T*v`` (its only topic), shape ``(n_words,)``.

        Returns
        -------
        topics : ndarray of int, shape (n_words,)
            ``(w - 1) // v`` for ``w = 1 .. T*v``.
        """
        return np.arange(self.n_words) // self._v

    def topic_indicator(self) -> np.ndarray:
        """Matrix whose column ``t`` is ``1_t`` (indicator of topic t's words); ``(V1, T)``.

        Returns
        -------
        ind : ndarray of float64, shape (V1, T)
            ``ind[w, t] = 1`` iff word ``w`` is in topic ``t``; row 0 ([MASK]) is zero.
        """
        ind = np.zeros((self.V1, self._T))
        ind[1:, :] = np.kron(np.eye(self._T), np.ones((self._v, 1)))
        return ind

    # ----- document law moments (SPEC §1.1, §4.0) ------------------------------
    @property
    def n_topic_sets(self):
        """``C(T, tau)`` for the uniform-tau prior (``inf`` for the Dirichlet prior)."""
        if self._tau is None:  # Dirichlet
            return math.inf
        return math.comb(self._T, self._tau)

    def pair_moments(self) -> tuple[float, float]:
        """``(s_same, s_diff)`` with ``E[p(w) p(w')]`` for two words of the same topic / of different topics.

        Uniform-tau: ``s_same = 1/(tau T v^2)``, ``s_diff = kappa/(tau T v^2)``,
        ``kappa = (tau-1)/(T-1)`` (SPEC §1.1). Dirichlet:
        ``E[theta_t^2] = (alpha+1)/(T (T alpha + 1))``, ``E[theta_t theta_s] = alpha/(T (T alpha+1))``,
        each divided by ``v^2``. ``s_same`` also covers ``w = w'``.

        Returns
        -------
        s_same : float
            ``E[p(w) p(w')]`` for two words of one topic (including ``w = w'``).
        s_diff : float
            ``E[p(w) p(w')]`` for words of different topics.
        """
        T, v = self._T, self._v
        if self._tau is not None:  # uniform-tau (tau is set iff this prior; validated at construction)
            tau = self._tau
            kappa = (tau - 1) / (T - 1) if T > 1 else 0.0
            return 1.0 / (tau * T * v * v), kappa / (tau * T * v * v)
        al = self._alpha_value
        assert al is not None  # the Dirichlet prior always has alpha (validated at construction)
        return (al + 1) / (T * (T * al + 1) * v * v), al / (T * (T * al + 1) * v * v)

    def expected_p_norm2(self) -> float:
        """``E ||p||^2``: ``1/(tau v)`` (uniform-tau) or ``(alpha+1)/((T alpha+1) v)`` (Dirichlet).

        Returns
        -------
        float
            The expected squared norm of the document's word law (SPEC §1.1, §1.2).
        """
        return self.pair_moments()[0] * self._T * self._v

    def min_value_loss(self) -> float:
        """Minimum population squared MLM loss under uniform attention, ``1 - E||p||^2`` (SPEC §4.0).

        Returns
        -------
        float
            ``1 - E||p||^2``, the minimum of :func:`theorycheck.population.value_loss` for any
            masking with ``a > 0``.
        """
        return 1.0 - self.expected_p_norm2()

    # ----- value semantics -----------------------------------------------------------
    def _fields(self) -> tuple:
        return tuple(getattr(self, _STORE[f]) for f in _FIELDS)

    def __eq__(self, other) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return "TopicModel(" + ", ".join(f"{f}={value!r}" for f, value in zip(_FIELDS, self._fields())) + ")"

    def __reduce__(self):
        return (type(self), self._fields())

    def to_dict(self) -> dict:
        """The five fields as a dict (JSON-serialisable), inverse of :meth:`from_dict`."""
        return dict(zip(_FIELDS, self._fields()))

    @classmethod
    def from_dict(cls, d: dict) -> TopicModel:
        """The model of a dict from :meth:`to_dict` (validated like the constructor)."""
        return cls(**d)
