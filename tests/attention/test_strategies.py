"""The public attention strategy draws valid instances; on the QᵀK = 0 family H1 is refuted
exactly when V != 0 (and the certificate is accepted)."""

from __future__ import annotations

from hypothesis import given, settings

from certified.attention import check_attention_hypothesis, parse_attention_instance
from certified.attention.strategies import attention_instances
from certified.checker import check_certificate


@settings(max_examples=30)
@given(attention_instances())
def test_instances_are_valid(obj):
    inst = parse_attention_instance(obj, require="X")
    assert inst.X.shape[1] == inst.d


@settings(max_examples=30)
@given(attention_instances(qtk_zero=True))
def test_h1_refuted_on_the_qtk_zero_family_iff_v_nonzero(obj):
    inst = parse_attention_instance(obj)
    assert all(x == 0 for x in (inst.K.T @ inst.Q).flat)
    v = check_attention_hypothesis(inst, "H1")
    assert (v.verdict == "REFUTED") == any(x != 0 for x in inst.V.flat), v.message
    if v.verdict == "REFUTED":
        assert check_certificate(v.certificate).verified
