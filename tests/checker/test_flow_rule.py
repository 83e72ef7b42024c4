"""Rule laminar-exact of flow certificates v1: golden certificates are VERIFIED, every single
edit is REJECTED (or, for enclosures, decided exactly as the claim's truth), and deliberately
broken checkers are caught."""

from __future__ import annotations

import copy
import random
import time

import pytest
from checker_golden import (
    containers,
    golden_certificates,
    laminar_step,
    random_laminar_instance,
    single_number_edits,
    structural_edits,
)
from flint import fmpq

from certified.arith.exact import to_fmpq
from certified.certificates import exact_number, flow_certificate, laminar_flow_exact
from certified.checker import check_certificate, flow
from certified.errors import InputError

IMAGES = golden_certificates(seed=20240601, count=24)
ENCLOSURES = golden_certificates(seed=20240602, count=8, enclosures=True)


def assert_rejected(cert, what):
    verdict = check_certificate(cert)
    assert not verdict.verified, f"{what} was VERIFIED"
    assert verdict.reason and not verdict.reason.startswith("internal error"), verdict.reason
    assert "\n" not in verdict.reason
    return verdict


@pytest.mark.parametrize("cert", IMAGES + ENCLOSURES)
def test_golden_certificates_are_verified(cert):
    verdict = check_certificate(cert)
    assert verdict.verified, verdict.reason
    assert verdict.kind == "flow"


def test_goldens_cover_the_intended_sizes():
    shapes = {
        (
            c["instance"]["schedule"]["dimension"],
            len(c["instance"]["schedule"]["pieces"][0]["b"]),
            len(c["instance"]["schedule"]["pieces"]),
        )
        for c in IMAGES
    }
    assert {d for d, _, _ in shapes} == {2, 3, 4, 5}
    assert {p for _, p, _ in shapes} == {1, 2, 3, 4}
    assert {n for _, _, n in shapes} >= {1, 2, 5}
    text = repr(IMAGES)
    assert "*2^" in text and "/" in text  # dyadic and rational spellings both occur


@pytest.mark.parametrize("index", range(len(IMAGES)))
def test_every_single_number_edit_is_rejected(index):
    # proofs/checker_soundness.md "Which edits a checker must notice": in these instances every
    # number matters, so no single edit can leave a true claim.
    count = 0
    for path, variant, cert in single_number_edits(IMAGES[index]):
        assert_rejected(cert, f"{path} -> {variant!r}")
        count += 1
    assert count > 20


@pytest.mark.parametrize("index", range(len(IMAGES)))
def test_every_structural_edit_is_rejected(index):
    for what, path, cert in structural_edits(IMAGES[index]):
        assert_rejected(cert, f"{what} at {path}")


def _expected(cert) -> bool:
    """Independent decision of an enclosure certificate after a single number edit."""
    inst = cert["instance"]
    sched = inst["schedule"]
    if cert["version"] != 1 or sched["dimension"] != len(inst["points"][0]):
        return False
    if any(to_fmpq(p["duration"]) <= 0 for p in sched["pieces"]):
        return False
    if to_fmpq(inst["time"]) != sum((to_fmpq(p["duration"]) for p in sched["pieces"]), fmpq(0)):
        return False
    boxes = [[[to_fmpq(v) for v in pair] for pair in row] for row in cert["claim"]["enclosures"]]
    if any(lo > hi for row in boxes for lo, hi in row):
        return False
    if (sched["activation"], cert["hints"]["method"], cert["kind"]) != (
        "relu",
        "laminar-exact",
        "flow",
    ):
        return False
    try:
        images = laminar_flow_exact(sched, inst["points"])
    except InputError:  # not laminar any more
        return False
    return all(
        lo <= images[i, k] <= hi for i, row in enumerate(boxes) for k, (lo, hi) in enumerate(row)
    )


