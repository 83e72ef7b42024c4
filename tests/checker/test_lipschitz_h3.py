"""Checker rule ``lipschitz`` v1, hypothesis H3 (proofs/lipschitz.md §4): the golden H3 verdict
is accepted; every single-number edit, deleted or added field is rejected unless the edited claim
is still true, decided independently (mpmath at 60 digits: pushed atoms, spectral norms, W₂ of
uniform measures by brute force over permutations); forged claims are rejected; the REFUTED path
is exercised with a checker whose right-hand side is forced to 0 (H3 itself is never refuted on
these instances)."""

from __future__ import annotations

import copy
import itertools
import json
import sys
from pathlib import Path

import flint
import mpmath
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from mpmath import mp

from certified.arith.exact import to_fmpq
from certified.attention.instance import parse_attention_instance
from certified.attention.mean_field import check_h3
from certified.certificates import dumps_certificate, exact_number
from certified.checker import check_certificate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attention"))
from attention_reference import reference_map

GOLDEN = Path(__file__).resolve().parent / "golden_lipschitz_h3_verified.json"
DPS = 60

H3_INSTANCE = {
    "Q": [["1/2", 1], [-1, "1/3"]],
    "K": [[1, "-1/4"], ["2/3", 1]],
    "V": [[1, "1/2"], ["-1/3", 1]],
    "R": 1,
    "mu": {"points": [["1/2", 0], [0, "1/2"], ["-1/2", "1/4"]]},
    "nu": {"points": [["3/5", "1/10"], ["-1/10", "2/5"], ["-1/2", "-1/4"]]},
}


def _cert(instance):
    v = check_h3(parse_attention_instance(instance))
    assert v.certificate is not None, v.message
    return v, json.loads(dumps_certificate(v.certificate))


@pytest.fixture(scope="module")
def h3_verified():
    v, cert = _cert(H3_INSTANCE)
    assert v.verdict == "VERIFIED" and cert["claim"]["verdict"] == "VERIFIED"
    return cert


@pytest.fixture(scope="module")
def h3_forced_refutation():
    """A REFUTED certificate produced and checked with the right-hand side of H3 forced to 0
    (producer: rhs_bounds; checker: the norm bounds); the genuine checker must reject it."""
    import certified.attention.mean_field as mf
    import certified.checker._lipschitz_rule as lip

    with pytest.MonkeyPatch.context() as m:
        m.setattr(mf, "rhs_bounds", lambda *a: (flint.fmpq(0), flint.fmpq(0)))
        v, cert = _cert(H3_INSTANCE)
    assert v.verdict == "REFUTED" and cert["claim"]["rhs_upper"] == "0"
    real = lip.norm_bounds  # still parses and checks the norm hints, then scales them by 0
    return cert, lambda m: m.setattr(lip, "norm_bounds", lambda *a: [x * 0 for x in real(*a)])


# --- independent decision of the claim ---------------------------------------------------------


def _mp(q):
    return mpmath.mpf(int(q.p)) / int(q.q)


def _mat(a):
    return [[to_fmpq(v) for v in row] for row in a]


def _norm2(M):
    with mp.workdps(DPS):
        return max(mpmath.svd_r(mpmath.matrix([[_mp(x) for x in r] for r in M]), compute_uv=False))


def _w2_uniform(A, B):
    """W₂ of uniform measures with equal numbers of atoms: the best permutation (Birkhoff)."""
    n = len(A)
    best = min(
        sum(sum((a - b) ** 2 for a, b in zip(A[i], B[p[i]], strict=True)) for i in range(n))
        for p in itertools.permutations(range(n))
    )
    return mpmath.sqrt(best / n)


