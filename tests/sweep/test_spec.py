"""Sweep specs: keys, generators, reproducibility and bad input (no Dask cluster here)."""

from __future__ import annotations

import hashlib
import json
import tomllib

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from certified.commands.registry import COMMANDS
from certified.sweep import SpecError, instance_key, load_spec
from certified.sweep.families import adapter
from certified.sweep.spec import canonical_json

H2 = {
    "family": "lipschitz",
    "statement": "H2",
    "generate": [{"kind": "random", "seed": 5, "count": 20, "n": [1, 4], "d": 2, "k": 2}],
}
GRID = {
    "family": "interpolate",
    "generate": [{"kind": "grid", "repeat": 2, "grid": {"N": [4, 8], "d": [2], "p": [1, 2]}}],
}


def test_key_is_sha256_of_canonical_spec_core_and_instance():
    spec = load_spec(H2)
    inst = spec.instances()[0]
    text = json.dumps(
        {"spec": spec.core, "instance": inst.params}, sort_keys=True, separators=(",", ":")
    )
    assert inst.key == hashlib.sha256(text.encode()).hexdigest()
    assert spec.core == {
        "version": 1,
        "family": "lipschitz",
        "statement": "H2",
        "options": {"prec": 128},
    }


def test_keys_depend_on_options_and_statement_not_on_run_or_out():
    base = [i.key for i in load_spec(H2).instances()]
    assert [i.key for i in load_spec({**H2, "run": {"batch": 3}, "out": "x"}).instances()] == base
    other_prec = load_spec({**H2, "options": {"prec": 200}}).instances()
    other_statement = load_spec({**H2, "statement": "H1"}).instances()
    assert not set(base) & {i.key for i in other_prec}
    assert not set(base) & {i.key for i in other_statement}


def test_growing_a_grid_keeps_the_keys_done():
    small = {i.key for i in load_spec(GRID).instances()}
    grown = dict(GRID, generate=[dict(GRID["generate"][0], grid={"N": [4, 8, 16], "d": [2],
                                                                  "p": [1, 2]})])  # fmt: skip
    big = load_spec(grown).instances()
    assert small < {i.key for i in big}
    assert len(big) == 3 * 2 * 2 and len(small) == 2 * 2 * 2


def test_toml_and_json_specs_are_the_same_spec(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(GRID))
    (tmp_path / "s.toml").write_text(
        'family = "interpolate"\n[[generate]]\nkind = "grid"\nrepeat = 2\n'
        "grid = { N = [4, 8], d = [2], p = [1, 2] }\n"
    )
    a = load_spec(tmp_path / "s.json").instances()
    b = load_spec(tmp_path / "s.toml").instances()
    assert [i.key for i in a] == [i.key for i in b] == [i.key for i in load_spec(GRID).instances()]


@pytest.mark.parametrize("record", [r for r in COMMANDS if r.sweep], ids=lambda r: r.name)
def test_every_init_example_is_a_valid_spec(record, tmp_path, monkeypatch):
    fam = adapter(record.name)
    if record.name == "flow":  # its example names a schedule and a points file
        from certified.flow.examples import LAMINAR_DEMO

        monkeypatch.chdir(tmp_path)
        (tmp_path / "schedule.json").write_text(json.dumps(LAMINAR_DEMO))
        np.savez(tmp_path / "points.npz", X=np.zeros((3, 2)))
    spec = load_spec(tomllib.loads(fam.example))
    assert spec.family == record.name
    assert len(spec.instances()) >= 1


@given(seed=st.integers(0, 2**63 - 1), count=st.integers(1, 30))
@example(seed=0, count=1)
def test_random_generators_are_reproducible_and_within_range(seed, count):
    raw = dict(H2, generate=[dict(H2["generate"][0], seed=seed, count=count)])
    a, b = load_spec(raw).instances(), load_spec(raw).instances()
    assert [(i.params, i.key) for i in a] == [(i.params, i.key) for i in b]
    assert len({i.key for i in a}) == len(a) == count  # 56-bit instance seeds: no collision
    assert all(1 <= i.params["n"] <= 4 and i.params["d"] == 2 for i in a)
    assert all(i.key == instance_key(load_spec(raw).core, i.params) for i in a)


def test_file_instances_are_keyed_by_content(tmp_path):
    data = {"X": [[0, 0], [1, 0], [0, 1]], "Y": [[1, 1], [2, 1], [1, 2]]}
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.json").write_text(json.dumps(data))
    raw = {"family": "interpolate", "generate": [{"kind": "files", "paths": ["data/*.json"]}]}
    (tmp_path / "spec.json").write_text(json.dumps(raw))
    [inst] = load_spec(tmp_path / "spec.json").instances()
    digest = hashlib.sha256((tmp_path / "data" / "a.json").read_bytes()).hexdigest()
    assert inst.params == {"file": "data/a.json", "sha256": digest}
    (tmp_path / "data" / "a.json").write_text(json.dumps({**data, "Y": [[1, 1], [2, 1], [1, 3]]}))
    assert load_spec(tmp_path / "spec.json").instances()[0].key != inst.key


