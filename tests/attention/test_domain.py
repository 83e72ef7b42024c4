"""H1/H2 over the whole domain (B_R)^n by subdivision (certified/attention/domain.py) and the
checker rule of kind ``lipschitz-domain``: the cell Jacobian contains 110-digit references,
the drop test never drops a point of the fundamental domain, the symmetry lemma holds, true
instances are VERIFIED with certificates the checker accepts, the false variant (RHS/10) is
never VERIFIED, tampered certificates are rejected, bad input raises InputError."""

from __future__ import annotations

import copy
import itertools

import flint
import mpmath
import numpy as np
import pytest
from attention_reference import reference_jacobian
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmath import mp

from certified.arith.ball import endpoints, precision
from certified.arith.exact import to_fmpq
from certified.attention.domain import (
    _balls,
    cell_jacobian,
    certified_point_lower,
    decide_on_domain,
    dropped,
    structural_bound,
)
from certified.attention.domain_search import ascend_jacobian_norm
from certified.attention.family import float_jacobian, tightness_configuration
from certified.attention.instance import parse_attention_instance
from certified.attention.lipschitz import norm_hint
from certified.checker import check_certificate
from certified.errors import InputError

Q = flint.fmpq


def _mpq(x):
    return mpmath.mpf(int(x.p)) / int(x.q)


def _ref_norm(inst, X):
    """110-digit ‖Df(X)‖₂ (complex-step Jacobian, mpmath SVD)."""
    J = reference_jacobian([(inst.Q.tolist(), inst.K.tolist(), inst.V.tolist(), None)], X)
    with mp.workdps(110):
        return max(mpmath.svd_r(mpmath.matrix(J), compute_uv=False))


def _ref_rhs(inst, n, hypothesis="H2"):
    with mp.workdps(60):
        M = lambda a: mpmath.matrix([[_mpq(v) for v in row] for row in a])  # noqa: E731
        nv = max(mpmath.svd_r(M(inst.V), compute_uv=False))
        nm = max(mpmath.svd_r(M(inst.K.T @ inst.Q), compute_uv=False))
        r = _mpq(inst.R)
        if hypothesis == "H1":
            return nv * nm * r**2 * mpmath.sqrt(12 * n + 3)
        return mpmath.sqrt(3) * nv * mpmath.sqrt(nm**2 / inst.k * r**4 * (4 * n + 1) + n)


def _instance(Qm, Km, Vm, R, n=1):
    d = len(Vm)
    return parse_attention_instance({"Q": Qm, "K": Km, "V": Vm, "R": R, "X": [[0] * d] * n})


BASE = _instance([[1, "1/2"], [0, -1]], [["1/2", 1], ["-1/4", "3/4"]], [[1, "1/3"], [0, 1]], 1)

entries = st.sampled_from([-1, "-1/2", "-1/4", 0, "1/4", "1/2", 1, "3/2"])


@settings(max_examples=12)
@given(st.data())
def test_cell_jacobian_contains_the_reference(data):
    n, d = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 2))
    mats = [[[data.draw(entries) for _ in range(d)] for _ in range(d)] for _ in range(3)]
    inst = _instance(*mats, 1)
    lo = [Q(data.draw(st.integers(-8, 6)), 8) for _ in range(n * d)]
    hi = [a + Q(data.draw(st.integers(1, 4)), 16) for a in lo]
    with precision(64):
        A = flint.arb_mat((inst.K.T @ inst.Q).tolist()) * (1 / flint.arb(inst.k).sqrt())
        X = [[flint.arb(lo[i * d + b]).union(flint.arb(hi[i * d + b])) for b in range(d)]
             for i in range(n)]  # fmt: skip
        J = cell_jacobian(A, flint.arb_mat(inst.V.tolist()), X)
    for t in (Q(0), Q(1, 3), Q(1)):
        point = [[lo[i * d + b] + t * (hi[i * d + b] - lo[i * d + b]) for b in range(d)]
                 for i in range(n)]  # fmt: skip
        ref = reference_jacobian([(inst.Q.tolist(), inst.K.tolist(), inst.V.tolist(), None)],
                                 point)  # fmt: skip
        with mp.workdps(110):
            for r, c in itertools.product(range(n * d), repeat=2):
                a, b = endpoints(J[r, c])
                tol = mpmath.mpf(10) ** -90 * (1 + abs(ref[r][c]))  # the reference's own error
                assert _mpq(a) - tol <= ref[r][c] <= _mpq(b) + tol, (r, c)


