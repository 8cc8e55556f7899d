"""Metrics on tiny arrays whose values are computed by hand in the comments."""
import numpy as np
import pytest

from mscred import metrics as m

# two events: [1, 3) and [5, 8)
LABELS = np.array([0, 1, 1, 0, 0, 1, 1, 1, 0, 0])
PRED = np.array([0, 1, 0, 0, 1, 0, 0, 0, 0, 1])


def test_events_half_open():
    assert m.events(LABELS).tolist() == [[1, 3], [5, 8]]
    assert m.events([1, 1, 0, 1]).tolist() == [[0, 2], [3, 4]]  # runs touching both ends
    assert m.events([0, 0]).shape == (0, 2)


def test_point_prf_hand_computed():
    # tp = 1 (index 1), 3 predicted, 5 true: P = 1/3, R = 1/5, F1 = 2 PR / (P + R) = (2/15) / (8/15) = 1/4
    r = m.point_prf(LABELS, PRED)
    assert (r.precision, r.recall, r.f1) == pytest.approx((1 / 3, 1 / 5, 0.25))


def test_point_prf_zero_division_is_zero():
    r = m.point_prf([0, 1, 1], [0, 0, 0])
    assert (r.precision, r.recall, r.f1) == (0.0, 0.0, 0.0)


def test_event_recall():
    assert m.event_recall(LABELS, PRED) == (1, 2)  # the first event has a hit, the second none
    assert m.event_recall(LABELS, LABELS) == (2, 2)


def test_point_adjust_and_pa_k():
    # classic PA: event [1, 3) has 1 hit -> both its points count; tp = 2 of 4 predicted, 5 true
    adj = m.point_adjust(LABELS, PRED)
    assert adj.tolist() == [0, 1, 1, 0, 1, 0, 0, 0, 0, 1]
    r = m.pa_f1(LABELS, PRED)
    assert (r.precision, r.recall, r.f1) == pytest.approx((0.5, 0.4, 2 * 0.2 / 0.9))
    # PA%K: 1 of 2 points = 50 % detected; adjusted only when strictly more than K %
    assert m.pa_f1(LABELS, PRED, k=49).f1 == pytest.approx(4 / 9)
    assert m.pa_f1(LABELS, PRED, k=50).f1 == pytest.approx(0.25)
    assert m.point_adjust(LABELS, PRED, k=100).tolist() == PRED.tolist()


def test_pa_k_auc_hand_computed():
    # F1 = 4/9 for K = 0..49 and 1/4 for K = 50..100; trapezoids over unit steps, divided by 100
    expected = (49 * 4 / 9 + (4 / 9 + 0.25) / 2 + 50 * 0.25) / 100
    assert m.pa_k_auc(LABELS, PRED) == pytest.approx(expected)


def test_auc_roc_hand_computed():
    # positive/negative pairs (0.35 vs 0.1, 0.35 vs 0.4, 0.8 vs 0.1, 0.8 vs 0.4): 3 of 4 ordered right
    assert m.auc_roc([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(0.75)
    # a tie between a positive and a negative counts half: (1 + 1 + 0.5 + 1) / 4
    assert m.auc_roc([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == pytest.approx(0.875)
    assert m.auc_roc([0, 1], [1.0, 0.0]) == 0.0


def test_auc_pr_hand_computed():
    # thresholds 0.8: P=1 R=1/2; 0.4: P=1/2 R=1/2; 0.35: P=2/3 R=1; 0.1: P=1/2 R=1
    # AP = 1/2 * 1 + 0 * 1/2 + 1/2 * 2/3 + 0 = 5/6
    assert m.auc_pr([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == pytest.approx(5 / 6)
    # tie: 0.9: P=1 R=1/2; 0.5 (two points, one positive): P=2/3 R=1 -> 1/2 + 1/3
    assert m.auc_pr([0, 1, 0, 1], [0.5, 0.5, 0.2, 0.9]) == pytest.approx(5 / 6)
    # perfect ranking
    assert m.auc_pr([0, 1, 1, 0], [0.0, 2.0, 3.0, 1.0]) == 1.0


def test_threshold_free_need_both_classes():
    with pytest.raises(ValueError):
        m.auc_roc([0, 0], [0.1, 0.2])
    with pytest.raises(ValueError):
        m.auc_pr([0, 0], [0.1, 0.2])
    with pytest.raises(ValueError):
        m.auc_roc([0, 1], [0.1, np.nan])


def test_best_f1_uses_labels_hand_computed():
    # thresholds 0.9: F1 1/2; 0.5: 0.4; 0.3: 2/3; 0.2: P 3/4 R 1 -> F1 6/7; 0.1: 3/4
    r, t = m.best_f1([0, 1, 1, 0, 1], [0.1, 0.9, 0.3, 0.5, 0.2])
    assert t == 0.2
    assert (r.precision, r.recall, r.f1) == pytest.approx((0.75, 1.0, 6 / 7))


def test_rank_event_causes_votes_then_position():
    lists = [["a", "b", "c"], [], ["b", "a", "d"], ["b", "c", "e"]]
    # votes b 3, a 2 (mean pos 0.5), c 2 (mean pos 1.5), d 1, e 1 (both mean pos 2 -> by name)
    assert m.rank_event_causes(lists) == ["b", "a", "c", "d", "e"]


def test_root_cause_recall_at_k_hand_computed():
    truth = [{"a", "c", "x"}, {"p", "q", "r"}, set()]
    ranked = [["b", "a", "c", "x"], [], ["z"]]
    # event 1: top-3 {b, a, c} holds 2 of 3; event 2 missed: 0; event 3 has no ground truth: skipped
    assert m.root_cause_recall_at_k(truth, ranked, k=3) == pytest.approx((2 / 3 + 0) / 2)
    assert m.root_cause_recall_at_k(truth, ranked, k=4) == pytest.approx((1 + 0) / 2)
    with pytest.raises(ValueError):
        m.root_cause_recall_at_k(truth, ranked[:2])


def test_bad_labels_raise():
    with pytest.raises(ValueError):
        m.point_prf([0, 2], [0, 1])
    with pytest.raises(ValueError):
        m.point_prf([0, 1, 1], [0, 1])
