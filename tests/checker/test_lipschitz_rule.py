"""Checker rule ``lipschitz`` v1: the golden H1 refutation and an H2 verification are accepted;
every single-number edit that makes the claim false, every deleted or added field and every
structural edit is rejected (the claim's truth is decided independently at 110 digits with
mpmath); deliberately broken checkers are caught."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import flint
import mpmath
import pytest
from mpmath import mp

from certified.arith.exact import to_fmpq
from certified.attention.instance import parse_attention_instance
from certified.attention.lipschitz import check_attention_hypothesis
from certified.certificates import dumps_certificate, exact_number
from certified.checker import check_certificate
from certified.errors import InputError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "attention"))
from attention_reference import reference_jacobian, reference_map

GOLDEN = Path(__file__).resolve().parent / "golden_lipschitz_h1_refutation.json"

# QᵀK = 0 with every entry of Q and K nonzero-relevant: changing any entry makes QᵀK != 0
H1_INSTANCE = {
    "Q": [[0, 1], [0, -1]],
    "K": [[1, 0], [1, 0]],
    "V": [[1, 2], [0, 1]],
    "R": 1,
    "X": [[1, 0], [0, "1/2"], ["-1/2", "-1/2"]],
}
H2_INSTANCE = {
    "Q": [["1/2", 1], [-1, "1/3"]],
    "K": [[1, "-1/4"], ["2/3", 1]],
    "V": [[1, "1/2"], ["-1/3", 1]],
    "R": 1,
    "X": [["1/2", 0], [0, "1/2"], ["-1/2", "1/4"]],
}


def _cert(instance, hypothesis):
    v = check_attention_hypothesis(parse_attention_instance(instance), hypothesis)
    assert v.certificate is not None, v.message
    return json.loads(dumps_certificate(v.certificate))


@pytest.fixture(scope="module")
def h1_refutation():
    return _cert(H1_INSTANCE, "H1")


@pytest.fixture(scope="module")
def h2_verified():
    cert = _cert(H2_INSTANCE, "H2")
    assert cert["claim"]["verdict"] == "VERIFIED"
    return cert


def test_golden_file_is_the_h1_refutation_and_is_accepted(h1_refutation):
    golden = json.loads(GOLDEN.read_text())
    assert golden["claim"]["verdict"] == "REFUTED" and golden["claim"]["rhs_upper"] == "0"
    assert golden["instance"] == h1_refutation["instance"]
    verdict = check_certificate(golden)
    assert verdict.verified and verdict.kind == "lipschitz", verdict.reason
    assert check_certificate(h1_refutation).verified


def test_h2_verification_is_accepted(h2_verified):
    assert check_certificate(h2_verified).verified


# --- independent decision of the claim (mpmath, 110 digits; exact where possible) -------------


def _mat(a):
    return [[to_fmpq(v) for v in row] for row in a]


def _mp(q):
    return mpmath.mpf(int(q.p)) / int(q.q)


def _norm2(M):
    with mp.workdps(110):
        return max(mpmath.svd_r(mpmath.matrix([[_mp(x) for x in r] for r in M]), compute_uv=False))


def claim_is_true(cert) -> bool:
    """True iff the certificate's claim holds (independently of its hints); False if it fails
    or if the certificate is not well formed for this decision."""
    try:
        inst, claim = cert["instance"], cert["claim"]
        Q, K, V, X = (_mat(inst[key]) for key in ("Q", "K", "V", "X"))
        R = to_fmpq(inst["R"])
        k, d, n = len(Q), len(Q[0]), len(X)
        shapes = [len(K) == k, len(V) == d] + [len(r) == d for r in Q + K + V + X]
        if not all(shapes) or R <= 0 or cert["kind"] != "lipschitz" or cert["version"] != 1:
            return False
        if any(sum(c * c for c in x) > R * R for x in X):
            return False
        KtQ = [[sum(K[r][a] * Q[r][b] for r in range(k)) for b in range(d)] for a in range(d)]
        with mp.workdps(110):
            nv, nm = _norm2(V), _norm2(KtQ)
            r2 = _mp(R) ** 2
            if claim["hypothesis"] == "H1":
                rhs = nv * nm * r2 * mpmath.sqrt(12 * n + 3)
            elif claim["hypothesis"] == "H2":
                rhs = mpmath.sqrt(3) * nv * mpmath.sqrt(nm**2 / k * r2**2 * (4 * n + 1) + n)
            else:
                return False
            heads = [(Q, K, V, None)]
            if claim["verdict"] == "REFUTED":
                lhs, bound = to_fmpq(claim["lhs_lower"]), to_fmpq(claim["rhs_upper"])
                Xp = _mat(claim["X_prime"])
                if len(Xp) != n or any(len(r) != d for r in Xp) or Xp == X or not lhs > bound:
                    return False
                if any(sum(c * c for c in x) > R * R for x in Xp):
                    return False
                F, G = reference_map(heads, X), reference_map(heads, Xp)
                num = sum((F[i][a] - G[i][a]) ** 2 for i in range(n) for a in range(d))
                den = sum(_mp(x - y) ** 2 for rx, ry in zip(X, Xp) for x, y in zip(rx, ry))  # noqa: B905
                return mpmath.sqrt(num / den) >= _mp(lhs) and rhs <= _mp(bound)
            if claim["verdict"] == "VERIFIED":
                lhs, bound = to_fmpq(claim["lhs_upper"]), to_fmpq(claim["rhs_lower"])
                J = reference_jacobian(heads, X)
                return 0 <= lhs <= bound and _norm2_mp(J) <= _mp(lhs) and rhs >= _mp(bound)
            return False
    except (KeyError, TypeError, ValueError, IndexError, InputError, AttributeError):
        return False


def _norm2_mp(J):
    with mp.workdps(110):
        return max(mpmath.svd_r(mpmath.matrix(J), compute_uv=False))


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
        return [value + "x", "", "H3" if value in ("H1", "H2") else "H1", "VERIFIED", "REFUTED"]
    edits = [q + 1, q - 1, q * 2, q + flint.fmpq(1, 1000), q - flint.fmpq(1, 3)]
    if q != 0:
        edits += [-q, q * flint.fmpq(999, 1000)]
    return [exact_number(e) for e in edits] + [1.5, None]


@pytest.mark.parametrize("which", ["h1_refutation", "h2_verified"])
def test_single_edits_are_rejected_unless_the_claim_stays_true(which, request):
    cert = request.getfixturevalue(which)
    assert check_certificate(cert).verified
    rejected = total = 0
    for path, value in _leaves(cert):
        for new in _number_edits(value):
            if new == value:
                continue
            edited = _set(cert, path, new)
            verdict = check_certificate(edited)
            total += 1
            if verdict.verified:
                assert claim_is_true(edited), (path, value, new, verdict.reason)
            else:
                rejected += 1
    # most edits make the claim false; the rest (a looser bound, a larger R, another precision)
    # leave a true claim, which the checker may accept
    assert rejected >= 0.8 * total, (rejected, total)


@pytest.mark.parametrize("which", ["h1_refutation", "h2_verified"])
def test_deleted_or_added_fields_are_rejected(which, request):
    cert = request.getfixturevalue(which)

    def objects(obj, path=()):
        if isinstance(obj, dict):
            yield path, obj
            for key, value in obj.items():
                yield from objects(value, (*path, key))

    for path, obj in list(objects(cert)):
        for key in obj:
            edited = copy.deepcopy(cert)
            target = edited
            for p in path:
                target = target[p]
            del target[key]
            assert not check_certificate(edited).verified, (path, key)
        edited = copy.deepcopy(cert)
        target = edited
        for p in path:
            target = target[p]
        target["extra"] = "0"
        assert not check_certificate(edited).verified, path


def test_rows_deleted_or_duplicated_are_rejected(h1_refutation):
    for key in ("X", "Q", "K", "V"):
        for op in ("del", "dup"):
            edited = copy.deepcopy(h1_refutation)
            rows = edited["instance"][key]
            rows.pop() if op == "del" else rows.append(list(rows[-1]))
            assert not check_certificate(edited).verified, (key, op)


def test_resource_limit_and_bad_precision(h1_refutation):
    big = copy.deepcopy(h1_refutation)
    big["instance"]["X"] = [["0", "0"]] * 129
    big["claim"]["X_prime"] = [["0", "1/2"]] * 129
    v = check_certificate(big)
    assert not v.verified and "n*d" in v.reason
    for prec in (52, 5000, "128", True):
        assert not check_certificate(_set(h1_refutation, ("hints", "precision"), prec)).verified


def test_broken_checkers_are_caught(h1_refutation, h2_verified, monkeypatch):
    """The rule has teeth: weakened versions accept false claims."""
    import certified.checker._lipschitz_rule as rule

    false_refutation = _set(h1_refutation, ("claim", "lhs_lower"), "10")
    assert not claim_is_true(false_refutation)
    assert not check_certificate(false_refutation).verified
    false_norm = _set(h1_refutation, ("hints", "norms", "V", "upper"), "1")
    assert not check_certificate(false_norm).verified  # ‖V‖₂ > 1: LDLᵀ must fail
    with monkeypatch.context() as m:  # a checker without the positive-definiteness test
        m.setattr(rule, "_pd", lambda G: True)
        loose = _set(h2_verified, ("claim", "lhs_upper"), "1/1000")
        assert not claim_is_true(loose)
        assert check_certificate(loose).verified
    assert not check_certificate(loose).verified
