"""Every closed-form fast path of the paper's :class:`TopicModel` equals the generic route on the same model.

``theorycheck.population`` writes each formula as a ``functools.singledispatch`` function: the generic
route for any :class:`GeneralTopicModel` (SPEC §11) is the base and the paper's model registers its
closed form (SPEC §1.1, §2.1, §4.0, §4.2, §4.3). Here every such function is called twice on one small
paper model (T <= 5, v <= 4): through the registry (the fast path) and through
``impl.dispatch(GeneralTopicModel)`` (the generic route, which reads the model's materialised ``phi``
and the closed-form ``E[theta theta^T]``; no sampling, so both priors compare exactly).

Tolerance: 1e-12 relative to the largest magnitude of the result (``max |ref|``). Entries that cancel
(a gradient entry near 0, a standard error far below the per-set losses it is computed from) carry no
relative accuracy of their own, only that of the terms they come from. The attention loss of the paper's
model averages over topic sets, so its fast path is uniform-tau only (the Dirichlet law raises there).

:func:`test_every_fast_path_is_tested` keeps the list complete: a new registration without a test fails.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import theorycheck.population as population
from theorycheck.models import GeneralTopicModel, Masking, TopicModel
from theorycheck.population._attention_loss import SetSampledLoss, _attention_loss, _attention_loss_grad
from theorycheck.population._moments import _expected_pp, _masked_density, _moments, _topic_density
from theorycheck.population._value_loss import _value_loss, _value_loss_grad
from theorycheck.strategies import maskings, topic_models

RTOL = 1e-12

#: the fast paths this file tests (module.function of the dispatcher)
TESTED = {
    "theorycheck.population._moments._topic_density",
    "theorycheck.population._moments._masked_density",
    "theorycheck.population._moments._expected_pp",
    "theorycheck.population._moments._moments",
    "theorycheck.population._value_loss._value_loss",
    "theorycheck.population._value_loss._value_loss_grad",
    "theorycheck.population._attention_loss._attention_loss",
    "theorycheck.population._attention_loss._attention_loss_grad",
}
#: registrations that compute no formula
EXEMPT = {
    "theorycheck.population._value_loss._grad_arrays": "a memory estimate (how many dense arrays a route allocates)"
}

both_priors = st.one_of(topic_models(max_T=5, max_v=4), topic_models(max_T=5, max_v=4, prior="dirichlet"))


def _generic(impl):
    return impl.dispatch(GeneralTopicModel)


def _assert_close(fast, ref):
    """``max |fast - ref| <= RTOL * max |ref|`` for an array or a number; tuples element by element, except a
    :class:`SetSampledLoss`, whose standard error is compared on the scale of the losses it comes from."""
    if isinstance(ref, SetSampledLoss):
        assert isinstance(fast, SetSampledLoss) and fast.n_sets == ref.n_sets
        assert max(abs(fast.mean - ref.mean), abs(fast.stderr - ref.stderr)) <= RTOL * abs(ref.mean)
        return
    if isinstance(ref, tuple):
        assert len(fast) == len(ref)
        for f, r in zip(fast, ref, strict=True):
            _assert_close(f, r)
        return
    ref = np.asarray(ref, dtype=float)
    assert np.shape(fast) == ref.shape
    assert float(np.max(np.abs(np.asarray(fast) - ref))) <= RTOL * float(np.max(np.abs(ref)))


def _theta(tm, seed):
    """A topic set's mixture (uniform-tau) or a random mixture (Dirichlet)."""
    rng = np.random.default_rng(seed)
    th = np.zeros(tm.T)
    if tm.prior == "uniform-tau":
        th[rng.choice(tm.T, tm.tau, replace=False)] = 1.0 / tm.tau
        return th
    return rng.dirichlet(tm.concentration)


# ----------------------------------------------------------------------------- completeness
def _dispatchers():
    found = {}
    for info in pkgutil.iter_modules(population.__path__):
        mod = importlib.import_module(f"{population.__name__}.{info.name}")
        for obj in vars(mod).values():
            if callable(obj) and hasattr(obj, "registry") and hasattr(obj, "dispatch"):
                found[f"{obj.__module__}.{obj.__name__}"] = obj
    return found


