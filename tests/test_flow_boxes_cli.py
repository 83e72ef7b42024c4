"""``certified flow --boxes``: enclosures of the images of whole boxes, certified (ReLU), with
the same bad-input behaviour as ``--points``."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from certified.checker import check_file
from certified.cli import main

RELU = {  # one laminar piece (normal e_1, motion along e_2), then a general one
    "dimension": 2,
    "activation": "relu",
    "pieces": [
        {"duration": "1/2", "W": [[0], [1]], "A": [[1, 0]], "b": ["1/4"]},
        {"duration": "1/4", "W": [[1, -1], ["1/2", 1]], "A": [[1, 1], [-1, 2]], "b": [0, "1/8"]},
    ],
}


def _files(tmp_path, schedule, boxes):
    s, b = tmp_path / "schedule.json", tmp_path / "boxes.json"
    s.write_text(json.dumps(schedule))
    b.write_text(json.dumps(boxes))
    return s, b


def _image(x, y):
    """Φ_T of RELU for one point, exactly (piece 1 is laminar: x_1 fixed; piece 2 by a fine
    explicit Euler step would not be exact, so only piece 1 is used for a containment check)."""
    return x, y + Fraction(1, 2) * max(x + Fraction(1, 4), 0)


@pytest.mark.parametrize("pieces", [1, 2])
def test_relu_boxes_are_certified_and_contain_sampled_images(tmp_path, capsys, pieces):
    schedule = {**RELU, "pieces": RELU["pieces"][:pieces]}
    boxes = {"lo": [[0.3, 0.5], ["1/3", 1]], "hi": [[0.4, "3/5"], ["1/2", 1]]}
    s, b = _files(tmp_path, schedule, boxes)
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--boxes", str(b), "--out", str(out), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["verdict"] == "VERIFIED" and check_file(out).verified
    cert = json.loads(out.read_text())
    assert "boxes" in cert["instance"]
    if pieces == 1:  # exact images of corners and inner points lie in the certified boxes
        for (x0, x1, y0, y1), enc in zip(
            [(0.3, 0.4, 0.5, Fraction(3, 5)), (Fraction(1, 3), 0.5, 1, 1)],
            payload["enclosures"],
            strict=True,
        ):
            for x in (Fraction(x0), Fraction(x1), (Fraction(x0) + Fraction(x1)) / 2):
                for y in (Fraction(y0), Fraction(y1)):
                    for v, (lo, hi) in zip(_image(x, y), enc, strict=True):
                        assert Fraction(lo) <= v <= Fraction(hi)


def test_a_box_across_a_hyperplane_is_undecided_with_the_reason(tmp_path, capsys):
    """--prec 128: the region engine (rule relu-regions) cannot carry a box across a plane."""
    s, b = _files(tmp_path, RELU, {"lo": [[-0.5, 0]], "hi": [[0.25, 0.1]]})
    out = tmp_path / "cert.json"
    args = ["flow", "--schedule", str(s), "--boxes", str(b), "--out", str(out)]
    assert main([*args, "--prec", "128"]) == 1
    assert "split the box" in capsys.readouterr().err
    assert not out.exists()


def test_a_box_across_a_hyperplane_is_certified_by_rule_relu_vectorised(tmp_path, capsys):
    """The default (53 bits): the vectorised engine's steps, replayed by the checker (boxes
    against 50-digit references: tests/checker/test_relu_vec_rule.py)."""
    s, b = _files(tmp_path, RELU, {"lo": [[-0.5, 0]], "hi": [[0.25, 0.1]]})
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--boxes", str(b), "--out", str(out)]) == 0
    cert = json.loads(out.read_text())
    assert cert["hints"]["method"] == "relu-vectorised" and main(["check", str(out)]) == 0


def test_boxes_of_tanh_flows_are_certified_by_the_generic_rule(tmp_path, capsys):
    schedule = {**RELU, "activation": "tanh"}
    s, b = _files(tmp_path, schedule, {"lo": [[0, 0]], "hi": [[0.1, 0.1]]})
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--boxes", str(b), "--out", str(out)]) == 0
    assert "VERIFIED" in capsys.readouterr().out
    assert json.loads(out.read_text())["hints"]["method"] == "taylor-lohner"
    assert main(["check", str(out)]) == 0


@pytest.mark.parametrize(
    ("boxes", "words"),
    [
        ({"lo": [[1, 0]], "hi": [[0, 1]]}, "lo[0][0]"),
        ({"lo": [[0, 0]], "hi": [[1, 1], [2, 2]]}, "hi"),
        ({"lo": [[0, 0, 0]], "hi": [[1, 1, 1]]}, "coordinates"),
        ({"lo": [[0, "nan"]], "hi": [[1, 1]]}, "lo"),
        ({"lo": [[0, 0]]}, "hi"),
    ],
)
def test_bad_boxes_exit_2_and_write_nothing(tmp_path, capsys, boxes, words):
    s, b = _files(tmp_path, RELU, boxes)
    out = tmp_path / "cert.json"
    assert main(["flow", "--schedule", str(s), "--boxes", str(b), "--out", str(out)]) == 2
    assert words in capsys.readouterr().err
    assert sorted(x.name for x in tmp_path.iterdir()) == ["boxes.json", "schedule.json"]


def test_points_and_boxes_are_exclusive(tmp_path, capsys):
    s, b = _files(tmp_path, RELU, {"lo": [[0, 0]], "hi": [[1, 1]]})
    args = ["flow", "--schedule", str(s), "--points", str(b), "--boxes", str(b), "--out", "x"]
    with pytest.raises(SystemExit) as exc:  # argparse: usage error, exit 2
        main(args)
    assert exc.value.code == 2 and "not allowed with" in capsys.readouterr().err


@pytest.mark.parametrize("max_splits", [0, 4])
def test_a_leaky_box_across_a_plane_comes_back_tight_from_the_command(tmp_path, capsys, max_splits):
    """Issue 18 item 3 through ``certified flow``: a box straddling the plane x = -1/4 of a
    leaky-ReLU piece (x fixed, y' = leaky(x + 1/4)) is carried in mean-value form (rule
    relu-vectorised, ``hints.form``), VERIFIED, contains the exact images of a grid of the box,
    and is at most 3x as wide as their hull (the window steps gave widths orders larger)."""
    schedule = {**RELU, "activation": "leaky_relu", "slope": "1/4", "pieces": RELU["pieces"][:1]}
    lo, hi = [Fraction(-1, 2), Fraction(0)], [Fraction(1, 4), Fraction(1, 10)]
    s, b = _files(tmp_path, schedule, {"lo": [["-1/2", 0]], "hi": [["1/4", "1/10"]]})
    out = tmp_path / "cert.json"
    args = ["flow", "--schedule", str(s), "--boxes", str(b), "--out", str(out), "--json"]
    assert main([*args, "--max-splits", str(max_splits)]) == 0
    payload = json.loads(capsys.readouterr().out)
    cert = json.loads(out.read_text())
    assert payload["verdict"] == "VERIFIED" and check_file(out).verified
    assert cert["hints"]["method"] == "relu-vectorised"
    assert "mean-value" in json.dumps(cert["hints"])

    def leaky(z):
        return z if z > 0 else Fraction(1, 4) * z

    images = [
        (x, y + Fraction(1, 2) * leaky(x + Fraction(1, 4)))
        for i in range(17)
        for j in range(5)
        for x in [lo[0] + (hi[0] - lo[0]) * Fraction(i, 16)]
        for y in [lo[1] + (hi[1] - lo[1]) * Fraction(j, 4)]
    ]
    (enc,) = payload["enclosures"]
    for k in range(2):
        lo_k, hi_k = Fraction(enc[k][0]), Fraction(enc[k][1])
        values = [v[k] for v in images]
        assert all(lo_k <= v <= hi_k for v in values)
        assert hi_k - lo_k <= 3 * (max(values) - min(values))
