"""Kind ``stack``: the checker replays the per-layer boxes; every tampering is REJECTED."""

from __future__ import annotations

import copy
import json

import pytest

from certified.checker import check_certificate
from certified.transformers.stack_certificate import stack_certificate
from certified.transformers.stack_model import parse_stack

MODEL = {
    "dimension": 2,
    "layers": [
        {"type": "layernorm", "eps": "1/1000", "gamma": [1, 2], "beta": [0, "1/2"]},
        {"type": "attention", "step": "1/2", "mask": [[1, 0, 1], [1, 1, 0], [0, 1, 1]],
         "heads": [{"Q": [[1, 0.5]], "K": [[0.25, -1]], "V": [[1, 0]], "W": [[1], [-1]]},
                   {"Q": [[0, 1]], "K": [[1, 1]], "V": [[0.5, 0], [0, 0.5]]}]},
        {"type": "mlp", "W1": [[1, -1], [0.5, 0.5]], "b1": [0, 0.25], "W2": [[1, 0], [0, 1]],
         "b2": [0.125, 0], "activation": "tanh"},
        {"type": "attention", "mask": "causal", "scale": "1/2",
         "heads": [{"Q": [[1, 0]], "K": [[0, 1]], "V": [[1, 0], [0, 1]]}]},
        {"type": "mlp", "W1": [[1, 1]], "b1": [-0.5], "W2": [[1], [0.5]], "b2": [0, 0],
         "activation": "gelu", "residual": False},
    ],
}  # fmt: skip
TOKENS = [[0.5, -1], ["1/3", 2], [-0.25, 0.75]]
WEIGHTS = ["1/2", "1/4", "1/4"]


@pytest.fixture(scope="module")
def cert():
    sc = stack_certificate(parse_stack(MODEL), TOKENS, WEIGHTS, prec=96)
    return json.loads(json.dumps(sc.certificate))


def test_the_checker_accepts_the_certificate(cert):
    verdict = check_certificate(cert)
    assert verdict.verified, verdict.reason
    assert verdict.kind == "stack"


def _shrink(box):
    return [box[1], box[1]]  # a box that lost its lower part


def _mut(name, fn):
    return pytest.param(fn, id=name)


def _change(where, value):
    def mutate(c):
        obj = c
        for key in where[:-1]:
            obj = obj[key]
        obj[where[-1]] = value(obj[where[-1]]) if callable(value) else value

    return mutate


MUTATIONS = [
    _mut("output box shrunk", _change(("claim", "output", 1, 0), _shrink)),
    _mut("hint box shrunk", _change(("hints", "layers", 2, 0, 1), _shrink)),
    _mut("hint box moved", _change(("hints", "layers", 0, 2, 0), lambda b: ["5", "6"])),
    _mut("token changed", _change(("instance", "tokens", 0, 0), "3/4")),
    _mut("weight changed", _change(("instance", "weights"), ["1/4", "1/2", "1/4"])),
    _mut("weights dropped", lambda c: c["instance"].pop("weights")),
    _mut("weights null", _change(("instance", "weights"), None)),
    _mut("Q entry", _change(("instance", "model", "layers", 1, "heads", 0, "Q", 0, 0), "2")),
    _mut("Q and K swapped", lambda c: c["instance"]["model"]["layers"][3]["heads"][0].update(
        Q=[["0", "1"]], K=[["1", "0"]])),
    _mut("mask changed", _change(("instance", "model", "layers", 1, "mask", 0), [1, 1, 1])),
    _mut("mask of wrong shape", _change(("instance", "model", "layers", 1, "mask"),
                                        [[1, 1], [1, 1]])),
    _mut("causal dropped", lambda c: c["instance"]["model"]["layers"][3].pop("mask")),
    _mut("step changed", _change(("instance", "model", "layers", 1, "step"), "1")),
    _mut("scale changed", _change(("instance", "model", "layers", 3, "scale"), "1")),
    _mut("residual flipped", _change(("instance", "model", "layers", 4, "residual"), 1)),
    _mut("residual as bool", _change(("instance", "model", "layers", 4, "residual"), False)),
    _mut("activation changed", _change(("instance", "model", "layers", 2, "activation"),
                                       "relu")),
    _mut("layernorm eps", _change(("instance", "model", "layers", 0, "eps"), "0")),
    _mut("gamma changed", _change(("instance", "model", "layers", 0, "gamma", 1), "3")),
    _mut("a layer dropped", lambda c: c["instance"]["model"]["layers"].pop(2)),
    _mut("a hint dropped", lambda c: c["hints"]["layers"].pop()),
    _mut("prec too low", _change(("hints", "prec"), 20)),
    _mut("unknown field", lambda c: c["claim"].update(extra=1)),
    _mut("dimension", _change(("instance", "model", "dimension"), 3)),
    _mut("non-exact number", _change(("claim", "output", 0, 0, 0), 0.5)),
]  # fmt: skip


@pytest.mark.parametrize("mutate", MUTATIONS)
def test_a_tampered_certificate_is_rejected(cert, mutate):
    bad = copy.deepcopy(cert)
    mutate(bad)
    verdict = check_certificate(bad)
    assert not verdict.verified, "accepted a tampered certificate"
    assert verdict.reason


def test_a_layer_norm_whose_variance_may_vanish_is_rejected():
    model = {"dimension": 2, "layers": [{"type": "layernorm"}]}
    sc = stack_certificate(parse_stack(model), [[1, 2]], prec=64)
    cert = json.loads(json.dumps(sc.certificate))
    cert["instance"]["tokens"] = [["1", "1"]]  # equal coordinates: variance exactly 0
    verdict = check_certificate(cert)
    assert not verdict.verified and "variance" in verdict.reason


