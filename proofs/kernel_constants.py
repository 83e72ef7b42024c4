"""Rigorous evaluation of the numeric constants in proofs/bounds.md.

Each function returns an arb upper bound (computed in python-flint ball arithmetic at 256 bits)
of the error term a lemma of bounds.md defines, and `check_all()` asserts that every kernel's
allowance in certified/arith/_kernels.py dominates its proved error. Run by
tests/arith/test_kernel_constants.py; also runnable on its own: `python proofs/kernel_constants.py`.
This file depends on python-flint only (not on the package), so that it can check the
package's constants rather than trust them.
"""

from __future__ import annotations

from math import factorial

from flint import arb, ctx

U = arb(2) ** -53  # unit roundoff
ETA = arb(2) ** -1074
RHO = arb("0.3466")  # |r| bound after reduction (exp-reduction)
LN2_HI = arb(float.fromhex("0x1.62e42fee00000p-1"))
LN2_LO = arb(float.fromhex("0x1.a39ef35793c76p-33"))
INV_LN2 = arb(1.4426950408889634)
KMAX = 1076  # |k| bound for exp arguments in [-745.2, 709.78]


def gamma(n: int) -> arb:
    return n * U / (1 - n * U)


def ln2_split_error() -> arb:
    """|ln 2 - LN2_HI - LN2_LO| (exp-reduction)."""
    return abs(arb(2).log() - LN2_HI - LN2_LO)


def reduced_argument_bound() -> arb:
    """Upper bound of |x - k ln2| for k = rint(fl(x * INV_LN2)), |x| <= 745.2."""
    rel = abs(INV_LN2 * arb(2).log() - 1)  # INV_LN2 = (1 + rel') / ln2
    v_err = arb("745.2") / arb(2).log() * (rel + U + rel * U)  # |fl(x I) - x / ln2|
    return arb(2).log() * (arb("0.5") + v_err)


def reduction_error(kmax: int = KMAX) -> arb:
    """delta_red: |r_hat - (x - k ln2)| (exp-reduction)."""
    t = RHO + kmax * abs(LN2_LO) + kmax * ln2_split_error()
    kl = kmax * abs(LN2_LO)
    return U * (2 * t + 2 * kl) * (1 + U) + kmax * ln2_split_error()


def exp_taylor_error() -> arb:
    """Relative error bound of the degree-13 Horner value vs e^r for |r| <= RHO (exp-taylor)."""
    trunc = RHO**14 / factorial(14) * RHO.exp()
    coef = sum(U / factorial(i) * RHO**i for i in range(3, 14))
    horner = sum(gamma(2 * i + 1) * (1 + U) / factorial(i) * RHO**i for i in range(14))
    underflow = 26 * ETA
    return (trunc + coef + horner + underflow) / (-RHO).exp()


def exp_total_error() -> arb:
    """epsilon of the widening lemma for exp: |y - e^x| <= eps |y| + eta."""
    ep = exp_taylor_error()
    d = reduction_error()
    er = d * d.exp()
    tot = (1 + ep) * (1 + er) - 1
    return tot / (1 - tot)


def expm1_taylor_error() -> arb:
    """Relative error of r * P_hat(r) vs expm1(r) for |r| <= RHO (expm1)."""
    trunc = RHO**14 / factorial(15) * RHO.exp()
    coef = sum(U / factorial(i + 1) * RHO**i for i in range(2, 14))
    horner = sum(gamma(2 * i + 1) * (1 + U) / factorial(i + 1) * RHO**i for i in range(14))
    p_min = (1 - (-RHO).exp()) / RHO  # min of P(r) = expm1(r)/r on [-RHO, RHO]
    return ((trunc + coef + horner + 28 * ETA) / p_min) * (1 + U) + U


def expm1_total_error() -> arb:
    """epsilon of the widening lemma for expm1 on [-40, 709.78] (expm1)."""
    eq = expm1_taylor_error()
    worst = eq  # k = 0: r_hat = x exactly and y = q_hat
    em1_rho = RHO.exp() - 1  # max |expm1(r)|, attained at r = RHO
    for k in range(-58, 1025):
        if k == 0:
            continue
        p = arb(2) ** k
        if k > 0:
            den = p * (-RHO).exp() - 1  # min |expm1(x)| over r, positive for k >= 1
        else:
            den = 1 - p * RHO.exp()
        d = reduction_error(abs(k) + 1)
        num = p * (eq * em1_rho + RHO.exp() * d * (1 + eq))
        pm1 = (p - 1) if k > 0 else (1 - p)
        rnd = U * pm1 if (k > 53 or k < -53) else arb(0)
        rel = (num + rnd) / den
        tot = rel + U * (1 + rel)  # rounding of the final sum
        worst = max_arb(worst, tot)
    return worst / (1 - worst)


def max_arb(a: arb, b: arb) -> arb:
    """An arb whose value bounds both arguments from above."""
    return a.upper() if a.upper() >= b.upper() else b.upper()


