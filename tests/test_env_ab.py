"""benchmarks/env_ab.py's variants, checked on the CPU: its one device call must not be spent on a misread argument
or on a variant that leaks its switches into the next one."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
env_ab = pytest.importorskip("env_ab")


def test_one_variable_keeps_its_labels():
    """--var / --values: one variant per value, labelled as the tables of earlier results are."""
    assert env_ab.parse_variants("MSCRED_X", "0,1,", None) == {
        "MSCRED_X='0'": {"MSCRED_X": "0"}, "MSCRED_X='1'": {"MSCRED_X": "1"}, "MSCRED_X=''": {"MSCRED_X": ""}}


def test_named_variants_of_several_variables():
    got = env_ab.parse_variants(None, None, ["off:", "all:MSCRED_A=1,MSCRED_B=1", "a:MSCRED_A=1"])
    assert got == {"off": {}, "all": {"MSCRED_A": "1", "MSCRED_B": "1"}, "a": {"MSCRED_A": "1"}}


@pytest.mark.parametrize("var, values, variants", [
    ("MSCRED_X", "0,1", ["off:"]),           # both forms
    (None, None, None),                      # neither
    ("MSCRED_X", None, None),                # --var without --values
    (None, None, ["off:", "off:MSCRED_A=1"]),  # a name twice
    (None, None, ["all"]),                   # no colon
    (None, None, ["all:MSCRED_A"]),          # no value
])
def test_bad_arguments_stop_before_the_device_time(var, values, variants):
    with pytest.raises(SystemExit):
        env_ab.parse_variants(var, values, variants)


def test_each_variant_sets_its_own_and_restores_the_rest(monkeypatch):
    """A variant's variables set (an empty value unsets); a variable another variant named goes back to the
    process's own value, set or unset."""
    monkeypatch.setenv("MSCRED_A", "7")
    monkeypatch.delenv("MSCRED_B", raising=False)
    variants = env_ab.parse_variants(None, None, ["all:MSCRED_A=1,MSCRED_B=1", "off:", "no_a:MSCRED_A="])
    named = {k for s in variants.values() for k in s}
    original = {k: os.environ.get(k) for k in named}
    env_ab.apply(variants["all"], named, original)
    assert os.environ["MSCRED_A"] == "1" and os.environ["MSCRED_B"] == "1"
    env_ab.apply(variants["off"], named, original)
    assert os.environ["MSCRED_A"] == "7" and "MSCRED_B" not in os.environ
    env_ab.apply(variants["no_a"], named, original)
    assert "MSCRED_A" not in os.environ and "MSCRED_B" not in os.environ


def test_a_failing_variant_leaves_the_others_their_rounds(monkeypatch):
    """With a failures dict, a variant whose step raises (an opt-in kernel that does not compile on the device, say)
    is recorded, skipped in later rounds and shown in the table; the others are timed in every round. Without one,
    the error propagates as before."""
    step_alternation = env_ab.step_alternation
    monkeypatch.setattr(step_alternation, "step_ms", lambda step, batches: (step, 0.5))
    monkeypatch.setattr(step_alternation.torch.cuda, "synchronize", lambda: None)
    built = []

    def make(variant, round_):
        built.append((variant, round_))
        if variant == "bad" and round_ == 1:
            raise RuntimeError("no kernel\nsecond line")
        return {"a": 2.0, "bad": 3.0}[variant]

    failures = {}
    times, losses = step_alternation.alternate(make, ("a", "bad"), 3, [], failures)
    assert times == {"a": [2.0, 2.0, 2.0], "bad": [3.0]} and losses == {"a": 0.5, "bad": 0.5}
    assert failures == {"bad": "RuntimeError: no kernel"}
    assert built == [("a", 0), ("bad", 0), ("a", 1), ("bad", 1), ("a", 2)]
    rows = step_alternation.table(times, losses, failures)
    assert rows[2] == "| a | 2.000 / 2.000 / 2.000 | 0.500000 |"
    assert rows[3] == "| bad | 3.000 (then failed: RuntimeError: no kernel) | 0.500000 |"
    assert step_alternation.table({}, {}, {"x": "E: y"})[2] == "| x | failed: E: y |  |"
    with pytest.raises(RuntimeError, match="no kernel"):
        step_alternation.alternate(make, ("bad", "a"), 2, [])