coords = st.integers(-16, 15).map(lambda k: Q(k, 16))


@settings(max_examples=200)
@given(st.integers(1, 3), st.integers(1, 2), st.data())
def test_dropped_never_drops_a_point_of_the_fundamental_domain(n, d, data):
    lo = [data.draw(coords) for _ in range(n * d)]
    hi = [a + Q(data.draw(st.integers(1, 8)), 16) for a in lo]
    R = Q(data.draw(st.sampled_from([1, 2, 3])), 2)
    if not dropped(lo, hi, R, n, d):
        return
    for _ in range(20):  # random points and corners of the box lie outside (B_R)^n ∩ F
        ts = [Q(data.draw(st.integers(0, 4)), 4) for _ in range(n * d)]
        x = [a + t * (b - a) for a, b, t in zip(lo, hi, ts, strict=True)]
        in_ball = all(sum(v * v for v in x[i * d : i * d + d]) <= R * R for i in range(n))
        first = [x[i * d] for i in range(n)]
        in_f = all(u >= w for u, w in itertools.pairwise(first)) and first[0] + first[-1] >= 0
        assert not (in_ball and in_f)


@settings(max_examples=100)
@given(st.integers(1, 3), st.integers(1, 3), st.data())
def test_cut_balls_contain_every_point_of_the_box_in_the_ball(n, d, data):
    # bounds.md #domain-contraction
    lo = [data.draw(coords) for _ in range(n * d)]
    hi = [a + Q(data.draw(st.integers(1, 12)), 16) for a in lo]
    R = Q(data.draw(st.sampled_from([1, 2, 3])), 2)
    if dropped(lo, hi, R, n, d):
        return
    with precision(64):
        balls = _balls(lo, hi, n, d, R)
    for _ in range(30):
        ts = [Q(data.draw(st.integers(0, 8)), 8) for _ in range(n * d)]
        x = [a + t * (b - a) for a, b, t in zip(lo, hi, ts, strict=True)]
        for i in range(n):
            if sum(v * v for v in x[i * d : i * d + d]) <= R * R:
                assert all(balls[i][b].contains(x[i * d + b]) for b in range(d))


@settings(max_examples=40)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_symmetry_lemma_canonical_representative(n, d, seed):
    # bounds.md #domain-symmetry: sorting tokens by the first coordinate (descending) and, if
    # x_{0,0} + x_{n-1,0} < 0, negating and reversing, lands in F without changing ‖Df‖₂
    rng = np.random.default_rng(seed)
    A, V = rng.normal(size=(d, d)), rng.normal(size=(d, d))
    X = rng.uniform(-1, 1, (n, d))
    Y = X[np.argsort(-X[:, 0], kind="stable")]
    if Y[0, 0] + Y[-1, 0] < 0:
        Y = -Y[::-1]
    assert all(Y[i, 0] >= Y[i + 1, 0] for i in range(n - 1)) and Y[0, 0] + Y[-1, 0] >= 0
    a, b = (np.linalg.norm(float_jacobian(A, V, Z), 2) for Z in (X, Y))
    assert abs(a - b) <= 1e-9 * max(1.0, a)


def _samples(inst, n, count, seed):
    rng = np.random.default_rng(seed)
    R = float(inst.R)
    out = [tightness_configuration(inst, n) * (1 - 2.0**-20)]
    for _ in range(count):
        X = rng.normal(size=(n, inst.d))
        X *= R * rng.uniform(0.3, 1, (n, 1)) / np.linalg.norm(X, axis=1, keepdims=True)
        out.append(X)
    return out


