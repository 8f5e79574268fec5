"""Configuration: the topic model, the masking scheme and the token layout.

Token layout (DESIGN.md, fixed): index 0 is ``[MASK]``; words are ``1 .. T*v``;
``topic(w) = (w - 1) // v`` (0-based topics); vectors over tokens have length
``V1 = T*v + 1``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from ._validate import check_choice, check_int, check_prob, check_real

__all__ = ["TopicModel", "Masking", "PRIORS", "check_models", "require_symmetric", "token_topic"]

PRIORS = ("uniform-tau", "dirichlet")


def token_topic(tokens, v: int) -> np.ndarray:
    """Topic (0-based) of each token of the fixed layout, ``(w - 1) // v``; ``-1`` for [MASK] (token 0).

    The one place the layout's topic rule is written; :meth:`TopicModel.topic_of` calls it. For
    callers that know only ``v`` (matrices indexed by tokens). No validation (hot paths).
    """
    tokens = np.asarray(tokens)
    return np.where(tokens == 0, -1, (tokens - 1) // v)


@dataclass(frozen=True)
class TopicModel:
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

    Examples
    --------
    >>> tm = TopicModel(T=10, v=10, tau=3)
    >>> tm.V1
    101
    """

    T: int
    v: int
    tau: int | None = None
    prior: str = "uniform-tau"
    alpha: float | None = None

    def __post_init__(self):
        check_choice("prior", self.prior, PRIORS)
        object.__setattr__(self, "T", check_int("T", self.T, low=1))
        object.__setattr__(self, "v", check_int("v", self.v, low=1))
        if self.prior == "uniform-tau":
            if self.tau is None:
                raise ValueError("tau is required for prior='uniform-tau' (an integer in [1, T])")
            object.__setattr__(self, "tau", check_int("tau", self.tau, low=1, high=self.T))
            if self.alpha is not None:
                raise ValueError("alpha is only used with prior='dirichlet'; pass alpha=None")
        else:
            if self.tau is not None:
                raise ValueError("tau is not used with prior='dirichlet'; pass tau=None")
            if self.alpha is None:
                raise ValueError("alpha is required for prior='dirichlet' (a real number > 0)")
            object.__setattr__(self, "alpha", check_real("alpha", self.alpha, low=0.0, low_open=True))
        if self.T * self.v + 1 > 2**31 - 1:
            raise ValueError(f"T*v must be < 2**31 - 1, got T*v = {self.T * self.v}")

    # ----- token layout -------------------------------------------------------------
    @property
    def n_words(self) -> int:
        """Number of words ``T*v``."""
        return self.T * self.v

    @property
    def V1(self) -> int:
        """Number of tokens including [MASK]: ``T*v + 1``."""
        return self.T * self.v + 1

    def topic_of(self, tokens) -> np.ndarray:
        """Topic (0-based) of each token; ``-1`` for [MASK] (token 0)."""
        return token_topic(tokens, self.v)

    def token_topics(self) -> np.ndarray:
        """Topic of every token ``0 .. V1-1`` (``-1`` for [MASK]); shape ``(V1,)``."""
        return self.topic_of(np.arange(self.V1))

    def topic_indicator(self) -> np.ndarray:
        """Matrix whose column ``t`` is ``1_t`` (indicator of topic t's words); ``(V1, T)``."""
        ind = np.zeros((self.V1, self.T))
        ind[1:, :] = np.kron(np.eye(self.T), np.ones((self.v, 1)))
        return ind

    # ----- document law moments (SPEC §1.1, §4.0) ------------------------------
    @property
    def n_topic_sets(self) -> int:
        """``C(T, tau)`` for the uniform-tau prior (``inf`` for the Dirichlet prior)."""
        if self.prior == "dirichlet":
            return math.inf
        return math.comb(self.T, self.tau)

    def pair_moments(self) -> tuple[float, float]:
        """``(s_same, s_diff)`` with ``E[p(w) p(w')]`` for two words of the same topic / of different topics.

        Uniform-tau: ``s_same = 1/(tau T v^2)``, ``s_diff = kappa/(tau T v^2)``,
        ``kappa = (tau-1)/(T-1)`` (SPEC §1.1). Dirichlet:
        ``E[theta_t^2] = (alpha+1)/(T (T alpha + 1))``, ``E[theta_t theta_s] = alpha/(T (T alpha+1))``,
        each divided by ``v^2``. ``s_same`` also covers ``w = w'``.
        """
        T, v = self.T, self.v
        if self.prior == "uniform-tau":
            tau = self.tau
            kappa = (tau - 1) / (T - 1) if T > 1 else 0.0
            return 1.0 / (tau * T * v * v), kappa / (tau * T * v * v)
        al = self.alpha
        return (al + 1) / (T * (T * al + 1) * v * v), al / (T * (T * al + 1) * v * v)

    def expected_p_norm2(self) -> float:
        """``E ||p||^2``: ``1/(tau v)`` (uniform-tau) or ``(alpha+1)/((T alpha+1) v)`` (Dirichlet)."""
        return self.pair_moments()[0] * self.T * self.v

    def min_value_loss(self) -> float:
        """Minimum population squared MLM loss under uniform attention, ``1 - E||p||^2`` (SPEC §4.0)."""
        return 1.0 - self.expected_p_norm2()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TopicModel:
        return cls(**d)


