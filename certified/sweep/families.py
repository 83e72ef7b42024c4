"""Sweep adapters: how a family of the command registry turns one instance (a small JSON object
of parameters, or a file) into a verdict, a certificate and the columns of its row.

An adapter is found through the command registry (``CommandRecord.sweep`` names it), so a new
family joins ``certified sweep`` by registering one. Adapters are producers like the commands
they mirror: they call the family's public API, never the checker's private names; the
certificate they return is written only after the checker accepts its bytes
(:mod:`certified.sweep.tasks`).

Random data is drawn from ``numpy.random.default_rng(seed)`` with the instance's own seed, as
exact dyadic rationals or binary64 doubles read exactly, so an instance is the same on every
worker and every run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

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

    ``params``: instance parameter -> inclusive integer range (every instance also has a
    ``seed``); ``options``: option -> (default, validator); ``run(params, path, statement,
    options) -> Result`` (``path``: the file of a file instance, else None); ``example``: the
    commented TOML spec ``certified sweep init`` prints."""

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
        rng = np.random.default_rng(params["seed"])
        X, Y = rng.random((params["N"], params["d"])), rng.random((params["N"], params["d"]))
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


INTERPOLATE = SweepFamily(
    name="interpolate",
    statements=(),
    params={"N": (1, 100_000), "d": (2, 1_000), "p": (1, 100_000)},
    defaults={"d": 2, "p": 2},
    options={
        "time": ("1", _exact_string),
        "variant": ("auto", _choice("auto", "general", "high-dim")),
        "width": (2, _width),
    },
    run=_run_interpolation,
    example="""\
# certified sweep spec: exact interpolation of N random pairs in R^d by a ReLU neural ODE of
# width p (theorem A: L = 2 ceil(N/p) - 1 switches); one certificate per instance.
version = 1
family = "interpolate"

[options]                # part of every instance's key
time = "1"               # final time T, exact
variant = "auto"         # auto | general | high-dim
width = 2                # p for file instances (grid / random give p themselves)

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


def _fractions(a: np.ndarray, den: int) -> list[list[str]]:
    return [[f"{int(v)}/{den}" for v in row] for row in a]


def attention_instance_json(params: Mapping[str, int], statement: str) -> dict[str, Any]:
    """The random attention instance of ``params`` (n, d, k, seed): Q, K, V with entries in
    {-1, -3/4, ..., 1}, R = 1, and points with coordinates in multiples of 1/(8d) of absolute
    value <= 1/(2d) (inside the unit ball); H3: two uniform measures of n atoms.

    Guarantee: exact (dyadic data; the same params give the same instance)."""
    n, d, k = params["n"], params["d"], params["k"]
    rng = np.random.default_rng(params["seed"])
    obj: dict[str, Any] = {
        "Q": _fractions(rng.integers(-4, 5, (k, d)), 4),
        "K": _fractions(rng.integers(-4, 5, (k, d)), 4),
        "V": _fractions(rng.integers(-4, 5, (d, d)), 4),
        "R": 1,
    }
    if statement == "H3":
        for name in ("mu", "nu"):
            obj[name] = {"points": _fractions(rng.integers(-4, 5, (n, d)), 8 * d)}
    else:
        obj["X"] = _fractions(rng.integers(-4, 5, (n, d)), 8 * d)
    return obj


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
    example="""\
# certified sweep spec: the attention Lipschitz hypothesis H2 (or H1, H3) on random instances:
# Q, K, V with entries in {-1, -3/4, ..., 1}, R = 1, n points (H3: two measures of n atoms) in
# the unit ball of R^d; one certificate per decided instance (VERIFIED or REFUTED).
version = 1
family = "lipschitz"
statement = "H2"         # H1 | H2 | H3

[options]                # part of every instance's key
prec = 128               # working precision in bits

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


def _run_wasserstein(params, path, statement, options) -> Result:
    from certified.transport.certificate import wasserstein_certificate
    from certified.transport.measure import Measure
    from certified.transport.wasserstein import wasserstein

    rng = np.random.default_rng(params["seed"])
    mu = Measure(rng.standard_normal((params["n"], params["d"])))
    nu = Measure(rng.standard_normal((params["m"], params["d"])) + 0.5)
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
    example="""\
# certified sweep spec: certified two-sided bounds on W_q between mu (n standard normal
# points in R^d, uniform) and nu (m points, shifted by 0.5), one certificate per instance.
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

    rng = np.random.default_rng(params["seed"])
    n, d = params["n"], params["d"]
    mu = [[f"{int(v)}/4" for v in row] for row in rng.integers(-4, 5, (n, d))]
    nu = [[f"{int(v)}/4" for v in row] for row in rng.integers(-4, 5, (n, d))]
    from certified.arith.exact import to_fmpq_array

    result = separation_witness((to_fmpq_array(mu), None), (to_fmpq_array(nu), None))
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
    example="""\
# certified sweep spec: separation witnesses of two random uniform measures of n atoms with
# coordinates in {-1, -3/4, ..., 1} (REFUTED when the measures are equal).
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
