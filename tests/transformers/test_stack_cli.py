"""``certified transformer stack``: the --json contract, a certificate the checker accepts,
Lipschitz bounds that bracket the truth, and bad input: exit 2, one line, nothing written."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from certified.checker import check_file
from certified.cli import main

MODEL = {
    "dimension": 2,
    "layers": [
        {"type": "attention", "mask": "causal", "step": "1/2",
         "heads": [{"Q": [[1, 0.5]], "K": [[0.5, -1]], "V": [[1, 0], [0.5, 1]]}]},
        {"type": "layernorm", "eps": "1/100"},
        {"type": "mlp", "W1": [[1, -1], [0.5, 1]], "b1": [0, 0.25], "W2": [[1, 0], [0, -1]],
         "b2": [0, 0], "activation": "relu"},
    ],
}  # fmt: skip
TOKENS = "0.5,-1\n1/3,2\n-0.25,0.75\n"


def _files(tmp_path, model=MODEL, tokens=TOKENS, weights=None):
    m, x = tmp_path / "m.json", tmp_path / "x.csv"
    m.write_text(json.dumps(model))
    x.write_text(tokens)
    argv = ["transformer", "stack", "--model", str(m), "--tokens", str(x)]
    if weights is not None:
        w = tmp_path / "w.csv"
        w.write_text(weights)
        argv += ["--weights", str(w)]
    return argv


def test_stack_json_and_certificate(tmp_path, capsys):
    out = tmp_path / "c.json"
    argv = _files(tmp_path, weights="1/2\n1/4\n1/4\n")
    assert main([*argv, "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["command"] == "transformer stack" and data["verdict"] == "VERIFIED"
    assert data["certificate"] == str(out) and len(data["enclosures"]) == 3
    lo, hi = data["enclosures"][2][1]
    assert Fraction(lo) <= Fraction(hi) and float(data["max_width"]) <= 1e-10
    assert len(data["layer_max_widths"]) == 4 and data["prec"] == 64
    assert check_file(out).verified


def test_lipschitz_bounds_bracket_a_linear_stack(tmp_path, capsys):
    # Q = 0: uniform attention, F(X) = X + (1/n) 1 1ᵀ X Gᵀ is linear, Lip = ‖I + J ⊗ G‖₂
    G = [[1, 2], [0, -1]]
    model = {"dimension": 2, "layers": [{"type": "attention",
             "heads": [{"Q": [[0, 0]], "K": [[1, 1]], "V": G}]}]}  # fmt: skip
    out = tmp_path / "c.json"
    argv = _files(tmp_path, model=model)
    assert main([*argv, "--lipschitz", "--radius", "1/64", "--out", str(out), "--json"]) == 0
    lip = json.loads(capsys.readouterr().out)["lipschitz"]
    n = 3
    M = np.eye(n * 2) + np.kron(np.ones((n, n)) / n, np.array(G, dtype=float))
    exact = np.linalg.norm(M, 2)
    assert float(lip["lower"]) <= exact * (1 + 1e-12)
    assert exact <= float(lip["composition_upper"]) <= exact * 1.05
    assert exact <= float(lip["product_upper"])
    assert float(lip["lower"]) >= 0.9 * exact


def test_lipschitz_lower_below_upper_on_a_nonlinear_stack(tmp_path, capsys):
    out = tmp_path / "c.json"
    assert main([*_files(tmp_path), "--lipschitz", "--out", str(out), "--json"]) == 0
    lip = json.loads(capsys.readouterr().out)["lipschitz"]
    lower = float(lip["lower"])
    assert 0 < lower <= float(lip["composition_upper"]) <= float(lip["product_upper"]) * 1.0001
    per_layer = [float(x) for x in lip["per_layer_upper"]]
    assert np.prod(per_layer) <= float(lip["product_upper"]) * (1 + 1e-12)


def _attention(mask):
    return {"type": "attention", "mask": mask,
            "heads": [{"Q": [[1, 0]], "K": [[0, 1]], "V": [[1, 0], [0, 1]]}]}  # fmt: skip


_PRE_MLP = {"type": "mlp", "W1": [[1, 0]], "b1": [0], "W2": [[1], [0]], "b2": [0, 0],
            "activation": "relu"}  # fmt: skip

BAD = [
    ({"dimension": 2, "layers": [{"type": "layernorm"}]}, "1,1\n2,3\n", None,
     "layers[0] (layernorm): the variance of token 0 is not certified > 0"),
    ({"dimension": 2, "layers": [_attention([[1, 0], [1, 1]])]}, TOKENS, None,
     "mask: has shape 2 x 2, the tokens need 3 x 3"),
    ({"dimension": 2, "layers": [_attention([[1, 0, 0], [0, 0, 0], [1, 1, 1]])]}, TOKENS, None,
     "mask[1]: token 1 sees no token"),
    ({"dimension": 3, "layers": [{"type": "layernorm"}]}, TOKENS, None,
     "tokens: 2 coordinates; the model has d = 3"),
    ({"dimension": 2, "layers": [{"type": "attention", "heads": [
        {"Q": [[1, 0, 0]], "K": [[0, 1, 0]], "V": [[1, 0], [0, 1]]}]}]}, TOKENS, None,
     "layers[0].heads[0]"),
    ({"dimension": 2, "layers": [{"type": "mlp", "W1": [[1, 0]], "b1": [0], "W2": [[1, 0]],
                                  "b2": [0, 0], "activation": "relu"}]}, TOKENS, None,
     "layers[0].W2: has 1 rows, expected 2"),
    (MODEL, TOKENS, "1/2\n1/2\n", "weights: 2 weights for 3 tokens"),
    (MODEL, TOKENS, "1/2\n1/4\n1/3\n", "not exactly 1"),
    (MODEL, TOKENS, "1/2\n1/2\n0\n", "weights[2]: 0 is not > 0"),
    ({"dimension": 2, "layers": [{"type": "mlp", "W1": [[1, 0]], "b1": [0], "W2": [[1], [0]],
                                  "b2": [0, 0], "activation": "sigmoid"}]}, TOKENS, None,
     "activation"),
    ({"dimension": 2, "layers": [_attention("anticausal")]}, TOKENS, None, "mask"),
    # pre-normalised layers: the norm's denominator, dimension and eps
    ({"dimension": 2, "layers": [{**_attention("causal"), "norm": {}}]}, "1,1\n2,3\n", None,
     "layers[0].norm (attention's pre-norm): the variance of token 0 is not certified > 0"),
    ({"dimension": 2, "layers": [{**_PRE_MLP, "norm": {"eps": 0}}]}, "2,3\n-1,-1\n", None,
     "layers[0].norm (mlp's pre-norm): the variance of token 1 is not certified > 0"),
    ({"dimension": 2, "layers": [{**_attention("causal"), "norm": {"gamma": [1, 2, 3]}}]}, TOKENS,
     None, "layers[0].norm.gamma: has shape (3,); give a list of 2 numbers"),
    ({"dimension": 2, "layers": [{**_PRE_MLP, "norm": {"beta": [1]}}]}, TOKENS, None,
     "layers[0].norm.beta: has shape (1,); give a list of 2 numbers"),
    ({"dimension": 2, "layers": [{**_PRE_MLP, "norm": {"eps": "-1/100"}}]}, TOKENS, None,
     "layers[0].norm.eps: -1/100 is negative; give eps >= 0"),
    ({"dimension": 2, "layers": [{**_PRE_MLP, "norm": {"epsilon": 1}}]}, TOKENS, None,
     "layers[0].norm"),
    ({"dimension": 2, "layers": [{**_PRE_MLP, "norm": [1, 0]}]}, TOKENS, None, "norm"),
]  # fmt: skip


@pytest.mark.parametrize(("model", "tokens", "weights", "message"), BAD)
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, model, tokens, weights, message):
    out = tmp_path / "c.json"
    argv = _files(tmp_path, model=model, tokens=tokens, weights=weights)
    assert main([*argv, "--out", str(out), "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert "Traceback" not in err and not out.exists()


def test_options_of_other_actions_are_refused(tmp_path, capsys):
    out = tmp_path / "c.json"
    argv = _files(tmp_path)
    assert main([*argv, "--radius", "1/8", "--out", str(out)]) == 2
    assert "--radius: only with --lipschitz" in capsys.readouterr().err
    assert main([*argv, "--prec", "20", "--out", str(out)]) == 2
    assert not out.exists()


def test_the_precision_rises_until_the_widths_are_small(tmp_path, capsys):
    # six dense attention layers with large scores: 64 bits overflow or stay wide
    rng = np.random.default_rng(3)
    heads = [{"Q": (2 * rng.standard_normal((2, 2))).tolist(),
              "K": (2 * rng.standard_normal((2, 2))).tolist(),
              "V": rng.standard_normal((2, 2)).tolist()}]  # fmt: skip
    model = {"dimension": 2, "layers": [{"type": "attention", "heads": heads}] * 6}
    out = tmp_path / "c.json"
    assert main([*_files(tmp_path, model=model), "--out", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["prec"] > 64 and float(data["max_width"]) <= 1e-10
    assert check_file(out).verified


def test_a_lipschitz_domain_too_wide_is_undecided_not_an_error(tmp_path, capsys):
    model = {"dimension": 2, "layers": [{"type": "layernorm"}]}
    out = tmp_path / "c.json"
    argv = _files(tmp_path, model=model, tokens="0,1\n1,0\n")
    assert main([*argv, "--lipschitz", "--radius", "1", "--out", str(out), "--json"]) == 0
    lip = json.loads(capsys.readouterr().out)["lipschitz"]
    assert "variance" in lip["undecided"] and check_file(out).verified


def test_lipschitz_of_pre_ln_blocks_brackets_the_jacobian(tmp_path, capsys):
    # x + attn(LN x), x + MLP(LN x): per layer [I] + J_f(LN(D)) J_LN(D) (proofs/stack.md
    # #prenorm-lipschitz); the upper bounds must cover the Jacobian norm at the centre
    from certified.transformers.stack_lipschitz import float_jacobian_norm
    from certified.transformers.stack_model import parse_stack

    model = {"dimension": 3, "layers": [
        {"type": "attention", "norm": {"eps": "1/100", "gamma": [1, 2, "1/2"]}, "step": "1/2",
         "heads": [{"Q": [[1, 0.5, 0]], "K": [[0.5, -1, 1]], "V": [[1, 0, 0], [0.5, 1, 0],
                                                                  [0, 0, 1]]}]},
        {"type": "mlp", "norm": {"eps": "1/100"}, "W1": [[1, -1, 0], [0.5, 1, 1]],
         "b1": [0, 0.25], "W2": [[1, 0], [0, -1], [1, 1]], "b2": [0, 0, 0],
         "activation": "tanh"}]}  # fmt: skip
    tokens = "0.5,-1,2\n1/3,2,0\n-0.25,0.75,1\n"
    out = tmp_path / "c.json"
    argv = _files(tmp_path, model=model, tokens=tokens)
    assert main([*argv, "--lipschitz", "--radius", "1/4096", "--out", str(out), "--json"]) == 0
    lip = json.loads(capsys.readouterr().out)["lipschitz"]
    X = np.array([[0.5, -1, 2], [1 / 3, 2, 0], [-0.25, 0.75, 1]])
    centre = float_jacobian_norm(parse_stack(model), X)
    upper = float(lip["composition_upper"])
    assert 0 < float(lip["lower"]) <= upper <= float(lip["product_upper"]) * 1.0001
    assert centre <= upper * (1 + 1e-6) and upper <= 2 * centre  # sound and not wildly loose
    assert float(lip["lower"]) >= 0.5 * centre
    assert check_file(out).verified


def test_gelu_slopes_stay_finite_on_huge_boxes():
    # g' = Φ + tφ ranges over [g'(-√2), g'(√2)] ≈ [-0.1289, 1.1289] on all of R
    # (proofs/stack.md#gelu): a box far beyond the double range of t φ(t) keeps finite slopes
    from certified.arith.interval import Interval
    from certified.transformers.stack_lipschitz import layer_jacobian
    from certified.transformers.stack_model import parse_stack

    model = {"dimension": 1, "layers": [{"type": "mlp", "W1": [[1]], "b1": [0], "W2": [[1]],
                                         "b2": [0], "activation": "gelu"}]}  # fmt: skip
    J = layer_jacobian(parse_stack(model), 0, Interval(np.array([[-1e300]]), np.array([[1e300]])))
    assert 0.8710 < J.lo[0, 0] < 0.8711 and 2.1289 < J.hi[0, 0] < 2.1290  # 1 + g'