@pytest.mark.parametrize(("n", "R"), [(1, 1), (2, 1), (2, "3/2")])
def test_true_instances_verified_with_certificate(n, R):
    inst = _instance(BASE.Q.tolist(), BASE.K.tolist(), BASE.V.tolist(), R)
    v = decide_on_domain(inst, "H2", n, max_cells=20_000, seconds=60)
    assert v.verdict == "VERIFIED", v.message
    assert check_certificate(v.certificate).verified
    with mp.workdps(60):
        assert _mpq(v.lhs_upper) <= _ref_rhs(inst, n)
        for X in _samples(inst, n, 3, n):
            assert _ref_norm(inst, X) <= _mpq(v.lhs_upper)


@pytest.mark.parametrize(("R", "verdict"), [(1, "VERIFIED"), ("1/4", "REFUTED")])
def test_h1_over_the_domain(R, verdict):
    # H1's right side is O(R²) while Lip(f) -> ‖V‖₂ as R -> 0: true at R = 1, false at R = 1/4
    inst = _instance(BASE.Q.tolist(), BASE.K.tolist(), BASE.V.tolist(), R)
    v = decide_on_domain(inst, "H1", 2, max_cells=5000, seconds=60)
    assert v.verdict == verdict, v.message
    assert check_certificate(v.certificate).verified
    with mp.workdps(60):
        if verdict == "VERIFIED":
            assert _mpq(v.lhs_upper) <= _ref_rhs(inst, 2, "H1")
            for X in _samples(inst, 2, 3, 1):
                assert _ref_norm(inst, X) <= _mpq(v.lhs_upper)
        else:
            assert _ref_norm(inst, v.counterexample["X"]) > _ref_rhs(inst, 2, "H1")


@pytest.mark.parametrize("hypothesis", ["H1", "H2"])
def test_false_variant_refuted_with_certificate(hypothesis):
    v = decide_on_domain(BASE, hypothesis, 2, factor=Q(1, 10), max_cells=2000, seconds=30)
    assert v.verdict == "REFUTED", v.message
    assert check_certificate(v.certificate).verified
    X = v.counterexample["X"]
    with mp.workdps(60):
        assert _ref_norm(BASE, X) >= _mpq(v.lhs_lower) > _ref_rhs(BASE, 2, hypothesis) / 10


@settings(max_examples=12, deadline=None)
@given(st.data())
def test_false_variant_is_never_verified(data):
    d, n = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 4))
    mats = [[[data.draw(entries) for _ in range(d)] for _ in range(d)] for _ in range(3)]
    inst = _instance(*mats, data.draw(st.sampled_from(["1/2", 1, 2])))
    v = decide_on_domain(inst, "H2", n, factor=Q(1, 10), max_cells=200, seconds=10)
    rhs10 = _ref_rhs(inst, n) / 10
    with mp.workdps(60):
        norm_v = max(mpmath.svd_r(mpmath.matrix([[_mpq(x) for x in r] for r in inst.V]),
                                  compute_uv=False))  # fmt: skip
        if norm_v > rhs10:  # ‖Df(0)‖₂ = ‖V‖₂: a point beyond RHS/10 exists
            assert v.verdict != "VERIFIED"
    Af = inst.K.T.astype(float) @ inst.Q.astype(float) / np.sqrt(inst.k)
    R = float(inst.R)
    _, X = ascend_jacobian_norm(Af, inst.V.astype(float), R, [np.zeros((n, d))], 3, samples=512)
    X = X * (1 - 2.0**-20)
    if _ref_norm(inst, X.tolist()) > rhs10:  # a witness found independently of the subdivision
        assert v.verdict == "REFUTED"
    with mp.workdps(60):
        if v.verdict == "VERIFIED":
            for X in _samples(inst, n, 2, 0):
                assert _ref_norm(inst, X) <= _mpq(v.lhs_upper) <= rhs10
        if v.verdict == "REFUTED":
            assert check_certificate(v.certificate).verified
            assert _ref_norm(inst, v.counterexample["X"]) > rhs10


@pytest.fixture(scope="module")
def certificate():
    # factor 1/2: the root's structural bound does not close, so the subdivision keeps leaves
    # of all three kinds ({"structure": b}, [bm, br], numbers or drops)
    v = decide_on_domain(BASE, "H2", 2, factor=Q(1, 2), max_cells=20_000, seconds=60)
    assert v.verdict == "VERIFIED" and check_certificate(v.certificate).verified
    kinds = {type(b).__name__ for b in v.certificate["hints"]["bounds"]}
    assert {"dict", "list"} <= kinds and "upper" in v.certificate["hints"]
    return v.certificate