def claim_is_true(cert, rhs_zero=False) -> bool:
    """True iff the certificate's H3 claim holds, decided without its hints (uniform measures
    of equal size only; False otherwise or when not well formed). ``rhs_zero``: decide the
    claim with the right-hand side of H3 replaced by 0 (the forced-refutation semantics)."""
    try:
        inst, claim = cert["instance"], cert["claim"]
        if cert["kind"] != "lipschitz" or cert["version"] != 1 or claim["hypothesis"] != "H3":
            return False
        Q, K, V = (_mat(inst[key]) for key in ("Q", "K", "V"))
        R, k, d = to_fmpq(inst["R"]), len(Q), len(Q[0])
        (X, a), (Y, b) = ((_mat(inst[m]["points"]), inst[m]["weights"]) for m in ("mu", "nu"))
        n = len(X)
        shapes = [len(K) == k, len(V) == d, len(Y) == n, len(a) == len(b) == n]
        if not all(shapes + [len(r) == d for r in Q + K + V + X + Y]) or R <= 0:
            return False
        if any(to_fmpq(w) != flint.fmpq(1, n) for w in a + b):
            return False
        if any(sum(c * c for c in x) > R * R for x in X + Y):
            return False
        KtQ = [[sum(K[r][i] * Q[r][j] for r in range(k)) for j in range(d)] for i in range(d)]
        with mp.workdps(DPS):
            ar2 = _norm2(KtQ) / mpmath.sqrt(k) * _mp(R) ** 2
            rhs = 0 if rhs_zero else _norm2(V) * (1 + 3 * ar2) * mpmath.exp(2 * ar2)
            heads = [(Q, K, V, None)]
            FX, FY = reference_map(heads, X), reference_map(heads, Y)
            w_push = _w2_uniform(FX, FY)
            w_base = _w2_uniform([[_mp(c) for c in x] for x in X], [[_mp(c) for c in y] for y in Y])
            if claim["verdict"] == "VERIFIED":
                lhs, bound = to_fmpq(claim["lhs_upper"]), to_fmpq(claim["rhs_lower"])
                ok = w_base > 0 and w_push <= _mp(lhs) * w_base
                return ok and 0 <= lhs <= bound and _mp(bound) <= rhs
            if claim["verdict"] == "REFUTED":
                lhs, bound = to_fmpq(claim["lhs_lower"]), to_fmpq(claim["rhs_upper"])
                ok = w_push > 0 and w_push >= _mp(lhs) * w_base
                return ok and lhs > bound and _mp(bound) >= rhs
            return False
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, ArithmeticError):
        return False
    except Exception as exc:  # to_fmpq's own errors on malformed numbers
        if type(exc).__module__.startswith("certified"):
            return False
        raise


# --- golden and accepted certificates ----------------------------------------------------------


def test_golden_file_is_the_h3_verification_and_is_accepted(h3_verified):
    golden = json.loads(GOLDEN.read_text())
    assert golden["claim"]["hypothesis"] == "H3" and golden["claim"]["verdict"] == "VERIFIED"
    assert golden["instance"] == h3_verified["instance"]
    verdict = check_certificate(golden)
    assert verdict.verified and verdict.kind == "lipschitz", verdict.reason
    assert verdict.reason.startswith("H3 VERIFIED")
    assert check_certificate(h3_verified).verified
    assert claim_is_true(golden) and claim_is_true(h3_verified)


def test_forced_refutation_needs_the_forced_rhs(h3_forced_refutation, monkeypatch):
    cert, force = h3_forced_refutation
    assert not check_certificate(cert).verified  # the genuine RHS of H3 is far above 0
    assert not claim_is_true(cert)
    force(monkeypatch)
    v = check_certificate(cert)
    assert v.verified and v.reason.startswith("H3 REFUTED"), v.reason
    assert claim_is_true(cert, rhs_zero=True)


# --- single edits ------------------------------------------------------------------------------


def _leaves(obj, path=()):
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _leaves(value, (*path, i))
    else:
        yield path, obj


def _set(obj, path, value):
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _number_edits(value):
    if isinstance(value, int) and not isinstance(value, bool):
        return [value + 1, value - 1, -value, str(value), "1/3"]
    try:
        q = to_fmpq(value)
    except Exception:
        return [value + "x", "", "H1", "H2", "VERIFIED", "REFUTED"]
    edits = [q + 1, q - 1, q * 2, q + flint.fmpq(1, 1000), q - flint.fmpq(1, 3)]
    if q != 0:
        edits += [-q, q * flint.fmpq(999, 1000)]
    return [exact_number(e) for e in edits] + [1.5, None]