def atanh_series_error(smax: arb) -> arb:
    """Relative error of 2 s Q_hat(s^2) vs 2 atanh(s_exact), s_hat = s_exact (1 + 2.0001u),
    |s| <= smax (log)."""
    t = smax**2
    es = 2 * U * (1 + U) / (1 - U)  # relative error of s_hat
    sens = es / (1 - t * (1 + es) ** 2)  # atanh(s(1+e)) vs atanh(s), relative
    trunc = t**11 / (23 * (1 - t))
    coef = sum(U * t**i / (2 * i + 1) for i in range(1, 11))
    horner = sum(gamma(2 * i + 1) * (1 + U) * t**i / (2 * i + 1) for i in range(11))
    dt = sum(t**i * i / (2 * i + 1) for i in range(1, 11)) * 2 * U  # Q(t_hat) vs Q(t)
    q_err = trunc + coef + horner + dt  # Q >= 1
    return (1 + sens) * (1 + q_err) * (1 + U) - 1


def log_total_error() -> arb:
    """epsilon for log: e = 0 is the atanh error; e != 0 adds e ln2 with |log x| >= 0.3465."""
    ea = atanh_series_error(arb("0.17158"))
    lm = arb("0.34658")  # |log m| <= log(sqrt 2) + tiny
    logmin = arb(2).log() - lm  # |log x| for e != 0
    # absolute errors: lm * ea (atanh), roundings of e*LN2_LO (u * 1075 * LN2_LO), of
    # e*LN2_LO + lm (u * (lm + tiny)), of the final sum (u |y|), and e * split error
    tiny = 1075 * abs(LN2_LO)
    abs_err = lm * ea + U * tiny + U * (lm + tiny) + 1075 * ln2_split_error()
    rel = abs_err / logmin + U
    worst = max_arb(ea, rel * (1 + U))
    return worst / (1 - worst)


def log1p_total_error() -> arb:
    """epsilon for log1p on [-0.29, 0.41]: s = x / (2 + x), |s| <= 0.1702."""
    e = atanh_series_error(arb("0.1702"))
    return e / (1 - e)


# --- sin and cos (sincos) ---------------------------------------------------------------

PIO2_1 = arb(float.fromhex("0x1.921fb54400000p+0"))
PIO2_2 = arb(float.fromhex("0x1.0b4611a600000p-34"))
PIO2_3 = arb(float.fromhex("0x1.3198a2e037073p-69"))
INV_PIO2 = arb(0.6366197723675814)
SINCOS_ARG_MAX = 2**20
SINCOS_KMAX = 667544  # |k| bound for |x| <= 2^20
RHO_S = arb("0.7854")  # |r| bound after reduction
SINCOS_TERMS = 9  # i = 0..8 in both polynomials
SINCOS_ETA_TERMS = 8  # underflow: at most 8 eta absolute in either polynomial
A_SINCOS = arb(2) ** -119  # absolute allowance per unit |k|
B_SINCOS = arb(2) ** -1070  # 16 eta
SINCOS_DELTA = arb(2) ** -51  # bound on |r_hat - r*| used by the extremum test


def pio2_split_error() -> arb:
    """|pi/2 - PIO2_1 - PIO2_2 - PIO2_3| (sincos)."""
    return abs(arb.pi() / 2 - PIO2_1 - PIO2_2 - PIO2_3)


def sincos_reduced_argument_bound() -> arb:
    """Upper bound of |r*| = |x - k pi/2| for k = rint(fl(x * INV_PIO2)), |x| <= 2^20."""
    v_err = SINCOS_ARG_MAX * (abs(INV_PIO2 - 2 / arb.pi()) + U * INV_PIO2)  # |fl(xI) - 2x/pi|
    return arb.pi() / 2 * (arb("0.5") + v_err)


def sincos_alpha() -> arb:
    """alpha: |r_hat - r*| <= gamma_2 |r*| + |k| alpha (sincos)."""
    return (pio2_split_error() * (1 + U) + 2 * U * PIO2_3) * (1 + U)


def sincos_reduction_error() -> arb:
    """Bound on |r_hat - r*| for every |x| <= 2^20 (the extremum test's SINCOS_DELTA)."""
    return gamma(2) * RHO_S + SINCOS_KMAX * sincos_alpha()


