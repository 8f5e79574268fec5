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
    Other types are left to :func:`check_models`."""
    if isinstance(tm, GeneralTopicModel) and not isinstance(tm, TopicModel):
        raise TypeError(
            f"{where} needs the paper's symmetric TopicModel (disjoint topics of v equally likely words), "
            f"got a GeneralTopicModel; for any topic-word matrix use {alternative} (SPEC §11)"
        )
