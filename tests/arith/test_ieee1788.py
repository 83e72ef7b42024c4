"""IEEE Std 1788-2015 test vectors (ITF1788, ITL format) as containment checks.

For every test line whose operation ``certified`` implements, whose arguments are bounded,
non-empty and undecorated and whose expected result is bounded and non-empty, the package's
result must CONTAIN the expected interval. The expected interval is the tightest double
interval around the true image of the (outward-rounded) arguments; the package returns an
outward-rounded enclosure of the same image, hence a superset of it.

The package refuses arguments outside a function's domain (``DomainError``) and results
beyond the float64 range (``RangeOverflowError``) instead of returning a restricted or
infinite interval. Both are counted separately, and each is checked: a ``DomainError`` is
accepted only when the argument really leaves the domain (tested here independently), a
``RangeOverflowError`` only when the expected result reaches ``OVERFLOW_THRESHOLD``. Any
other exception, and any non-containment, is a failure reported with its source line.

The vectors and the ITL parser (``itl.py``, standard library only) are the independent
reference. Vectors are read from ``$CERTIFIED_IEEE1788_DIR``, else from
``<repo root>/../shared/ieee1788``.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st


def _load_itl():
    """Import the sibling ``itl.py`` whatever pytest's import mode or package layout."""
    name = "_certified_tests_ieee1788_itl"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("itl.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


itl = _load_itl()

ENV_VAR = "CERTIFIED_IEEE1788_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = REPO_ROOT.parent / "shared" / "ieee1788"

# A RangeOverflowError is legitimate only when the expected result itself reaches this.
OVERFLOW_THRESHOLD = 1e308

# Floors on the totals over all files, against a parser or filter that silently drops most
# of the vectors. Measured: 826 eligible lines (781 run, 15 domain-rejected, 14 overflow-
# rejected, 16 failing while the package had the bugs reported with this harness).
MIN_ELIGIBLE = 800
MIN_RUN = 750


def vector_dir() -> Path:
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else DEFAULT_DIR


def _skip_if_absent(directory: Path) -> None:
    if not directory.is_dir():
        source = f"${ENV_VAR}" if os.environ.get(ENV_VAR) else "the default location"
        pytest.skip(
            f"IEEE 1788 test vectors not found: looked at {directory} ({source}); "
            f"set the environment variable {ENV_VAR} to the folder holding the *.itl files "
            f"(ITF1788 itl/), e.g. {ENV_VAR}=/path/to/ieee1788"
        )


def _itl_files() -> list[str]:
    directory = vector_dir()
    names = sorted(p.name for p in directory.glob("*.itl")) if directory.is_dir() else []
    return names or ["<no vectors>"]


# --------------------------------------------------------------------------------------------
# The package, imported lazily so that the parser tests run without it
# --------------------------------------------------------------------------------------------


@functools.cache
def _package() -> SimpleNamespace:
    from certified.arith import Interval
    from certified.arith import interval as iv
    from certified.errors import DomainError, RangeOverflowError

    return SimpleNamespace(
        Interval=Interval,
        iv=iv,
        DomainError=DomainError,
        RangeOverflowError=RangeOverflowError,
    )


# --------------------------------------------------------------------------------------------
# Operations: ITL name -> arity, package call, domain predicate
# --------------------------------------------------------------------------------------------

Bounds = tuple[float, float]


@dataclass(frozen=True)
class OpSpec:
    arity: int  # number of interval arguments
    call: Callable  # (pkg, intervals, k) -> package Interval
    needs: str | None = None  # attribute of certified.arith.interval it needs, if any
    int_arg: bool = False  # a trailing integer argument (pown)
    # True when the arguments leave the function's domain (DomainError is then allowed)
    outside_domain: Callable[[tuple[Bounds, ...], int | None], bool] = lambda a, k: False


def _contains_zero(b: Bounds) -> bool:
    return b[0] <= 0.0 <= b[1]


def _pos(pkg, x, k):
    (x,) = x
    return +x if hasattr(type(x), "__pos__") else x


def _fn(name: str) -> Callable:
    def call(pkg, xs, k):
        return getattr(pkg.iv, name)(*xs)

    return call


OPS: dict[str, OpSpec] = {
    "pos": OpSpec(1, _pos),
    "neg": OpSpec(1, lambda pkg, x, k: -x[0]),
    "add": OpSpec(2, lambda pkg, x, k: x[0] + x[1]),
    "sub": OpSpec(2, lambda pkg, x, k: x[0] - x[1]),
    "mul": OpSpec(2, lambda pkg, x, k: x[0] * x[1]),
    "div": OpSpec(
        2,
        lambda pkg, x, k: x[0] / x[1],
        outside_domain=lambda a, k: _contains_zero(a[1]),
    ),
    "recip": OpSpec(
        1,
        lambda pkg, x, k: pkg.Interval(1.0, 1.0) / x[0],
        outside_domain=lambda a, k: _contains_zero(a[0]),
    ),
    "sqr": OpSpec(1, _fn("sqr"), "sqr"),
    "sqrt": OpSpec(1, _fn("sqrt"), "sqrt", outside_domain=lambda a, k: a[0][0] < 0.0),
    "pown": OpSpec(
        1,
        lambda pkg, x, k: pkg.iv.pown(x[0], k),
        "pown",
        int_arg=True,
        outside_domain=lambda a, k: k < 0 and _contains_zero(a[0]),
    ),
    "exp": OpSpec(1, _fn("exp"), "exp"),
    "expm1": OpSpec(1, _fn("expm1"), "expm1"),
    "log": OpSpec(1, _fn("log"), "log", outside_domain=lambda a, k: a[0][0] <= 0.0),
    "logp1": OpSpec(1, _fn("log1p"), "log1p", outside_domain=lambda a, k: a[0][0] <= -1.0),
    "tanh": OpSpec(1, _fn("tanh"), "tanh"),
    "abs": OpSpec(1, lambda pkg, x, k: abs(x[0])),
    "min": OpSpec(2, _fn("minimum"), "minimum"),
    "max": OpSpec(2, _fn("maximum"), "maximum"),
    # not in ITF1788 (checked by test_every_mapped_name_is_an_itl_operation's report); kept so
    # that vectors for them, if ever added, are picked up
    "sigmoid": OpSpec(1, _fn("sigmoid"), "sigmoid"),
    "softplus": OpSpec(1, _fn("softplus"), "softplus"),
}

SKIP_REASONS = ("unsupported op", "signal", "decorated", "empty", "unbounded")


# --------------------------------------------------------------------------------------------
# Collection
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    stmt: itl.Statement
    args: tuple[Bounds, ...]
    k: int | None
    expected: Bounds


def classify(stmt: itl.Statement, implemented: Callable[[str], bool]) -> Case | str:
    """A :class:`Case` to run, or the reason (one of ``SKIP_REASONS``) to skip ``stmt``.

    A mapped operation with arguments of the wrong shape is a harness error, not a skip.
    """
    spec = OPS.get(stmt.op)
    if spec is None or not implemented(stmt.op):
        return "unsupported op"
    n = spec.arity + spec.int_arg
    intervals = stmt.args[: spec.arity]
    if (
        len(stmt.args) != n
        or len(stmt.results) != 1
        or not all(isinstance(a, itl.IntervalLiteral) for a in intervals)
        or (
            spec.int_arg
            and not (isinstance(stmt.args[-1], itl.Number) and stmt.args[-1].is_integer)
        )
    ):
        raise AssertionError(f"{stmt.where}: unexpected form for {stmt.op}: {stmt.source}")
    (result,) = stmt.results
    if stmt.signals:
        return "signal"
    if not isinstance(result, itl.IntervalLiteral):
        raise AssertionError(f"{stmt.where}: non-interval result: {stmt.source}")
    literals = (*intervals, result)
    if any(x.is_decorated for x in literals):
        return "decorated"
    if any(x.is_empty for x in literals):
        return "empty"
    if not all(x.is_bounded for x in literals):
        return "unbounded"
    k = stmt.args[-1].as_int() if spec.int_arg else None
    return Case(stmt, tuple((a.lo, a.hi) for a in intervals), k, (result.lo, result.hi))


# --------------------------------------------------------------------------------------------
# Evaluation
# --------------------------------------------------------------------------------------------


@dataclass
class Report:
    counts: dict[str, Counter] = field(default_factory=dict)  # op -> outcome -> count
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, op: str, outcome: str, n: int = 1) -> None:
        self.counts.setdefault(op, Counter())[outcome] += n

    def total(self, outcome: str) -> int:
        return sum(c[outcome] for c in self.counts.values())

    def merge(self, other: Report) -> None:
        for op, c in other.counts.items():
            self.counts.setdefault(op, Counter()).update(c)
        self.failures.extend(other.failures)
        self.seconds += other.seconds


