"""Sweep specifications (``proofs/sweep.md``): what to verify, over which instances.

A spec is a JSON or TOML file (``tomllib``), or the same structure as a dict::

    version = 1
    family = "lipschitz"        # a command of the registry with a sweep adapter
    statement = "H2"            # the family's statement (lipschitz: H1 | H2 | H3)
    out = "runs/h2"             # optional: where results go (``--out`` wins)
    [options]                   # per instance, part of every key (prec, time, q, ...)
    prec = 128
    time_budget = 60            # seconds per instance (not part of the keys)
    [run]                       # how to run, not part of any key
    batch = 16                  # instances per Dask task (default: automatic)
    retries = 2                 # Dask retries of a task whose worker died
    [[generate]]                # one or more generators, expanded in order
    kind = "random"             # "grid" | "random" | "files"
    seed = 7
    count = 100
    n = [2, 6]                  # an inclusive integer range, or a fixed integer
    d = 2

Every instance is a small JSON object of parameters, keyed by the SHA-256 of the canonical
JSON of ``{"spec": core, "instance": params}``, where ``core`` is the version, family,
statement and options (but ``time_budget``): what decides an instance's result. A generated
(grid or random) instance has its own ``seed`` and the ``hypothesis`` version: the family
draws its data from a strategy of :mod:`certified.strategies` with them
(:mod:`certified.sweep.draw`). Generators, output and run settings are not in the key, so
growing a grid or adding a generator keeps the keys of the instances already done.

Standard library only (no Dask, pandas, pyarrow, nor hypothesis: bad specs are refused
before any of them is imported).
"""

from __future__ import annotations

import glob
import hashlib
import itertools
import json
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from certified.errors import InputError

__all__ = [
    "SPEC_VERSION",
    "Instance",
    "SpecError",
    "SweepSpec",
    "canonical_json",
    "instance_key",
    "load_spec",
]

SPEC_VERSION = 1
MAX_INSTANCES = 10_000_000
_TOP = {"version", "family", "statement", "options", "generate", "run", "out"}
_RUN = {"batch", "retries"}
MAX_TIME_BUDGET = 1_000_000  # seconds (11.6 days): larger is a typo, or no budget at all


class SpecError(InputError):
    """A sweep specification is malformed: the message names the field and the fix."""


