"""VUS-ROC / VUS-PR against a loop-for-loop transcription of the reference (TSB-AD ``RangeAUC_volume_opt``).

No published input/output pairs exist for tiny inputs, so the oracle below transcribes the reference algorithm
(TheDatumOrg/TSB-AD, TSB_AD/evaluation/basic_metrics.py: ``sequencing``, ``new_sequence``, ``range_convers_new``,
``RangeAUC_volume_opt``) with its loops, per-threshold label copies and per-segment dot products kept as they are;
the pinned numbers further down were produced by that transcription.
"""
import numpy as np
import pytest

from mscred import metrics
from mscred.vus import range_curves, soft_labels, vus, widened_ranges, label_ranges


def _ref_ranges(label):
    starts = np.where(np.diff(label) == 1)[0] + 1
    (ends,) = np.where(np.diff(label) == -1)
    if len(ends) and (not len(starts) or ends[0] < starts[0]):
        starts = np.concatenate([[0], starts])
    if len(starts) and (not len(ends) or ends[-1] < starts[-1]):
        ends = np.concatenate([ends, [len(label) - 1]])
    return list(zip(starts, ends))


def _ref_new_sequence(label, seq, window):
    a = max(seq[0][0] - window // 2, 0)
    out = []
    for i in range(len(seq) - 1):
        if seq[i][1] + window // 2 < seq[i + 1][0] - window // 2:
            out.append((a, seq[i][1] + window // 2))
            a = seq[i + 1][0] - window // 2
    out.append((a, min(seq[-1][1] + window // 2, len(label) - 1)))
    return out


def _ref_sequencing(x, seq, window):
    label = x.copy().astype(float)
    n = len(label)
    for s, e in seq:
        x1 = np.arange(e + 1, min(e + window // 2 + 1, n))
        label[x1] += np.sqrt(1 - (x1 - e) / window)
        x2 = np.arange(max(s - window // 2, 0), s)
        label[x2] += np.sqrt(1 - (s - x2) / window)
    return np.minimum(np.ones(n), label)


def _ref_volume(labels_original, score, window_size, thre=250):
    """Transcription of RangeAUC_volume_opt: returns per-buffer AUC and AP arrays."""
    P = np.sum(labels_original)
    seq = _ref_ranges(labels_original)
    l_max = _ref_new_sequence(labels_original, seq, window_size)
    score_sorted = -np.sort(-score)
    idx = np.linspace(0, len(score) - 1, thre).astype(int)
    n_pred = np.array([np.sum(score >= score_sorted[i]) for i in idx])
    aucs, aps = [], []
    for window in range(window_size + 1):
        ext = _ref_sequencing(labels_original, seq, window)
        L = _ref_new_sequence(ext, seq, window)
        tf = np.zeros((thre + 2, 2))
        prec = np.ones(thre + 1)
        for j, i in enumerate(idx, start=1):
            pred = score >= score_sorted[i]
            labels = ext.copy()
            existence = 0
            for a, b in L:
                labels[a:b + 1] = ext[a:b + 1] * pred[a:b + 1]
                if (pred[a:b + 1] > 0).any():
                    existence += 1
            for a, b in seq:
                labels[a:b + 1] = 1
            tp, n_labels = 0.0, 0.0
            for a, b in l_max:
                tp += np.dot(labels[a:b + 1], pred[a:b + 1])
                n_labels += np.sum(labels[a:b + 1])
            fp = n_pred[j - 1] - tp
            p_new = (P + n_labels) / 2
            tf[j] = [min(tp / p_new, 1) * existence / len(L), fp / (len(labels) - p_new)]
            prec[j] = tp / n_pred[j - 1]
        tf[thre + 1] = [1, 1]
        aucs.append(np.dot(tf[1:, 1] - tf[:-1, 1], (tf[1:, 0] + tf[:-1, 0]) / 2))
        aps.append(np.dot(tf[1:-1, 0] - tf[:-2, 0], prec[1:]))
    return np.array(aucs), np.array(aps)


def test_helpers_match_reference():
    y = np.array([1, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 1])
    seq = label_ranges(y)
    assert seq == [(int(a), int(b)) for a, b in _ref_ranges(y)] == [(0, 1), (5, 5), (12, 14), (17, 17)]
    for w in range(0, 12):
        assert widened_ranges(seq, w, y.size) == [(int(a), int(b)) for a, b in _ref_new_sequence(y, seq, w)]
        np.testing.assert_array_equal(soft_labels(y, seq, w), _ref_sequencing(y, seq, w))


def test_soft_labels_hand_computed():
    # event at index 3, window 4: half = 2 -> ramps at distance 1, 2: sqrt(1 - 1/4), sqrt(1 - 2/4)
    y = np.array([0, 0, 0, 1, 0, 0, 0])
    got = soft_labels(y, [(3, 3)], 4)
    a, b = np.sqrt(0.75), np.sqrt(0.5)
    np.testing.assert_allclose(got, [0, b, a, 1, a, b, 0])


@pytest.mark.parametrize("seed,n,max_buffer,thre", [(0, 60, 8, 250), (1, 200, 20, 250), (2, 150, 30, 37),
                                                     (3, 40, 6, 5)])
def test_range_curves_match_reference_transcription(seed, n, max_buffer, thre):
    rng = np.random.default_rng(seed)
    y = np.zeros(n, dtype=int)
    for start in rng.choice(n - 6, size=3, replace=False):
        y[start:start + rng.integers(1, 6)] = 1
    # scores with ties (rounded) and a signal on the events
    s = np.round(rng.random(n) + 0.8 * y, 1)
    aucs, aps = range_curves(y, s, max_buffer, thre)
    ref_aucs, ref_aps = _ref_volume(y, s, max_buffer, thre)
    np.testing.assert_allclose(aucs, ref_aucs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(aps, ref_aps, rtol=1e-12, atol=1e-12)


def test_vus_pinned_values():
    # labels/scores below; (VUS-ROC, VUS-PR) with sliding window 2 (buffers 0..4) from the transcription above
    y = np.array([0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0])
    s = np.array([0.1, 0.2, 0.6, 0.9, 0.4, 0.3, 0.1, 0.0, 0.2, 0.1, 0.5, 0.7, 0.8, 0.1, 0.0, 0.3])
    ref_aucs, ref_aps = _ref_volume(y, s, 4)
    got = vus(y, s, sliding_window=2)
    assert got == pytest.approx((ref_aucs.mean(), ref_aps.mean()), abs=1e-12)
    assert got == pytest.approx((0.9459429744696605, 0.8210770740125308), abs=1e-12)


def test_buffer_zero_is_close_to_point_auc():
    # with no buffer, range-AUC-ROC reduces to point AUC-ROC sampled at 250 thresholds (here every rank)
    rng = np.random.default_rng(5)
    y = (rng.random(200) < 0.1).astype(int)
    s = rng.random(200) + y
    aucs, _ = range_curves(y, s, 0, n_thresholds=200)
    assert aucs[0] == pytest.approx(metrics.auc_roc(y, s), abs=0.02)


def test_vus_rejects_no_anomaly():
    with pytest.raises(ValueError):
        vus(np.zeros(10), np.arange(10.0))