def _fmt(x: float) -> str:
    return f"{float(x)!r} ({float(x).hex()})"


def _evaluate(pkg, spec: OpSpec, cases: list[Case]):
    """Call the package on the batch ``cases``; returns (lo, hi) float64 arrays."""
    n = len(cases)
    xs = [
        pkg.Interval(
            np.array([c.args[i][0] for c in cases], dtype=np.float64),
            np.array([c.args[i][1] for c in cases], dtype=np.float64),
        )
        for i in range(spec.arity)
    ]
    r = spec.call(pkg, xs, cases[0].k)
    lo = np.broadcast_to(np.asarray(r.lo, dtype=np.float64), (n,))
    hi = np.broadcast_to(np.asarray(r.hi, dtype=np.float64), (n,))
    return lo, hi


def _check_results(report: Report, op: str, cases: list[Case], lo, hi) -> None:
    exp_lo = np.array([c.expected[0] for c in cases])
    exp_hi = np.array([c.expected[1] for c in cases])
    ok = (exp_lo >= lo) & (exp_hi <= hi)  # False for NaN
    report.add(op, "run", int(ok.sum()))
    for i in np.flatnonzero(~ok):
        c = cases[i]
        report.add(op, "failed")
        report.failures.append(
            f"{c.stmt.where}: {c.stmt.source}  expected [{_fmt(c.expected[0])}, "
            f"{_fmt(c.expected[1])}], got [{_fmt(lo[i])}, {_fmt(hi[i])}] (not containing)"
        )


