"""Self-attention dynamics on the sphere by Taylor steps vectorised over the tokens
(certified/transformers/sphere_taylor.py, particle_taylor.py; proofs/particles.md §6):
containment of 20-digit mpmath references (transformer_reference.py, written from the formula)
for random and adversarial instances (β up to 10, nearly antipodal tokens, weights, several
heads and pieces), the closed forms of theorems.md §2 (equiangular ρ̇, the barycentre flow),
agreement with the generic engine, the interval Jacobian against a 50-digit one, the Cholesky
eigenvalue test refusing false bounds, and bad input."""

from __future__ import annotations

import os

import mpmath
import numpy as np
import pytest
import transformer_reference as ref
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_closed_forms import _gram_contains, _rho

from certified.arith.interval import Interval
from certified.errors import InputError
from certified.transformers import parse_instance, token_enclosures, transformer_flow
from certified.transformers.particle_taylor import (
    _below,
    _Head,
    _perron_bound,
    lognorm2_bound,
    sphere_jacobian,
    taylor_coefficients,
)
from certified.transformers.sphere_taylor import sphere_taylor_flow

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"
E3 = [[1, 0, 0], [0, 1, 0], [0, 0, 1]]


def _unit(v):
    v = np.asarray(v, dtype=float)
    return (v / np.linalg.norm(v)).tolist()


@st.composite
def sphere_problems(draw):
    """d in {2, 3} (up to 8 in the thorough profile), n in {2, 3} (up to 16), one or two heads,
    one or two pieces, B entries up to beta = 10, optional weights, tokens on the sphere."""
    d = draw(st.integers(2, 8 if THOROUGH else 3))
    n = draw(st.integers(2, 16 if THOROUGH else 3))
    beta = draw(st.sampled_from([0, 1, 10]))
    pieces = []
    for _ in range(draw(st.integers(1, 2))):
        heads = []
        for _ in range(draw(st.integers(1, 2))):
            V = [[draw(st.integers(-8, 8)) / 8 for _ in range(d)] for _ in range(d)]
            B = [[beta * draw(st.integers(-4, 4)) / 4 for _ in range(d)] for _ in range(d)]
            heads.append({"V": V, "B": B})
        pieces.append({"duration": draw(st.sampled_from(["1/16", "1/8"])), "heads": heads})
    tokens = []
    for _ in range(n):
        v = [draw(st.integers(-8, 8)) for _ in range(d)]
        tokens.append(_unit(v if any(v) else [1] + [0] * (d - 1)))
    inst = {"tokens": tokens, "pieces": pieces}
    if draw(st.booleans()):
        raw = [draw(st.integers(1, 4)) for _ in range(n)]
        inst["weights"] = [f"{r}/{sum(raw)}" for r in raw]
    return inst


def _antipodal(beta):
    a = 2.0**-20
    B = [[beta * int(i == j) for j in range(3)] for i in range(3)]
    return {"tokens": [[1.0, 0.0, 0.0], [-np.cos(a), np.sin(a), 0.0], [0.0, 0.6, 0.8]],
            "pieces": [{"duration": "1/8", "V": E3, "B": B}]}  # fmt: skip


@settings(max_examples=30 if THOROUGH else 3, deadline=None)
@given(sphere_problems(), st.sampled_from([1, 2, 3]))
@example(_antipodal(10), 2)
def test_enclosure_contains_the_20_digit_flow(inst, reuse):
    """``reuse``: one growth-rate bound for several steps (particles.md #rate-reuse; the
    default is 2)."""
    (enc,) = sphere_taylor_flow(parse_instance(inst), reuse=reuse)
    box = enc.box()
    # 20 digits: odefun at 50 digits costs minutes per example; the reference's error (~1e-20)
    # is far below the enclosures' widths (~1e-13)
    exact = ref.flow(inst, dps=20)
    assert ref.contains(box.lo, box.hi, exact) == []
    assert enc.radius < 1e-8


@pytest.mark.slow
def test_the_benchmark_size_contains_the_20_digit_flow():
    """Random tokens, V = I, B = 2 I: n = 8, d = 4, T = 1/16 (the thorough profile: the
    benchmark's n = 64, d = 8, T = 1/32; ~5 minutes of mpmath)."""
    n, d, T = (64, 8, "1/32") if THOROUGH else (8, 4, "1/16")
    X = np.random.default_rng(5).standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    eye = np.eye(d).tolist()
    inst = {"tokens": X.tolist(), "pieces": [{"duration": T, "V": eye,
                                              "B": (2 * np.eye(d)).tolist()}]}  # fmt: skip
    (enc,) = sphere_taylor_flow(parse_instance(inst))
    box = enc.box()
    assert ref.contains(box.lo, box.hi, ref.flow(inst, dps=20)) == []
    assert enc.radius < 1e-11


