"""Sweep adapters: how a family of the command registry turns one instance (a small JSON object
of parameters, or a file) into a verdict, a certificate and the columns of its row.

An adapter is found through the command registry (``CommandRecord.sweep`` names it), so a new
family joins ``certified sweep`` by registering one. Adapters are producers like the commands
they mirror: they call the family's public API, never the checker's private names; the
certificate they return is written only after the checker accepts its bytes
(:mod:`certified.sweep.tasks`).

The data of a generated (grid or random) instance are the example that a public strategy of
:mod:`certified.strategies` gives for the instance's own seed (:func:`certified.sweep.draw.
draw_example`: Hypothesis's ``fuzz_one_input`` driven by a SHAKE-256 byte stream), so an
instance is the same on every worker and every run with the Hypothesis version its
``hypothesis`` parameter records: interpolation ``datasets`` (or ``near_degenerate_datasets``),
attention ``attention_inputs``, Wasserstein and separation two ``measures``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from certified.errors import InputError
from certified.sweep.spec import SpecError
from certified.verdict import Outcome

__all__ = ["INTERPOLATE", "LIPSCHITZ", "SEPARATE", "WASSERSTEIN", "Result", "SweepFamily"]


@dataclass(frozen=True)
class Result:
    """What an adapter returns for one instance: the verdict, the certificate to write (None:
    no certificate for this verdict), the reason, and the family's columns (exact strings for
    bounds, floats beside them for plotting).

    Guarantee: as the family function it wraps."""

    verdict: Outcome
    certificate: dict[str, Any] | None
    reason: str = ""
    columns: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SweepFamily:
    """A family's sweep adapter.

    ``params``: instance parameter -> inclusive integer range (every generated instance also
    has a ``seed`` and the ``hypothesis`` version that draws its data); ``options``: option ->
    (default, validator); ``run(params, path, statement, options) -> Result`` (``path``: the
    file of a file instance, else None); ``example``: the commented TOML spec ``certified
    sweep init`` prints; ``drawn``: ``(size, limit, what)``, the number of values
    ``size(params, statement)`` a generated instance draws, at most ``limit`` (Hypothesis
    draws examples of at most 8 KiB of choices), described as ``what`` in the refusal."""

    name: str
    statements: tuple[str, ...]
    params: Mapping[str, tuple[int, int]]
    defaults: Mapping[str, Any]
    options: Mapping[str, tuple[Any, Callable[[Any], Any]]]
    run: Callable[..., Result]
    example: str
    reads_files: bool = True
    chunks: bool = False  # the "chunks" generator: row ranges of one .npz points file
    base_options: tuple[str, ...] = ()  # validators called as check(value, spec directory)
    drawn: tuple[Callable[[Mapping[str, int], Any], int], int, str] | None = None

    def check_drawn(self, params: Mapping[str, int], statement: Any, field: str) -> None:
        """Refuse (SpecError) generated instances too large for Hypothesis to draw."""
        if self.drawn is None:
            return
        size, limit, what = self.drawn
        if size(params, statement) > limit:
            values = ", ".join(f"{k} = {v}" for k, v in sorted(params.items()))
            raise SpecError(
                f"{field}: {values} draws {size(params, statement)} values; generated "
                f"{self.name} instances draw at most {limit} ({what}: Hypothesis draws "
                "examples of at most 8 KiB); use smaller sizes, or file instances"
            )

    def check_options(
        self, options: Mapping[str, Any], statement: str | None, base: Any = "."
    ) -> dict:
        """The options with defaults filled in, each validated (SpecError otherwise)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            known = ", ".join(sorted(self.options)) or "none"
            raise SpecError(f"options: unknown option {unknown[0]!r} (known: {known})")
        out = {}
        for name, (default, check) in sorted(self.options.items()):
            try:
                value = options.get(name, default)
                out[name] = check(value, base) if name in self.base_options else check(value)
            except InputError as exc:
                raise SpecError(f"options.{name}: {exc}") from None
        return out


def adapter(name: Any) -> SweepFamily:
    """The sweep adapter of the registry command ``name``.

    Raises
    ------
    SpecError
        No such command, or it has no sweep adapter (the message lists those that have one).

    Guarantee: exact."""
    from certified.commands.registry import COMMANDS, load

    names = [r.name for r in COMMANDS if getattr(r, "sweep", None)]
    for record in COMMANDS:
        if record.name == name and getattr(record, "sweep", None):
            return load(record.sweep)
    raise SpecError(f"family: {name!r} is not a sweep family; use one of {', '.join(names)}")