def _run_one(report: Report, pkg, op: str, spec: OpSpec, case: Case) -> None:
    where = f"{case.stmt.where}: {case.stmt.source}"
    try:
        lo, hi = _evaluate(pkg, spec, [case])
    except pkg.DomainError as exc:
        if spec.outside_domain(case.args, case.k):
            report.add(op, "domain")
        else:
            report.add(op, "failed")
            report.failures.append(f"{where}  DomainError inside the domain: {exc}")
        return
    except pkg.RangeOverflowError as exc:
        if max(abs(case.expected[0]), abs(case.expected[1])) >= OVERFLOW_THRESHOLD:
            report.add(op, "overflow")
        else:
            report.add(op, "failed")
            report.failures.append(
                f"{where}  RangeOverflowError although the expected result "
                f"[{case.expected[0]!r}, {case.expected[1]!r}] is far below the float64 "
                f"range: {exc}"
            )
        return
    except Exception as exc:  # any other exception is a reported failure
        report.add(op, "failed")
        report.failures.append(f"{where}  raised {type(exc).__name__}: {exc}")
        return
    _check_results(report, op, [case], lo, hi)


def _implemented(op: str) -> bool:
    spec = OPS.get(op)
    if spec is None:
        return False
    return spec.needs is None or hasattr(_package().iv, spec.needs)


