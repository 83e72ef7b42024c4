"""Enclosures of the attention fields contain 50-digit mpmath references: the graph equals the
formula written here (transformer_reference.py, not from the graph) at 50 digits, and the
flow's enclosures contain a 50-digit Taylor integration of the graph (and, in the thorough
profile, mpmath.odefun on the formula): heads, causal mask, weights, hidden layer, Euclidean
and unnormalised variants, ensembles, and the residual layers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import mpmath
import numpy as np
import pytest
import transformer_reference as ref

from certified.errors import InputError
from certified.transformers import parse_instance, residual_layers, transformer_flow

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "flow"))
import field_reference as fref

THOROUGH = os.environ.get("HYPOTHESIS_PROFILE") == "thorough"


def _tokens(rng, n, d):
    X = rng.standard_normal((n, d))
    return (X / np.linalg.norm(X, axis=1, keepdims=True)).tolist()


def _mat(rng, d, scale=1.0, rows=None):
    return (scale * rng.standard_normal((rows or d, d))).tolist()


def _instances():
    rng = np.random.default_rng(2024)
    d = 3
    yield (
        "sphere-heads-causal-weights",
        {
            "tokens": _tokens(rng, 3, d),
            "weights": ["1/2", "1/3", "1/6"],
            "causal": True,
            "pieces": [
                {
                    "duration": "1/8",
                    "heads": [
                        {"V": _mat(rng, d), "B": _mat(rng, d, 2)},
                        {"V": _mat(rng, d), "B": _mat(rng, d)},
                    ],
                },
                {"duration": "1/8", "V": _mat(rng, d), "B": _mat(rng, d, 3)},
            ],
        },
    )
    yield (
        "sphere-hidden-sigmoid",
        {
            "tokens": _tokens(rng, 2, d),
            "pieces": [
                {
                    "duration": "1/8",
                    "V": _mat(rng, d),
                    "B": _mat(rng, d),
                    "W": _mat(rng, 2, rows=d) if False else rng.standard_normal((d, 2)).tolist(),
                    "U": rng.standard_normal((2, d)).tolist(),
                    "b": [0.5, -1.0],
                    "activation": "sigmoid",
                }
            ],
        },
    )
    yield (
        "euclidean-mean",
        {
            "tokens": (0.5 * rng.standard_normal((3, d))).tolist(),
            "geometry": "euclidean",
            "normalisation": "mean",
            "pieces": [{"duration": "1/8", "V": _mat(rng, d, 0.5), "B": _mat(rng, d, 0.5)}],
        },
    )
    yield "ensemble", {
        "measures": [{"tokens": _tokens(rng, 2, d)},
                     {"tokens": _tokens(rng, 2, d), "weights": ["1/4", "3/4"]}],
        "pieces": [{"duration": "1/8", "V": _mat(rng, d), "B": _mat(rng, d, 2)}],
    }  # fmt: skip


@pytest.mark.parametrize(("name", "obj"), list(_instances()), ids=[n for n, _ in _instances()])
def test_graph_is_the_formula(name, obj):
    """The package's graph and the formula written here agree at 50 digits at random states."""
    inst = parse_instance(obj)
    graph = inst.problem.field.to_json()
    rng = np.random.default_rng(7)
    with mpmath.workdps(50):
        for piece, values in zip(obj["pieces"], inst.problem.pieces, strict=True):
            f = ref.field(obj, piece)
            randoms = [list(map(ref.mp, rng.standard_normal(inst.state().shape[1])))
                       for _ in range(2)]  # fmt: skip
            for x in [ref.state(obj), *randoms]:
                a = fref.evaluate(graph, values.values, x)
                b = f(x)
                assert max(abs(u - v) for u, v in zip(a, b, strict=True)) < mpmath.mpf(10) ** -40


@pytest.mark.parametrize(("name", "obj"), list(_instances()), ids=[n for n, _ in _instances()])
def test_flow_contains_the_reference(name, obj):
    """A 50-digit Taylor integrator of the graph (tests/flow/field_reference.py); in the
    thorough profile also mpmath.odefun on the formula (minutes at 50 digits)."""
    inst = parse_instance(obj)
    res = transformer_flow(inst)
    assert res.status.name == "SUCCESS", res.message
    (exact,) = fref.taylor_flow(inst.problem.field.to_json(), inst.problem, inst.state()[0],
                                [inst.total_time], dps=50)  # fmt: skip
    lo, hi = res.final.lo[0], res.final.hi[0]
    assert ref.contains(lo, hi, exact) == []
    assert float(np.max(hi - lo)) < 1e-10
    # the test can fail: a reference moved by 1e-9 leaves the enclosure
    assert ref.contains(lo, hi, [v + mpmath.mpf(10) ** -9 for v in exact]) != []
    if THOROUGH:
        assert ref.contains(lo, hi, ref.flow(obj, dps=50)) == []


def test_residual_layers_contain_the_reference():
    obj = dict(next(iter(_instances()))[1])
    inst = parse_instance(obj)
    balls = residual_layers(inst, 5, prec=128)
    exact = ref.layers(obj, 5)
    for b, v in zip(balls, exact, strict=True):
        lo, hi = (
            mpmath.mpf(b.lower().str(40, radius=False)),
            mpmath.mpf(b.upper().str(40, radius=False)),
        )
        assert lo - mpmath.mpf(10) ** -35 <= v <= hi + mpmath.mpf(10) ** -35
        assert b.rad() < 1e-30


def test_layers_approach_the_flow_at_rate_one_over_layers():
    """|layers(L) - flow| ~ C / L (one forward-Euler step per layer, theorems.md §9)."""
    eye = np.eye(3).tolist()
    obj = {"tokens": eye, "pieces": [{"duration": 1, "V": eye, "B": eye}]}
    inst = parse_instance(obj)
    flow = transformer_flow(inst).final
    mid = 0.5 * (flow.lo[0] + flow.hi[0])
    errs = [np.max(np.abs(np.array([float(b.mid()) for b in residual_layers(inst, L)]) - mid))
            for L in (8, 16, 32)]  # fmt: skip
    assert 1.7 < errs[0] / errs[1] < 2.3 and 1.7 < errs[1] / errs[2] < 2.3


def test_layers_reject_bad_counts():
    inst = parse_instance({"tokens": [[1, 0, 0]], "pieces": [{"duration": 1}]})
    with pytest.raises(InputError, match="layers"):
        residual_layers(inst, 0)
