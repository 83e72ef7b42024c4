"""Work that no replay budget counts is charged to the check's meter before it is done (issue
11, proofs/format.md "Bounds of a check"): the cuts of a partition (hints.partition), the
token cloud's diameter and the witness of transformer-cluster, the weights and bounds of
transformer-match; and the replay limit of rule relu-vectorised agrees with the backstop.
Then (the kinds stack, gradient / training, transformer-match and -cluster, lipschitz-domain):
exact matrix products by the heights of their common denominators, a ReLU box's signs, the
regulariser, the per-point loss, the transformer bounds, a domain's subdivision."""

from __future__ import annotations

import json
from pathlib import Path

import flint
import pytest

from certified.checker import _parse, _stack_rule, _transformer_rule, check_certificate
from certified.checker._field_rule import check_field_flow
from certified.checker._lipschitz_domain_rule import _leaves
from certified.checker._parse import Rejected, common_bits, exact_product, metered
from certified.checker._partition import partition_leaves
from certified.checker._relu_vec_plan import MAX_RELU_VEC_COST
from certified.checker._transformer_rule import _diameter_sq, _w2_upper
from certified.checker.sensitivity import loss_and_gradient, relu_sign_failure
from certified.commands.check import DEFAULT_TIME_LIMIT


def _chain(cuts: list[str]) -> list:
    """A tree cutting [0, 1] at each cut in turn, always keeping the left part."""
    return [t for q in cuts for t in (0, q)] + [None] * (len(cuts) + 1)


def test_the_cuts_of_a_partition_are_charged_at_their_height(monkeypatch):
    monkeypatch.setattr(_parse, "MAX_WORK", 2 * 10**5)
    giant = [f"1/{10**3990 + i}" for i in range(1, 40)]  # decreasing, each inside the last
    small = [f"1/{i}" for i in range(2, 41)]
    box = [(flint.fmpq(0), flint.fmpq(1))]
    with metered(0):
        leaves, owner = partition_leaves([_chain(small)], "hints.partition", [box])
    assert len(leaves) == 40 and owner == [0] * 40
    assert leaves[0] == [(flint.fmpq(0), flint.fmpq(1, 40))]
    with metered(0), pytest.raises(Rejected, match=r"resource limit: hints.partition\[0\]\["):
        partition_leaves([_chain(giant)], "hints.partition", [box])


def test_the_diameter_of_a_token_cloud_is_charged_before_it_is_computed():
    zero = (flint.fmpq(0), flint.fmpq(0))
    one = (flint.fmpq(1), flint.fmpq(2))
    with metered(0):
        assert _diameter_sq([zero, one, zero], 3, 1) == (1, 4)
        with pytest.raises(Rejected, match="resource limit: the token cloud's diameter"):
            _diameter_sq([zero] * 2000, 2000, 1)  # 6 units x 2e6 pairs > 1e7


def test_the_relu_vectorised_limit_fits_in_the_backstop():
    # format.md section 4: at most 0.83 ns a unit as measured (loaded machine); two minutes
    # of the backstop's 600 s are left for reading the file
    assert MAX_RELU_VEC_COST * 0.83e-9 <= DEFAULT_TIME_LIMIT - 120


# --- issue 11, second part: the kinds stack, gradient / training, transformer-match and
# transformer-cluster, lipschitz-domain --------------------------------------------------------
SEEDS = Path(__file__).parent / "hostile_seeds"


def _seed(name: str) -> dict:
    return json.loads((SEEDS / name).read_text())


def _coprime(i: int, digits: int) -> flint.fmpq:
    return flint.fmpq(1, 10**digits + 2 * i + 1)


def test_exact_products_are_charged_by_the_heights_of_their_common_denominators():
    dyadic = [[flint.fmpq(2 * i + 2 * j + 1, 2**50) for j in range(16)] for i in range(16)]
    giant = [[_coprime(16 * i + j, 1000) for j in range(16)] for i in range(16)]
    with metered(0):
        C = exact_product(dyadic, dyadic, "dyadics")
    assert C == flint.fmpq_mat(dyadic) * flint.fmpq_mat(dyadic)
    with metered(0), pytest.raises(Rejected, match="resource limit: giants"):
        exact_product(giant, giant, "giants")
    # the bound holds: every entry of the product has at most the charged height
    assert common_bits([x for r in dyadic for x in r]) == 51 + 50  # 61 / 2^50: 51 bits
    small = [[_coprime(4 * i + j, 30) for j in range(4)] for i in range(4)]
    P = exact_product(small, small, "small")
    bound = 2 * max(common_bits(r) for r in small) + 3
    assert all(P[i, j].height_bits() <= bound for i in range(4) for j in range(4))


def test_a_stack_head_of_coprime_giant_denominators_is_charged_before_kt_q():
    rows = [[f"1/{10**1000 + 32 * i + 2 * j + 1}" for j in range(16)] for i in range(16)]
    head = {"Q": rows, "K": rows, "V": [["1" if i == j else "0" for j in range(16)]
                                        for i in range(16)]}  # fmt: skip
    layer = {"type": "attention", "heads": [head]}
    with metered(0), pytest.raises(Rejected, match=r"resource limit: .*heads\[0\]: K\^T Q"):
        _stack_rule._attention(layer, "layer", 16, 2, False)