BAD = [
    ({**H2, "family": "nope"}, "family: 'nope' is not a sweep family; use one of"),
    ({**H2, "family": "bench"}, "family: 'bench' is not a sweep family"),
    ({**H2, "family": "flow"}, "statement: flow has no statements; remove the key"),
    ({**H2, "statement": "H7"}, "statement: 'H7' for lipschitz; use one of H2, H1, H3"),
    ({**H2, "extra": 1}, "unknown key 'extra'"),
    ({**H2, "version": 2}, "version: 2"),
    ({**H2, "options": {"prec": 128.0}}, "options.prec"),
    ({**H2, "options": {"tol": 1}}, "unknown option 'tol'"),
    ({**H2, "run": {"batch": 0}}, r"run.batch: 0 is not an integer in \[1, 100000\]"),
    ({**H2, "generate": []}, "generate: give at least one generator"),
    ({**GRID, "options": {"time": 0.5}}, "options.time: 0.5: write the number as a string"),
    ({**GRID, "options": {"time": "-1"}}, "options.time: -1 is not > 0"),
]
BAD_GENERATORS = [
    ({"kind": "grid", "grid": {"N": [4, "x"], "d": [2], "p": [1]}}, r"grid.N: 'x' is not an"),
    ({"kind": "grid", "grid": {"N": [], "d": [2], "p": [1]}}, "grid.N: an empty list"),
    ({"kind": "grid", "grid": {"N": [4], "d": [2]}}, "grid: no values for p"),
    ({"kind": "grid", "grid": {"N": [4], "d": [1], "p": [1]}}, r"grid.d: 1 is not an integer"),
    ({"kind": "grid", "grid": {"N": [4], "d": [2], "p": [1], "q": [1]}}, "unknown parameter 'q'"),
    ({"kind": "grid", "grid": [4]}, "grid: expected a table"),
    ({"kind": "lattice"}, "kind: 'lattice'; for interpolate use"),
    ({"kind": "chunks", "points": "x.npz", "size": 4}, "kind: 'chunks'; for interpolate use"),
    ({"kind": "random", "seed": 1, "count": 0, "N": 4}, r"count: 0 is not an integer"),
    ({"kind": "random", "seed": 1, "count": 3, "N": [8, 4]}, r"N: empty range \[8, 4\]"),
    ({"kind": "random", "seed": 1, "count": 3, "N": [1, 2, 3]}, "N: a range is"),
    ({"kind": "random", "count": 3, "N": 4}, "seed: None is not an integer"),
    ({"kind": "files", "paths": ["no/such/*.json"]}, "matches no file"),
    ({"kind": "files", "paths": ["missing.json"]}, "missing.json: cannot read"),
    ({"kind": "files"}, "paths: give a list"),
]


@pytest.mark.parametrize(("raw", "message"), BAD)
def test_bad_specs_are_refused_with_the_field(raw, message):
    with pytest.raises(SpecError, match=message):
        load_spec(raw).instances()


@pytest.mark.parametrize(("gen", "message"), BAD_GENERATORS)
def test_malformed_generators_are_refused_with_the_field(gen, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SpecError, match=message):
        load_spec({"family": "interpolate", "generate": [gen]}).instances()


def test_wasserstein_has_no_file_instances():
    raw = {"family": "wasserstein", "generate": [{"kind": "files", "paths": ["a.json"]}]}
    with pytest.raises(SpecError, match="wasserstein has no file instances"):
        load_spec(raw).instances()


def test_bad_spec_files(tmp_path):
    (tmp_path / "s.toml").write_text("family = \n")
    with pytest.raises(SpecError, match="not valid TOML"):
        load_spec(tmp_path / "s.toml")
    (tmp_path / "s.yaml").write_text("family: x\n")
    with pytest.raises(SpecError, match=r"a spec is a .toml or a .json file"):
        load_spec(tmp_path / "s.yaml")
    with pytest.raises(SpecError, match="cannot read the spec"):
        load_spec(tmp_path / "none.json")


def test_canonical_json_is_order_independent():
    assert canonical_json({"b": 1, "a": [1, {"d": 2, "c": 3}]}) == canonical_json(
        {"a": [1, {"c": 3, "d": 2}], "b": 1}
    )