@pytest.mark.parametrize("index", range(len(ENCLOSURES)))
def test_enclosure_edits_are_decided_by_the_truth_of_the_claim(index):
    # Moving an enclosure's end by 1/1000 inside a radius-3 box leaves a true (weaker or
    # stronger) claim: accepting it is correct. The oracle is the producer's independent replay.
    still_true = 0
    for path, variant, cert in single_number_edits(ENCLOSURES[index]):
        expected = _expected(cert)
        verdict = check_certificate(cert)
        assert verdict.verified == expected, (path, variant, verdict.reason)
        assert not verdict.reason.startswith("internal error")
        still_true += expected
    for what, path, cert in structural_edits(ENCLOSURES[index]):
        assert_rejected(cert, f"{what} at {path}")
    assert still_true < 60  # only some claim ends may move


def test_an_enclosure_edit_that_keeps_the_claim_true_is_accepted_and_one_that_breaks_it_is_not():
    cert = ENCLOSURES[0]
    exact = laminar_flow_exact(cert["instance"]["schedule"], cert["instance"]["points"])[0, 0]
    wide = copy.deepcopy(cert)
    wide["claim"]["enclosures"][0][0] = [exact_number(exact - 1), exact_number(exact)]
    assert check_certificate(wide).verified
    wide["claim"]["enclosures"][0][0] = [
        exact_number(exact + fmpq(1, 10**30)),
        exact_number(exact + 1),
    ]
    verdict = assert_rejected(wide, "an enclosure just above the image")
    assert verdict.reason.startswith("claim.enclosures[0][0]: does not contain")
    point = copy.deepcopy(cert)
    point["claim"]["enclosures"][0][0] = [exact_number(exact)] * 2
    assert check_certificate(point).verified


def test_respelling_a_number_does_not_change_the_verdict():
    cert = copy.deepcopy(IMAGES[0])
    for path_node in containers(cert):
        node = path_node[1]
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, value in list(items):
            if isinstance(value, str) and value[:1] in "-0123456789":
                q = to_fmpq(value)
                if q.q == 1:
                    node[key] = int(q)  # a JSON integer
                elif q.q & (q.q - 1) == 0:
                    e = int(q.q).bit_length() - 1
                    node[key] = f"{q.p}*2^-{e}"
    assert cert != IMAGES[0]
    assert check_certificate(cert).verified


def test_non_laminar_pieces_other_activations_and_rules_are_rejected_with_the_reason():
    base = IMAGES[0]
    tanh = copy.deepcopy(base)
    tanh["instance"]["schedule"]["activation"] = "tanh"
    assert "needs relu" in assert_rejected(tanh, "tanh").reason
    method = copy.deepcopy(base)
    method["hints"]["method"] = "taylor"
    assert "hints.method" in assert_rejected(method, "unknown rule").reason
    version = copy.deepcopy(base)
    version["version"] = 2
    assert assert_rejected(version, "version 2").reason.startswith("version:")
    kind = copy.deepcopy(base)
    kind["kind"] = "no-such-kind"
    assert assert_rejected(kind, "unknown kind").reason.startswith("kind:")


def _naive_certificate():
    """A non-laminar schedule whose claim is what the laminar formula (wrongly) predicts."""
    schedule = {
        "dimension": 2,
        "activation": "relu",
        "pieces": [{"duration": 1, "W": [[1], [0]], "A": [[1, 0]], "b": [0]}],  # w = a
    }
    points = [[1, 0]]
    naive = [[2, 0]]  # x + tau w (a.x)_+ ; the true flow is e^t: (e, 0)
    cert = flow_certificate(schedule, [[1, 0]], images=naive)
    return cert, points


def test_a_non_laminar_piece_is_rejected_even_when_the_claim_matches_the_formula(monkeypatch):
    cert, _ = _naive_certificate()
    verdict = assert_rejected(cert, "a non-laminar piece")
    assert "not orthogonal" in verdict.reason
    # deliberately broken checker: without the laminarity test it would accept a false claim
    monkeypatch.setattr(flow.Piece, "shared_normal", lambda self: self.A[0])
    assert check_certificate(cert).verified


def test_rows_of_a_must_share_the_normal():
    schedule = {
        "dimension": 2,
        "activation": "relu",
        "pieces": [{"duration": 1, "W": [[0, 0], [1, 1]], "A": [[1, 0], [2, 0]], "b": [0, 0]}],
    }
    cert = flow_certificate(schedule, [[1, 0]], images=[[1, 3]])
    assert "do not share a normal" in assert_rejected(cert, "two normals").reason