def _single_edits(cert, accepted_is_true):
    rejected = total = 0
    for path, value in _leaves(cert):
        for new in _number_edits(value):
            if new == value:
                continue
            edited = _set(cert, path, new)
            total += 1
            if check_certificate(edited).verified:
                assert accepted_is_true(edited), (path, value, new)
            else:
                rejected += 1
    return rejected, total


def test_single_edits_are_rejected_unless_the_claim_stays_true(h3_verified):
    rejected, total = _single_edits(h3_verified, claim_is_true)
    # the accepted rest: a looser claim, another precision, potentials or radius with room
    assert rejected >= 0.8 * total, (rejected, total)


def test_single_edits_of_the_forced_refutation(h3_forced_refutation, monkeypatch):
    cert, force = h3_forced_refutation
    force(monkeypatch)
    rejected, total = _single_edits(cert, lambda c: claim_is_true(c, rhs_zero=True))
    assert rejected >= 0.8 * total, (rejected, total)


@pytest.mark.parametrize("which", ["verified", "refuted"])
def test_deleted_or_added_fields_are_rejected(which, h3_verified, h3_forced_refutation, request):
    cert = h3_verified
    if which == "refuted":
        cert, force = h3_forced_refutation
        monkeypatch = request.getfixturevalue("monkeypatch")
        force(monkeypatch)
        assert check_certificate(cert).verified

    def objects(obj, path=()):
        if isinstance(obj, dict):
            yield path, obj
            for key, value in obj.items():
                yield from objects(value, (*path, key))

    for path, obj in list(objects(cert)):
        for key in [*obj, "extra"]:
            edited = copy.deepcopy(cert)
            target = edited
            for p in path:
                target = target[p]
            if key == "extra":
                target[key] = "0"
            else:
                del target[key]
            assert not check_certificate(edited).verified, (path, key)


def test_rows_deleted_or_duplicated_are_rejected(h3_verified):
    for where in (("Q",), ("K",), ("V",), ("mu", "points"), ("nu", "points")):
        for op in ("del", "dup"):
            edited = copy.deepcopy(h3_verified)
            rows = edited["instance"]
            for key in where:
                rows = rows[key]
            rows.pop() if op == "del" else rows.append(list(rows[-1]))
            assert not check_certificate(edited).verified, (where, op)


# --- forged claims and hints -------------------------------------------------------------------


def test_forged_claims_are_rejected(h3_verified):
    lhs = to_fmpq(h3_verified["claim"]["lhs_upper"])
    for factor in (flint.fmpq(999, 1000), flint.fmpq(1, 2), flint.fmpq(0)):
        forged = _set(h3_verified, ("claim", "lhs_upper"), exact_number(lhs * factor))
        assert not claim_is_true(forged) or factor == flint.fmpq(999, 1000)
        v = check_certificate(forged)
        assert not v.verified and "lhs_upper" in v.reason, v.reason
    too_high = _set(h3_verified, ("claim", "rhs_lower"), "100")  # RHS of H3 is about 28
    assert not claim_is_true(too_high) and not check_certificate(too_high).verified
    # a claim of REFUTED with the VERIFIED data, or of H1 on measures
    for key, value in (("verdict", "REFUTED"), ("hypothesis", "H1"), ("hypothesis", "H4")):
        assert not check_certificate(_set(h3_verified, ("claim", key), value)).verified


def test_forged_hints_are_rejected(h3_verified, h3_forced_refutation):
    base = h3_verified["hints"]["base"]
    # a wasserstein lower bound above W2(mu, nu)^2: the embedded check rejects it
    lq = to_fmpq(base["claim"]["lower_q"])
    v = check_certificate(
        _set(h3_verified, ("hints", "base", "claim", "lower_q"), exact_number(lq * 2))
    )
    assert not v.verified and v.reason.startswith("hints.base:"), v.reason
    # potentials of the pushed measures raised above a cost: infeasible
    cert, _ = h3_forced_refutation
    phi = to_fmpq(cert["hints"]["pushed"]["phi"][0])
    forged = _set(cert, ("hints", "pushed", "phi", 0), exact_number(phi + 1))
    assert not check_certificate(forged).verified
    # a norm test vector that is zero
    zero = _set(h3_verified, ("hints", "norms", "V", "vector"), ["0", "0"])
    assert not check_certificate(zero).verified