def _structural_leaf(c):
    return next(i for i, b in enumerate(c["hints"]["bounds"]) if isinstance(b, dict))


def _tamper_structure_lowered(c):
    i = _structural_leaf(c)
    c["hints"]["bounds"][i] = {"structure": str(to_fmpq(c["hints"]["bounds"][i]["structure"]) / 2)}


def _tamper_structure_key(c):
    i = _structural_leaf(c)
    c["hints"]["bounds"][i] = {"structure": c["hints"]["bounds"][i]["structure"], "x": 1}


def _tamper_upper_missing(c):
    del c["hints"]["upper"]


def _tamper_upper_v_lowered(c):
    c["hints"]["upper"]["V"] = str(to_fmpq(c["hints"]["upper"]["V"]) / 4)


def _tamper_upper_negative(c):
    # |-u| >= ‖V‖ passes the Gram test; a negative norm bound would make every bound negative
    c["hints"]["upper"]["V"] = "-" + c["hints"]["upper"]["V"]


def _tamper_upper_ktq_lowered(c):
    c["hints"]["upper"]["KtQ"] = "1/1000"


def _kept(cert):
    return [i for i, b in enumerate(cert["hints"]["bounds"]) if b != "drop"]


def _tamper_cell_removed(c):
    c["hints"]["bounds"][_kept(c)[0]] = "drop"  # a kept leaf declared outside


def _tamper_entry_dropped(c):
    del c["hints"]["bounds"][_kept(c)[-1]]


def _tamper_bound_lowered(c):
    i = _kept(c)[len(_kept(c)) // 2]
    c["hints"]["bounds"][i] = "1/1000"


def _tamper_pair_lowered(c):
    i = _kept(c)[0]
    b = c["hints"]["bounds"][i]
    c["hints"]["bounds"][i] = (
        [str(to_fmpq(b[0]) / 2), b[1]] if isinstance(b, list) else ["1/8", "1/8"]
    )


def _tamper_lhs_lowered(c):
    c["claim"]["lhs_upper"] = "1/1000"


def _tamper_rhs_raised(c):
    c["claim"]["rhs_lower"] = "10000"
    c["claim"]["lhs_upper"] = "10000"


def _tamper_factor(c):
    c["claim"]["factor"] = "1/10"


def _tamper_split_moved(c):
    tree = c["hints"]["tree"]
    tree[0] = (tree[0] + 1) % 4  # the root split along another coordinate


def _tamper_tree_truncated(c):
    c["hints"]["tree"].pop()


def _tamper_tree_extended(c):
    c["hints"]["tree"].append(-1)


def _tamper_radius(c):
    c["instance"]["R"] = "2"


def _tamper_more_tokens(c):
    c["instance"]["n"] = 3


def _tamper_value_matrix(c):
    c["instance"]["V"][0][0] = "3"


@pytest.mark.parametrize(
    "tamper",
    [_tamper_cell_removed, _tamper_entry_dropped, _tamper_bound_lowered, _tamper_pair_lowered,
     _tamper_lhs_lowered,
     _tamper_rhs_raised, _tamper_factor, _tamper_split_moved, _tamper_tree_truncated,
     _tamper_tree_extended, _tamper_radius, _tamper_more_tokens, _tamper_value_matrix,
     _tamper_structure_lowered, _tamper_structure_key, _tamper_upper_missing,
     _tamper_upper_v_lowered, _tamper_upper_negative, _tamper_upper_ktq_lowered],
)  # fmt: skip
def test_tampered_domain_certificates_are_rejected(certificate, tamper):
    c = copy.deepcopy(certificate)
    tamper(c)
    assert not check_certificate(c).verified


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8)
    | st.sampled_from(["1e999999", "-1/3", "0", "1/0", "nan", "9" * 400]),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["structure", "x"]), c,
                                                        max_size=2),
    max_leaves=6,
)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["leaf", "upper", "upper.V", "upper.KtQ"]), json_values)
def test_hostile_structure_entries_are_rejected_without_error(certificate, where, value):
    # the structural leaf and hints.upper under arbitrary JSON: a rejection, never an exception
    c = copy.deepcopy(certificate)
    if where == "leaf":
        c["hints"]["bounds"][_structural_leaf(c)] = value
    elif where == "upper":
        c["hints"]["upper"] = value
    else:
        c["hints"]["upper"][where.split(".")[1]] = value
    assert not check_certificate(c).verified  # none of these values certifies the leaf