def test_a_replay_beyond_the_cost_limit_is_rejected_before_it_starts(cert):
    bad = copy.deepcopy(cert)
    n = 3000  # two attention layers of 3000 tokens at 4096 bits: far beyond the limit
    bad["instance"]["tokens"] = [["1", "0"]] * n
    bad["instance"].pop("weights")
    layers = bad["instance"]["model"]["layers"]
    bad["instance"]["model"]["layers"] = [layers[3], layers[3]]
    bad["hints"] = {"prec": 4096, "layers": []}
    verdict = check_certificate(bad)
    assert not verdict.verified and "cost limit" in verdict.reason


# --- pre-normalised layers (version 2) ----------------------------------------------------------

PRE_LN = {
    "dimension": 2,
    "layers": [
        {"type": "attention", "norm": {"eps": "1/1000", "gamma": [1, 2], "beta": [0, "1/2"]},
         "heads": [{"Q": [[1, 0.5]], "K": [[0.25, -1]], "V": [[1, 0], [0.5, 1]]}]},
        {"type": "mlp", "norm": {"eps": "1/100"}, "W1": [[1, -1], [0.5, 0.5]], "b1": [0, 0.25],
         "W2": [[1, 0], [0, 1]], "b2": [0.125, 0], "activation": "gelu", "step": "1/2"},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def pre_ln_cert():
    sc = stack_certificate(parse_stack(PRE_LN), TOKENS, WEIGHTS, prec=96)
    return json.loads(json.dumps(sc.certificate))


def test_the_checker_accepts_pre_ln_blocks_at_version_2(pre_ln_cert):
    assert pre_ln_cert["version"] == 2
    assert pre_ln_cert["instance"]["model"]["layers"][0]["norm"]["gamma"] == ["1", "2"]
    verdict = check_certificate(pre_ln_cert)
    assert verdict.verified, verdict.reason


def _layer0(c):
    return c["instance"]["model"]["layers"][0]


PRE_LN_MUTATIONS = [
    _mut("norm gamma changed", lambda c: _layer0(c)["norm"]["gamma"].__setitem__(1, "3")),
    _mut("norm beta changed", lambda c: _layer0(c)["norm"]["beta"].__setitem__(0, "1/4")),
    _mut("norm eps changed", lambda c: _layer0(c)["norm"].__setitem__("eps", "1")),
    _mut("norm removed", lambda c: _layer0(c).pop("norm")),
    _mut("mlp norm removed", lambda c: c["instance"]["model"]["layers"][1].pop("norm")),
    _mut("norm gamma of wrong length", lambda c: _layer0(c)["norm"]["gamma"].append("1")),
    _mut("norm eps negative", lambda c: _layer0(c)["norm"].__setitem__("eps", "-1/1000")),
    _mut("norm unknown field", lambda c: _layer0(c)["norm"].__setitem__("type", "layernorm")),
    _mut("norm replaced by a layernorm layer", lambda c: c["instance"]["model"]["layers"]
         .insert(0, {"type": "layernorm", **_layer0(c).pop("norm")})),
    _mut("read as version 1", lambda c: c.__setitem__("version", 1)),
]  # fmt: skip


@pytest.mark.parametrize("mutate", PRE_LN_MUTATIONS)
def test_a_tampered_pre_ln_certificate_is_rejected(pre_ln_cert, mutate):
    bad = copy.deepcopy(pre_ln_cert)
    mutate(bad)
    verdict = check_certificate(bad)
    assert not verdict.verified, "accepted a tampered certificate"
    assert verdict.reason


def test_version_1_certificates_are_still_read(cert):
    old = copy.deepcopy(cert)
    old["version"] = 1  # a certificate written before pre-norms: same layout, no "norm"
    assert check_certificate(old).verified
    old["instance"]["model"]["layers"][1]["norm"] = {"eps": "1"}
    verdict = check_certificate(old)
    assert not verdict.verified and "unknown field 'norm'" in verdict.reason


def test_a_pre_norm_whose_variance_may_vanish_is_rejected(pre_ln_cert):
    bad = copy.deepcopy(pre_ln_cert)
    _layer0(bad)["norm"]["eps"] = "0"
    bad["instance"]["tokens"][1] = ["1", "1"]  # equal coordinates: variance exactly 0
    verdict = check_certificate(bad)
    assert not verdict.verified and "variance of token 1" in verdict.reason


def test_the_python_builder_writes_and_reads_pre_norms():
    from certified.attention.model import Head
    from certified.errors import ShapeError
    from certified.transformers.stack_model import AttentionLayer, LayerNorm, Stack, stack_to_json

    head = Head([[1, 0.5]], [[0.25, -1]], [[1, 0], [0.5, 1]])
    layer = AttentionLayer([head], norm=LayerNorm(2, gamma=[1, 2], eps="1/1000"))
    model = stack_to_json(Stack(2, (layer,)))
    assert model["layers"][0]["norm"] == {"gamma": ["1", "2"], "beta": ["0", "0"],
                                          "eps": "1/1000"}  # fmt: skip
    assert stack_to_json(parse_stack(model)) == model
    with pytest.raises(ShapeError, match="norm: acts on dimension 3, the layer on d = 2"):
        AttentionLayer([head], norm=LayerNorm(3))
