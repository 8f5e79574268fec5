"""Type checks of models and maskings at the public entry points (they validate themselves at
construction, so nothing else needs checking)."""

from __future__ import annotations

from .general import GeneralTopicModel
from .masking import Masking
from .paper import TopicModel

__all__ = ["check_models", "require_symmetric", "NOT_GIVEN"]

NOT_GIVEN = object()


def check_models(tm: object, mk: object = NOT_GIVEN, *, general: bool = False) -> None:
    """Raise ``TypeError`` unless ``tm`` is a topic model and ``mk`` (when passed, even as ``None``)
    is a :class:`Masking`.

    ``general=False`` (default): ``tm`` must be the paper's :class:`TopicModel` (closed forms of
    disjoint, equal, uniform topics); ``general=True``: any :class:`GeneralTopicModel`.

    Models and maskings validate their values at construction, so a public function only checks the
    types once, here, at its entry.

    Parameters
    ----------
    tm : object
        The topic model to check.
    mk : object, optional
        The masking to check; not checked when omitted (``None`` passed explicitly is rejected).
    general : bool, default False
        Whether any :class:`GeneralTopicModel` is accepted (``True``) or only the paper's
        :class:`TopicModel` (``False``).

    Raises
    ------
    TypeError
        If ``tm`` is not of the accepted type (the message names the functions that accept a
        general model when it is one), or ``mk`` is passed and is not a :class:`Masking`.

    See Also
    --------
    require_symmetric : Rejects only general models, with the name of the function to use instead.
    TopicModel : The paper's model, accepted always.
    GeneralTopicModel : Accepted with ``general=True``.

    References
    ----------
    SPEC §11 (which functions accept a general topic-word matrix).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, Masking, TopicModel
    >>> from theorycheck.models import check_models
    >>> tm, mk = TopicModel(T=3, v=2, tau=1), Masking()
    >>> check_models(tm, mk) is None  # passes silently
    True
    >>> check_models(tm, None)
    Traceback (most recent call last):
    ...
    TypeError: mk must be a Masking, got NoneType
    >>> g = GeneralTopicModel.from_topic_model(tm)
    >>> check_models(g, mk, general=True) is None
    True
    >>> check_models(g, mk)
    Traceback (most recent call last):
    ...
    TypeError: tm: this function needs the paper's symmetric TopicModel ...
    """
    if not general and not isinstance(tm, TopicModel):
        if isinstance(tm, GeneralTopicModel):
            raise TypeError(
                "tm: this function needs the paper's symmetric TopicModel (disjoint topics of v equally likely "
                "words); a GeneralTopicModel is accepted by moments, value_loss, embedding_loss, attention_loss, "
                "the solvers' generic methods, sampling and training (SPEC §11)"
            )
        raise TypeError(f"tm must be a TopicModel, got {type(tm).__name__}")
    if not isinstance(tm, GeneralTopicModel):
        raise TypeError(f"tm must be a TopicModel or a GeneralTopicModel, got {type(tm).__name__}")
    if mk is not NOT_GIVEN and not isinstance(mk, Masking):
        raise TypeError(f"mk must be a Masking, got {type(mk).__name__}")


def require_symmetric(tm: object, where: str, alternative: str) -> None:
    """Raise ``TypeError`` unless ``tm`` is the paper's :class:`TopicModel`: ``where`` is
    symmetric-only by nature (closed forms of the paper's disjoint, equal, uniform topics); the
    message names ``alternative``, the function to use for any topic-word matrix (SPEC §11).
    Other types are left to :func:`check_models`.

    Parameters
    ----------
    tm : object
        The topic model to check.
    where : str
        The symmetric-only function or quantity, named in the message.
    alternative : str
        The function that accepts any topic-word matrix, named in the message.

    Raises
    ------
    TypeError
        If ``tm`` is a :class:`GeneralTopicModel` but not a :class:`TopicModel`.

    See Also
    --------
    check_models : The type check of models and maskings at a public entry.
    TopicModel : The paper's symmetric model, always accepted.

    References
    ----------
    SPEC §11 (the general model and which closed forms are symmetric-only).

    Examples
    --------
    >>> from theorycheck import GeneralTopicModel, TopicModel
    >>> from theorycheck.models import require_symmetric
    >>> tm = TopicModel(T=3, v=2, tau=1)
    >>> require_symmetric(tm, "alpha_beta_loss", "attention_loss") is None
    True
    >>> require_symmetric("not a model", "alpha_beta_loss", "attention_loss") is None  # left to check_models
    True
    >>> require_symmetric(GeneralTopicModel.from_topic_model(tm), "alpha_beta_loss", "attention_loss")
    Traceback (most recent call last):
    ...
    TypeError: alpha_beta_loss needs ... got a GeneralTopicModel; for any topic-word matrix use attention_loss ...
    """
    if isinstance(tm, GeneralTopicModel) and not isinstance(tm, TopicModel):
        raise TypeError(
            f"{where} needs the paper's symmetric TopicModel (disjoint topics of v equally likely words), "
            f"got a GeneralTopicModel; for any topic-word matrix use {alternative} (SPEC §11)"
        )
