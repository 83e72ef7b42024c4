"""Generated sweep instances drawn from certified.strategies: the attention_inputs strategy, the
draw of an example from a seed (pinned, the same in another process), the spec's sizes and
seeds, and instances too large for Hypothesis refused before any work."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from certified.arith.exact import to_fmpq
from certified.attention import parse_attention_instance
from certified.errors import InputError
from certified.strategies import ATTENTION_RADII, attention_inputs
from certified.sweep import SpecError, load_spec
from certified.sweep.draw import byte_stream, draw_example, hypothesis_version
from certified.sweep.spec import canonical_json

# Hypothesis documents that fuzz_one_input's reading of a byte string is specific to its
# version: these examples are those of this version. On an upgrade, check that the draws are
# still good instances, then update PINNED_VERSION and the values below (the version is part of
# every generated instance's key, so old sweeps are not mixed with the new draws).
PINNED_VERSION = "6.170.17"
PINNED_INTEGERS = [65204563, 749785329, 907456846, 37759354]
PINNED_DIGESTS = {
    "attention": "b10556a2ef5b2b429e176d1100e69459a3c62e78047e8aa9a1ba6f844af17988",
    "h3": "c4ceeb7a787d918617e381b88f6c1d13de41ba0ce17d518d3c4150de6f80fe6a",
    "dataset": "3a94b3d60bd12bab83a6361a72ced5c67badcc05edbb2f0ba1bedab9a9c4fb64",
    "measures": "d842ba9ed767b1fc0fed4b8dddd75c1cdf1779d95678f4152ffecf75485c4fda",
}

# the family instances of the pin, printed as JSON (also run in a fresh process)
FAMILY_DRAWS = """
import json
from certified.sweep.draw import draw_example, hypothesis_version
from certified.sweep.families import attention_instance_json, _dataset_strategy, _measure_pair
V = hypothesis_version()
a = attention_instance_json({"n": 3, "d": 2, "k": 2, "seed": 5, "hypothesis": V}, "H2")
h3 = attention_instance_json({"n": 2, "d": 2, "k": 1, "seed": 5, "hypothesis": V}, "H3")
X, Y = draw_example(_dataset_strategy(4, 2, "random"), 5)
mu, nu = draw_example(_measure_pair(3, 2, 2), 5)
print(json.dumps({"attention": a, "h3": h3,
                  "dataset": [[[v.hex() for v in r] for r in M] for M in (X, Y)],
                  "measures": [m.to_json() for m in (mu, nu)]}))
