"""Depth to ODE: the certified gap bound contains the exact gap where both sides are closed
forms (attention reads a coordinate V never writes: (I + hL)^T versus e^L, theorems.md §9),
shrinks like 1/T, and the CLI reports the table; bad input exits 2."""

from __future__ import annotations

import itertools
import json

import mpmath as mp
import pytest

from certified.cli import main
from certified.transformers.depth import depth_gap_table, read_model

mp.mp.dps = 50
TOKENS = [["1/2", "1"], ["-1/4", "-1/2"], ["1", "1/4"], ["0", "-1"]]
V = [["1/2", "-1/3"], [0, 0]]  # writes the first coordinate only
B = [[0, 0], [0, "3/4"]]  # reads the second coordinate only
MODEL = {"geometry": "euclidean", "pieces": [{"duration": 1, "V": V, "B": B}]}


def _exact_gaps(depths, pieces=((1, "1/2", "-1/3"),)):
    """z (second coordinates) is frozen, so the weights P are constant and y' = v11 P y +
    v12 P z: on each piece (duration, v11, v12) the layers are (I + tau L/T)^T and the flow
    e^{tau L} on the augmented state (y, 1)."""
    q = [[mp.mpf(mp.fraction(*map(int, (s + "/1").split("/")[:2]))) for s in t] for t in TOKENS]
    n = len(q)
    z = [t[1] for t in q]
    b = mp.mpf(3) / 4
    P = mp.matrix(n, n)
    for i in range(n):
        e = [mp.exp(b * z[i] * z[j]) for j in range(n)]
        for j in range(n):
            P[i, j] = e[j] / sum(e)

    def generator(tau, v11, v12):
        L = mp.matrix(n + 1, n + 1)
        for i in range(n):
            for j in range(n):
                L[i, j] = tau * v11 * P[i, j]
                L[i, n] += tau * v12 * P[i, j] * z[j]
        return L

    gens = [generator(mp.mpf(mp.fraction(*map(int, (str(t) + "/1").split("/")[:2]))),
                      *(mp.mpf(mp.fraction(*map(int, (str(x) + "/1").split("/")[:2])))
                        for x in (a, b))) for t, a, b in pieces]  # fmt: skip
    y0 = mp.matrix([t[0] for t in q] + [1])
    flow = y0
    for L in gens:
        flow = mp.expm(L) * flow
    out = {}
    for T in depths:
        y = y0
        for L in gens:
            step = mp.eye(n + 1) + L / T
            for _ in range(T):
                y = step * y
        out[T] = max(abs(y[i] - flow[i]) for i in range(n))
    return out


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    d = tmp_path_factory.mktemp("depth")
    (d / "model.json").write_text(json.dumps(MODEL))
    (d / "x.json").write_text(json.dumps({"X": TOKENS}))
    return depth_gap_table(read_model(d / "model.json", d / "x.json"), max_depth=64)


def test_bound_contains_the_exact_gap_and_is_tight(table):
    exact = _exact_gaps([r.layers for r in table.rows])
    for r in table.rows:
        assert r.bound is not None and exact[r.layers] <= r.bound
        if r.layers >= 8:
            assert r.bound <= 20 * exact[r.layers]  # the fan is not loose by orders


def test_bound_shrinks_like_one_over_t(table):
    bounds = [r.bound for r in table.rows]
    assert all(b2 < b1 for b1, b2 in itertools.pairwise(bounds))
    assert -1.1 < table.rate < -0.9
    assert all(r.layers * r.bound <= table.constant for r in table.rows if r.layers >= 4)


def test_piecewise_parameters(tmp_path):
    """Two pieces (durations 1/2 and 3/4, different V): the fan continues across the switch."""
    V2 = [["-1/3", "1/2"], [0, 0]]
    model = {"geometry": "euclidean", "pieces": [{"duration": "1/2", "V": V, "B": B},
                                                 {"duration": "3/4", "V": V2, "B": B}]}  # fmt: skip
    (tmp_path / "m.json").write_text(json.dumps(model))
    (tmp_path / "x.json").write_text(json.dumps({"X": TOKENS}))
    table = depth_gap_table(read_model(tmp_path / "m.json", tmp_path / "x.json"), max_depth=16)
    exact = _exact_gaps([1, 2, 4, 8, 16], (("1/2", "1/2", "-1/3"), ("3/4", "-1/3", "1/2")))
    for r in table.rows:
        assert r.bound is not None and exact[r.layers] <= r.bound <= 20 * exact[r.layers]


def test_cli_table_json(tmp_path, capsys):
    (tmp_path / "m.json").write_text(json.dumps(MODEL))
    (tmp_path / "x.csv").write_text("\n".join(",".join(t) for t in TOKENS))
    argv = ["transformer", "depth-limit", "--model", str(tmp_path / "m.json"), "--tokens",
            str(tmp_path / "x.csv"), "--max-depth", "8", "--json"]  # fmt: skip
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"] == "transformer depth-limit" and data["verdict"] == "VERIFIED"
    assert [r["layers"] for r in data["table"]] == [1, 2, 4, 8]
    assert all(float(r["gap_upper"]) > 0 for r in data["table"])


@pytest.mark.parametrize(
    ("model", "extra", "message"),
    [
        ({**MODEL, "tokens": TOKENS}, [], "--tokens"),
        (MODEL, ["--max-depth", "3"], "power of 2"),
        ({**MODEL, "pieces": [{"duration": 1, "V": [[1, 0, 0]], "B": B}]}, [], "V"),
        (MODEL, ["--out", "x.json"], "--out"),
    ],
)
def test_bad_input_exits_2(tmp_path, capsys, model, extra, message):
    (tmp_path / "m.json").write_text(json.dumps(model))
    (tmp_path / "x.csv").write_text("\n".join(",".join(t) for t in TOKENS))
    argv = ["transformer", "depth-limit", "--model", str(tmp_path / "m.json"), "--tokens",
            str(tmp_path / "x.csv"), *extra]  # fmt: skip
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1