def test_the_signs_of_a_relu_box_are_charged_at_the_heights_of_their_sums():
    d = p = 30
    giant = [flint.fmpq(0)] * (d * p) + [_coprime(i, 100) for i in range(d * p + p)]
    box = [(flint.fmpq(-1), flint.fmpq(1))] * d
    with metered(0), pytest.raises(Rejected, match="resource limit: an a priori box's signs"):
        relu_sign_failure(d, p, giant, [1] * p, box)
    theta = [flint.fmpq(0)] * (d * p) + [flint.fmpq(0)] * (d * p) + [flint.fmpq(1, 2)] * p
    with metered(0):
        assert relu_sign_failure(d, p, theta, [1] * p, box) is None


def test_a_regulariser_of_coprime_giant_parameters_is_refused():
    # 40 parameters of coprime 1000-digit denominators: the exact sum would have 40 x 6,600 bits
    pieces = [(flint.fmpq(1), [_coprime(i, 1000) for i in range(40)])]
    with metered(0), pytest.raises(Rejected, match="resource limit: the regulariser"):
        loss_and_gradient([], [], [[flint.fmpq(0)]], pieces, flint.fmpq(1, 10))


def test_the_per_point_loss_is_in_the_replay_budget():
    cert = _seed("gradient_arb.json")
    d = 2
    nodes = [["x", k] for k in range(2 * d)] + [["sin", k] for k in range(3, 60_000)]
    cert["instance"]["loss"] = {"dimension": 2 * d, "parameters": [], "nodes": nodes,
                                "outputs": [len(nodes) - 1, 1, 2, 3]}  # fmt: skip
    for key in ("points", "targets"):
        cert["instance"][key] = cert["instance"][key] * 400
    verdict = check_certificate(cert)
    assert not verdict.verified and verdict.reason.startswith("resource limit: the replay")


def test_the_transformer_bounds_are_charged_at_the_heights_of_their_sums(monkeypatch):
    ends = [(_coprime(i, 300), _coprime(i, 300) + 1) for i in range(2000)]
    with metered(0), pytest.raises(Rejected, match="resource limit: the token cloud's diameter"):
        _diameter_sq(ends, 2, 1000)
    monkeypatch.setattr(_parse, "MAX_WORK", 10**5)  # the honest file's bounds take 600 units
    q0, q1 = flint.fmpq(0), flint.fmpq(1)
    giant = [[_coprime(3 * g + k, 3000) for k in range(3)] for g in range(2)]
    with metered(0):
        assert list(_w2_upper([[(q0, q1)] * 3] * 2, [[q1]] * 2, [[q0] * 3] * 2, 3)) == [3, 3]
        with pytest.raises(Rejected, match="resource limit: measure 0"):
            list(_w2_upper([[(q0, q1)] * 3] * 2, [[q1]] * 2, giant, 3))


@pytest.mark.slow
@pytest.mark.fullscale
def test_the_transformer_bounds_are_charged_in_a_whole_match_file(monkeypatch):
    """As the test above, through the whole file (its replay: 5 to 10 s; deselected in CI)."""
    monkeypatch.setattr(_parse, "MAX_WORK", 10**5)  # the honest file takes 600 units
    cert = _seed("transformer_match.json")
    cert["instance"]["targets"] = [[str(_coprime(3 * g + k, 3000)) for k in range(3)]
                                   for g in range(2)]  # fmt: skip
    verdict = check_certificate(cert, len(json.dumps(cert)))
    assert not verdict.verified and "resource limit: measure 0" in verdict.reason


def test_the_subdivision_of_a_domain_is_charged_split_by_split():
    nd, tree = 4096, [0] * 200 + [-1] * 201  # a chain of 200 splits of [-1, 1]^4096
    budget = [10**5]
    with pytest.raises(Rejected, match=r"resource limit: hints.tree\[\d+\]"):
        for _ in _leaves(tree, flint.fmpq(1), nd, budget):
            pass
    budget = [10**6]
    leaves = list(_leaves([0, -1, -1], flint.fmpq(1), 2, budget))
    assert [depth for _, depth in leaves] == [1, 1] and budget[0] > 10**6 - 100


def test_the_flows_of_a_match_share_one_replay_budget(monkeypatch):
    """A transformer-match file of many flows, each under MAX_TAYLOR_OPS, replayed for hours:
    its flows now draw on one budget (MAX_MATCH_OPS), each replay's cost taken before it runs.
    (At full scale: test_hostile_files.py's transformer_match_flows.)"""
    cert = _seed("tanh_flow.json")  # a taylor-lohner flow of 0.2 s
    flow = cert["instance"], cert["claim"], cert["hints"]
    budget = [10**12]
    check_field_flow(*flow, budget)
    cost = 10**12 - budget[0]
    assert cost > 0
    budget = [cost * 3 // 2]
    check_field_flow(*flow, budget)  # the first flow fits, the second does not
    with pytest.raises(Rejected, match="resource limit: the replay"):
        check_field_flow(*flow, budget)
    monkeypatch.setattr(_transformer_rule, "MAX_MATCH_OPS", cost)  # below the seed's 2 atoms
    verdict = check_certificate(_seed("transformer_match.json"))
    assert not verdict.verified and verdict.reason.startswith("resource limit: the replay")


def test_the_weights_of_a_match_are_read_before_its_replays(monkeypatch):
    monkeypatch.setattr(_transformer_rule, "MAX_MATCH_OPS", 0)  # any replay: resource limit
    cert = _seed("transformer_match.json")
    cert["instance"]["weights"][1] = ["2"]
    verdict = check_certificate(cert)
    assert verdict.reason == "instance.weights[1]: must be positive and sum to 1"