"""


def _family_draws() -> dict:
    scope: dict = {}
    lines = []
    scope["print"] = lines.append
    exec(FAMILY_DRAWS, scope)  # the test's own code, also run in a subprocess
    return json.loads(lines[0])


def _digest(obj) -> str:
    return hashlib.sha256(canonical_json(obj).encode("ascii")).hexdigest()


@given(attention_inputs(n=(1, 6), d=(1, 4), k=(1, 3)))
def test_attention_inputs_are_valid_instances_in_the_ball(obj):
    inst = parse_attention_instance(obj, require="X")
    assert obj["R"] in ATTENTION_RADII
    R = to_fmpq(obj["R"])
    for row in obj["X"]:
        assert sum(to_fmpq(x) ** 2 for x in row) <= R**2
    assert inst.Q.shape == inst.K.shape and inst.V.shape == (inst.Q.shape[1],) * 2
    for row in [*obj["Q"], *obj["K"], *obj["V"]]:
        for x in row:
            q = to_fmpq(x)
            assert abs(q) <= 2 and q.q <= 8


@given(attention_inputs(n=3, d=2, k=1, measures=True))
def test_attention_inputs_measures_have_exact_weights_summing_to_one(obj):
    parse_attention_instance(obj, require="measures")
    for name in ("mu", "nu"):
        assert len(obj[name]["points"]) == 3
        assert sum(to_fmpq(w) for w in obj[name]["weights"]) == 1
        assert all(to_fmpq(w) > 0 for w in obj[name]["weights"])
    assert len(obj["Q"]) == 1 and len(obj["mu"]["points"][0]) == 2 and "X" not in obj


def test_attention_inputs_refuse_bad_sizes():
    with pytest.raises(InputError, match="n: 0 is not a range"):
        attention_inputs(n=0)
    with pytest.raises(InputError, match="k: expected an int"):
        attention_inputs(k="2")


def test_the_byte_stream_is_shake_256_of_the_seed():
    assert byte_stream(0, 0, 8).hex() == "ff937079c3e2f153"
    assert byte_stream(12, 3, 8).hex() == "7f5ab582873d0db6"
    expected = hashlib.shake_256(b"certified.sweep.draw/1/12/3").digest(64)
    assert byte_stream(12, 3, 64) == expected and byte_stream(12, 3, 8) == expected[:8]


def test_draws_are_pinned_for_this_hypothesis_version():
    assert hypothesis_version() == PINNED_VERSION, (
        f"hypothesis {hypothesis_version()} is installed, the draws are pinned for "
        f"{PINNED_VERSION}: see the comment above PINNED_VERSION"
    )
    assert [draw_example(st.integers(0, 10**9), s) for s in range(4)] == PINNED_INTEGERS
    draws = _family_draws()
    assert {k: _digest(v) for k, v in draws.items()} == PINNED_DIGESTS
    assert draws["attention"]["X"] == [["-1/6", "0"], ["-2/3", "-2/3"], ["-2/3", "-1"]]


def test_draws_do_not_depend_on_the_process():
    # a fresh interpreter has imported almost nothing of the package; this one, much (with
    # Hypothesis's default provider, constants of the imported modules would leak in)
    fresh = subprocess.run(
        [sys.executable, "-c", FAMILY_DRAWS], capture_output=True, text=True, check=True
    )
    assert json.loads(fresh.stdout) == _family_draws()


def test_draws_repeat_and_differ_between_seeds():
    s = st.lists(st.integers(-(2**40), 2**40), min_size=20, max_size=20)
    a, b = draw_example(s, 3), draw_example(s, 4)
    assert a == draw_example(s, 3) and a != b


def test_a_strategy_hypothesis_cannot_draw_is_an_input_error():
    never = st.integers(0, 10).filter(lambda v: v > 10)
    with pytest.raises(InputError, match=r"toy: Hypothesis gave no example in 8 attempts"):
        draw_example(never, 1, what="toy")
    with pytest.raises(InputError, match="seed: -1"):
        draw_example(st.just(1), -1)


def test_random_sizes_and_seeds_come_from_shake_256_of_seed_and_index():
    spec = load_spec({"family": "lipschitz", "generate": [
        {"kind": "random", "seed": 12, "count": 2, "n": [1, 4], "d": 2, "k": 2}]})  # fmt: skip
    params = [i.params for i in spec.instances()]
    version = hypothesis_version()
    assert params == [
        {"d": 2, "k": 2, "n": 4, "seed": 1367098864264969, "hypothesis": version},
        {"d": 2, "k": 2, "n": 1, "seed": 49160296895583356, "hypothesis": version},
    ]


def test_grid_instances_record_the_hypothesis_version_in_their_key():
    spec = load_spec({"family": "interpolate", "generate": [
        {"kind": "grid", "grid": {"N": [4], "d": [2], "p": [1]}}]})  # fmt: skip
    [inst] = spec.instances()
    assert inst.params["hypothesis"] == hypothesis_version()


def test_another_hypothesis_version_fails_the_instance_not_records_it(tmp_path):
    from certified.sweep.tasks import run_instance

    spec = load_spec({"family": "lipschitz", "generate": [
        {"kind": "random", "seed": 1, "count": 1, "n": 2, "d": 2, "k": 2}]})  # fmt: skip
    [inst] = spec.instances()
    params = {**inst.params, "hypothesis": "0.0.1"}
    with pytest.raises(RuntimeError, match=r"generated for hypothesis 0\.0\.1"):
        run_instance(spec.core, inst.key, params, None, str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_a_worker_without_hypothesis_fails_the_instance_not_records_it(monkeypatch, tmp_path):
    from certified.errors import MissingDependencyError
    from certified.sweep import draw
    from certified.sweep.tasks import run_instance

    spec = load_spec({"family": "separate", "generate": [
        {"kind": "random", "seed": 1, "count": 1, "n": 2, "d": 1}]})  # fmt: skip
    [inst] = spec.instances()

    def missing():
        raise MissingDependencyError("... needs hypothesis: pip install 'certified[test]'")

    monkeypatch.setattr(draw, "hypothesis_version", missing)
    with pytest.raises(RuntimeError, match=r"this worker cannot draw the instance: .* needs hyp"):
        run_instance(spec.core, inst.key, inst.params, None, str(tmp_path))


def test_a_spec_of_generated_instances_without_hypothesis_is_refused(monkeypatch):
    from importlib import metadata

    from certified.errors import MissingDependencyError
    from certified.sweep import draw

    def absent(name):
        raise metadata.PackageNotFoundError(name)

    draw.hypothesis_version.cache_clear()
    monkeypatch.setattr(metadata, "version", absent)
    try:
        with pytest.raises(MissingDependencyError, match=r"pip install 'certified\[test\]'"):
            load_spec(H2_SPEC).instances()
    finally:
        draw.hypothesis_version.cache_clear()


H2_SPEC = {"family": "lipschitz", "generate": [
    {"kind": "random", "seed": 1, "count": 1, "n": 2, "d": 2, "k": 2}]}  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"family": "interpolate", "generate": [
            {"kind": "random", "seed": 1, "count": 2, "N": [4, 400], "d": 2, "p": 1}]},
         r"generate\[0\]: N = 400, d = 2, p = 1 draws 1600 values; generated interpolate "
         r"instances draw at most 600 \(2 N d coordinates"),
        ({"family": "interpolate", "generate": [
            {"kind": "grid", "grid": {"N": [4, 200], "d": [2], "p": [1]}}]},
         r"generate\[0\]\.grid: N = 200, d = 2, p = 1 draws 800 values"),
        ({"family": "lipschitz", "statement": "H3", "generate": [
            {"kind": "random", "seed": 1, "count": 1, "n": 256, "d": 8, "k": 2}]},
         "draws 4704 values; generated lipschitz instances draw at most 1800"),
        ({"family": "wasserstein", "generate": [
            {"kind": "random", "seed": 1, "count": 1, "n": 500, "m": 500, "d": 2}]},
         "draws 3000 values"),
        ({"family": "separate", "generate": [
            {"kind": "random", "seed": 1, "count": 1, "n": 200, "d": 8}]},
         "draws 3600 values"),
        ({"family": "interpolate", "options": {"layout": "grid"}, "generate": [
            {"kind": "random", "seed": 1, "count": 1, "N": 4, "d": 2, "p": 1}]},
         "options.layout: 'grid'; use one of random, collinear"),
    ],
)  # fmt: skip
def test_instances_too_large_to_draw_are_refused_before_any_work(raw, message):
    with pytest.raises(SpecError, match=message):
        load_spec(raw).instances()


@pytest.mark.parametrize("layout", ["any", "lattice", "last_bit", "near_degenerate"])
def test_interpolation_layouts_give_verified_rows(layout, tmp_path):
    from certified.checker import check_file
    from certified.sweep.tasks import run_instance

    spec = load_spec({"family": "interpolate", "options": {"layout": layout}, "generate": [
        {"kind": "random", "seed": 2, "count": 2, "N": [2, 6], "d": 2, "p": [1, 2]}]})  # fmt: skip
    for inst in spec.instances():
        row = run_instance(spec.core, inst.key, inst.params, None, str(tmp_path))
        assert row["verdict"] == "VERIFIED", row["reason"]
        assert check_file(tmp_path / f"{inst.key}.json").verified
