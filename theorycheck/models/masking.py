"""BERT-style masking (SPEC §2.1)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .._validate import check_prob

__all__ = ["Masking"]


@dataclass(frozen=True)
class Masking:
    """BERT-style masking (SPEC §2.1).

    Each position is selected with probability ``p_m``; a selected position keeps its word
    with probability ``p_c``, becomes a uniformly random *word* (``1 .. n_words``) with probability
    ``p_r``, and becomes [MASK] otherwise. Defaults 0.15 / 0.1 / 0.1.

    Derived fractions of positions in the masked document (N -> inf):
    ``a = 1 - p_m (1 - p_c)`` (original word shown), ``r = p_m p_r`` (random word),
    ``q = p_m (1 - p_c - p_r)`` ([MASK]); ``a + r + q = 1``.

    Parameters
    ----------
    p_m : float, 0 <= p_m <= 1
        Probability that a position is selected for the loss (default 0.15).
    p_c : float, 0 <= p_c <= 1
        Probability that a selected position keeps its word (default 0.1).
    p_r : float, 0 <= p_r <= 1 - p_c
        Probability that a selected position becomes a uniformly random word (default 0.1).

    Raises
    ------
    ValueError
        If a probability is outside ``[0, 1]`` or ``p_c + p_r > 1``.

    See Also
    --------
    TopicModel : The document law the masking is applied to (SPEC §1).
    theorycheck.sampling.mask_documents : Applies this masking to sampled documents.
    theorycheck.population.value_loss : A population loss whose constants depend on ``a``, ``r``, ``q``.

    Notes
    -----
    Immutable (a frozen dataclass). A loss over selected positions needs ``p_m > 0``
    (:meth:`require_masked_positions`); the stage-1 theory also needs ``a > 0``
    (:meth:`require_informative`).

    References
    ----------
    SPEC §2.1 (the masking and the constants ``a``, ``r``, ``q``); Devlin et al., *BERT*, NAACL 2019,
    Section 3.1 (the 80/10/10 rule).

    Examples
    --------
    >>> from theorycheck import Masking
    >>> mk = Masking(p_m=0.15, p_c=0.1, p_r=0.1)
    >>> round(mk.a, 12), round(mk.r, 12), round(mk.q, 12)
    (0.865, 0.015, 0.12)
    >>> round(mk.a + mk.r + mk.q, 12)  # every position shows exactly one of the three
    1.0
    >>> Masking(p_m=0.15, p_c=0.6, p_r=0.5)
    Traceback (most recent call last):
    ...
    ValueError: p_c + p_r must be <= 1 (they are probabilities of disjoint events), got p_c=0.6, p_r=0.5
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
        """Raise unless ``p_m > 0`` (a loss over selected positions needs some).

        Parameters
        ----------
        where : str
            The computation that needs selected positions, named in the message.

        Raises
        ------
        ValueError
            If ``p_m = 0``.
        """
        if self.p_m <= 0.0:
            raise ValueError(f"p_m must be > 0 for {where} (the loss averages over selected positions), got p_m=0")

    def require_informative(self, where: str = "this computation") -> None:
        """Raise unless ``p_m > 0`` and ``a > 0`` (some original words remain visible).

        Parameters
        ----------
        where : str
            The computation that needs them, named in the message.

        Raises
        ------
        ValueError
            If ``p_m = 0`` or ``a = 1 - p_m (1 - p_c) = 0``.
        """
        self.require_masked_positions(where)
        if self.a <= 0.0:
            raise ValueError(
                f"{where} needs a = 1 - p_m (1 - p_c) > 0 (some original words visible); "
                f"got p_m={self.p_m!r}, p_c={self.p_c!r}"
            )

    def to_dict(self) -> dict:
        """The three probabilities as a dict, inverse of :meth:`from_dict`."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Masking:
        """The masking of a dict from :meth:`to_dict` (validated like the constructor)."""
        return cls(**d)