@pytest.mark.parametrize("beta", [0, 10])
def test_equiangular_tokens_closed_form(beta):
    """Orthonormal tokens under V = I, B = beta I stay equiangular with <x_i, x_k> = rho(t);
    T = 1/2 (at beta = 10 in CI T = 1/4: ~80 steps of this fast field and the closed form's
    quadrature were 10 s of the module's CI time; the thorough profile keeps T = 1/2)."""
    B = [[beta * int(i == j) for j in range(3)] for i in range(3)]
    q = 4 if beta == 10 and not THOROUGH else 2
    inst = parse_instance({"tokens": E3, "pieces": [{"duration": f"1/{q}", "V": E3, "B": B}]})
    (enc,) = sphere_taylor_flow(inst)
    boxes = enc.box()
    rho = _rho(0, beta, 3, mpmath.mpf(1) / q, True)
    assert enc.radius < 1e-10
    assert _gram_contains(boxes, rho)
    assert not _gram_contains(boxes, rho + mpmath.mpf(10) ** -8)  # the test can fail


def test_barycentre_flow_closed_form():
    """B = 0, V = alpha alpha^T: <x, alpha> = tanh(artanh <x0, alpha> + C(t))."""
    X = [[0.6, 0.0, 0.8], [0.0, 0.6, 0.8], [0.0, 1.0, 0.0]]
    V = [[0, 0, 0], [0, 0, 0], [0, 0, 1]]
    (enc,) = sphere_taylor_flow(parse_instance({"tokens": X, "pieces": [{"duration": 2, "V": V}]}))
    s0 = [mpmath.mpf(x[2]) for x in X]
    with mpmath.workdps(20):  # ~1e-20: far below the enclosure's 1e-14 and the 1e-9 probe
        Cf = mpmath.odefun(lambda t, C: sum(mpmath.tanh(mpmath.atanh(s) + C) for s in s0) / 3,
                           0, mpmath.mpf(0))(2)  # fmt: skip
        exact = []
        for x, s in zip(X, s0, strict=True):
            st_ = mpmath.tanh(mpmath.atanh(s) + Cf)
            norm = mpmath.sqrt(mpmath.mpf(x[0]) ** 2 + mpmath.mpf(x[1]) ** 2)
            scale = mpmath.sqrt(1 - st_ * st_) / norm
            exact += [mpmath.mpf(x[0]) * scale, mpmath.mpf(x[1]) * scale, st_]
        box = enc.box()
        assert ref.contains(box.lo, box.hi, exact) == []
        exact[2] += mpmath.mpf(10) ** -9
        assert ref.contains(box.lo, box.hi, exact) == [2]