def canonical_json(obj: Any) -> str:
    """The canonical JSON text of ``obj`` (sorted keys, no blanks, ASCII): the hashed form.

    Guarantee: exact (equal objects give equal texts).
    """
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def instance_key(core: Mapping[str, Any], params: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of the canonical JSON of ``{"spec": core, "instance": params}``.

    Guarantee: exact (a function of the core spec and the instance only).
    """
    text = canonical_json({"spec": dict(core), "instance": dict(params)})
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@dataclass(frozen=True)
class Instance:
    """One instance of a sweep: its position, its parameters (JSON), its key, and for a file
    instance the resolved path (not part of the key: the file's SHA-256 is).

    Guarantee: exact."""

    index: int
    params: dict[str, Any]
    key: str
    path: str | None = None


def _int(value: Any, field: str, low: int, high: int) -> int:
    if type(value) is not int or not low <= value <= high:
        raise SpecError(f"{field}: {value!r} is not an integer in [{low}, {high}]")
    return value


def _table(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SpecError(f"{field}: expected a table / object, got {type(value).__name__}")
    return value


def _seed(params: Mapping[str, Any], *salt: Any) -> int:
    # a seed derived from the instance's description (not its position): growing a grid or
    # reordering generators leaves every existing instance's data unchanged
    text = canonical_json([dict(params), list(salt)])
    return int.from_bytes(hashlib.sha256(text.encode("ascii")).digest()[:7], "big")


class _Shake:
    """Uniform integers from SHAKE-256 of a text, by rejection sampling: a function of the
    text alone (no library's random stream, whose algorithm may change between versions)."""

    def __init__(self, text: str) -> None:
        self._xof = hashlib.shake_256(text.encode("ascii"))
        self._pos = 0
        self._buf = b""

    def _bytes(self, n: int) -> bytes:
        if self._pos + n > len(self._buf):  # a longer digest extends the shorter one
            self._buf = self._xof.digest(2 * (self._pos + n) + 64)
        out = self._buf[self._pos : self._pos + n]
        self._pos += n
        return out

    def integer(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        bits = (span - 1).bit_length()
        while True:
            v = int.from_bytes(self._bytes((bits + 7) // 8), "big") & ((1 << bits) - 1)
            if v < span:
                return lo + v


def time_budget(value: Any) -> float | None:
    """A validated per-instance time budget in seconds (None: no budget).

    Raises
    ------
    SpecError
        Not a number, not finite, not > 0, above :data:`MAX_TIME_BUDGET`, or no ``os.fork``
        on this platform (the budget runs instances in a forked child process).

    Guarantee: exact."""
    field = "options.time_budget"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SpecError(
            f"{field}: {value!r} is not a number of seconds; write e.g. time_budget = 60"
        )
    if not math.isfinite(value):
        raise SpecError(
            f"{field}: {value!r} is not a finite number of seconds; omit it for no budget"
        )
    if not 0 < value <= MAX_TIME_BUDGET:
        raise SpecError(
            f"{field}: {value!r} is not in (0, {MAX_TIME_BUDGET}] seconds; give the seconds "
            "one instance may take, or omit it for no budget"
        )
    if not hasattr(os, "fork"):  # pragma: no cover - POSIX in the test environment
        raise SpecError(f"{field}: needs os.fork (POSIX), which this platform does not have")
    return float(value)


@dataclass(frozen=True, eq=False)
class SweepSpec:
    """A validated sweep specification (see the module docstring).

    Attributes
    ----------
    family, statement : str, str or None
    options : dict
        Validated by the family adapter; part of every key.
    generators : tuple of dict
    batch : int or None
    retries : int
    out : str or None
    base : pathlib.Path
        Directory that relative file patterns are resolved against (the spec file's).
    time_budget : float or None
        Seconds one instance may take (``options.time_budget``; not part of the keys: it
        decides whether an answer is waited for, never which answer).

    Guarantee: exact (validated when built by :func:`load_spec`).
    """

    family: str
    statement: str | None
    options: dict[str, Any]
    generators: tuple[dict[str, Any], ...]
    batch: int | None = None
    retries: int = 2
    out: str | None = None
    base: Path = Path(".")
    time_budget: float | None = None

    @property
    def core(self) -> dict[str, Any]:
        """What decides an instance's result: hashed into every key."""
        return {
            "version": SPEC_VERSION,
            "family": self.family,
            "statement": self.statement,
            "options": self.options,
        }

    def adapter(self):
        """The family's sweep adapter (from the command registry)."""
        from certified.sweep.families import adapter

        return adapter(self.family)

    def instances(self) -> list[Instance]:
        """Every instance, in generator order, duplicates (same key) dropped.

        Raises
        ------
        SpecError
            A generator is malformed or a parameter is outside the family's range.

        Guarantee: exact (deterministic: the same spec gives the same instances and keys).
        """
        fam = self.adapter()
        out: list[Instance] = []
        seen: set[str] = set()
        for g, gen in enumerate(self.generators):
            expanded = _expand(gen, f"generate[{g}]", fam, self.base, self.statement)
            for params, path in expanded:
                key = instance_key(self.core, params)
                if key not in seen:
                    seen.add(key)
                    out.append(Instance(len(out), params, key, path))
                if len(out) > MAX_INSTANCES:
                    raise SpecError(f"generate: more than {MAX_INSTANCES} instances; split it")
        if not out:
            raise SpecError("generate: the generators give no instance")
        return out


def _param_value(fam, name: str, value: Any, field: str) -> int:
    if name not in fam.params:
        known = ", ".join(sorted(fam.params)) or "none"
        raise SpecError(f"{field}: unknown parameter {name!r} for {fam.name} (known: {known})")
    low, high = fam.params[name]
    return _int(value, field, low, high)


def _drawn_params(fam, params: dict[str, int], seed: int, version: str | None) -> dict:
    # the Hypothesis version is part of a drawn instance: another version may draw other data
    return {**params, "seed": seed} if fam.drawn is None else {
        **params, "seed": seed, "hypothesis": version}  # fmt: skip


def _grid(gen: dict, field: str, fam, statement: Any) -> list[tuple[dict, None]]:
    grid = _table(gen.get("grid"), f"{field}.grid")
    axes = []
    for name in sorted(grid):
        values = grid[name]
        values = values if isinstance(values, list) else [values]
        if not values:
            raise SpecError(f"{field}.grid.{name}: an empty list; give at least one value")
        axes.append([(name, _param_value(fam, name, v, f"{field}.grid.{name}")) for v in values])
    missing = sorted(set(fam.params) - set(grid))
    if missing:
        raise SpecError(f"{field}.grid: no values for {', '.join(missing)}")
    repeat = _int(gen.get("repeat", 1), f"{field}.repeat", 1, MAX_INSTANCES)
    seed = _int(gen.get("seed", 0), f"{field}.seed", 0, 2**63 - 1)
    points = [dict(point) for point in itertools.product(*axes)]
    for params in points:
        fam.check_drawn(params, statement, f"{field}.grid")
    version = _hypothesis_version(fam)
    return [
        (_drawn_params(fam, params, _seed(params, seed, r), version), None)
        for params in points
        for r in range(repeat)
    ]


def _hypothesis_version(fam) -> str | None:
    from certified.sweep.draw import hypothesis_version

    return None if fam.drawn is None else hypothesis_version()


def _random(gen: dict, field: str, fam, statement: Any) -> list[tuple[dict, None]]:
    count = _int(gen.get("count"), f"{field}.count", 1, MAX_INSTANCES)
    seed = _int(gen.get("seed"), f"{field}.seed", 0, 2**63 - 1)
    ranges = {}
    for name in fam.params:
        value = gen.get(name, fam.defaults.get(name))
        if value is None:
            raise SpecError(f"{field}.{name}: give an integer or a range [low, high]")
        lo, hi = (value, value) if not isinstance(value, list) else (value + [None])[:2]
        if isinstance(value, list) and len(value) != 2:
            raise SpecError(f"{field}.{name}: a range is [low, high], got {value!r}")
        lo = _param_value(fam, name, lo, f"{field}.{name}")
        hi = _param_value(fam, name, hi, f"{field}.{name}")
        if lo > hi:
            raise SpecError(f"{field}.{name}: empty range [{lo}, {hi}]; give low <= high")
        ranges[name] = (lo, hi)
    fam.check_drawn({n: hi for n, (lo, hi) in ranges.items()}, statement, field)
    version = _hypothesis_version(fam)
    out = []
    for i in range(count):
        # instance i: its sizes and its seed from SHAKE-256 of (seed, i) alone
        shake = _Shake(canonical_json(["certified.sweep.random/1", seed, i]))
        params = {n: shake.integer(lo, hi) for n, (lo, hi) in sorted(ranges.items())}
        out.append((_drawn_params(fam, params, shake.integer(0, 2**56 - 1), version), None))
    return out


def _files(gen: dict, field: str, fam, base: Path) -> list[tuple[dict, str]]:
    if not fam.reads_files:
        raise SpecError(f"{field}: {fam.name} has no file instances; use grid or random")
    paths = gen.get("paths")
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise SpecError(f'{field}.paths: give a list of files or patterns, e.g. ["data/*.json"]')
    out = []
    for pattern in paths:
        full = os.path.join(base, os.path.expanduser(pattern))
        matches = sorted(glob.glob(full)) if glob.has_magic(pattern) else [full]
        if not matches:
            raise SpecError(f"{field}.paths: {pattern!r} matches no file")
        for path in matches:
            try:
                data = Path(path).read_bytes()
            except OSError as exc:
                raise SpecError(f"{field}.paths: {path}: cannot read ({exc.strerror})") from None
            name = os.path.relpath(path, base)
            params = {"file": name, "sha256": hashlib.sha256(data).hexdigest()}
            out.append((params, os.path.abspath(path)))
    return out


def _expand(gen: Any, field: str, fam, base: Path, statement: Any = None) -> list:
    gen = _table(gen, field)
    kind = gen.get("kind")
    allowed = {
        "grid": {"kind", "grid", "repeat", "seed"},
        "random": {"kind", "count", "seed", *fam.params},
        "files": {"kind", "paths"},
    }
    if fam.chunks:
        allowed = {"chunks": {"kind", "points", "size"}}
    if not isinstance(kind, str) or kind not in allowed:
        kinds = " or ".join(f'"{k}"' for k in allowed)
        raise SpecError(f"{field}.kind: {kind!r}; for {fam.name} use {kinds}")
    unknown = sorted(set(gen) - allowed[kind])
    if unknown:
        raise SpecError(f"{field}: unknown key {unknown[0]!r} for kind {kind!r}")
    if kind == "grid":
        return _grid(gen, field, fam, statement)
    if kind == "random":
        return _random(gen, field, fam, statement)
    if kind == "chunks":
        from certified.sweep.flow_family import chunk_instances

        return chunk_instances(gen, field, base)
    return _files(gen, field, fam, base)


def _read(source: Any) -> tuple[dict[str, Any], Path]:
    if isinstance(source, Mapping):
        return dict(source), Path(".")
    path = Path(source)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the spec ({exc.strerror})") from None
    try:
        if path.suffix == ".toml":
            obj = tomllib.loads(data.decode("utf-8"))
        elif path.suffix == ".json":
            from certified.io import parse_json

            obj = parse_json(data, str(path))
        else:
            raise SpecError(f"{path}: a spec is a .toml or a .json file")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: not valid TOML: {exc}") from None
    return _table(obj, str(path)), path.parent


def load_spec(source: Any) -> SweepSpec:
    """Read and validate a sweep spec: a ``.toml`` / ``.json`` path, or a dict.

    Raises
    ------
    SpecError
        Unreadable file, unknown key, unknown family or statement, a bad option or run
        setting (the family adapter validates options). Generators are checked by
        :meth:`SweepSpec.instances`.

    Guarantee: exact (validation only).
    """
    from certified.sweep.families import adapter

    obj, base = _read(source)
    unknown = sorted(set(obj) - _TOP)
    if unknown:
        raise SpecError(f"unknown key {unknown[0]!r}; the keys are {', '.join(sorted(_TOP))}")
    if obj.get("version", SPEC_VERSION) != SPEC_VERSION:
        raise SpecError(f"version: {obj['version']!r}; this is version {SPEC_VERSION}")
    fam = adapter(obj.get("family"))
    statement = obj.get("statement", fam.statements[0] if fam.statements else None)
    if fam.statements and statement not in fam.statements:
        raise SpecError(
            f"statement: {statement!r} for {fam.name}; use one of {', '.join(fam.statements)}"
        )
    if not fam.statements and statement is not None:
        raise SpecError(f"statement: {fam.name} has no statements; remove the key")
    options = dict(_table(obj.get("options", {}), "options"))
    budget = time_budget(options.pop("time_budget", None))
    options = fam.check_options(options, statement, base)
    run = _table(obj.get("run", {}), "run")
    if set(run) - _RUN:
        raise SpecError(f"run: unknown key {sorted(set(run) - _RUN)[0]!r}; use batch, retries")
    batch = run.get("batch")
    batch = None if batch is None else _int(batch, "run.batch", 1, 100_000)
    retries = _int(run.get("retries", 2), "run.retries", 0, 100)
    gens = obj.get("generate")
    if isinstance(gens, dict):
        gens = [gens]
    if not isinstance(gens, list) or not gens:
        raise SpecError("generate: give at least one generator ([[generate]] in TOML)")
    out = obj.get("out")
    if out is not None and not isinstance(out, str):
        raise SpecError(f"out: {out!r} is not a directory name")
    return SweepSpec(fam.name, statement, options, tuple(gens), batch, retries, out, base, budget)
