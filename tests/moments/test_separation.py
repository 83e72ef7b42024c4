"""Separation witnesses: found and certified (checker-accepted) for every generated pair of
distinct measures, including pairs sharing their first 5 moments; enclosures contain 60-digit
references; equal measures give no witness and the reason; bad input raises."""

from __future__ import annotations

import pytest
from flint import fmpq
from hypothesis import example, given, settings
from hypothesis import strategies as st
from moment_pairs import (
    PTE_2,
    PTE_5,
    distinct_pairs,
    five_moment_pairs,
    measures,
    mp_inside,
    power_sums_equal,
    reference_gradient,
    thue_morse,
    uniform,
)

from certified.checker import check_certificate
from certified.errors import InputError, NonFiniteError, PrecisionError, ShapeError
from certified.moments.measure import discrete_measure, first_differing_moment, merged_atoms
from certified.moments.separation import (
    SeparationResult,
    SeparationStatus,
    separation_witness,
)


def _assert_certified(result: SeparationResult, mu, nu) -> None:
    assert result.status is SeparationStatus.SEPARATED, result.reason
    assert result.verdict == "VERIFIED"
    w = result.witness
    verdict = check_certificate(result.certificate)
    assert verdict.verified, verdict.reason
    assert w.gap() > 0
    # the claimed enclosures contain independent 60-digit values of G_mu(q)_k, G_nu(q)_k
    for measure, (lo, hi) in ((mu, w.mu_enclosure), (nu, w.nu_enclosure)):
        ref = reference_gradient(measure, w.q, digits=80 + w.precision // 3)
        assert mp_inside(ref[w.coordinate], lo, hi, digits=80 + w.precision // 3)


@pytest.mark.parametrize(
    "pair, shared",
    [(PTE_2, 2), (PTE_5, 5), (thue_morse(5), 5), (thue_morse(6), 6)],
    ids=["pte-0,4,5", "pte-degree5", "thue-morse-5", "thue-morse-6"],
)
def test_hard_pairs_sharing_moments_are_separated(pair, shared):
    assert power_sums_equal(*pair, shared) and not power_sums_equal(*pair, shared + 1)
    mu, nu = uniform(pair[0]), uniform(pair[1])
    result = separation_witness(mu, nu)
    _assert_certified(result, mu, nu)
    assert result.first_differing_moment == shared + 1  # the first differing moment


@settings(deadline=None)
@given(distinct_pairs())
@example((([[0], [4], [5]], None), ([[1], [2], [6]], None)))
@example((([[0, 0], [1, 1]], None), ([[0, 1], [1, 0]], None)))  # same marginals
@example((([[0], [0], [1]], None), ([[0], [1], [1]], None)))  # repeated atoms
def test_every_distinct_pair_gets_a_certified_witness(pair):
    mu, nu = pair
    result = separation_witness(mu, nu)
    _assert_certified(result, mu, nu)


@settings(deadline=None, max_examples=40)
@given(five_moment_pairs())
def test_pairs_sharing_five_moments_get_a_certified_witness(pair):
    mu, nu = pair
    result = separation_witness(mu, nu)
    _assert_certified(result, mu, nu)
    a, b = discrete_measure(mu), discrete_measure(nu)
    if a[0].shape[1] == 1:
        center = sum((x[0] * w for x, w in merged_atoms(*a).items()), fmpq(0))
        m, _ = first_differing_moment(merged_atoms(*a), merged_atoms(*b), center)
        assert m >= 6 and result.first_differing_moment == m


@pytest.mark.parametrize("d", [1, 2, 5, 10])
def test_dimensions_one_to_ten_with_a_pte_pair_on_a_line(d):
    v = [(-1) ** i * (i + 1) for i in range(d)]
    c = [fmpq(i, 3) for i in range(d)]
    mu, nu = uniform(PTE_5[0], v, c), uniform(PTE_5[1], v, c)
    result = separation_witness(mu, nu)
    _assert_certified(result, mu, nu)
    assert len(result.witness.q) == d


def test_near_identical_measures_need_and_get_more_precision():
    eps = fmpq(1, 2**300)
    mu = ([[0], [1], [2]], ["1/3", "1/3", "1/3"])
    nu = ([[0], [1], [2]], [fmpq(1, 3) + eps, fmpq(1, 3) - eps, fmpq(1, 3)])
    result = separation_witness(mu, nu)
    _assert_certified(result, mu, nu)
    assert result.witness.precision > 300
    low = separation_witness(mu, nu, max_prec=128)
    assert low.status is SeparationStatus.UNDECIDED and low.witness is None
    assert low.verdict == "UNDECIDED" and "max_prec" in low.reason


def test_large_offsets_and_tiny_spreads():
    mu = ([[10**9], [10**9 + 1], [10**9 + 5]], None)
    nu = ([[10**9 + 1], [10**9 + 2], [10**9 + 3]], None)
    _assert_certified(separation_witness(mu, nu), mu, nu)
    tiny = fmpq(1, 2**40)
    mu = ([[0], [4 * tiny], [5 * tiny]], None)
    nu = ([[tiny], [2 * tiny], [6 * tiny]], None)
    _assert_certified(separation_witness(mu, nu), mu, nu)


@given(measures(), st.permutations(range(6)), st.booleans())
def test_equal_measures_get_no_witness_and_the_reason(measure, order, split):
    pts, w = measure
    n = len(pts)
    perm = [i for i in order if i < n]
    other_pts = [pts[i] for i in perm]
    other_w = [w[i] for i in perm]
    if split:  # split the first atom in two, and add an atom of weight 0
        other_pts = [other_pts[0], *other_pts, [fmpq(99)] * len(pts[0])]
        other_w = [other_w[0] / 2, other_w[0] / 2, *other_w[1:], fmpq(0)]
    result = separation_witness(measure, (other_pts, other_w))
    assert result.status is SeparationStatus.EQUAL
    assert result.witness is None and result.certificate is None
    assert result.verdict == "REFUTED"
    assert "mu = nu" in result.reason and "no witness exists" in result.reason


def test_witness_json_is_exact_strings():
    result = separation_witness(uniform(PTE_2[0]), uniform(PTE_2[1]))
    js = result.witness.to_json()
    assert set(js) == {"q", "coordinate", "mu", "nu", "precision", "direction"}
    assert all(isinstance(x, str) for x in js["q"] + js["mu"] + js["nu"])


@pytest.mark.parametrize(
    "mu, nu, error",
    [
        (([[0], [1]], ["1/2", "1/3"]), ([[0]], None), InputError),  # weights do not sum to 1
        (([[0], [1]], ["3/2", "-1/2"]), ([[0]], None), InputError),  # negative weight
        (([[0], [float("nan")]], None), ([[0]], None), NonFiniteError),
        (([[0], [1]], ["1"]), ([[0]], None), ShapeError),  # weights / points mismatch
        (([], None), ([[0]], None), ShapeError),  # n = 0
        (([[0, 1]], None), ([[0]], None), ShapeError),  # dimension mismatch
    ],
)
def test_bad_input_raises_specific_errors(mu, nu, error):
    with pytest.raises(error):
        separation_witness(mu, nu)


def test_bad_limits():
    with pytest.raises(PrecisionError):
        separation_witness(([[0]], None), ([[1]], None), max_prec=16385)
    with pytest.raises(PrecisionError):
        separation_witness(([[0]], None), ([[1]], None), max_prec=2)


def test_too_many_atoms_for_the_checker_is_undecided_not_an_error(monkeypatch):
    import certified.moments.separation as sep

    monkeypatch.setattr(sep, "MAX_SEPARATION_COST", 1000)
    result = separation_witness(uniform(PTE_2[0]), uniform(PTE_2[1]))
    assert result.status is SeparationStatus.UNDECIDED and "resource limit" in result.reason
