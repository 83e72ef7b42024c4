"""The per-instance time budget (``options.time_budget``): validated before any work, not part
of the keys, enforced by killing the worker's forked child (also inside a C call), the rest of
the batch run by a new child, a stale certificate of the overrun removed, the child reused
across batches otherwise."""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time

import pytest

from certified.checker import check_file
from certified.sweep import SpecError, budget, load_spec
from certified.sweep import families as fam_module
from certified.sweep.budget import budget_exceeded, budget_reason
from certified.sweep.tasks import run_batch


@pytest.fixture(autouse=True)
def _fresh_child():
    """Each test forks its own child (a child is a snapshot: it would miss a monkeypatch)."""
    budget.shutdown()
    yield
    budget.shutdown()


H2 = {
    "family": "lipschitz",
    "statement": "H2",
    "generate": [{"kind": "random", "seed": 4, "count": 4, "n": [2, 3], "d": 2, "k": 2}],
}


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        (-1, r"options\.time_budget: -1 is not in \(0, 1000000\] seconds"),
        (0, r"options\.time_budget: 0 is not in \(0, 1000000\]"),
        (math.nan, r"options\.time_budget: nan is not a finite number of seconds"),
        (math.inf, r"options\.time_budget: inf is not a finite number"),
        (2e6, r"options\.time_budget: 2000000\.0 is not in \(0, 1000000\]"),
        (True, r"options\.time_budget: True is not a number of seconds"),
        ("60", r"options\.time_budget: '60' is not a number of seconds"),
        ([1], r"options\.time_budget: \[1\] is not a number"),
    ],
)
def test_bad_budgets_are_refused_before_any_work_with_nothing_written(budget, message, tmp_path):
    from certified.sweep.run import sweep

    raw = {**H2, "options": {"time_budget": budget}}
    with pytest.raises(SpecError, match=message):
        load_spec(raw)
    with pytest.raises(SpecError, match=message):
        sweep(raw, tmp_path / "out", workers=1)
    assert not (tmp_path / "out").exists()


def test_bad_budgets_in_toml_files(tmp_path):
    path = tmp_path / "s.toml"
    for text, message in [("nan", "not a finite"), ("-0.5", "not in"), ('"1 s"', "not a number")]:
        path.write_text(
            f'family = "lipschitz"\n[options]\ntime_budget = {text}\n[[generate]]\n'
            'kind = "random"\nseed = 1\ncount = 1\nn = 2\n'
        )
        with pytest.raises(SpecError, match=message):
            load_spec(path)


def test_the_budget_is_not_part_of_the_keys():
    plain = load_spec(H2)
    budgeted = load_spec({**H2, "options": {"time_budget": 2.5}})
    assert budgeted.time_budget == 2.5 and plain.time_budget is None
    assert budgeted.core == plain.core
    assert [i.key for i in budgeted.instances()] == [i.key for i in plain.instances()]
    assert load_spec({**H2, "options": {"time_budget": 7}}).time_budget == 7.0


def test_budget_reason_is_recognised():
    assert budget_reason(0.5) == "time budget of 0.5 s exceeded"
    assert budget_exceeded(budget_reason(60)) and budget_exceeded("time budget of 1e+06 s exceeded")
    assert not budget_exceeded("input: time budget of") and not budget_exceeded(None)


def _slow_when(monkeypatch, slow, what):
    """Make the lipschitz adapter run ``what()`` for the instances whose n is ``slow`` (the
    forked child inherits the patch)."""
    real = fam_module.LIPSCHITZ

    def run(params, path, statement, options):
        if params["n"] == slow:
            what()
        return real.run(params, path, statement, options)

    monkeypatch.setattr(fam_module, "LIPSCHITZ", dataclasses.replace(real, run=run))


def _items(spec):
    return [(i.key, i.params, i.path) for i in spec.instances()]


def _spin():
    while True:
        pass