def test_upper_hint_in_a_refutation_is_rejected():
    v = decide_on_domain(BASE, "H2", 2, factor=Q(1, 10), max_cells=100, seconds=10)
    c = copy.deepcopy(v.certificate)
    c["hints"]["upper"] = {"V": "10", "KtQ": "10"}
    assert not check_certificate(c).verified


def test_tampered_refutations_are_rejected():
    v = decide_on_domain(BASE, "H2", 2, factor=Q(1, 10), max_cells=100, seconds=10)
    assert check_certificate(v.certificate).verified
    for key, value in [("lhs_lower", "1000"), ("rhs_upper", "1/1000"), ("factor", "1")]:
        c = copy.deepcopy(v.certificate)
        c["claim"][key] = value
        assert not check_certificate(c).verified, key
    c = copy.deepcopy(v.certificate)
    c["claim"]["X"][0] = ["2", "0"]  # outside B_1
    assert not check_certificate(c).verified


def test_bad_input_is_rejected():
    with pytest.raises(InputError, match="n:"):
        decide_on_domain(BASE, "H2", 0)
    with pytest.raises(InputError, match="factor"):
        decide_on_domain(BASE, "H2", 2, factor=0)
    with pytest.raises(InputError, match="hypothesis"):
        decide_on_domain(BASE, "H3", 2)


def test_budget_exhaustion_is_undecided():
    # H2 itself closes at the root (bounds.md #domain-structure); a fifth of its right side not
    wide = _instance(BASE.Q.tolist(), BASE.K.tolist(), BASE.V.tolist(), 3)
    v = decide_on_domain(wide, "H2", 4, factor=Q(1, 5), max_cells=30, seconds=30, search=False)
    assert v.verdict == "UNDECIDED" and v.certificate is None and "budget" in v.message


def _cli(tmp_path, *extra):
    import json

    from certified.cli import main

    path = tmp_path / "i.json"
    body = {"Q": BASE.Q.tolist(), "K": BASE.K.tolist(), "V": BASE.V.tolist(), "R": "1"}
    body = {k: [[str(x) for x in r] for r in v] if k != "R" else v for k, v in body.items()}
    path.write_text(json.dumps({**body, "X": [[0, 0], [0, 0]]}))
    out = tmp_path / "c.json"
    argv = ["lipschitz", "--instance", str(path), "--hypothesis", "H2", "--domain"]
    return main([*argv, "--out", str(out), *extra]), out


def test_cli_domain_writes_checked_certificates(tmp_path, capsys):
    import json

    rc, out = _cli(tmp_path, "--json")
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["verdict"] == "VERIFIED" and data["certificate"] == str(out)
    assert check_certificate(json.loads(out.read_text())).verified
    out.unlink()
    rc, out = _cli(tmp_path, "--factor", "1/10", "--json")
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["verdict"] == "REFUTED" and data["counterexample"] is True
    assert check_certificate(json.loads(out.read_text())).verified


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--factor", "abc"], "factor"),
        (["--factor", "0"], "factor"),
        (["--max-cells", "0"], "--max-cells"),
        (["--seconds", "-1"], "--seconds"),
    ],
)
def test_cli_domain_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, extra, message):
    rc, out = _cli(tmp_path, *extra)
    err = capsys.readouterr().err
    assert rc == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