def test_a_checker_without_relu_is_caught_by_the_goldens(monkeypatch):
    def no_relu(x, piece, a):
        s = sum((a[k] * x[k] for k in range(len(x))), fmpq(0))
        v = [
            sum((piece.W[k][i] * (s + b) for i, b in enumerate(piece.b)), fmpq(0))
            for k in range(len(x))
        ]
        return [x[k] + piece.duration * v[k] for k in range(len(x))]

    monkeypatch.setattr(flow, "_laminar_step", no_relu)
    assert sum(not check_certificate(c).verified for c in IMAGES) >= len(IMAGES) // 2


def test_a_checker_comparing_only_the_first_coordinate_is_caught(monkeypatch):
    real = flow._laminar_step
    monkeypatch.setattr(flow, "_laminar_step", lambda x, p, a: [real(x, p, a)[0], *x[1:]])
    assert not any(check_certificate(c).verified for c in IMAGES)


def test_the_closed_form_solves_the_ode_exactly():
    # x(t) = x + t v with v = sum_i w_i (a.x + b_i)_+ satisfies x'(t) = f(x(t)) on [0, tau]
    # because a.v = 0 (proofs/checker_soundness.md, Lemma 1); checked exactly at sample times.
    rng = random.Random(7)
    for _ in range(30):
        d, p = rng.randint(2, 5), rng.randint(1, 4)
        schedule, points, _ = random_laminar_instance(rng, d, p, 1, 3)
        piece = schedule["pieces"][0]
        tau = to_fmpq(piece["duration"])
        W = [[to_fmpq(v) for v in row] for row in piece["W"]]
        a = [to_fmpq(v) for v in piece["A"][0]]
        b = [to_fmpq(v) for v in piece["b"]]

        def field(y, W=W, a=a, b=b):
            s = sum((a[k] * y[k] for k in range(len(y))), fmpq(0))
            return [
                sum((W[k][i] * max(s + b_i, fmpq(0)) for i, b_i in enumerate(b)), fmpq(0))
                for k in range(len(y))
            ]

        for x in points:
            end = laminar_step(x, tau, a, W, b)
            v = [(e - s) / tau for e, s in zip(end, x, strict=True)]
            assert v == field(x)
            for t in (fmpq(0), tau / 3, tau / 2, tau):
                assert field([x[k] + t * v[k] for k in range(d)]) == v


def test_resource_limits_reject_cleanly(monkeypatch):
    monkeypatch.setattr(flow, "MAX_REPLAY_COST", 5)
    assert "resource limit" in assert_rejected(IMAGES[0], "over budget").reason
    monkeypatch.undo()
    monkeypatch.setattr(flow, "MAX_HEIGHT_BITS", 2)
    assert "resource limit" in assert_rejected(IMAGES[0], "tall numbers").reason


def test_tall_numbers_exhaust_the_budget_quickly_instead_of_hanging():
    # wide enclosures accept any image, so only the replay budget stops this certificate
    rng = random.Random(11)

    def tall():
        return fmpq(rng.randrange(10**999, 10**1000), rng.randrange(10**999, 10**1000))

    pieces, total = [], fmpq(0)
    for _ in range(3):
        a = [tall(), tall()]
        tau = tall()
        total += tau
        pieces.append(
            {
                "duration": exact_number(tau),
                "W": [[exact_number(-a[1])], [exact_number(a[0])]],
                "A": [[exact_number(v) for v in a]],
                "b": [exact_number(tall() + 10**6)],
            }
        )
    n = 300
    cert = {
        "kind": "flow",
        "version": 1,
        "instance": {
            "schedule": {"dimension": 2, "activation": "relu", "pieces": pieces},
            "points": [[1, 2]] * n,
            "time": exact_number(total),
        },
        "claim": {"enclosures": [[["-" + "9" * 3999, "9" * 3999]] * 2] * n},
        "hints": {"method": "laminar-exact"},
    }
    t0 = time.perf_counter()
    verdict = assert_rejected(cert, "a replay over budget")
    assert verdict.reason.startswith("resource limit")
    assert time.perf_counter() - t0 < 10
