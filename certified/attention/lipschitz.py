"""Three-valued checks of the Lipschitz statements H1 and H2 (theorems.md section 5).

f(X)_i = Σ_j softmax_j(x_iᵀ A x_j) V x_j with A = KᵀQ/√k, Frobenius norm on (R^d)^n, inputs
in (B_R)^n (closed balls). The hypotheses, as transcribed:

* H1: Lip(f) ≤ ‖V‖₂ ‖QᵀK‖₂ R² √(12n + 3);
* H2: ‖Df(X)‖₂ ≤ √3 ‖V‖₂ (‖A‖₂² R⁴ (4n + 1) + n)^{1/2} for every X in (B_R)^n.

Since (B_R)^n is convex, Lip(f) = sup ‖Df(X)‖₂ there, so both are statements about the same
quantity with different right-hand sides. Verdicts (proofs/lipschitz.md):

* REFUTED: a pair X ≠ X' in (B_R)^n whose certified ratio ‖f(X) − f(X')‖/‖X − X'‖ exceeds a
  certified upper bound on the right-hand side. Heuristics (float SVDs) propose the pair.
* VERIFIED: at the instance's X, a certified upper bound on ‖Df(X)‖₂ is at most a certified
  lower bound on the right-hand side. This is the statement *at X*, not over the domain.
* UNDECIDED otherwise (the message says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import flint
import numpy as np

from certified.arith.ball import check_precision, endpoints, precision
from certified.arith.exact import approx_str, to_fmpq, to_fmpq_array
from certified.attention.instance import AttentionInstance
from certified.attention.maps import attention_jacobian, attention_map, to_numpy_mid
from certified.attention.norms import exact_norm_upper, scaled_float, spectral_norm_upper
from certified.errors import InputError
from certified.verdict import Outcome

__all__ = [
    "HYPOTHESES",
    "LipschitzVerdict",
    "check_attention_hypothesis",
    "check_on_domain",
    "norm_hint",
    "pair_ratio_lower",
    "rhs_bounds",
    "round_down",
    "round_up",
]

HYPOTHESES = ("H1", "H2")
DEFAULT_PREC = 128
CLAIM_BITS = 40  # claims are rounded outward to this many significant bits (replay margin)


@dataclass(frozen=True, eq=False)
class LipschitzVerdict:
    """Outcome of a Lipschitz check.

    Attributes
    ----------
    hypothesis : str
    verdict : Outcome
        VERIFIED, REFUTED or UNDECIDED (equal to its contract string).
    lhs_lower, lhs_upper : fmpq or None
        Certified bounds on the left side (REFUTED: the ratio of the counterexample pair;
        VERIFIED: ‖Df(X)‖₂ at the instance X).
    rhs_lower, rhs_upper : fmpq or None
        Certified bounds on the right side of the hypothesis.
    statement : str
        Exactly what the verdict asserts.
    counterexample : dict or None
        ``{"X": ..., "X_prime": ...}`` exact (n, d) object arrays (REFUTED).
    certificate : dict or None
        A ``lipschitz`` v1 certificate (kind as in proofs/lipschitz.md), not yet checked.
    message : str

    Guarantee: VERIFIED / REFUTED imply ``statement`` (the producer is untrusted only for the
    certificate, which the checker re-verifies).
    """

    hypothesis: str
    verdict: Outcome
    lhs_lower: flint.fmpq | None
    lhs_upper: flint.fmpq | None
    rhs_lower: flint.fmpq | None
    rhs_upper: flint.fmpq | None
    statement: str
    counterexample: dict[str, Any] | None = None
    certificate: dict[str, Any] | None = None
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # producers may pass the contract string: normalised (and validated) here
        object.__setattr__(self, "verdict", Outcome(self.verdict))


def _scaled(q: flint.fmpq, bits: int) -> tuple[flint.fmpq, int]:
    # 2^(e0 - 1) <= |q| < 2^(e0 + 1) with e0 the difference of bit lengths: exact, any size
    e = bits - (int(abs(q.p)).bit_length() - int(q.q).bit_length()) if q != 0 else 0
    return q * flint.fmpq(2) ** e if e >= 0 else q / flint.fmpq(2) ** (-e), e


def round_down(q: Any, bits: int = CLAIM_BITS) -> flint.fmpq:
    """Largest dyadic with about ``bits`` significant bits that is ``<= q``. Guarantee: exact."""
    q = to_fmpq(q)
    if q == 0:
        return q
    s, e = _scaled(q, bits)
    m = flint.fmpq(s.floor())
    return m / flint.fmpq(2) ** e if e >= 0 else m * flint.fmpq(2) ** (-e)


def round_up(q: Any, bits: int = CLAIM_BITS) -> flint.fmpq:
    """Smallest dyadic with about ``bits`` significant bits that is ``>= q``. Guarantee: exact."""
    return -round_down(-to_fmpq(q), bits)


def norm_hint(M: np.ndarray, prec: int) -> dict[str, Any]:
    """Certified ``upper`` (exact LDLᵀ) and a float test ``vector`` for ``‖M‖₂`` of an exact
    matrix, with the ``lower`` bound the vector gives (proofs/bounds.md#spectral-upper,
    #spectral-lower).

    Guarantee: ``lower <= ‖M‖₂ <= upper``.
    """
    Mf, _ = scaled_float(M)  # the test vector is a heuristic: any scale will do
    v = np.linalg.svd(Mf)[2][0] if np.any(Mf) else np.eye(M.shape[1])[0]
    vq = to_fmpq_array(v, "v")
    upper = exact_norm_upper(M)
    num = sum(
        (sum((a * b for a, b in zip(row, vq, strict=True)), flint.fmpq(0)) ** 2 for row in M),
        flint.fmpq(0),
    )
    den = sum((x * x for x in vq), flint.fmpq(0))
    with precision(prec):
        lower = endpoints((flint.arb(num) / flint.arb(den)).sqrt(), "norm")[0]
    return {"upper": upper, "vector": vq, "lower": max(lower, flint.fmpq(0))}


def rhs_bounds(
    hypothesis: str, norm_v: tuple, norm_ktq: tuple, R: Any, n: int, k: int, prec: int
) -> tuple[flint.fmpq, flint.fmpq]:
    """Certified ``(lower, upper)`` on the right side of H1/H2/H3 from two-sided bounds on
    ``‖V‖₂`` and ``‖KᵀQ‖₂`` (each side is increasing in both norms; ``‖A‖₂ = ‖KᵀQ‖₂/√k``).

    Guarantee: encloses the right-hand side (proofs/lipschitz.md#right-hand-sides).
    """
    R = to_fmpq(R, "R")
    out = []
    with precision(prec):
        for nv, nm in ((norm_v[0], norm_ktq[0]), (norm_v[1], norm_ktq[1])):
            v, m, r2 = flint.arb(nv), flint.arb(nm), flint.arb(R * R)
            if hypothesis == "H1":
                val = v * m * r2 * flint.arb(12 * n + 3).sqrt()
            elif hypothesis == "H2":
                val = flint.arb(3).sqrt() * v * ((m * m / k) * r2 * r2 * (4 * n + 1) + n).sqrt()
            elif hypothesis == "H3":
                a = m / flint.arb(k).sqrt()
                val = v * (1 + 3 * a * r2) * (2 * a * r2).exp()
            else:
                raise InputError(f"hypothesis: {hypothesis!r} is not H1, H2 or H3")
            out.append(val)
        return endpoints(out[0], "rhs")[0], endpoints(out[1], "rhs")[1]


def pair_ratio_lower(inst: AttentionInstance, X: Any, Xp: Any, prec: int) -> flint.fmpq:
    """Certified lower bound on ``‖f(X) − f(X')‖_F / ‖X − X'‖_F`` (exact X ≠ X').

    Guarantee: lower bound on the ratio (proofs/lipschitz.md#pair).
    """
    X, Xp = to_fmpq_array(X, "X"), to_fmpq_array(Xp, "X_prime")
    den = sum(((a - b) ** 2 for a, b in zip(X.flat, Xp.flat, strict=True)), flint.fmpq(0))
    if den == 0:
        return flint.fmpq(0)
    F, G = attention_map(inst.layer, X, prec=prec), attention_map(inst.layer, Xp, prec=prec)
    with precision(prec):
        num = flint.arb(0)
        for i in range(F.nrows()):
            for a in range(F.ncols()):
                e = F[i, a] - G[i, a]
                num += e * e
        ratio = (num / flint.arb(den)).sqrt()
        return max(endpoints(ratio, "ratio")[0], flint.fmpq(0)) if ratio.is_finite() else 0


def _inside(X: np.ndarray, R: flint.fmpq) -> bool:
    return all(sum((v * v for v in x), flint.fmpq(0)) <= R * R for x in X)


def _exact(a: np.ndarray) -> np.ndarray:
    return to_fmpq_array(np.asarray(a, dtype=float), "X")


def _room(X: np.ndarray, v: np.ndarray, R: float) -> float:
    """Largest t >= 0 with |x_i + t v| <= R for all i (float, then shrunk; verified later)."""
    xv, x2 = X @ v, np.einsum("ij,ij->i", X, X)
    disc = np.maximum(xv * xv + R * R - x2, 0.0)
    return max(float(np.min(-xv + np.sqrt(disc))) * 0.99, 0.0)


def candidate_pairs(inst: AttentionInstance, prec: int) -> list[np.ndarray]:
    """Heuristic partners X' of the instance X in (B_R)^n likely to give a large ratio:
    common translations along the top right singular vector of V (ratio ‖V‖₂ when QᵀK = 0)
    and small steps along the top singular vector of Df(X) (ratio -> ‖Df(X)‖₂).

    Guarantee: none (heuristic); every returned X' is exactly in (B_R)^n.
    """
    try:
        return _candidate_pairs(inst, prec)
    except (OverflowError, ZeroDivisionError, np.linalg.LinAlgError):
        return []  # numbers beyond the reach of the float heuristic: it proposes nothing


def _candidate_pairs(inst: AttentionInstance, prec: int) -> list[np.ndarray]:
    X = inst.X.astype(float)
    n, d, R = X.shape[0], inst.d, float(inst.R)
    Vf, _ = scaled_float(inst.V)
    v = np.linalg.svd(Vf)[2][0] if np.any(Vf) else np.eye(d)[0]
    J = to_numpy_mid(attention_jacobian(inst.layer, inst.X, prec=64))
    if not np.all(np.isfinite(J)):
        raise OverflowError("the Jacobian's midpoints leave the double range")
    u = np.linalg.svd(J)[2][0].reshape(n, d)
    out = []
    for s in (1.0, -1.0):
        t = _room(X, s * v, R)
        for frac in (1.0, 1e-3):
            if t > 0:
                out.append(_exact(X + frac * t * s * v))
        for h in (1e-4, 1e-7):
            out.append(_exact(X + s * h * R * u / max(np.abs(u).max(), 1e-300)))
    return [Xp for Xp in out if _inside(Xp, inst.R) and np.any(Xp != inst.X)]


def check_attention_hypothesis(
    inst: AttentionInstance, hypothesis: str, *, prec: int = DEFAULT_PREC
) -> LipschitzVerdict:
    """Three-valued check of H1 or H2 on an instance (module docstring).

    Parameters
    ----------
    inst : AttentionInstance
        With a point cloud ``X`` (n tokens) in (B_R)^n.
    hypothesis : {"H1", "H2"}
    prec : int

    Returns
    -------
    LipschitzVerdict
        With a ``lipschitz`` v1 certificate for VERIFIED and REFUTED.

    Raises
    ------
    InputError

    Guarantee: REFUTED ⇒ the hypothesis fails for this (Q, K, V, R, n) (a certified
    counterexample pair); VERIFIED ⇒ ‖Df(X)‖₂ ≤ RHS at the instance X.
    """
    prec = check_precision(prec)
    if hypothesis not in HYPOTHESES:
        raise InputError(f"hypothesis: {hypothesis!r}; use one of {', '.join(HYPOTHESES)}")
    if inst.X is None:
        raise InputError('X: give a point cloud "X" (n×d) in the instance')
    n = inst.X.shape[0]
    hv, hm = norm_hint(inst.V, prec), norm_hint(inst.K.T @ inst.Q, prec)
    rhs_lo, rhs_hi = rhs_bounds(
        hypothesis,
        (hv["lower"], hv["upper"]),
        (hm["lower"], hm["upper"]),
        inst.R,
        n,
        inst.k,
        prec,
    )
    best, best_pair = flint.fmpq(-1), None
    for Xp in candidate_pairs(inst, prec):
        r = pair_ratio_lower(inst, inst.X, Xp, prec)
        if r > best:
            best, best_pair = r, (inst.X, Xp)
    hints = {"precision": prec, "norms": {"V": hv, "KtQ": hm}}
    if best_pair is not None and best > rhs_hi:
        lhs, rhs = round_down(best), round_up(rhs_hi)
        pair = {"X": best_pair[0], "X_prime": best_pair[1]}
        claim = {
            "hypothesis": hypothesis,
            "verdict": "REFUTED",
            "lhs_lower": lhs,
            "rhs_upper": rhs,
            "X_prime": best_pair[1],
        }
        return LipschitzVerdict(
            hypothesis,
            Outcome.REFUTED,
            lhs,
            None,
            rhs_lo,
            rhs,
            _statement(hypothesis, Outcome.REFUTED, n),
            counterexample=pair,
            certificate=_certificate(inst, claim, hints),
            message=f"certified ratio >= {approx_str(lhs)} > {approx_str(rhs)} >= right-hand side",
            extra={"pair_ratio_lower": best},
        )
    lower_found = best if best >= 0 else None
    J = attention_jacobian(inst.layer, inst.X, prec=prec)
    up = spectral_norm_upper(J, prec)
    if up <= rhs_lo:
        # strictly above the norm: the checker's positive-definiteness test is strict
        lhs = round_up(up * (1 + flint.fmpq(1, 2**30)), CLAIM_BITS - 8)
        rhs = round_down(rhs_lo)
        if lhs <= rhs:
            claim = {
                "hypothesis": hypothesis,
                "verdict": "VERIFIED",
                "lhs_upper": lhs,
                "rhs_lower": rhs,
            }
            return LipschitzVerdict(
                hypothesis,
                Outcome.VERIFIED,
                lower_found,
                lhs,
                rhs,
                rhs_hi,
                _statement(hypothesis, Outcome.VERIFIED, n),
                # lhs_upper = 0 (V = 0) cannot be certified by a strict positive-definiteness test
                certificate=_certificate(inst, claim, hints) if lhs > 0 else None,
                message=f"‖Df(X)‖₂ <= {approx_str(lhs)} <= {approx_str(rhs)} <= right-hand side",
                extra={"pair_ratio_lower": best},
            )
    return LipschitzVerdict(
        hypothesis,
        Outcome.UNDECIDED,
        lower_found,
        up,
        rhs_lo,
        rhs_hi,
        "",
        message=f"‖Df(X)‖₂ <= {approx_str(up)} is not below the right side's lower bound "
        f"{approx_str(rhs_lo)}, and no pair beats its upper bound {approx_str(rhs_hi)}",
        extra={"pair_ratio_lower": best},
    )


def _statement(hypothesis: str, verdict: Outcome, n: int) -> str:
    if verdict is Outcome.REFUTED:
        return (
            f"{hypothesis} is false for these Q, K, V, R and n = {n}: the certified pair X, X' "
            "in (B_R)^n has ‖f(X) − f(X')‖_F / ‖X − X'‖_F >= lhs_lower > rhs_upper >= RHS"
        )
    return f"at the instance X: ‖Df(X)‖₂ <= lhs_upper <= rhs_lower <= RHS of {hypothesis}"


def _certificate(inst: AttentionInstance, claim: dict, hints: dict) -> dict[str, Any]:
    from certified.certificates import exact_number

    mat = lambda a: [[exact_number(v) for v in row] for row in a]  # noqa: E731
    body = inst.to_json()
    instance = {key: body[key] for key in ("Q", "K", "V", "R", "X")}
    c = dict(claim)
    for key in ("lhs_lower", "rhs_upper", "lhs_upper", "rhs_lower"):
        if key in c:
            c[key] = exact_number(c[key])
    if "X_prime" in c:
        c["X_prime"] = mat(c["X_prime"])
    key = "upper" if claim["verdict"] == "REFUTED" else "vector"
    norms = {}
    for name, b in hints["norms"].items():
        value = b[key]
        norms[name] = {
            key: exact_number(value) if key == "upper" else [exact_number(x) for x in value]
        }
    h = {"precision": hints["precision"], "norms": norms}
    return {"kind": "lipschitz", "version": 1, "instance": instance, "claim": c, "hints": h}


def check_on_domain(
    inst: AttentionInstance,
    hypothesis: str,
    n: int | None = None,
    *,
    prec: int = 64,
    factor: Any = 1,
    max_cells: int = 200_000,
    seconds: float = 600.0,
) -> LipschitzVerdict:
    """H1/H2 over the whole domain (B_R)^n by adaptive subdivision of [−R, R]^{nd}
    (:func:`certified.attention.domain.decide_on_domain`; proofs/lipschitz.md §5).

    ``factor`` scales the right-hand side (1: the hypothesis itself); ``max_cells`` and
    ``seconds`` bound the work (UNDECIDED when exhausted). VERIFIED and REFUTED carry a
    ``lipschitz-domain`` certificate (not yet checked; the CLI checks it before writing).

    Guarantee: VERIFIED ⇒ Lip(f|(B_R)^n) = sup ‖Df‖₂ ≤ lhs_upper ≤ factor·RHS (the hypothesis
    holds for these Q, K, V, R, n when factor = 1); REFUTED ⇒ ‖Df(X)‖₂ > factor·RHS at the
    certified X in (B_R)^n.
    """
    from certified.attention.domain import decide_on_domain

    return decide_on_domain(
        inst, hypothesis, n, factor=factor, prec=prec, max_cells=max_cells, seconds=seconds
    )