# issue 15's sizes (n <= 4, d <= 3, R <= 2): each closes at the root by the structural bound
# (bounds.md #domain-structure), well under a second; the 110-digit references take longer
@pytest.mark.parametrize(
    ("n", "d", "R"), [(3, 2, 2), (2, 3, 1), (3, 3, 2), (4, 3, 2), (4, 3, "1/2")]
)
def test_larger_true_instances_verified(n, d, R):
    rng = np.random.default_rng(0)
    mats = [np.round(rng.normal(size=(d, d)), 2).tolist() for _ in range(3)]
    inst = _instance(*mats, R)
    v = decide_on_domain(inst, "H2", n, max_cells=100_000, seconds=600)
    assert v.verdict == "VERIFIED", v.message
    assert check_certificate(v.certificate).verified
    with mp.workdps(60):
        assert _mpq(v.lhs_upper) <= _ref_rhs(inst, n)
        for X in _samples(inst, n, 1, 0):
            assert _ref_norm(inst, X) <= _mpq(v.lhs_upper)


small = st.sampled_from([-2, "-3/2", -1, "-1/3", 0, "1/4", "1/2", 1, "5/4", 2])


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.sampled_from(["1/4", "1/2", 1, "3/2", 2]),
       st.data())  # fmt: skip
def test_h2_is_verified_at_every_user_size(n, d, R, data):
    # H2 holds for every instance (bounds.md #domain-structure): VERIFIED, checked, and the
    # false variant (RHS/10) never VERIFIED where ‖V‖₂ = ‖Df(0)‖₂ exceeds it
    mats = [[[data.draw(small) for _ in range(d)] for _ in range(d)] for _ in range(3)]
    inst = _instance(*mats, R)
    v = decide_on_domain(inst, "H2", n, max_cells=50, seconds=10, search=False)
    if not any(inst.V.flat):  # f = 0: sup 0, VERIFIED without a certificate
        assert v.verdict == "VERIFIED" and v.lhs_upper == 0
        return
    assert v.verdict == "VERIFIED" and v.extra["run"].cells == 1, v.message
    assert check_certificate(v.certificate).verified


@settings(max_examples=60)
@given(st.integers(1, 64), st.fractions(0, 10**6))
def test_root_bound_is_below_the_h2_right_side(n, a):
    # bounds.md #domain-structure: with s = √n, a = ‖A‖R², the root bound ‖V‖(s + a(2s + 1)) is
    # below √3 ‖V‖ (a²(4n + 1) + n)^½ for every n and a (discriminant −12n(2s − 1)² < 0)
    with mp.workdps(50):
        a, sq = mpmath.mpf(a.numerator) / a.denominator, mpmath.sqrt(n)
        gap = 3 * (a * a * (4 * n + 1) + n) - (sq + a * (2 * sq + 1)) ** 2
        quad = (8 * n - 4 * sq + 2) * a * a - 2 * (2 * n + sq) * a + 2 * n
        assert gap > 0 and abs(gap - quad) <= mpmath.mpf(10) ** -40 * (1 + a * a * n)


@pytest.mark.parametrize(("n", "d", "R"), [(1, 2, 1), (2, 2, "1/2"), (3, 3, 2), (4, 2, "3/2")])
def test_root_structural_bound_is_the_closed_form(n, d, R):
    rng = np.random.default_rng(n + d)
    inst = _instance(*[np.round(rng.normal(size=(d, d)), 2).tolist() for _ in range(3)], R)
    hv, hm = norm_hint(inst.V, 64), norm_hint(inst.K.T @ inst.Q, 64)
    with precision(64):
        A = flint.arb_mat((inst.K.T @ inst.Q).tolist()) * (1 / flint.arb(inst.k).sqrt())
        nA, nV = flint.arb(hm["upper"]) / flint.arb(inst.k).sqrt(), flint.arb(hv["upper"])
        R_ = inst.R
        S = structural_bound(A, _balls([-R_] * (n * d), [R_] * (n * d), n, d, R_), R_, nA, nV)
        a, sq = nA * R_ * R_, flint.arb(n).sqrt()
        closed = nV * (sq * (1 + a) + a)  # ‖V‖(√n(1 + a) + a) <= ‖V‖(√n + a(2√n + 1))
    assert endpoints(S)[1] <= endpoints(closed)[1] * (1 + Q(1, 2**40))
    with mp.workdps(60):
        assert _mpq(endpoints(closed)[1]) < _ref_rhs(inst, n)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 3), st.integers(1, 2), st.data())