def _sincos_core(odd: bool) -> arb:
    """Absolute error, excluding underflow, of the Horner value P_hat(t_hat) against the
    series P(t) (P = sin(r)/r or cos r, t = r^2 <= RHO_S^2): truncation, coefficient rounding,
    Horner rounding (gamma_{2i+1}) and the rounding of t."""
    tau = RHO_S**2 * (1 + U)  # bound of t_hat
    n = SINCOS_TERMS
    fact = (lambda i: factorial(2 * i + 1)) if odd else (lambda i: factorial(2 * i))
    trunc = tau**n / fact(n)  # alternating series with decreasing terms
    first_inexact = 1 if odd else 2  # 1, -1/6 (inexact); 1, -1/2 (exact), 1/24 (inexact)
    coef = sum(U * tau**i / fact(i) for i in range(first_inexact, n))
    horner = sum(gamma(2 * i + 1) * (1 + U) * tau**i / fact(i) for i in range(n))
    slope = sum(i * tau ** (i - 1) / fact(i) for i in range(1, n + 4))  # >= max |P'| on [0, tau]
    slope += tau ** (n + 3) / fact(n + 3)  # the rest of the (alternating, decreasing) slope series
    return trunc + coef + horner + slope * U * tau


def sin_core_error() -> arb:
    """Relative error of fl(r * S_hat(t_hat)) vs sin r for |r| <= RHO_S (no underflow)."""
    m_s = RHO_S.sin() / RHO_S  # min of sin(r)/r on [0, RHO_S]
    return _sincos_core(True) * (1 + U) / m_s + U


def cos_core_error() -> arb:
    """Relative error of C_hat(t_hat) vs cos r for |r| <= RHO_S (no underflow)."""
    return _sincos_core(False) / RHO_S.cos()


def sincos_total_error() -> arb:
    """epsilon' of the widening (relative to |y|) for sin and cos (sincos)."""
    m_s = RHO_S.sin() / RHO_S
    es = sin_core_error()
    eps_sin = es + (1 + es) * gamma(2) / m_s  # the branch computing +-sin(r_hat)
    ec = cos_core_error()
    delta = sincos_reduction_error() * RHO_S.sin()  # |cos r_hat - cos r*|
    eps_cos = ec + (1 + ec) * delta / RHO_S.cos()
    eps = max_arb(eps_sin, eps_cos)
    return eps / (1 - eps)


def check_sincos() -> None:
    """The side conditions of bounds.md#sincos."""
    rho_star = sincos_reduced_argument_bound()
    assert rho_star * (1 + gamma(2)) + SINCOS_KMAX * sincos_alpha() < RHO_S, "sincos range"
    kmax = SINCOS_ARG_MAX * INV_PIO2 * (1 + U) + arb("0.5")
    assert kmax < SINCOS_KMAX + 1 and SINCOS_KMAX < 2**20, "sincos |k| bound"
    # Sterbenz for x - k PIO2_1 (k >= 1): kP1/2 <= (k - 1/2)/(I(1+u)) and
    # (k + 1/2)/(I(1-u)) <= 2 k P1, whose worst case is k = 1
    assert PIO2_1 * INV_PIO2 * (1 + U) < 1, "sincos Sterbenz (lower)"
    assert 2 * PIO2_1 * INV_PIO2 * (1 - U) > arb("1.5"), "sincos Sterbenz (upper)"
    assert pio2_split_error() < arb("1.1e-37")
    assert sincos_reduction_error() < SINCOS_DELTA, "sincos extremum test"
    eps = sincos_total_error()
    eps_f = eps / (1 + eps)
    # absolute allowances: A (1-u)^3 >= (1 + eps_f) alpha / (1 - eps_f) and
    # (B (1-u) - eta/2)(1-u) >= 8 eta / (1 - eps_f)
    assert A_SINCOS * (1 - U) ** 3 > (1 + eps_f) * sincos_alpha() / (1 - eps_f), "sincos A"
    lhs = (B_SINCOS * (1 - U) - ETA / 2) * (1 - U)
    assert lhs > SINCOS_ETA_TERMS * ETA / (1 - eps_f), "sincos B"


ALLOWANCES = {
    "exp": (exp_total_error, 2.0**-50),
    "expm1": (expm1_total_error, 2.0**-49),
    "log": (log_total_error, 2.0**-49),
    "log1p": (log1p_total_error, 2.0**-50),
    "sincos": (sincos_total_error, 2.0**-50),
}


def check_all() -> dict[str, tuple[float, float]]:
    """Assert each proved epsilon <= allowance * (1 - u)^2 (widening). Returns the figures
    in units of u for reporting."""
    old = ctx.prec
    ctx.prec = 256
    try:
        out = {}
        assert reduced_argument_bound() < RHO - reduction_error(), "reduction range"
        assert ln2_split_error() < arb("1.2e-26")
        check_sincos()
        for name, (f, allowance) in ALLOWANCES.items():
            eps = f()
            limit = arb(allowance) * (1 - U) ** 2
            assert eps.is_finite() and eps < limit, f"{name}: {eps} not below {limit}"
            out[name] = (float((eps / U).upper()), float(allowance / 2.0**-53))
        return out
    finally:
        ctx.prec = old


if __name__ == "__main__":
    for name, (eps_u, allow_u) in check_all().items():
        print(f"{name:6s} proved error <= {eps_u:6.3f} u   allowance {allow_u:4.0f} u")
