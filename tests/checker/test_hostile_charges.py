"""Work that no replay budget counts is charged to the check's meter before it is done (issue
11, proofs/format.md "Bounds of a check"): the cuts of a partition (hints.partition), the
token cloud's diameter and the witness of transformer-cluster, the weights and bounds of
transformer-match; and the replay limit of rule relu-vectorised agrees with the backstop."""

from __future__ import annotations

import flint
import pytest

from certified.checker import _parse
from certified.checker._parse import Rejected, metered
from certified.checker._partition import partition_leaves
from certified.checker._relu_vec_plan import MAX_RELU_VEC_COST
from certified.checker._transformer_rule import _diameter_sq
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
