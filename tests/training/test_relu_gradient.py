"""ReLU gradients with a certified activation pattern (issue 21 item 1): the scalar closed form
z(t) = z(0) e^{awt} (z > 0), inactive neurons, the Noether identity (its diagonal) for ReLU,
NOT_DIFFERENTIABLE naming piece, point and neuron where a kink may be met, and the ``gradient``
certificate with ``instance.relu``: VERIFIED, containing the closed form, and REJECTED when
mutated (a flipped pattern bit caught by the checker's sign check)."""

from __future__ import annotations

import copy
import json

import flint
import mpmath as mp
import pytest

from certified.arith.exact import to_fmpq
from certified.checker import check_certificate
from certified.models import Schedule
from certified.training.certificate import gradient_certificate
from certified.training.examples import small_problem
from certified.training.gradient import NotDifferentiableError, certified_gradient


def _mpq(v):
    q = to_fmpq(v)
    return mp.mpf(int(q.p)) / int(q.q)


def _scalar(w, a, b):
    return Schedule.from_json(
        {"dimension": 1, "activation": "relu",
         "pieces": [{"duration": "1/2", "W": [[w]], "A": [[a]], "b": [b]}]}
    )  # fmt: skip


@pytest.mark.parametrize(("w", "a", "b"), [("1/2", "1", "1/4"), ("-3/4", "2", "1/3")])
def test_scalar_relu_contains_the_closed_form(w, a, b):
    mp.mp.dps = 40
    x0, y, T, eps = mp.mpf(3) / 10, mp.mpf(1) / 2, mp.mpf(1) / 2, mp.mpf(1) / 10

    def J(w, a, b):  # noqa: N802 (the loss J)
        x = ((a * x0 + b) * mp.exp(a * w * T) - b) / a
        return (x - y) ** 2 / 2 + eps / 2 * T * (w * w + a * a + b * b)

    r = certified_gradient(_scalar(w, a, b), [["3/10"]], [["1/2"]], eps="1/10")
    args = [_mpq(w), _mpq(a), _mpq(b)]
    assert _mpq(r.loss[0]) <= J(*args) <= _mpq(r.loss[1])
    for k, name in enumerate(("W[0][0]", "A[0][0]", "b[0]")):
        ref = mp.diff(lambda u, k=k: J(*[u if i == k else args[i] for i in range(3)]), args[k])
        lo, hi = r.gradient[0][r.names.index(name)]
        assert _mpq(lo) <= ref <= _mpq(hi), name
    assert r.max_width < 1e-12


def test_an_inactive_neuron_has_zero_loss_gradient():
    r = certified_gradient(_scalar("1/2", "1", "-1"), [["3/10"]], [["1/2"]])
    for name in ("W[0][0]", "A[0][0]", "b[0]"):
        assert r.gradient[0][r.names.index(name)] == (0, 0)
    assert to_fmpq(r.loss[0]) <= flint.fmpq(1, 50) <= r.loss[1]  # x stays at 3/10


def test_relu_noether_identity_diagonal():
    obj = small_problem("relu")[0].to_json()
    for piece, b in zip(obj["pieces"], (["2", "-3"], ["3", "3"]), strict=True):
        piece["b"] = b  # neuron signs constant along the flow (one inactive in piece 0)
    schedule = Schedule.from_json(obj)
    r = certified_gradient(schedule, [["1/2", "-1/4"], ["-3/4", "1"]], [["1", "0"], ["0", "1"]])
    d = p = 2
    for piece, (j, g) in zip(schedule.pieces, enumerate(r.gradient), strict=True):
        G = {n: flint.arb(lo).union(flint.arb(hi)) for n, (lo, hi) in zip(r.names, g, strict=True)}
        for k in range(p):
            lhs = sum((piece.W[i, k] * G[f"W[{i}][{k}]"] for i in range(d)), flint.arb(0))
            rhs = sum((G[f"A[{k}][{i}]"] * piece.A[k, i] for i in range(d)), flint.arb(0))
            rhs += G[f"b[{k}]"] * piece.b[k]
            assert (lhs - rhs).contains(0), (j, k)


def test_a_kink_is_not_differentiable_and_named():
    with pytest.raises(NotDifferentiableError, match="piece 0, point 0, neuron 0"):
        certified_gradient(_scalar("1/2", "1", "-3/10"), [["3/10"]], [["1/2"]])
    with pytest.raises(NotDifferentiableError, match="piece 0, point 1, neuron 0"):
        certified_gradient(_scalar("1/2", "1", "-3/10"), [["1"], ["3/10"]], [["0"], ["0"]])


def _closed_form(w, a, b, x0="3/10", y="1/2", eps="1/10", T="1/2"):
    """J and its (W, A, b) gradient of the scalar active case, mpmath at 40 digits."""
    mp.mp.dps = 40
    x0, y, eps, T = _mpq(x0), _mpq(y), _mpq(eps), _mpq(T)

    def J(w, a, b):  # noqa: N802 (the loss J)
        x = ((a * x0 + b) * mp.exp(a * w * T) - b) / a
        return (x - y) ** 2 / 2 + eps / 2 * T * (w * w + a * a + b * b)

    args = [_mpq(w), _mpq(a), _mpq(b)]
    grad = [mp.diff(lambda u, k=k: J(*[u if i == k else args[i] for i in range(3)]), args[k])
            for k in range(3)]  # fmt: skip
    return J(*args), grad


def _certificate(schedule, X, Y, eps="0"):
    return json.loads(json.dumps(gradient_certificate(certified_gradient(schedule, X, Y, eps=eps))))