def _long_c_call():
    import flint

    flint.ctx.prec = 10**9  # pi to a billion bits: minutes inside arb, no Python to interrupt
    flint.arb.pi()


@pytest.mark.parametrize("what", [_spin, _long_c_call], ids=["python", "inside-flint"])
def test_an_instance_over_budget_is_undecided_and_the_batch_goes_on(what, monkeypatch, tmp_path):
    spec = load_spec(H2)
    items = _items(spec)
    slow = items[1][1]["n"]
    _slow_when(monkeypatch, slow, what)
    key = items[1][0]
    (tmp_path / f"{key}.json").write_text("{}")  # as if left by an earlier, interrupted run
    (tmp_path / f".{key}.json.0a1b2c.tmp").write_text("{")
    t0 = time.perf_counter()
    rows = run_batch(spec.core, items, str(tmp_path), 0.5)
    assert time.perf_counter() - t0 < 30
    assert [r["key"] for r in rows] == [k for k, _, _ in items]
    for (k, params, _), row in zip(items, rows, strict=True):
        if params["n"] == slow:
            assert row["verdict"] == "UNDECIDED"
            assert row["reason"] == "time budget of 0.5 s exceeded"
            assert row["certificate"] is None and row["certificate_sha256"] is None
            assert 0.4 < row["seconds"] < 10 and row["n"] == slow
        else:
            assert row["verdict"] in ("VERIFIED", "REFUTED"), row["reason"]
            assert check_file(tmp_path / f"{k}.json").verified
    assert not (tmp_path / f"{key}.json").exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_an_exception_in_the_child_fails_the_task(monkeypatch, tmp_path):
    spec = load_spec(H2)
    items = _items(spec)

    def boom():
        raise ValueError("a bug, not a refused instance")

    _slow_when(monkeypatch, items[0][1]["n"], boom)
    with pytest.raises(RuntimeError, match="ValueError: a bug, not a refused instance"):
        run_batch(spec.core, items, str(tmp_path), 30)


def test_a_child_that_dies_otherwise_fails_the_task(monkeypatch, tmp_path):
    spec = load_spec(H2)
    items = _items(spec)
    _slow_when(monkeypatch, items[0][1]["n"], lambda: os.kill(os.getpid(), signal.SIGTERM))
    with pytest.raises(RuntimeError, match=r"died .* before its time budget ran out"):
        run_batch(spec.core, items, str(tmp_path), 30)


def test_the_child_serves_batch_after_batch_and_is_replaced_after_an_overrun(monkeypatch, tmp_path):
    spec = load_spec(H2)
    items = _items(spec)
    run_batch(spec.core, items[:2], str(tmp_path), 30)
    [first] = budget._CHILD
    run_batch(spec.core, items[2:], str(tmp_path), 30)
    assert budget._CHILD == [first]
    budget.shutdown()
    assert budget._CHILD == []
    _slow_when(monkeypatch, items[0][1]["n"], _spin)
    rows = run_batch(spec.core, items[:1], str(tmp_path), 0.2)
    assert rows[0]["reason"] == "time budget of 0.2 s exceeded" and budget._CHILD == []


def test_a_task_interrupted_mid_batch_never_reuses_its_child(monkeypatch, tmp_path):
    spec = load_spec(H2)
    items = _items(spec)

    def interrupted(path, data):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        budget.run_budgeted(spec.core, items, str(tmp_path), 30, interrupted)
    assert budget._CHILD == []  # killed: its unread rows can never answer the next batch
    rows = run_batch(spec.core, items, str(tmp_path), 30)
    assert [r["key"] for r in rows] == [k for k, _, _ in items]


def test_rows_within_the_budget_equal_rows_without_one(tmp_path):
    spec = load_spec(H2)
    items = _items(spec)
    plain = run_batch(spec.core, items, str(tmp_path))
    budgeted = run_batch(spec.core, items, str(tmp_path), 60)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in plain]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in budgeted]