@dataclass(frozen=True)
class Masking:
    """BERT-style masking (SPEC §2.1).

    Each position is selected with probability ``p_m``; a selected position keeps its word
    with probability ``p_c``, becomes a uniformly random *word* (``1 .. T*v``) with probability
    ``p_r``, and becomes [MASK] otherwise. Defaults 0.15 / 0.1 / 0.1.

    Derived fractions of positions in the masked document (N -> inf):
    ``a = 1 - p_m (1 - p_c)`` (original word shown), ``r = p_m p_r`` (random word),
    ``q = p_m (1 - p_c - p_r)`` ([MASK]); ``a + r + q = 1``.
    """

    p_m: float = 0.15
    p_c: float = 0.1
    p_r: float = 0.1

    def __post_init__(self):
        object.__setattr__(self, "p_m", check_prob("p_m", self.p_m))
        object.__setattr__(self, "p_c", check_prob("p_c", self.p_c))
        object.__setattr__(self, "p_r", check_prob("p_r", self.p_r))
        if self.p_c + self.p_r > 1.0 + 1e-12:
            raise ValueError(
                f"p_c + p_r must be <= 1 (they are probabilities of disjoint events), "
                f"got p_c={self.p_c!r}, p_r={self.p_r!r}"
            )

    @property
    def p_mask(self) -> float:
        """Probability that a selected position shows [MASK]: ``1 - p_c - p_r``."""
        return max(0.0, 1.0 - self.p_c - self.p_r)

    @property
    def a(self) -> float:
        """Fraction of positions showing their original word, ``1 - p_m (1 - p_c)``."""
        return 1.0 - self.p_m * (1.0 - self.p_c)

    @property
    def r(self) -> float:
        """Fraction of positions showing a uniformly random word, ``p_m p_r``."""
        return self.p_m * self.p_r

    @property
    def q(self) -> float:
        """Fraction of positions showing [MASK], ``p_m (1 - p_c - p_r)``."""
        return self.p_m * self.p_mask

    def require_masked_positions(self, where: str = "this loss") -> None:
        """Raise unless ``p_m > 0`` (a loss over selected positions needs some)."""
        if self.p_m <= 0.0:
            raise ValueError(f"p_m must be > 0 for {where} (the loss averages over selected positions), got p_m=0")

    def require_informative(self, where: str = "this computation") -> None:
        """Raise unless ``p_m > 0`` and ``a > 0`` (some original words remain visible)."""
        self.require_masked_positions(where)
        if self.a <= 0.0:
            raise ValueError(
                f"{where} needs a = 1 - p_m (1 - p_c) > 0 (some original words visible); "
                f"got p_m={self.p_m!r}, p_c={self.p_c!r}"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Masking:
        return cls(**d)


_NOT_GIVEN = object()


def check_models(tm, mk=_NOT_GIVEN) -> None:
    """Raise ``TypeError`` unless ``tm`` is a :class:`TopicModel` and ``mk`` (when passed, even
    as ``None``) is a :class:`Masking`."""
    if not isinstance(tm, TopicModel):
        if type(tm).__name__ == "GeneralTopicModel":
            raise TypeError(
                "tm: this function needs the paper's symmetric TopicModel (disjoint topics of v equally likely "
                "words); a GeneralTopicModel is accepted by moments, value_loss, embedding_loss, attention_loss, "
                "the solvers' generic methods, sampling and training (SPEC §11)"
            )
        raise TypeError(f"tm must be a TopicModel, got {type(tm).__name__}")
    if mk is not _NOT_GIVEN and not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")


def require_symmetric(tm, where: str, alternative: str) -> None:
    """Raise ``TypeError`` if ``tm`` is a ``GeneralTopicModel``: ``where`` is symmetric-only by nature
    (closed forms of the paper's disjoint, equal, uniform topics); the message names ``alternative``,
    the function to use for any topic-word matrix (SPEC §11). Other types are left to
    :func:`check_models`."""
    from .general_model import is_general  # lazy: general_model imports this module

    if is_general(tm):
        raise TypeError(
            f"{where} needs the paper's symmetric TopicModel (disjoint topics of v equally likely words), "
            f"got a GeneralTopicModel; for any topic-word matrix use {alternative} (SPEC §11)"
        )