def test_relu_certificate_is_verified_and_contains_the_closed_form():
    cert = _certificate(_scalar("-3/4", "2", "1/3"), [["3/10"]], [["1/2"]], eps="1/10")
    assert cert["instance"]["relu"] == {"dimension": 1, "width": 1}
    assert cert["hints"]["relu_patterns"] == [[[1]]]
    assert check_certificate(cert).verified
    value, grad = _closed_form("-3/4", "2", "1/3")
    lo, hi = cert["claim"]["loss"]
    assert _mpq(lo) <= value <= _mpq(hi)
    for (lo, hi), ref in zip(cert["claim"]["gradient"][0], grad, strict=True):  # W, A, b
        assert _mpq(lo) <= ref <= _mpq(hi)


def _two_by_two():
    obj = small_problem("relu")[0].to_json()
    for piece, b in zip(obj["pieces"], (["2", "-3"], ["3", "3"]), strict=True):
        piece["b"] = b  # one neuron inactive in piece 0
    return Schedule.from_json(obj), [["1/2", "-1/4"], ["-3/4", "1"]], [["1", "0"], ["0", "1"]]


@pytest.fixture(scope="module")
def relu_cert():
    return _certificate(*_two_by_two(), eps="1/10")


def test_relu_certificate_d2_p2_is_verified_with_an_inactive_neuron(relu_cert):
    assert check_certificate(relu_cert).verified
    assert [row[0] for row in relu_cert["hints"]["relu_patterns"]] == [[1, 0], [1, 0]]
    r = certified_gradient(*_two_by_two(), eps="1/10")
    g, piece = relu_cert["claim"]["gradient"][0], r.problem.pieces[0]
    for name in ("W[0][1]", "W[1][1]", "A[1][0]", "A[1][1]", "b[1]"):  # neuron 1 inactive:
        k = r.names.index(name)  # the regulariser's eps h theta only
        reg = _mpq(r.eps) * _mpq(piece.duration) * _mpq(piece.values[k])
        assert _mpq(g[k][0]) <= reg <= _mpq(g[k][1])
        assert _mpq(g[k][1]) - _mpq(g[k][0]) < 1e-12


def _mutated(cert, change):
    bad = copy.deepcopy(cert)
    change(bad)
    return check_certificate(bad)


def test_a_flipped_pattern_bit_is_rejected_by_the_sign_check(relu_cert):
    def flip(c):
        s = c["hints"]["relu_patterns"][1][1]
        s[0] = 1 - s[0]

    v = _mutated(relu_cert, flip)
    assert not v.verified and "piece 1, point 1, neuron 0" in v.reason and "sign" in v.reason


@pytest.mark.parametrize(
    ("value", "message"),
    [([1], "expected 2 elements"), ([1, 2], "0 or 1"), ([1, True], "0 or 1"),
     ([1, "1"], "0 or 1"), ([1, 1.0], "0 or 1")],
)  # fmt: skip
def test_a_pattern_of_wrong_length_or_values_is_rejected(relu_cert, value, message):
    def put(c):
        c["hints"]["relu_patterns"][0][1] = value

    v = _mutated(relu_cert, put)
    assert not v.verified and message in v.reason


def test_moved_claims_and_a_field_in_place_of_relu_are_rejected(relu_cert):
    def move(c):
        lo, _ = c["claim"]["gradient"][1][3]
        c["claim"]["gradient"][1][3] = [lo, lo]

    assert "claim.gradient[1][3]" in _mutated(relu_cert, move).reason

    def shift_loss(c):
        c["claim"]["loss"] = [c["claim"]["loss"][1]] * 2

    assert "claim.loss" in _mutated(relu_cert, shift_loss).reason

    def wider(c):
        c["instance"]["relu"]["width"] = 3

    assert not _mutated(relu_cert, wider).verified

    def huge(c):
        c["instance"]["relu"] = {"dimension": 1000, "width": 1000}

    assert "resource limit" in _mutated(relu_cert, huge).reason

    def no_patterns(c):
        del c["hints"]["relu_patterns"]

    assert not _mutated(relu_cert, no_patterns).verified


def test_cli_writes_a_verified_relu_certificate(tmp_path, capsys):
    from certified.cli import main

    (tmp_path / "s.json").write_text(json.dumps(_scalar("1/2", "1", "1/4").to_json()))
    (tmp_path / "x.json").write_text(json.dumps({"X": [["3/10"]]}))
    (tmp_path / "y.json").write_text(json.dumps({"X": [["1/2"]]}))
    out = tmp_path / "c.json"
    argv = ["gradient", "--schedule", str(tmp_path / "s.json"), "--points",
            str(tmp_path / "x.json"), "--targets", str(tmp_path / "y.json")]  # fmt: skip
    argv += ["--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["check", str(out)]) == 0
    assert "VERIFIED" in capsys.readouterr().out


def test_cli_a_kink_exits_2_naming_it(tmp_path, capsys):
    from certified.cli import main

    (tmp_path / "s.json").write_text(json.dumps(_scalar("1/2", "1", "-3/10").to_json()))
    (tmp_path / "x.json").write_text(json.dumps({"X": [["3/10"]]}))
    (tmp_path / "y.json").write_text(json.dumps({"X": [["1/2"]]}))
    out = tmp_path / "c.json"
    argv = ["gradient", "--schedule", str(tmp_path / "s.json"), "--points",
            str(tmp_path / "x.json"), "--targets", str(tmp_path / "y.json")]  # fmt: skip
    argv += ["--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "NOT_DIFFERENTIABLE" in err and "neuron 0" in err and err.count("\n") == 1
    assert not out.exists()
