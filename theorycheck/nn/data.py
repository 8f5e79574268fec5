"""Training data streams (SPEC §2.1, §2.2, §4.0): the batch of every step as a pure function of ``(seed, step)``.

Sources (``DataConfig.source``):

- ``"fresh"``: new documents and new masks every step, drawn from ``default_rng([seed, 1, step])``;
- ``"static"``: the official code's setting, a fixed training set masked once (``default_rng([seed, 3])``)
  visited in epochs (permutation ``default_rng([seed, 1, epoch])``), plus a dev set masked once;
- ``"population"``: the exact infinite-document population (every ``tau``-subset as one weighted
  context, :func:`theorycheck.nn.population_batch`, SPEC §4.0; for a general topic-word matrix
  ``cfg.data.phi`` the contexts of SPEC §11.4, chosen by
  :func:`theorycheck.population.population_contexts` from the model).

Documents come from :func:`theorycheck.sampling.sample_documents` (SPEC §1, §2.1; SPEC §11.1 for a
general model).

The fixed evaluation documents come from ``default_rng([seed, 2])``. Because a batch depends only
on the seed and the step, the RNG state a resumed run must restore *is* the step counter.
"""

from __future__ import annotations

import numpy as np

from ..sampling import MaskedBatch, mask_documents, sample_documents
from .batches import CountBatch, PositionBatch, make_batch, population_batch
from .config import TrainConfig

__all__ = ["DataStream"]


class DataStream:
    """Batches, evaluation documents and the dev set of one :class:`TrainConfig`.

    The batch of step ``s`` depends only on ``(seed, s)`` (see the module docstring for the streams of
    each source), so two streams of one configuration give equal batches, and a resumed run needs no
    RNG state beyond its step.

    Parameters
    ----------
    cfg : TrainConfig
        The run: its data source, model (the batch form, ``mask_keys``), batch size and seed.

    See Also
    --------
    Trainer : Draws its batches from a ``DataStream``.
    make_batch : Turns masked documents into the model's batch form.
    population_batch : The batch of every step for ``source="population"``.
    theorycheck.sampling.sample_documents : Where the documents come from.

    References
    ----------
    SPEC §1 (documents), §2.1 (masking), §2.2 (the loss's averaging), §4.0 (the exact population).

    Examples
    --------
    >>> from theorycheck.nn import DataConfig, DataStream, TrainConfig
    >>> cfg = TrainConfig(data=DataConfig(T=3, v=2, N=12), batch_size=4, seed=0)
    >>> a, b = DataStream(cfg), DataStream(cfg)
    >>> batch = a.batch_at(3)
    >>> type(batch).__name__, batch.K.sum(axis=1)  # token counts: 4 documents of 12 keys
    ('CountBatch', array([12., 12., 12., 12.]))
    >>> np.array_equal(batch.Y, b.batch_at(3).Y), round(float(batch.weight.sum()), 12)  # document average
    (True, 1.0)
    >>> a.eval_tokens().shape, a.dev_loss(None)  # no dev set for fresh documents
    ((8, 12), None)
    """

    def __init__(self, cfg: TrainConfig):
        self.cfg = cfg
        self.tm = cfg.data.topic_model()
        self.mk = cfg.data.masking()
        self._pop: CountBatch | PositionBatch | None = None
        self._train_set: MaskedBatch | None = None
        self.dev: MaskedBatch | None = None
        self._eval_tokens: np.ndarray | None = None

    def _make_batch(self, masked):
        return make_batch(self.cfg.model, masked.inputs, masked.selected, masked.targets, average=self.cfg.data.average)

    def static_sets(self) -> MaskedBatch:
        """The masked training set (and ``self.dev``) of the static source, built once."""
        if self._train_set is None:
            d = self.cfg.data
            rng = np.random.default_rng([self.cfg.seed, 3])
            docs = sample_documents(self.tm, d.n_train, d.N, rng=rng)
            self._train_set = mask_documents(docs, self.tm, self.mk, rng=rng)
            if d.n_dev:
                dev = sample_documents(self.tm, d.n_dev, d.N, rng=rng)
                self.dev = mask_documents(dev, self.tm, self.mk, rng=rng)
        return self._train_set

    def population(self) -> CountBatch | PositionBatch:
        """The exact population batch (built once)."""
        if self._pop is None:
            pop = population_batch(self.tm, self.mk, mask_keys=self.cfg.model.mask_keys)
            self._pop = pop.to_positions() if self.cfg.model.batch_form == "merged" else pop
        return self._pop

    def batch_at(self, step: int):
        """The training batch of step ``step`` (a pure function of seed and step).

        Parameters
        ----------
        step : int
            The step, ``step >= 0``.

        Returns
        -------
        CountBatch or PositionBatch
            The batch, in the form the model configuration asks for (:func:`make_batch`).
        """
        d, bs = self.cfg.data, self.cfg.batch_size
        if d.source == "population":
            return self.population()
        if d.source == "fresh":
            rng = np.random.default_rng([self.cfg.seed, 1, step])
            docs = sample_documents(self.tm, bs, d.N, rng=rng)
            return self._make_batch(mask_documents(docs, self.tm, self.mk, rng=rng))
        ts = self.static_sets()
        per_epoch = max(d.n_train // bs, 1)
        epoch, k = divmod(step, per_epoch)
        perm = np.random.default_rng([self.cfg.seed, 1, epoch]).permutation(d.n_train)
        idx = perm[k * bs : (k + 1) * bs]
        sub = MaskedBatch(ts.inputs[idx], ts.selected[idx], ts.targets[idx], ts.lengths[idx])
        return self._make_batch(sub)

    def eval_tokens(self):
        """Fixed unmasked evaluation documents for attention statistics (``None`` if ``eval_docs = 0``)."""
        if self._eval_tokens is None and self.cfg.eval_docs:
            rng = np.random.default_rng([self.cfg.seed, 2])
            self._eval_tokens = sample_documents(self.tm, self.cfg.eval_docs, self.cfg.data.N, rng=rng).tokens
        return self._eval_tokens

    def dev_loss(self, model, chunk: int = 1000) -> float | None:
        """Loss of ``model`` on the dev set without the L2 term (static source; token- or
        document-averaged as configured): chunk averages re-weighted into the full-set average."""
        d = self.cfg.data
        if d.source != "static" or not d.n_dev:
            return None
        self.static_sets()
        dev = self.dev
        assert dev is not None  # static_sets() masks a dev set when n_dev > 0
        n = dev.inputs.shape[0]
        tot = 0.0
        n_sel_all = dev.selected.sum()
        for s in range(0, n, chunk):
            sl = slice(s, min(s + chunk, n))
            sub = MaskedBatch(dev.inputs[sl], dev.selected[sl], dev.targets[sl], dev.lengths[sl])
            w = sub.selected.sum() / n_sel_all if d.average == "token" else (sl.stop - sl.start) / n
            tot += w * (model.loss(self._make_batch(sub)) - model.reg_loss())
        return float(tot)
