"""ReLU gradients with a certified activation pattern (issue 21 item 1): the scalar closed form
z(t) = z(0) e^{awt} (z > 0), inactive neurons, the Noether identity (its diagonal) for ReLU,
and NOT_DIFFERENTIABLE naming piece, point and neuron where a kink may be met."""

from __future__ import annotations

import flint
import mpmath as mp
import pytest

from certified.arith.exact import to_fmpq
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


def test_relu_gradients_are_not_written_as_certificates():
    r = certified_gradient(_scalar("1/2", "1", "1/4"), [["3/10"]], [["1/2"]])
    with pytest.raises(Exception, match="no checker rule"):
        gradient_certificate(r)


def test_cli_a_kink_exits_2_naming_it(tmp_path, capsys):
    import json

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