@functools.cache
def run_file(name: str) -> Report:
    """Run every eligible line of one ITL file: batched per (operation, exponent), then case
    by case for a batch that raised, to attribute each exception to its line."""
    start = time.perf_counter()
    pkg = _package()
    report = Report()
    groups: dict[tuple[str, int | None], list[Case]] = {}
    for stmt in itl.parse_file(vector_dir() / name):
        outcome = classify(stmt, _implemented)
        if isinstance(outcome, str):
            report.add(stmt.op if stmt.op in OPS else "(other)", "skip:" + outcome)
        else:
            groups.setdefault((stmt.op, outcome.k), []).append(outcome)
    for (op, _k), cases in groups.items():
        spec = OPS[op]
        try:
            lo, hi = _evaluate(pkg, spec, cases)
        except Exception:  # attribute it: redo the batch case by case
            for case in cases:
                _run_one(report, pkg, op, spec, case)
        else:
            _check_results(report, op, cases, lo, hi)
    report.seconds = time.perf_counter() - start
    return report


# --------------------------------------------------------------------------------------------
# Tests
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", _itl_files())
def test_ieee1788_file(name: str) -> None:
    _skip_if_absent(vector_dir())
    report = run_file(name)
    if report.failures:
        pytest.fail(
            f"{len(report.failures)} IEEE 1788 containment failure(s) in {name}:\n"
            + "\n".join(report.failures),
            pytrace=False,
        )


def test_ieee1788_summary() -> None:
    directory = vector_dir()
    _skip_if_absent(directory)
    names = sorted(p.name for p in directory.glob("*.itl"))
    assert names, f"no *.itl files in {directory}"
    total = Report()
    for name in names:
        total.merge(run_file(name))
    run, domain, overflow = (
        total.total("run"),
        total.total("domain"),
        total.total("overflow"),
    )
    failed = total.total("failed")
    skipped = sum(total.total("skip:" + r) for r in SKIP_REASONS)
    lines = [f"{'op':>8} {'run':>5} {'domain':>6} {'ovfl':>5} {'failed':>6} {'skipped':>7}"]
    for op in [*OPS, "(other)"]:
        c = total.counts.get(op)
        if c:
            skip = sum(c["skip:" + r] for r in SKIP_REASONS)
            lines.append(
                f"{op:>8} {c['run']:>5} {c['domain']:>6} {c['overflow']:>5} "
                f"{c['failed']:>6} {skip:>7}"
            )
    missing = sorted({OPS[op].needs for op in OPS if not _implemented(op)})
    reasons = ", ".join(f"{total.total('skip:' + r)} {r}" for r in SKIP_REASONS)
    print("\n".join(lines))
    if missing:
        print(f"not in certified.arith.interval (their lines skipped): {', '.join(missing)}")
    print(f"skip reasons: {reasons}; evaluation took {total.seconds:.2f} s")
    print(
        f"IEEE 1788: {run} cases run, {domain} domain-rejected, {overflow} overflow-rejected, "
        f"{skipped} skipped (unsupported op/unbounded/empty/decorated), {failed} failures"
    )
    assert failed == 0, "\n".join(total.failures)
    assert run + domain + overflow >= MIN_ELIGIBLE, "far fewer eligible lines than measured"
    assert run >= MIN_RUN, "far fewer lines evaluated than measured"


def test_every_itl_file_parses() -> None:
    directory = vector_dir()
    _skip_if_absent(directory)
    statements = itl.parse_dir(directory)
    assert statements and all(statements.values())
    ops = {s.op for file in statements.values() for s in file}
    # the names this harness maps must be spelled as in the vectors (logp1, not log1p)
    assert {"add", "div", "pown", "logp1", "recip", "min", "max"} <= ops