def _prec(value: Any) -> int:
    from certified.arith.ball import check_precision

    return check_precision(value, "prec")


def _exact_string(value: Any) -> str:
    from certified.arith.exact import fmpq_to_str, to_fmpq

    if isinstance(value, float):
        raise InputError(f"{value!r}: write the number as a string or an integer (exact)")
    q = to_fmpq(value, "time")
    if q <= 0:
        raise InputError(f"{fmpq_to_str(q)} is not > 0")
    return fmpq_to_str(q)


def _choice(*allowed: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in allowed:
            raise InputError(f"{value!r}; use one of {', '.join(allowed)}")
        return value

    return check


def _q_int(value: Any) -> int:
    if type(value) is not int or not 1 <= value <= 8:
        raise InputError(f"{value!r} is not an integer in [1, 8]")
    return value


def _width(value: Any) -> int:
    if type(value) is not int or not 1 <= value <= 100_000:
        raise InputError(f"{value!r} is not an integer in [1, 100000]")
    return value


def _s(q: Any) -> str | None:
    from certified.arith.exact import fmpq_to_str

    return None if q is None else fmpq_to_str(q)


def _f(q: Any) -> float | None:
    return None if q is None else float(q)


def _drawn(strategy: Any, params: Mapping[str, Any], what: str) -> Any:
    """The example of ``strategy`` for the instance's seed, drawn by the Hypothesis version
    that its key records (another version may draw other data: the task fails, no row)."""
    from certified.errors import MissingDependencyError
    from certified.sweep.draw import draw_example, hypothesis_version

    try:
        here = hypothesis_version()
    except MissingDependencyError as exc:  # the worker's environment, not the instance
        raise RuntimeError(f"this worker cannot draw the instance: {exc}") from None
    if params.get("hypothesis") != here:
        raise RuntimeError(
            f"this instance was generated for hypothesis {params.get('hypothesis')}, which "
            f"draws its data; this worker has {here}: install the same version everywhere"
        )
    return draw_example(strategy, params["seed"], what=what)


# --- interpolation ------------------------------------------------------------------------------


def _run_interpolation(params, path, statement, options) -> Result:
    from certified.interpolation.certificate import interpolation_certificate
    from certified.interpolation.construct import construct_interpolation
    from certified.interpolation.verify import verify_interpolation

    if path is not None:
        from certified.io import read_dataset

        X, Y = read_dataset(path)
        p = params.get("p", options["width"])
    else:
        strategy = _dataset_strategy(params["N"], params["d"], options["layout"])
        X, Y = _drawn(strategy, params, f"dataset N = {params['N']}, d = {params['d']}")
        p = params["p"]
    interp = construct_interpolation(X, Y, p, time=options["time"], variant=options["variant"])
    verdict = verify_interpolation(interp.X, interp.Y, interp.schedule)
    columns = {
        "switches": verdict.switches,
        "formula_switches": interp.formula_switches,
        "exact": verdict.exact,
        "max_error": _s(verdict.max_error),
        "max_error_float": _f(verdict.max_error),
        "variant": interp.variant,
    }
    if verdict.verdict is not Outcome.VERIFIED or verdict.max_error_squared is None:
        return Result(Outcome.UNDECIDED, None, verdict.message or "not laminar", columns)
    cert = interpolation_certificate(interp, interp.schedule, verdict)
    return Result(Outcome.VERIFIED, cert, "", columns)


@lru_cache(maxsize=256)
def _dataset_strategy(N: int, d: int, layout: str) -> Any:
    from certified.strategies import datasets, near_degenerate_datasets

    if layout == "near_degenerate":
        if N < 2:
            raise InputError("layout near_degenerate: N = 1; it needs N >= 2 points")
        return near_degenerate_datasets(n=N, d=d)
    return datasets(n=N, d=d, layout=layout)


def _layout(value: Any) -> str:
    from certified.strategies import LAYOUTS

    allowed = (*LAYOUTS, "any", "near_degenerate")
    if value not in allowed:
        raise InputError(f"{value!r}; use one of {', '.join(allowed)}")
    return value


INTERPOLATE = SweepFamily(
    name="interpolate",
    statements=(),
    params={"N": (1, 100_000), "d": (2, 1_000), "p": (1, 100_000)},
    defaults={"d": 2, "p": 2},
    options={
        "time": ("1", _exact_string),
        "variant": ("auto", _choice("auto", "general", "high-dim")),
        "width": (2, _width),
        "layout": ("random", _layout),
    },
    run=_run_interpolation,
    drawn=(lambda p, s: 2 * p["N"] * p["d"], 600, "2 N d coordinates"),
    example="""\
# certified sweep spec: exact interpolation of N random pairs in R^d by a ReLU neural ODE of
# width p (theorem A: L = 2 ceil(N/p) - 1 switches); one certificate per instance. Datasets
# are drawn from certified.strategies.datasets (2 N d <= 600 coordinates).
version = 1
family = "interpolate"

[options]                # part of every instance's key (except time_budget)
time = "1"               # final time T, exact
variant = "auto"         # auto | general | high-dim
width = 2                # p for file instances (grid / random give p themselves)
layout = "random"        # datasets layout: random | any | collinear | lattice | repeated |
                         # last_bit | mixed | near_degenerate
# time_budget = 60       # seconds per instance; beyond: UNDECIDED, no certificate

[run]                    # not part of the keys
retries = 2              # Dask retries of a task whose worker died
# batch = 16             # instances per Dask task (default: automatic)

[[generate]]             # every (N, d, p) of the grid, `repeat` seeded datasets each
kind = "grid"
seed = 0
repeat = 2
grid = { N = [4, 8, 16, 32], d = [2, 3], p = [1, 2, 4] }

# [[generate]]           # or random parameters: an integer, or an inclusive range
# kind = "random"
# seed = 1
# count = 100
# N = [2, 40]
# d = 2
# p = [1, 4]

# [[generate]]           # or dataset files {"X": N x d, "Y": N x d} (relative to this file)
# kind = "files"
# paths = ["data/*.json"]
""",
)


# --- attention Lipschitz hypotheses ---------------------------------------------------------------


@lru_cache(maxsize=256)
def _attention_strategy(n: int, d: int, k: int, measures: bool) -> Any:
    from certified.strategies import attention_inputs

    return attention_inputs(n=n, d=d, k=k, measures=measures)


def attention_instance_json(params: Mapping[str, Any], statement: str) -> dict[str, Any]:
    """The generated attention instance of ``params`` (n, d, k, seed, hypothesis): the example
    of :func:`certified.strategies.attention_inputs` with exactly these sizes for the seed (H3:
    two measures of n atoms instead of the points X).

    Guarantee: exact (the same params give the same instance)."""
    n, d, k = params["n"], params["d"], params["k"]
    strategy = _attention_strategy(n, d, k, statement == "H3")
    return _drawn(strategy, params, f"attention instance n = {n}, d = {d}, k = {k}")


def _attention_values(p: Mapping[str, int], statement: Any) -> int:
    n, d, k = p["n"], p["d"], p["k"]
    return 2 * k * d + d * d + (2 * n * (d + 1) if statement == "H3" else n * d)


def _run_lipschitz(params, path, statement, options) -> Result:
    from certified.attention.instance import parse_attention_instance, read_attention_instance

    need = "measures" if statement == "H3" else "X"
    if path is not None:
        inst = read_attention_instance(path, require=need)
    else:
        inst = parse_attention_instance(attention_instance_json(params, statement), require=need)
    if statement == "H3":
        from certified.attention.mean_field import check_h3

        v = check_h3(inst, prec=options["prec"])
    else:
        from certified.attention.lipschitz import check_attention_hypothesis

        v = check_attention_hypothesis(inst, statement, prec=options["prec"])
    ratio = None
    if v.lhs_upper is not None and v.rhs_lower is not None and v.rhs_lower > 0:
        ratio = float(v.lhs_upper / v.rhs_lower)
    columns = {
        "lhs_lower": _s(v.lhs_lower),
        "lhs_upper": _s(v.lhs_upper),
        "rhs_lower": _s(v.rhs_lower),
        "rhs_upper": _s(v.rhs_upper),
        "lhs_upper_float": _f(v.lhs_upper),
        "rhs_lower_float": _f(v.rhs_lower),
        "ratio_upper": ratio,
    }
    if not v.verdict.decided:
        return Result(Outcome.UNDECIDED, None, v.message, columns)
    if v.certificate is None:
        return Result(Outcome.UNDECIDED, None, "no certificate kind covers this verdict", columns)
    return Result(v.verdict, v.certificate, "", columns)


LIPSCHITZ = SweepFamily(
    name="lipschitz",
    statements=("H2", "H1", "H3"),
    params={"n": (1, 256), "d": (1, 32), "k": (1, 32)},
    defaults={"d": 2, "k": 2},
    options={"prec": (128, _prec)},
    run=_run_lipschitz,
    drawn=(_attention_values, 1800, "entries of Q, K, V and of the points"),
    example="""\
# certified sweep spec: the attention Lipschitz hypothesis H2 (or H1, H3) on random instances
# drawn from certified.strategies.attention_inputs: Q, K, V with entries p/q (q <= 8, |p/q| <=
# 2), R in {1/2, 1, 2}, n points (H3: two measures of n atoms) in the ball of radius R in R^d;
# one certificate per decided instance (VERIFIED or REFUTED).
version = 1
family = "lipschitz"
statement = "H2"         # H1 | H2 | H3

[options]                # part of every instance's key (except time_budget)
prec = 128               # working precision in bits
# time_budget = 60       # seconds per instance; beyond: UNDECIDED, no certificate

[run]                    # not part of the keys
retries = 2

[[generate]]
kind = "random"
seed = 7
count = 200
n = [1, 8]               # an integer or an inclusive range
d = [2, 3]
k = 2

# [[generate]]           # or every point of a grid, `repeat` seeded instances each
# kind = "grid"
# repeat = 4
# grid = { n = [2, 4, 8, 16], d = [2], k = [2] }

# [[generate]]           # or attention instance files {"Q", "K", "V", "R", "X"}
# kind = "files"
# paths = ["instances/*.json"]
""",
)


# --- Wasserstein bounds and moment separation (random instances) ---------------------------------


@lru_cache(maxsize=256)
def _measure_pair(n: int, m: int, d: int) -> Any:
    from hypothesis import strategies as st

    from certified.strategies import measures

    return st.tuples(measures(n=n, d=d), measures(n=m, d=d))


def _run_wasserstein(params, path, statement, options) -> Result:
    from certified.transport.certificate import wasserstein_certificate
    from certified.transport.wasserstein import wasserstein

    n, m, d = params["n"], params["m"], params["d"]
    mu, nu = _drawn(_measure_pair(n, m, d), params, f"measures n = {n}, m = {m}, d = {d}")
    e = wasserstein(mu, nu, options["q"])
    columns = {
        "lower": _s(e.lower),
        "upper": _s(e.upper),
        "lower_float": _f(e.lower),
        "upper_float": _f(e.upper),
        "relative_gap": float(e.relative_gap),
        "method": e.method,
    }
    return Result(Outcome.VERIFIED, wasserstein_certificate(e), "", columns)


WASSERSTEIN = SweepFamily(
    name="wasserstein",
    statements=(),
    params={"n": (1, 2_000), "m": (1, 2_000), "d": (1, 64)},
    defaults={"d": 2},
    options={"q": (2, _q_int)},
    run=_run_wasserstein,
    reads_files=False,
    drawn=(
        lambda p, s: (p["n"] + p["m"]) * (p["d"] + 1),
        1200,
        "(n + m)(d + 1) coordinates and weights",
    ),
    example="""\
# certified sweep spec: certified two-sided bounds on W_q between two measures of n and m
# atoms in R^d drawn from certified.strategies.measures (exact weights), one certificate per
# instance.
version = 1
family = "wasserstein"

[options]
q = 2

[[generate]]
kind = "grid"
repeat = 3
grid = { n = [10, 20, 40], m = [10, 20, 40], d = [2] }
""",
)


def _run_separate(params, path, statement, options) -> Result:
    from certified.moments.separation import separation_witness

    n, d = params["n"], params["d"]
    mu, nu = _drawn(_measure_pair(n, n, d), params, f"measures n = {n}, d = {d}")
    result = separation_witness((mu.points, mu.weights), (nu.points, nu.weights))
    w = result.witness
    columns = {
        "first_differing_moment": result.first_differing_moment,
        "coordinate": None if w is None else w.coordinate,
    }
    verdict = Outcome(result.verdict)
    if verdict is Outcome.VERIFIED and result.certificate is not None:
        return Result(verdict, result.certificate, "", columns)
    return Result(Outcome.UNDECIDED if verdict is Outcome.VERIFIED else verdict, None,
                  result.reason, columns)  # fmt: skip


SEPARATE = SweepFamily(
    name="separate",
    statements=(),
    params={"n": (1, 200), "d": (1, 8)},
    defaults={"d": 1},
    options={},
    run=_run_separate,
    reads_files=False,
    drawn=(lambda p, s: 2 * p["n"] * (p["d"] + 1), 1200, "2 n (d + 1) coordinates and weights"),
    example="""\
# certified sweep spec: separation witnesses of two measures of n atoms in R^d drawn from
# certified.strategies.measures (exact weights; REFUTED when the measures are equal).
version = 1
family = "separate"

[[generate]]
kind = "random"
seed = 3
count = 50
n = [2, 6]
d = [1, 2]
""",
)