def test_broken_checkers_are_caught(h3_verified, monkeypatch):
    """The rule has teeth: without the recomputed pushed atoms it accepts a false claim."""
    import certified.checker._lipschitz_rule as rule

    loose = _set(h3_verified, ("claim", "lhs_upper"), "1/100")
    assert not claim_is_true(loose) and not check_certificate(loose).verified
    with monkeypatch.context() as m:  # every pushed atom at the origin: W2(F mu, F nu) "= 0"
        m.setattr(rule, "_gamma", lambda A, V, X, w: flint.arb_mat(X.nrows(), X.ncols()))
        assert check_certificate(loose).verified
    assert not check_certificate(loose).verified


def test_resource_limit_and_bad_precision(h3_verified):
    for prec in (52, 5000, "128", True):
        assert not check_certificate(_set(h3_verified, ("hints", "precision"), prec)).verified
    big = copy.deepcopy(h3_verified)
    big["hints"]["precision"] = 4096
    big["instance"]["mu"] = {"points": [["0", "0"]] * 400, "weights": ["1/400"] * 400}
    v = check_certificate(big)
    assert not v.verified and "resource limit" in v.reason, v.reason


# --- producer and checker on random instances ---------------------------------------------------

_q = st.fractions(-2, 2, max_denominator=8).map(lambda f: f"{f.numerator}/{f.denominator}")
_pt = st.tuples(
    st.fractions(-1, 1, max_denominator=16), st.fractions(-1, 1, max_denominator=16)
).filter(lambda p: p[0] ** 2 + p[1] ** 2 <= 1)


@settings(max_examples=10)
@given(
    st.lists(st.lists(_q, min_size=2, max_size=2), min_size=6, max_size=6),
    st.lists(_pt, min_size=2, max_size=3, unique=True),
    st.lists(_pt, min_size=2, max_size=3, unique=True),
)
@example(
    [["0", "0"], ["0", "0"], ["1", "0"], ["0", "0"], ["1", "0"], ["0", "1"]],
    [(1, 0), (0, 0)],
    [(0, 1), (0, 0)],
)  # Q = 0: Gamma is the (weighted) mean, F(mu) a Dirac mass
def test_random_instances_verdicts_are_accepted_and_true(mats, xs, ys):
    if len(xs) != len(ys):
        ys = (ys * 3)[: len(xs)]
        if len(set(ys)) != len(ys):
            return
    pts = lambda p: [[f"{c.numerator}/{c.denominator}" for c in x] for x in p]  # noqa: E731
    inst = {
        "Q": mats[0:2],
        "K": mats[2:4],
        "V": mats[4:6],
        "R": 1,
        "mu": {"points": pts(xs)},
        "nu": {"points": pts(ys)},
    }
    v = check_h3(parse_attention_instance(inst))
    event(v.verdict)
    assert v.verdict in ("VERIFIED", "UNDECIDED"), v.message  # H3 is not refuted here
    if v.verdict == "VERIFIED":
        cert = json.loads(dumps_certificate(v.certificate))
        verdict = check_certificate(cert)
        assert verdict.verified, verdict.reason
        assert claim_is_true(cert)


def test_zero_weights_and_unequal_sizes_through_the_api():
    inst = parse_attention_instance(
        {
            "Q": [["1/2", 0]],
            "K": [[1, "1/3"]],
            "V": [[1, 0], [0, "1/2"]],
            "R": 1,
            "mu": {"points": [[0, 0], ["1/2", "1/4"], ["-1/2", 0]], "weights": ["1/3", "2/3", 0]},
            "nu": {"points": [["1/10", 0], ["1/2", "1/2"]]},
        }
    )
    v = check_h3(inst)
    assert v.verdict == "VERIFIED" and check_certificate(v.certificate).verified
