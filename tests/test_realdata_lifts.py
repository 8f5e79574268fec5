"""Attention lifts under the comparison's definitions (theorycheck.realdata.lifts, SPEC §11.9), measured side.

- every pooled lift, pair count and own-word / own-position share == a brute-force loop over queries and keys
  written from the definitions (text and masked windows, overlapping topic sets, repeated words);
- a known answer: attention uniform over the keys other than the query's own position and word, whatever mass
  sits on those, gives excl_own lift exactly 1 in both classes and the planted own-word share;
- ``all_keys`` == the package's :class:`stats.AttentionAccumulator` on the same windows;
- the window bootstrap of the gap and ratio == a direct bootstrap with the same replicates;
- masking and bad input.

No optional package is needed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from theorycheck.realdata import lifts as LF
from theorycheck.realdata import stats as S


def _memberships(V, K, rng):
    """Two class sets over the same topic tokens: random topic sets (some overlapping) and one label each."""
    topic = rng.random(V) < 0.7
    topic[[0, 1]] = True
    sets = (rng.random((V, K)) < 0.4) & topic[:, None]
    sets[topic & ~sets.any(axis=1), 0] = True
    labels = np.zeros((V, K), dtype=bool)
    labels[np.flatnonzero(topic), rng.integers(0, K, topic.sum())] = True
    return {"sets": sets, "labels": labels}, topic


def _brute(A, shown, hidden, queries, keys, M, topic):
    """Sums from the definitions: loops over queries i and keys j (module docstring of lifts)."""
    LH, n, _ = A.shape
    num = np.zeros((2, LH, 2))
    cnt = np.zeros(2)
    share = np.zeros((LH, 2))
    nq = 0
    for i in range(n):
        if not queries[i]:
            continue
        x = hidden[i]
        K = [k for k in range(n) if k != i and shown[k] != x]
        for h in range(LH):
            r = sum(A[h, i, k] for k in K)
            for j in range(n):
                if not keys[j] or j == i or shown[j] == x:
                    continue
                if not (M[x].any() and M[shown[j]].any()):
                    continue
                c = 0 if (M[x] & M[shown[j]]).any() else 1
                num[0, h, c] += n * A[h, i, j]
                num[1, h, c] += len(K) * A[h, i, j] / r
                if h == 0:
                    cnt[c] += 1
            if topic[x]:
                share[h, 0] += sum(A[h, i, k] for k in range(n) if k != i and shown[k] == x)
                share[h, 1] += A[h, i, i]
        nq += int(topic[x])
    return num, cnt, share, nq


@settings(max_examples=40, deadline=None)
@given(n=st.integers(3, 14), V=st.integers(3, 9), K=st.integers(1, 4), LH=st.integers(1, 3),
       masked=st.booleans(), seed=st.integers(0, 10_000))  # fmt: skip
def test_window_sums_equal_brute_force(n, V, K, LH, masked, seed):
    rng = np.random.default_rng(seed)
    Ms, topic = _memberships(V, K, rng)
    ids = rng.integers(0, V, n)  # small vocabulary: repeated words
    valid = rng.random(n) < 0.8
    A = rng.dirichlet(np.full(n, 0.7), size=(LH, n))
    if masked:
        m = valid & (rng.random(n) < 0.4)
        shown = np.where(m, V, ids)  # id V: [MASK], no topic
        Mx = {k: np.vstack([v, np.zeros((1, K), bool)]) for k, v in Ms.items()}
        tx = np.append(topic, False)
        queries, keys, hidden = m, valid & ~m, np.where(m, ids, shown)
    else:
        shown, Mx, tx, queries, keys, hidden = ids, Ms, topic, valid, valid, ids
    num, cnt, share, nq = LF.window_lift_sums(A, shown, hidden, queries, keys, Mx, tx)
    for name, M in Mx.items():
        bn, bc, bs, bq = _brute(A, shown, hidden, queries, keys, M, tx)
        np.testing.assert_allclose(num[name], bn, rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(cnt[name], bc)
    np.testing.assert_allclose(share, bs, rtol=1e-12, atol=1e-14)
    assert nq == bq


def _uniform_window(n, ids, own_mass, rng):
    """Rows uniform over K_i (keys other than the own position and the own word), ``own_mass`` spread at random
    over the own position and the other copies of the own word."""
    A = np.zeros((n, n))
    for i in range(n):
        own = ids == ids[i]
        w = rng.random(own.sum())
        A[i, own] = own_mass * w / w.sum()
        A[i, ~own] = (1 - own_mass) / (~own).sum()
    return A


def test_known_answer_uniform_over_the_other_keys():
    """excl_own lift is exactly 1 in both classes (gap 0, ratio 1) whatever the own-word mass; all_keys is
    ``n (1 - m) / |K_i|`` per pair; the own-word + own-position share is the planted ``m``."""
    rng = np.random.default_rng(0)
    V, K, n = 12, 3, 20
    M = np.zeros((V, K), bool)
    M[np.arange(V), np.arange(V) % K] = True
    acc = LF.LiftAccumulator(1, 2, {"sets": M})
    num_all = np.zeros(2)
    cnt = np.zeros(2)
    for _ in range(15):
        ids = rng.integers(0, V, n)
        A = np.stack([_uniform_window(n, ids, m, rng) for m in (0.8, 0.05)])[None]
        acc.add(A, ids, np.ones(n, bool))
        cls = S.pair_classes(ids, M)
        for i in range(n):
            Ki = (ids != ids[i]).sum()
            for c, code in enumerate((1, 2)):
                sel = cls[i] == code
                num_all[c] += sel.sum() * n * (1 - 0.8) / Ki
                cnt[c] += sel.sum()
    res = acc.result(n_boot=50, seed=1)
    ex, al = res.lifts["sets"]["excl_own"], res.lifts["sets"]["all_keys"]
    np.testing.assert_allclose(ex["same_topic"], 1.0, rtol=1e-13)
    np.testing.assert_allclose(ex["different_topic"], 1.0, rtol=1e-13)
    np.testing.assert_allclose(ex["gap_ci"], 0.0, atol=1e-13)
    np.testing.assert_allclose(al[("same_topic")][0, 0], num_all[0] / cnt[0], rtol=1e-12)
    np.testing.assert_allclose(al["different_topic"][0, 0], num_all[1] / cnt[1], rtol=1e-12)
    np.testing.assert_allclose(res.own_word + res.own_position, [[0.8, 0.05]], rtol=1e-12)
    np.testing.assert_array_equal(res.counts["sets"], cnt)


def _random_windows(rng, n_win=25, V=30, K=4, n=16, LH=(2, 3)):
    M = np.zeros((V, K), bool)
    M[np.arange(V), np.arange(V) % K] = True
    M[0, 1] = True
    M[V - 5 :] = False  # no-topic tokens
    out = []
    for _ in range(n_win):
        ids = rng.integers(0, V, n)
        A = rng.dirichlet(np.full(n, 0.5), size=LH + (n,))
        out.append((A, ids, rng.random(n) < 0.85))
    return M, out


def test_all_keys_equals_the_attention_accumulator():
    rng = np.random.default_rng(3)
    M, wins = _random_windows(rng)
    acc, ref = LF.LiftAccumulator(2, 3, {"sets": M}), S.AttentionAccumulator(2, 3, M)
    for A, ids, valid in wins:
        acc.add(A, ids, valid)
        ref.add(A, ids, valid)
    got, want = acc.result(n_boot=20, seed=0), ref.result(n_boot=20, seed=0)
    i, j = S.ATTN_CLASSES.index("same_topic"), S.ATTN_CLASSES.index("different_topic")
    a = got.lifts["sets"]["all_keys"]
    np.testing.assert_allclose(a["same_topic"], want.mean_lift[..., i], rtol=1e-12)
    np.testing.assert_allclose(a["different_topic"], want.mean_lift[..., j], rtol=1e-12)
    np.testing.assert_array_equal(got.counts["sets"], want.counts[[i, j]])


def test_bootstrap_is_the_direct_bootstrap_of_the_same_replicates():
    rng = np.random.default_rng(4)
    M, wins = _random_windows(rng)
    acc = LF.LiftAccumulator(2, 3, {"sets": M})
    sums = []
    for A, ids, valid in wins:
        acc.add(A, ids, valid)
        num, cnt, _, _ = LF.window_lift_sums(A.reshape(6, 16, 16), ids, ids, valid, valid, {"sets": M}, M.any(1))
        sums.append((num["sets"][1], cnt["sets"]))
    res = acc.result(n_boot=300, seed=7)
    W = S.bootstrap_weights(len(wins), 300, np.random.default_rng(7))
    num = np.stack([s[0] for s in sums])  # (S, 6, 2)
    cnt = np.stack([s[1] for s in sums])
    b = np.einsum("bs,shc->bhc", W, num) / (W @ cnt)[:, None, :]
    ratio = b[..., 0] / b[..., 1]
    ex = res.lifts["sets"]["excl_own"]
    np.testing.assert_allclose(ex["ratio_ci"].reshape(6, 2), np.quantile(ratio, [0.025, 0.975], axis=0).T)
    np.testing.assert_allclose(ex["mean_gap_ci"], np.quantile((b[..., 0] - b[..., 1]).mean(1), [0.025, 0.975]))
    assert ex["ratio"].shape == (2, 3) and np.all(ex["ratio_ci"][..., 0] <= ex["ratio"])


def test_mask_positions():
    rng = np.random.default_rng(0)
    valid = np.array([False, True, True, False, True, True, True, True, True, True, True, False])
    m = LF.mask_positions(valid, 0.15, rng)
    assert m.sum() == 1 and not np.any(m & ~valid)  # round(0.15 * 9) = 1
    assert LF.mask_positions(valid, 0.5, rng).sum() == 4  # round(4.5) = 4 (banker's), never an invalid position
    assert not LF.mask_positions(np.zeros(5, bool), 0.5, rng).any()
    with pytest.raises(ValueError, match="fraction"):
        LF.mask_positions(valid, 0.0, rng)


def test_bad_input():
    M = np.zeros((5, 2), bool)
    M[:3, 0] = True
    other = M.copy()
    other[3, 1] = True
    with pytest.raises(ValueError, match="memberships\\['b'\\] must give topics to the same tokens"):
        LF.LiftAccumulator(1, 1, {"a": M, "b": other})
    with pytest.raises(ValueError, match="memberships must be a non-empty dict"):
        LF.LiftAccumulator(1, 1, {})
    acc = LF.LiftAccumulator(1, 1, {"a": M})
    A = np.full((1, 1, 4, 4), 0.25)
    with pytest.raises(ValueError, match="attentions must have shape"):
        acc.add(A[..., :3], np.arange(4), np.ones(4, bool))
    with pytest.raises(ValueError, match="masked positions must be valid positions"):
        acc.add(A, np.arange(4), np.array([1, 1, 0, 1], bool), masked=np.array([0, 0, 1, 0], bool),
                hidden_ids=np.arange(4))  # fmt: skip
    with pytest.raises(ValueError, match="no window was added"):
        acc.result(n_boot=20, seed=0)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"masked_fraction": 1.5}, "masked_fraction must lie in \\(0, 1\\], got 1.5"),
        ({"masked_fraction": -0.1}, "masked_fraction must lie in \\(0, 1\\], got -0.1"),
        ({"sensitivity_laws": 1}, "sensitivity_laws must be 0 \\(skip\\) or at least 2, got 1"),
        ({"sensitivity_laws": -1}, "sensitivity_laws must lie in \\[0, inf\\], got -1"),
    ],
)
def test_config_of_the_comparison_is_validated(kw, match):
    from theorycheck.realdata.pipeline import RealDataConfig

    with pytest.raises(ValueError, match=match):
        RealDataConfig(**kw)
    RealDataConfig(masked_fraction=0, sensitivity_laws=0)  # 0 skips each
