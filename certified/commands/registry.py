"""The registry of ``certified`` commands, read by ``cli``, ``demo`` and ``bench``.

Each theorem family registers one :class:`CommandRecord`: the subcommand's name and help, the
module that defines ``add_arguments(parser)`` and ``run(args) -> exit code``, and optionally a
demo step (returning :class:`~certified.commands.records.DemoCheck` records) and benchmark
suites (returning :class:`~certified.commands.records.Benchmark` records). Functions are named
by ``"module:attribute"`` strings and imported only when used, so that ``certified --help`` and
``certified check`` import no family (no numpy, no numba), and the import direction is always
registry -> family, never family -> ``cli`` / ``demo`` / ``bench``.

Standard library only.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "COMMANDS",
    "CommandRecord",
    "bench_suites",
    "command",
    "demo_steps",
    "load",
]


def load(ref: str) -> Callable[..., Any]:
    """The object named by ``"package.module:attribute"`` (imports the module)."""
    module, _, attribute = ref.partition(":")
    if not attribute:
        raise ValueError(f"{ref!r}: expected 'module:attribute'")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class CommandRecord:
    """One subcommand of ``certified``.

    ``module`` defines ``add_arguments(parser)`` and ``run(args) -> int``. ``demo`` names a
    function of no arguments returning a ``DemoCheck`` or a list of them; ``bench`` pairs a
    suite name with a function ``(quick: bool) -> list[Benchmark]``."""

    name: str
    help: str
    module: str
    description: str | None = None
    demo: str | None = None
    bench: tuple[tuple[str, str], ...] = ()
    # ``certified sweep``: names the family's SweepFamily adapter (certified/sweep/families.py)
    sweep: str | None = None
    # what ``--out`` names: "file" (``cli`` refuses one that is an input, or exists without
    # ``--force``, before any work) or "directory" (the command's own business)
    output: str = "file"

    def add_arguments(self, parser) -> None:
        load(f"{self.module}:add_arguments")(parser)

    def run(self, args) -> int:
        return load(f"{self.module}:run")(args)


# Order: ``certified --help`` lists the commands, and ``certified demo`` runs the steps, in it.
COMMANDS: tuple[CommandRecord, ...] = (
    CommandRecord(
        "demo",
        "run the main job on embedded defaults and re-check it",
        "certified.demo",
        demo="certified.demo:arithmetic_checks",
        output="directory",
    ),
    CommandRecord(
        "check",
        "re-check certificate files with the independent checker",
        "certified.commands.check",
        description="One line per file: 'VERIFIED <kind> <file>' or 'REJECTED <file>: <reason>'. "
        "Exit 0 all verified, 1 some rejected, 2 usage or I/O error.",
    ),
    CommandRecord(
        "flow",
        "certified enclosures of a schedule's flow map, with a certificate",
        "certified.flow.command",
        demo="certified.flow.examples:demo_checks",
        bench=(
            ("flow", "certified.flow.bench:bench_flow"),
            ("certificates", "certified.flow.bench_certificates:bench_certificates"),
        ),
        sweep="certified.sweep.flow_family:FLOW",
    ),
    CommandRecord(
        "bench",
        "benchmarks: ratios against float64 in the same run",
        "certified.bench",
        bench=(("arith", "certified.bench:bench_arith"),),
    ),
    CommandRecord(
        "separate",
        "certified separation witness of two discrete measures, with a certificate",
        "certified.moments.command",
        description="Find q and a coordinate k where G_mu(q)_k and G_nu(q)_k (G = grad log Z) "
        "lie in disjoint certified intervals. VERIFIED writes the certificate (exit 0); "
        "REFUTED (mu = nu exactly) and UNDECIDED write nothing (exit 1); bad input exits 2.",
        demo="certified.moments.command:demo_check",
        sweep="certified.sweep.families:SEPARATE",
    ),
    CommandRecord(
        "wasserstein",
        "certified two-sided bounds on W_q between two discrete measures, with a certificate",
        "certified.transport.command",
        demo="certified.transport.command:demo_check",
        bench=(("wasserstein", "certified.transport._bench:bench_wasserstein"),),
        sweep="certified.sweep.families:WASSERSTEIN",
    ),
    CommandRecord(
        "sinkhorn",
        "certified two-sided bounds on entropic OT or the Sinkhorn divergence, with a certificate",
        "certified.entropic.command",
        description="Bounds on OT_gamma(mu, nu) = min <C, pi> + gamma KL(pi ‖ a x b) (or on the "
        "Sinkhorn divergence with --divergence), cost ‖x - y‖^q; the certificate holds the dual "
        "potentials. Exit 0 verified, 1 not verified, 2 bad input (nothing written).",
        demo="certified.entropic.command:demo_check",
        bench=(("sinkhorn", "certified.entropic._bench:bench_sinkhorn"),),
    ),
    CommandRecord(
        "lipschitz",
        "three-valued checks of Lipschitz bounds (attention H1/H2/H3, neural-ODE flows)",
        "certified.attention.command",
        description="VERIFIED needs an upper bound on the left side below a lower bound on the "
        "right side; REFUTED comes with a certified counterexample. H1/H2: at the instance X "
        "(see proofs/lipschitz.md); H3: for the pair mu, nu; flow: all pairs of the points.",
        demo="certified.attention.command:demo_check",
        sweep="certified.sweep.families:LIPSCHITZ",
    ),
    CommandRecord(
        "tokens",
        "token-sample complexity: certified sup over B_R of the error of n-token attention",
        "certified.attention.tokens_command",
        description="VERIFIED if the certified upper bound on the sup is <= C/sqrt(n) (or "
        "C/log n, C/sqrt(log n)); REFUTED with a query whose certified error exceeds it. "
        "Populations with closed-form attention: Gaussian, uniform on a box; --family hardmax "
        "for the beta -> infinity limit (Gaussian tokens).",
        bench=(("tokens", "certified.attention._tokens_bench:suite"),),
    ),
    CommandRecord(
        "interpolate",
        "exact interpolation of point pairs by a ReLU neural ODE, with a certificate",
        "certified.interpolation.command",
        demo="certified.interpolation.command:demo_check",
        bench=(("interpolation", "certified.interpolation.bench:bench_interpolation"),),
        sweep="certified.sweep.families:INTERPOLATE",
    ),
    CommandRecord(
        "transport-to-cube",
        "theorem F: a ReLU flow pushing an empirical measure or a box density within "
        "W_q <= eps of U([0,1]^d), with a certificate",
        "certified.cube.command",
        description="Theorem F for empirical measures and piecewise-constant densities on grids "
        "(proofs/cube.md): VERIFIED writes the certificate (exit 0); refused certificates are "
        "UNDECIDED, nothing written (exit 1); p < d (erratum), eps <= 0, q outside "
        "[1, d/(d-1)), weights or masses not summing to 1, negative masses, too few atoms for "
        "eps: exit 2.",
        demo="certified.cube.command:demo_check",
    ),
    CommandRecord(
        "gradient",
        "certified enclosures of a neural-ODE loss and its parameter gradient, with a certificate",
        "certified.training.command",
        description="J = (1/N) sum_i ‖x_i(T) - y_i‖^2 / 2 + (eps/2) sum_l h_l ‖theta_l‖^2 for a "
        "tanh / sigmoid schedule, and dJ/d(W, A, b) of every piece, from the forward C^1 "
        "enclosure in the parameters and the discrete adjoint (proofs/training.md). Exit 0 "
        "written, 1 refused by the checker, 2 bad input (nothing written).",
        demo="certified.training.command:demo_check",
        bench=(("gradient", "certified.training.bench:bench_gradient"),),
    ),
    CommandRecord(
        "train",
        "certified gradient descent: every step a certified decrease of the loss, with a trace",
        "certified.training.train_command",
        description="theta_{k+1} = theta_k - lr mid(grad J(theta_k)), kept only when the upper "
        "bound of J(theta_{k+1}) is below the lower bound of J(theta_k); the trace is a "
        "training certificate. Exit 0 written, 1 --stationary not met or refused, 2 bad input.",
    ),
    CommandRecord(
        "conservation",
        "certified counts of conservation laws of gradient flows (exact ranks)",
        "certified.training.conservation_command",
        description="Lower bound: known or given polynomial laws, each proved conserved "
        "exactly, of exact rank at theta_0; upper bound: D minus the exact rank of Lie brackets "
        "of the grad phi_k at theta_0. Exit 0 COMPLETE (bounds meet), 1 gap, 2 bad input.",
    ),
    CommandRecord(
        "transformer",
        "transformers as flow maps on the sphere: certified token flows and clustering verdicts",
        "certified.transformers.command",
        description="certified transformer flow --instance F --out CERT: the certified flow of "
        "the tokens (attention dynamics, rule taylor-lohner); certified transformer cluster "
        "--instance F --eps E --out CERT: the hemisphere theorem's instance check (V = I, "
        "B = beta I). Exit 0 verified, 1 refuted or undecided, 2 bad input (nothing written). "
        "See proofs/transformers.md.",
        demo="certified.transformers.command:demo_check",
        bench=(("transformer", "certified.transformers.bench:bench_transformer"),),
    ),
    CommandRecord(
        "sweep",
        "campaigns of theorem instances on Dask: a table and a certificate per instance",
        "certified.sweep.command",
        description="certified sweep SPEC --out DIR [--scheduler ADDRESS] [--workers N]; "
        "certified sweep init FAMILY prints an example spec; certified sweep check DIR "
        "re-checks a sweep's certificates on the cluster. Needs the sweep extra "
        "(pip install 'certified[sweep]'). See proofs/sweep.md.",
        bench=(("sweep", "certified.sweep._bench:bench_sweep"),),
        output="directory",
    ),
)


def command(name: str) -> CommandRecord:
    """The record of subcommand ``name`` (KeyError if there is none)."""
    for record in COMMANDS:
        if record.name == name:
            return record
    raise KeyError(name)


def demo_steps() -> list[str]:
    """The demo steps, in the order ``certified demo`` runs them."""
    return [r.demo for r in COMMANDS if r.demo is not None]


def bench_suites() -> dict[str, str]:
    """Benchmark suite name -> the function that runs it."""
    suites: dict[str, str] = {}
    for record in COMMANDS:
        for name, ref in record.bench:
            if name in suites:
                raise ValueError(f"benchmark suite {name!r} registered twice")
            suites[name] = ref
    return suites
