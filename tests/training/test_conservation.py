"""Certified counts of conservation laws (issue 21 item 3): the counts of theorems.md §10 on
small architectures (COMPLETE), a gap when only part of the laws is given, laws that are not
conserved refused, bad points refused, the guard of orthogonality, the CLI's JSON keys."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from certified.cli import main
from certified.errors import InputError, ShapeError
from certified.training.conservation import architecture, count_laws, parse_polynomial


@pytest.mark.parametrize(
    ("name", "widths", "expected"),
    [
        ("relu", (2, 2, 1), 2),  # 2 neurons R^2 -> R with bias: D = 8, 2 laws
        ("relu", (3, 2, 2), 2),
        ("linear", (2, 2, 2), 3),  # 2 x 2 linear
        ("linear", (2, 2, 2, 2), 6),  # depth 3
        ("linear", (1, 3, 1), 5),  # r(r+1)/2 - k(k+1)/2 with k = 1: not 6
        ("linear", (2, 4, 1), 9),  # k = 1: 10 - 1
        ("linear", (1, 2, 1), 3),  # k = 0
        ("attention", (2, 2), 6),
        ("neural-ode", (2, 2), 2),
    ],
)
def test_counts_are_complete_and_right(name, widths, expected):
    count = count_laws(architecture(name, widths), name=name)
    assert count.verdict == "COMPLETE"
    assert count.laws == expected
    assert count.lower == count.upper == expected


def test_linear_wide_hidden_layer_formula():
    for n, r, m in ((1, 3, 1), (1, 4, 1), (2, 4, 1), (1, 2, 2)):
        k = max(0, r - n - m)
        assert (
            count_laws(architecture("linear", (n, r, m))).laws
            == r * (r + 1) // 2 - k * (k + 1) // 2
        )


def test_part_of_the_laws_leaves_a_gap_never_a_wrong_count():
    fact = architecture("relu", (2, 2, 1))
    count = count_laws(fact, laws=["u_0_0^2 + u_0_1^2 + b_0^2 - v_0_0^2"])
    assert (count.lower, count.upper, count.verdict, count.laws) == (1, 2, "GAP", None)
    assert count_laws(fact, laws=[]).lower == 0


def test_a_law_that_is_not_conserved_is_refused():
    fact = architecture("relu", (2, 2, 1))
    with pytest.raises(InputError, match="not conserved"):
        count_laws(fact, laws=["u_0_0^2 - v_0_0^2"])
    with pytest.raises(InputError, match="unknown name"):
        count_laws(fact, laws=["x^2"])
    with pytest.raises(InputError):
        count_laws(fact, laws=["u_0_0^(2"])


def test_points_are_exact_and_of_the_right_length():
    fact = architecture("linear", (2, 2, 2))
    with pytest.raises(ShapeError, match="expected 8"):
        count_laws(fact, at=[1, 2])
    with pytest.raises(InputError):
        count_laws(fact, at=["nan"] * 8)
    with pytest.raises(InputError):
        count_laws(fact, at=["sqrt(2)"] * 8)
    # at the origin every bracket vanishes: the upper bound is D, a gap, never a wrong count
    zero = count_laws(fact, at=[0] * 8)
    assert zero.upper == 8 and zero.verdict == "GAP"


def test_polynomial_parser_is_exact():
    fact = architecture("relu", (1, 1, 1))
    ctx = fact.ctx
    u, b, v = ctx.gens()
    assert parse_polynomial("1/2*u_0_0^2 - (b_0 + v_0_0)**2", ctx) == u * u / 2 - (b + v) ** 2


def test_cli_json_keys(capsys):
    assert main(["conservation", "--architecture", "attention", "--widths", "2,2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["laws"] == 6 and out["lower"] == out["upper"] == 6
    assert out["verdict"] == "VERIFIED" and out["status"] == "COMPLETE"
    assert len(out["expressions"]) == 6


@pytest.mark.parametrize(
    "argv",
    [
        ["--architecture", "relu", "--widths", "2,0,1"],
        ["--architecture", "relu", "--widths", "2,2"],
        ["--architecture", "relu", "--widths", "2,x,1"],
        ["--architecture", "relu", "--widths", "2,2,1", "--at", "1,2,nan,1,1,1,1,1"],
        ["--architecture", "relu", "--widths", "2,2,1", "--at", "1,2"],
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, capsys):
    assert main(["conservation", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err


@settings(deadline=None)
@given(st.data())
def test_bounds_bracket_the_count_at_every_integer_point(data):
    # non-generic points (zeros, coincidences) may leave a gap, never a wrong count
    for name, widths, expected in (("relu", (2, 2, 1), 2), ("linear", (2, 2, 2), 3)):
        fact = architecture(name, widths)
        D = len(fact.names)
        point = data.draw(st.lists(st.integers(-2, 2), min_size=D, max_size=D))
        count = count_laws(fact, at=point)
        assert count.lower <= expected <= count.upper
        if count.verdict == "COMPLETE":
            assert count.laws == expected


def test_a_factorisation_given_by_polynomials(tmp_path, capsys):
    phi = tmp_path / "phi.json"
    phi.write_text(json.dumps({"variables": ["u", "v", "w"], "phi": ["u*v", "u*w"]}))
    laws = tmp_path / "laws.json"
    laws.write_text(json.dumps(["v^2 + w^2 - u^2"]))
    assert main(["conservation", "--phi", str(phi), "--laws", str(laws), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["laws"] == 1 and out["status"] == "COMPLETE"
    assert main(["conservation", "--phi", str(phi), "--json"]) == 1  # no laws given: a gap
    assert json.loads(capsys.readouterr().out)["upper"] == 1
    assert main(["conservation", "--phi", str(phi), "--widths", "2,2"]) == 2
    phi.write_text(json.dumps({"variables": ["u"], "phi": ["u*v"]}))
    assert main(["conservation", "--phi", str(phi)]) == 2
    assert "unknown name" in capsys.readouterr().err