def test_every_fast_path_is_tested():
    fast = {name for name, impl in _dispatchers().items() if TopicModel in impl.registry}
    assert fast == TESTED | set(EXEMPT), f"untested fast paths: {sorted(fast - TESTED - set(EXEMPT))}"
    for name, impl in _dispatchers().items():  # one generic base each: GeneralTopicModel registers nothing of its own
        assert impl.dispatch(GeneralTopicModel) is impl.registry[object], name


# ----------------------------------------------------------------------------- densities, moments (SPEC §2.1, §4.0)
@given(tm=both_priors, mk=maskings(), seed=st.integers(0, 2**16))
def test_densities(tm, mk, seed):
    th = _theta(tm, seed)
    _assert_close(_topic_density(tm, th), _generic(_topic_density)(tm, th))
    _assert_close(_masked_density(tm, mk, th), _generic(_masked_density)(tm, mk, th))


@given(tm=both_priors, mk=maskings())
def test_expected_pp_and_moments(tm, mk):
    _assert_close(_expected_pp(tm, None), _generic(_expected_pp)(tm, None))
    _assert_close(_moments(tm, mk, "closed-form", None), _generic(_moments)(tm, mk, "closed-form", None))
    if tm.prior == "uniform-tau":
        _assert_close(_moments(tm, mk, "enumerate", None), _generic(_moments)(tm, mk, "enumerate", None))


# ----------------------------------------------------------------------------- value loss (SPEC §4.0, §4.2)
@given(tm=both_priors, mk=maskings(), seed=st.integers(0, 2**16), bias=st.booleans(), reg=st.sampled_from([0.0, 0.3]))
def test_value_loss_and_grad(tm, mk, seed, bias, reg):
    rng = np.random.default_rng(seed)
    W = rng.standard_normal((tm.V1, tm.V1))
    b = rng.standard_normal(tm.V1) if bias else None
    _assert_close(_value_loss(tm, W, mk, b, reg), _generic(_value_loss)(tm, W, mk, b, reg))
    _assert_close(_value_loss_grad(tm, W, mk, b, reg, None), _generic(_value_loss_grad)(tm, W, mk, b, reg, None))


# ----------------------------------------------------------------------------- attention loss (SPEC §4.3)
@settings(max_examples=40)
@given(
    tm=topic_models(max_T=5, max_v=4),
    mk=maskings(),
    seed=st.integers(0, 2**16),
    scale=st.floats(0.01, 10.0),
    bias=st.booleans(),
    mask_keys=st.booleans(),
    loss=st.sampled_from(["squared", "ce"]),
    n_sets=st.sampled_from([None, 7]),
)
def test_attention_loss_and_grad(tm, mk, seed, scale, bias, mask_keys, loss, n_sets):
    """Every topic set (exact), or 7 sampled sets from one seed (the same draws on both routes)."""
    rng = np.random.default_rng(seed)
    S, W = rng.uniform(-scale, scale, (2, tm.V1, tm.V1))
    b = rng.uniform(-scale, scale, tm.V1) if bias else None
    seed_sets = None if n_sets is None else seed
    args = (tm, S, W, mk, b, mask_keys, n_sets, None, None, seed_sets, loss, None)
    _assert_close(_attention_loss(*args), _generic(_attention_loss)(*args))
    _assert_close(_attention_loss_grad(*args), _generic(_attention_loss_grad)(*args))


def test_attention_fast_path_is_uniform_tau_only():
    """The paper's attention route averages over topic sets: a Dirichlet paper model is refused there
    (the generic route takes it, by sampling theta: attention_loss on GeneralTopicModel.from_topic_model)."""
    tm = TopicModel(T=3, v=2, prior="dirichlet", alpha=0.5)
    S = W = np.zeros((tm.V1, tm.V1))
    with pytest.raises(ValueError, match="uniform-tau"):
        _attention_loss(tm, S, W, Masking(), None, False, None, None, None, None, "squared", None)
