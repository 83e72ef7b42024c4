"""Checker rule ``interpolation`` v1: accepts the producer's certificates, rejects every single
changed number, every deleted or added field, and unsound variants."""

import copy

import numpy as np
import pytest
from checker_golden import get, leaves, number_variants, replaced, structural_edits

from certified.certificates import dumps_certificate
from certified.checker import check_bytes, check_certificate
from certified.interpolation import construct_interpolation, export_float64
from certified.interpolation.certificate import interpolation_certificate

WORDS = {
    "kind": ["flow", "Interpolation", ""],
    "activation": ["leaky_relu", "tanh", "ReLU"],
    "result": ["max-error", "exact", "Exact"],
    "variant": ["general", "high-dim", "auto"],
}


def _certificates():
    rng = np.random.default_rng(21)
    X, Y = rng.random((5, 2)), rng.random((5, 2))
    general = construct_interpolation(X, Y, 2)
    Xh, Yh = rng.random((3, 4)), rng.random((3, 4))
    high = construct_interpolation(Xh, Yh, 2)
    sched, _ = export_float64(general)
    return {
        "general": interpolation_certificate(general),
        "high-dim": interpolation_certificate(high),
        "float": interpolation_certificate(general, sched),
    }


CERTS = _certificates()


@pytest.mark.parametrize("name", sorted(CERTS))
def test_producer_certificates_are_verified(name):
    cert = CERTS[name]
    verdict = check_bytes(dumps_certificate(cert).encode())
    assert verdict.verified, verdict.reason
    assert verdict.kind == "interpolation"
    assert cert["claim"]["result"] == ("max-error" if name == "float" else "exact")


@pytest.mark.parametrize("name", sorted(CERTS))
def test_every_single_changed_leaf_is_rejected(name):
    cert = CERTS[name]
    count = 0
    for path, value in leaves(cert):
        key = next((k for k in reversed(path) if isinstance(k, str)), None)
        if key == "result" and name == "float":
            variants = ["exact"]
        elif key in WORDS:
            variants = [w for w in WORDS[key] if w != value]
        else:
            variants = number_variants(value)
        for variant in variants:
            verdict = check_certificate(replaced(cert, path, variant))
            assert not verdict.verified, (path, value, variant)
            count += 1
    assert count > 50


@pytest.mark.parametrize("name", sorted(CERTS))
def test_every_structural_edit_is_rejected(name):
    for what, path, new in structural_edits(CERTS[name]):
        if what == "append element" and path and path[-1] == "pieces" and len(path) > 2:
            continue  # the last piece repeated is a different but checkable schedule: below
        assert not check_certificate(new).verified, (what, path)


def test_an_extra_piece_changes_the_claim_and_is_rejected():
    cert = copy.deepcopy(CERTS["general"])
    pieces = get(cert, ("instance", "schedule", "pieces"))
    pieces.append(copy.deepcopy(pieces[-1]))
    cert["hints"]["phases"][-1]["pieces"][1] += 1
    assert not check_certificate(cert).verified


def test_unsound_variants_are_rejected():
    cert = CERTS["general"]
    # claimed exact with a wrong target
    bad = copy.deepcopy(cert)
    bad["instance"]["Y"][0][0] = bad["instance"]["X"][0][0]
    assert not check_certificate(bad).verified
    # a non-laminar piece: w not orthogonal to the normal
    bad = copy.deepcopy(cert)
    W = bad["instance"]["schedule"]["pieces"][0]["W"]
    W[0][0] = "1" if W[0][0] != "1" else "2"
    assert not check_certificate(bad).verified
    # the normal given as a JSON integer (rows of A are compared as text)
    bad = copy.deepcopy(cert)
    bad["hints"]["phases"][0]["normal"] = [int(x) for x in bad["hints"]["phases"][0]["normal"]]
    assert not check_certificate(bad).verified
    # phases that overlap or leave a gap
    bad = copy.deepcopy(cert)
    bad["hints"]["phases"][1]["pieces"][0] -= 1
    assert not check_certificate(bad).verified
    # a piece of zero duration
    bad = copy.deepcopy(cert)
    bad["instance"]["schedule"]["pieces"][0]["duration"] = "0"
    assert not check_certificate(bad).verified


def test_every_prefix_sum_is_held_to_the_height_limit():
    """Weights whose partial sums exceed MAX_HEIGHT_BITS and then cancel back to 0 (before any
    periodic check would look) are rejected: the limit bounds every operation's cost."""
    import flint

    from certified.checker import check_certificate

    rng = __import__("random").Random(5)
    big = [flint.fmpq(rng.getrandbits(13000) | 1, rng.getrandbits(13000) | 1) for _ in range(6)]
    ws = big + [-q for q in big]  # sums: height grows past 65,536 bits, then back to 0
    p = len(ws)
    cert = {
        "kind": "interpolation",
        "version": 1,
        "instance": {
            "X": [["0", "0"]],
            "Y": [["0", "0"]],
            "schedule": {
                "dimension": 2,
                "activation": "relu",
                "pieces": [
                    {
                        "duration": "1",
                        "W": [["0"] * p, [str(q) for q in ws]],
                        "A": [["-1", "0"]] * p,
                        "b": [str(-(i + 1)) for i in range(p)],  # breakpoints 1..12 > s = 0
                    }
                ],
            },
        },
        "claim": {
            "result": "exact",
            "max_error_squared": "0",
            "switches": 0,
            "formula_switches": 0,
            "variant": "high-dim",
        },
        "hints": {"phases": [{"pieces": [0, 1], "normal": ["-1", "0"]}]},
    }
    v = check_certificate(cert)
    assert not v.verified and "prefix sums beyond" in v.reason
    # the same weights with small heights: accepted (the point sees no neuron)
    small = copy.deepcopy(cert)
    small["instance"]["schedule"]["pieces"][0]["W"][1] = [str(i + 1) for i in range(p)]
    assert check_certificate(small).verified