def test_literals() -> None:
    p = itl.parse_interval
    assert (p("[-0.0, 0.0]").lo, p("[-0.0,-0.0]").hi) == (0.0, 0.0)
    assert math.copysign(1.0, p("[-0.0]").lo) == 1.0
    assert math.copysign(1.0, p("[-2.5,-0.0]").hi) == 1.0
    x = p("[0.1]")
    assert (x.lo, x.hi) == (math.nextafter(0.1, 0.0), 0.1)
    assert itl.parse_number("0X1.99999AP-4") == Fraction(0x199999A, 2**28)
    assert itl.parse_number("-0X1P+2") == -4 and itl.parse_number("0x10p0") == 16
    assert p("[-infinity, +infinity]").lo == -math.inf and not p("[entire]").is_bounded
    assert p("[1.0, 2.0]_com").decoration == "com" and p("[empty]").is_empty
    assert p("[nai]").is_nai and p("[nai]").is_decorated
    assert itl.parse_number("-.25") == Fraction(-1, 4)
    assert itl.parse_number("0x1440c131282cd9p-53") == Fraction(0x1440C131282CD9, 2**53)
    assert itl.parse_number("1.5e-3") == Fraction(3, 2000)
    for bad in (
        "[2, 1]",
        "[infinity]",
        "[1, 2]_xyz",
        "[1, 2, 3]",
        "[1,]",
        "[empty]_com",
    ):
        with pytest.raises(ValueError):
            p(bad)
    with pytest.raises(itl.ItlSyntaxError, match="<string>:2"):
        itl.parse_text("testcase t {\n add [1, 2] [3 = [4, 5];\n}")
    (s,) = itl.parse_text('testcase t { b-textToInterval "[1]" = [1.0] signal Foo; }')
    assert s.signals == ("Foo",) and isinstance(s.args[0], itl.String)


_EDGES = [
    0.0,
    itl.MIN_SUBNORMAL,
    3 * itl.MIN_SUBNORMAL,
    2.0**-1022,
    math.nextafter(2.0**-1022, 0.0),
    1.0,
    0.1,
    2.0**1023,
    itl.MAX_DOUBLE,
]


def _check_directed(q: Fraction) -> None:
    lo, hi = itl.round_down(q), itl.round_up(q)
    assert lo == -math.inf or Fraction(lo) <= q
    assert hi == math.inf or Fraction(hi) >= q
    if math.isfinite(lo) and Fraction(lo) == q:
        assert hi == lo
    else:
        assert math.nextafter(lo, math.inf) == hi or (lo == 0.0 and hi == itl.MIN_SUBNORMAL)
    try:
        nearest = float(q)  # correctly rounded to nearest
    except OverflowError:
        nearest = math.inf if q > 0 else -math.inf
    if math.isfinite(nearest):
        assert nearest in (lo, hi)
    for v in (lo, hi):
        assert v != 0.0 or math.copysign(1.0, v) == 1.0  # no negative zero


@settings(max_examples=400, deadline=None)
@given(
    x=st.floats(allow_nan=False, allow_infinity=False),
    t=st.fractions(min_value=0, max_value=1),
    scale=st.integers(min_value=-1200, max_value=1100),
    n=st.integers(min_value=-(2**200), max_value=2**200),
    d=st.integers(min_value=1, max_value=2**200),
)
@example(x=itl.MAX_DOUBLE, t=Fraction(1, 2), scale=1024, n=1, d=1)
@example(x=-itl.MIN_SUBNORMAL, t=Fraction(1, 2), scale=-1075, n=-1, d=3)
def test_directed_rounding(x: float, t: Fraction, scale: int, n: int, d: int) -> None:
    _check_directed(Fraction(x))
    assert itl.round_down(Fraction(x)) == itl.round_up(Fraction(x)) == x + 0.0
    y = math.nextafter(x, math.inf)
    if math.isfinite(y):  # a point between two neighbours, the midpoint included
        _check_directed(Fraction(x) + (Fraction(y) - Fraction(x)) * t)
    _check_directed(Fraction(n, d) * Fraction(2) ** scale)


def test_directed_rounding_edges() -> None:
    big = Fraction(2) ** 1024
    assert (itl.round_down(big), itl.round_up(big)) == (itl.MAX_DOUBLE, math.inf)
    assert (itl.round_down(-big), itl.round_up(-big)) == (-math.inf, -itl.MAX_DOUBLE)
    tiny = Fraction(1, 2**1075)
    assert (itl.round_down(tiny), itl.round_up(tiny)) == (0.0, itl.MIN_SUBNORMAL)
    for x in _EDGES:
        for q in (Fraction(x), -Fraction(x)):
            for eps in (Fraction(1, 10**400), Fraction(1, 2**1100)):
                _check_directed(q + eps)
                _check_directed(q - eps)