def test_structural_bound_contains_the_reference(n, d, data):
    # bounds.md #domain-structure, against 110-digit ‖Df(X)‖₂ at points of box ∩ (B_R)^n
    mats = [[[data.draw(entries) for _ in range(d)] for _ in range(d)] for _ in range(3)]
    inst = _instance(*mats, 1)
    R = Q(data.draw(st.sampled_from([1, 2, 3])), 2)
    lo = [data.draw(coords) * R for _ in range(n * d)]
    hi = [a + Q(data.draw(st.integers(1, 16)), 16) * R for a in lo]
    if any(sum(max(lo[i * d + b], -hi[i * d + b], 0) ** 2 for b in range(d)) > R * R
           for i in range(n)):  # fmt: skip
        return
    hv, hm = norm_hint(inst.V, 64), norm_hint(inst.K.T @ inst.Q, 64)
    with precision(64):
        A = flint.arb_mat((inst.K.T @ inst.Q).tolist()) * (1 / flint.arb(inst.k).sqrt())
        nA = flint.arb(hm["upper"]) / flint.arb(inst.k).sqrt()
        S = structural_bound(A, _balls(lo, hi, n, d, R), R, nA, flint.arb(hv["upper"]))
    top = _mpq(endpoints(S)[1]) if S.is_finite() else mpmath.inf
    for _ in range(3):
        ts = [Q(data.draw(st.integers(0, 8)), 8) for _ in range(n * d)]
        x = [a + t * (b - a) for a, b, t in zip(lo, hi, ts, strict=True)]
        X = [x[i * d : i * d + d] for i in range(n)]
        if all(sum(v * v for v in row) <= R * R for row in X):
            with mp.workdps(110):
                assert _ref_norm(inst, X) <= top


@settings(max_examples=10, deadline=None)
@given(st.integers(2, 4), st.integers(1, 3), st.data())
def test_structural_bound_above_the_worst_point_found(n, d, data):
    # bounds.md #domain-structure on a small box around the float ascent's best X (where ‖Df‖₂
    # is largest): the bound stays above the certified ‖Df(X)v‖/‖v‖ there
    mats = [[[data.draw(small) for _ in range(d)] for _ in range(d)] for _ in range(3)]
    inst = _instance(*mats, data.draw(st.sampled_from([1, "3/2", 2])))
    Af = inst.K.T.astype(float) @ inst.Q.astype(float) / np.sqrt(inst.k)
    _, found = ascend_jacobian_norm(Af, inst.V.astype(float), float(inst.R), [np.zeros((n, d))], 3)
    low, X, _ = certified_point_lower(inst, found, 64)
    x = [q for row in X for q in row]
    w = inst.R / 64
    lo, hi = [q - w for q in x], [q + w for q in x]
    hv, hm = norm_hint(inst.V, 64), norm_hint(inst.K.T @ inst.Q, 64)
    with precision(64):
        A = flint.arb_mat((inst.K.T @ inst.Q).tolist()) * (1 / flint.arb(inst.k).sqrt())
        nA = flint.arb(hm["upper"]) / flint.arb(inst.k).sqrt()
        S = structural_bound(A, _balls(lo, hi, n, d, inst.R), inst.R, nA, flint.arb(hv["upper"]))
    assert not S.is_finite() or endpoints(S)[1] >= low


@pytest.mark.parametrize(
    ("entry", "R"),
    [("1" * 5000, 1), (1, "1" + "0" * 400), (str(2**39), str(2**39))],
)  # regressions: OverflowError / NonFiniteError in the float heuristics (found by hand)
def test_extreme_magnitudes_are_undecided_without_error(entry, R):
    inst = _instance([[entry, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, entry]], R)
    v = decide_on_domain(inst, "H2", 2, max_cells=200, seconds=5)
    # no error; H2 may still close at the root (bounds.md #domain-structure): then checked
    assert v.verdict in ("UNDECIDED", "VERIFIED") and v.message
    assert (v.certificate is None) if v.verdict == "UNDECIDED" else v.certificate is not None
    if v.certificate is not None:
        assert check_certificate(v.certificate).verified