def test_agrees_with_the_generic_engine():
    """n = 4, d = 3, T = 1: both enclosures are narrow and intersect."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4, 3))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    inst = parse_instance({"tokens": X.tolist(), "pieces": [
        {"duration": "1", "V": E3, "B": [[2, 0, 0], [0, 1, 0], [0, 0, 1]]}]})  # fmt: skip
    (enc,) = sphere_taylor_flow(inst)
    res = transformer_flow(inst)
    assert res.status.name == "SUCCESS"
    (boxes,) = token_enclosures(inst, res)
    ours = enc.box()
    assert enc.radius < 1e-10
    assert np.all(np.maximum(ours.lo, boxes.lo) <= np.minimum(ours.hi, boxes.hi))


def test_euclidean_geometry_is_the_unprojected_field():
    piece = {"duration": "1/8", "V": [[1, 0], [0.5, 1]], "B": [[1, 0.5], [0, 1]]}
    inst = {"tokens": [[0.5, 1.0], [-1.0, 0.25], [0.0, -0.5]], "geometry": "euclidean",
            "pieces": [piece]}  # fmt: skip
    (enc,) = sphere_taylor_flow(parse_instance(inst))
    box = enc.box()
    assert ref.contains(box.lo, box.hi, ref.flow(inst, dps=20)) == []


def _mp_jacobian(inst, x):
    """The Jacobian of the reference field at the point x, by 50-digit central differences."""
    with mpmath.workdps(50):
        f = ref.field(inst, inst["pieces"][0])
        x = [mpmath.mpf(v) for v in x]
        h = mpmath.mpf(10) ** -22
        cols = []
        for k in range(len(x)):
            xp, xm = list(x), list(x)
            xp[k] += h
            xm[k] -= h
            cols.append([(a - b) / (2 * h) for a, b in zip(f(xp), f(xm), strict=True)])
        return mpmath.matrix(cols).T


def test_jacobian_and_lognorm_enclose_the_50_digit_ones():
    """Two heads, general V and B, weights: the interval Jacobian at the tokens contains the
    reference, and the log-norm bound is above the reference's largest symmetric eigenvalue."""
    rng = np.random.default_rng(7)
    n, d = 3, 3
    X = rng.standard_normal((n, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    heads = [{"V": (rng.integers(-8, 9, (d, d)) / 8).tolist(),
              "B": (rng.integers(-8, 9, (d, d)) / 4).tolist()} for _ in range(2)]  # fmt: skip
    inst = {"tokens": X.tolist(), "weights": ["1/2", "1/3", "1/6"],
            "pieces": [{"duration": 1, "heads": heads}]}  # fmt: skip
    hs = [_Head(Interval(np.array(h["B"])), Interval(np.array(h["V"]))) for h in heads]
    w = Interval.from_exact(["1/2", "1/3", "1/6"])
    _, level0 = taylor_coefficients(Interval(X), hs, w, 2, True)
    J = sphere_jacobian(Interval(X), level0, hs)
    Jr = _mp_jacobian(inst, X.ravel().tolist())
    bad = [
        (r, c)
        for r in range(n * d)
        for c in range(n * d)
        if not mpmath.mpf(float(J.lo[r, c])) <= Jr[r, c] <= mpmath.mpf(float(J.hi[r, c]))
    ]
    assert bad == []  # fmt: skip
    with mpmath.workdps(50):
        lam = max(mpmath.eigsy((Jr + Jr.T) / 2)[0])
    mu = lognorm2_bound(J)
    assert lam <= mu < lam + 1e-5


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([1.0, 1e-12, 1e6]))
@example(0, 1.0)
def test_perron_bound_dominates_the_spectral_norm(seed, scale):
    """Collatz-Wielandt: the bound is >= the largest eigenvalue of a nonnegative symmetric
    matrix (sparse, dense, with zero rows) and within the row-sum bound."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    A = rng.random((m, m)) * (rng.random((m, m)) < rng.random()) * scale
    A = np.maximum(A, A.T)
    bound = _perron_bound(A)
    top = max(float(np.linalg.eigvalsh(A)[-1]), 0.0)  # LAPACK's error: ~m u ||A||
    assert top * (1 - 1e-12) <= bound
    assert bound <= float(np.max(A.sum(axis=1))) * (1 + 1e-9) + 1e-300


def test_warm_started_lognorm_stays_above_the_eigenvalues():
    """lognorm2_bound with a memo (the warm start from the previous eigenvector): over a
    sequence of slowly moving interval matrices, and after a jump that makes the stale vector
    useless, every bound is >= the largest symmetric eigenvalue of sampled members; a stale
    vector that points the wrong way only costs the fallback."""
    rng = np.random.default_rng(5)
    m = 60
    base = rng.standard_normal((m, m))
    memo: dict = {}
    for step, jump in enumerate([0.0, 0.01, 0.02, 0.03, 5.0, 5.01]):
        M = base + jump * np.eye(m) + 0.05 * step * np.diag(rng.standard_normal(m))
        J = Interval(M) + Interval(-1e-6, 1e-6)
        mu = lognorm2_bound(J, memo)
        for _ in range(3):
            Mk = M + rng.uniform(-1e-6, 1e-6, (m, m))
            assert float(np.linalg.eigvalsh((Mk + Mk.T) / 2)[-1]) < mu
        assert mu < float(np.linalg.eigvalsh((M + M.T) / 2)[-1]) + 0.05  # tight enough
    memo["v"] = -memo["v"] + 1.0  # a useless start: still a bound
    J = Interval(base) + Interval(-1e-6, 1e-6)
    assert float(np.linalg.eigvalsh((base + base.T) / 2)[-1]) < lognorm2_bound(J, memo)


def test_batched_series_contain_each_sets_50_digit_derivatives():
    """Two token sets in one batched pass (as each step computes the box and the point series):
    X_1 = f(x), X_2 = J(x) f(x) / 2 of each set against its own 50-digit field (attention
    leaking between the sets would move both), one head with general V and B, weights."""
    rng = np.random.default_rng(2)
    n, d = 3, 3
    V = (rng.integers(-8, 9, (d, d)) / 8).tolist()
    B = (rng.integers(-8, 9, (d, d)) / 4).tolist()
    sets = [rng.standard_normal((n, d)) for _ in range(2)]
    sets = [(S / np.linalg.norm(S, axis=1, keepdims=True)).tolist() for S in sets]
    weights = ["1/2", "1/3", "1/6"]
    w = Interval.from_exact(weights)
    both = Interval(np.vstack(sets))
    X = taylor_coefficients(both, [_Head(Interval(np.array(B)), Interval(np.array(V)))], w, 3,
                            True, batch=2)[0]  # fmt: skip
    for k, tokens in enumerate(sets):
        inst = {"tokens": tokens, "weights": weights}
        f = ref.field(inst, {"heads": [{"V": V, "B": B}]})
        with mpmath.workdps(50):
            x0 = ref.state(inst)
            f0 = f(x0)
            jf = [_along(f, x0, f0, c) for c in range(n * d)]
        rows = slice(k * n, (k + 1) * n)
        assert ref.contains(X[1].lo[rows], X[1].hi[rows], f0) == []
        assert ref.contains(X[2].lo[rows], X[2].hi[rows], [v / 2 for v in jf]) == []
        assert float(np.max(X[2].hi[rows] - X[2].lo[rows])) < 1e-11


def _along(f, x0, f0, c):
    """d/dt f(x0 + t f0)_c at t = 0 (mpmath, the working precision)."""
    return mpmath.diff(lambda t: f([a + t * b for a, b in zip(x0, f0, strict=True)])[c], 0)


def test_cholesky_eigenvalue_test_refuses_false_bounds():
    rng = np.random.default_rng(11)
    Q, _ = np.linalg.qr(rng.standard_normal((40, 40)))
    lams = np.linspace(-3, 1.5, 40)
    S = Q @ np.diag(lams) @ Q.T
    S = np.triu(S) + np.triu(S, 1).T
    top = float(np.linalg.eigvalsh(S)[-1])
    assert _below(S, top + 1e-6)
    for gap in (1e-3, 1e-7, 0.0):
        assert not _below(S, top - gap)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"normalisation": "mean"}, "softmax"),
        ({"causal": True}, "causal"),
    ],
)
def test_outside_the_method_is_refused(extra, message):
    inst = parse_instance({"tokens": E3[:2], "pieces": [{"duration": 1, "V": E3, "B": E3}],
                           **extra})  # fmt: skip
    with pytest.raises(InputError, match=message):
        sphere_taylor_flow(inst)


def test_hidden_layer_is_refused():
    piece = {"duration": 1, "V": E3, "B": E3, "W": [[1], [0], [0]], "U": [[0, 0, 1]], "b": [0]}
    inst = parse_instance({"tokens": E3[:2], "pieces": [piece]})
    with pytest.raises(InputError, match="attention only"):
        sphere_taylor_flow(inst)


def test_cli_no_certificate(tmp_path, capsys):
    """``certified transformer flow --no-certificate``: enclosures only, nothing written."""
    import json
    from fractions import Fraction

    from certified.cli import main

    inst = {"tokens": [[1, 0, 0], [0, 0.6, 0.8]], "pieces": [{"duration": "1/4", "V": E3, "B": E3}]}
    path = tmp_path / "inst.json"
    path.write_text(json.dumps(inst))
    argv = ["transformer", "flow", "--instance", str(path), "--no-certificate", "--json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "VERIFIED" and data["certificate"] is None
    assert data["method"] == "taylor steps over tokens" and float(data["max_width"]) < 1e-12
    exact = ref.flow(inst, dps=20)
    lo = [float(Fraction(a)) for tok in data["enclosures"] for a, _ in tok]  # exact doubles
    hi = [float(Fraction(b)) for tok in data["enclosures"] for _, b in tok]
    assert ref.contains(lo, hi, exact) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inst.json"]
    for extra in (["--out", str(tmp_path / "c.json")], ["--save-at", "1/8"]):
        assert main([*argv, *extra]) == 2
        assert "--no-certificate" in capsys.readouterr().err
    cluster = ["transformer", "cluster", "--instance", str(path), "--eps", "1", "--no-certificate"]
    assert main(cluster) == 2
    assert "--no-certificate" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inst.json"]


def test_max_norm_route_contains_the_20_digit_flow(monkeypatch):
    """Above NORM2_LIMIT the error is carried by the log max-norm bound (particles.md §6)."""
    import certified.transformers.particle_taylor as pt

    monkeypatch.setattr(pt, "NORM2_LIMIT", 0)
    inst = _antipodal(1)
    (enc,) = sphere_taylor_flow(parse_instance(inst))
    box = enc.box()
    assert ref.contains(box.lo, box.hi, ref.flow(inst, dps=20)) == []
    assert enc.radius < 1e-10
