"""Reading the input files of the command line exactly, and writing output files atomically.

Formats (the CLI contract of ``design.md``):

* points / dataset: ``.json`` ``{"X": n×d, "Y": n×d}`` (``Y`` optional for points), ``.npz``
  with arrays ``X`` (and ``Y``), or ``.csv`` with one point per row for ``X`` alone (an
  optional first row of column names: a row whose fields all are names);
* measure: ``.json`` ``{"points": n×d, "weights": n}`` (weights optional: uniform ``1/n``;
  an optional ``"normalized_from_sum"`` next to them records a ``--normalize`` rescaling).

Numbers are JSON numbers or strings. A JSON integer is that integer, a JSON number with a
fraction or an exponent is the binary64 double Python reads for it (``0.1`` is the double
``3602879701896397/2**55``); a string is parsed exactly by
:func:`~certified.arith.exact.to_fmpq` (``"0.1"`` is 1/10, ``"1/3"`` is one third). CSV fields
are read as text, never via float, so ``0.1`` in a CSV file is 1/10. A JSON number below the
double range (``1e-400``) is read as its double, 0; write it as a string to keep it.

JSON is read strictly (:func:`parse_json`): ``NaN``/``Infinity`` tokens (which Python's
``json`` accepts by default), numbers that overflow binary64 (``1e400``), duplicate keys,
invalid UTF-8 and files over :data:`MAX_INPUT_BYTES` are rejected. The readers then check the
structure of the decoded JSON against the shipped JSON Schema of the file kind
(:func:`validate_json`, with ``jsonschema``: unknown or missing keys, nesting, JSON types,
empty arrays), and only then convert the numbers exactly and check what a schema cannot say
(shapes that agree, weights summing to 1).

Errors: every problem raises a :class:`~certified.errors.CertifiedError` whose one-line
message starts with the file name, then the field (``points.json: X[3]: expected 2
coordinates, got 3``):

* :class:`InputFileError`: the file cannot be read as strict JSON / CSV / NPZ at all (missing,
  unreadable, too large, not UTF-8, syntax error, duplicate key, unsupported extension);
* :class:`SchemaError`: wrong structure (missing or unknown key, wrong JSON type of a field),
  named by its JSON path (``pieces[2]: missing key 'b'``);
* :class:`~certified.errors.ShapeError`: ragged rows, wrong lengths, empty arrays;
* :class:`~certified.errors.NonFiniteError`, :class:`~certified.errors.NumberFormatError`:
  a number;
* :class:`~certified.errors.InputError`: a value (negative weight, weights not summing to 1);
* :class:`OutputFileError`: an output file cannot be written.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import re
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import flint
import numpy as np

from certified.arith.exact import fmpq_to_float, fmpq_to_str, to_fmpq
from certified.errors import (
    InputError,
    NonFiniteError,
    NumberFormatError,
    RangeOverflowError,
    ShapeError,
)

__all__ = [
    "MAX_INPUT_BYTES",
    "InputFileError",
    "MeasureFile",
    "OutputFileError",
    "SchemaError",
    "check_keys",
    "exact_matrix",
    "exact_vector",
    "exact_weights",
    "normalized_from_sum",
    "parse_json",
    "prefixed_errors",
    "read_boxes",
    "read_dataset",
    "read_json",
    "read_measure",
    "read_measure_file",
    "read_points",
    "validate_json",
    "write_json_atomic",
]

MAX_INPUT_BYTES = 256 * 2**20
"""Largest input file read (256 MiB), also the limit on the uncompressed arrays of a ``.npz``."""


class InputFileError(InputError):
    """An input file cannot be read as strict JSON, CSV or NPZ (I/O, size, encoding, syntax,
    duplicate key, unsupported extension)."""


class OutputFileError(InputError):
    """An output file cannot be written (missing directory, permission, disk full)."""


class SchemaError(InputError):
    """The structure of an input is wrong: a missing or unknown key, or a field of the wrong
    JSON type or outside its set of allowed names."""


# --- error messages that name the file -------------------------------------------------------


def _named(exc: InputError, source: str) -> InputError:
    exc.source = source  # type: ignore[attr-defined]
    return exc


def _file_error(cls: type[InputError], source: str, message: str) -> InputError:
    return _named(cls(f"{source}: {message}"), source)


@contextlib.contextmanager
def prefixed_errors(source: str | os.PathLike[str]) -> Iterator[None]:
    """Prefix the message of every :class:`~certified.errors.InputError` raised inside with
    ``"<source>: "`` (same exception class), once.

    Guarantee: exact (messages only).
    """
    name = os.fspath(source)
    try:
        yield
    except InputError as exc:
        if getattr(exc, "source", None) is not None:
            raise
        raise _named(type(exc)(f"{name}: {exc}"), name) from None


# --- strict JSON -------------------------------------------------------------------------------


def _reject_constant(token: str) -> Any:
    raise NonFiniteError(
        f"{token} is not allowed in JSON input; use a finite number "
        '(or a string such as "1/3" or "1e-400" for exact values)'
    )


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise NonFiniteError(
            f"the JSON number {text} overflows binary64 (JSON numbers are read as doubles); "
            f'write it as the string "{text}" to read it exactly'
        )
    return value


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputFileError(f"duplicate key {key!r} in a JSON object; give each key once")
        out[key] = value
    return out


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8-sig")  # a leading byte-order mark is dropped
    except UnicodeDecodeError as exc:
        raise _file_error(
            InputFileError, source, f"not UTF-8 text (invalid byte at offset {exc.start})"
        ) from None


def parse_json(text: str | bytes, source: str = "<json>") -> Any:
    """Parse strict JSON text.

    Parameters
    ----------
    text : str or bytes
        Bytes must be UTF-8 (a leading byte-order mark is ignored).
    source : str
        Name used at the start of error messages (usually the file name).

    Raises
    ------
    InputFileError
        Invalid UTF-8, a syntax error, a duplicate key, or nesting too deep.
    NonFiniteError
        A ``NaN``, ``Infinity`` or ``-Infinity`` token, or a number that overflows binary64.

    Guarantee: exact (integers are Python ints; other numbers are the doubles Python reads).
    """
    if isinstance(text, bytes):
        text = _decode(text, source)
    elif text.startswith("\ufeff"):
        text = text[1:]
    try:
        return json.loads(
            text,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            object_pairs_hook=_unique_object,
        )
    except InputError as exc:
        raise _named(type(exc)(f"{source}: {exc}"), source) from None
    except json.JSONDecodeError as exc:
        raise _file_error(
            InputFileError,
            source,
            f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        ) from None
    except RecursionError:
        raise _file_error(InputFileError, source, "JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer beyond Python's 4300-digit conversion limit
        raise _file_error(InputFileError, source, f"not valid JSON: {exc}") from None


def _read_bytes(path: str | os.PathLike[str], max_bytes: int) -> bytes:
    name = os.fspath(path)
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size > max_bytes:
                data = b""
                too_big = True
            else:
                data = f.read(max_bytes + 1)
                too_big = len(data) > max_bytes
    except FileNotFoundError:
        raise _file_error(InputFileError, name, "no such file; check the path") from None
    except IsADirectoryError:
        raise _file_error(InputFileError, name, "is a directory; give a file") from None
    except PermissionError:
        raise _file_error(InputFileError, name, "permission denied") from None
    except OSError as exc:
        raise _file_error(InputFileError, name, f"cannot read ({exc.strerror or exc})") from None
    if too_big:
        raise _file_error(
            InputFileError,
            name,
            f"larger than the limit of {max_bytes} bytes for input files; "
            "split the data into smaller files",
        )
    return data


def read_json(path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES) -> Any:
    """Read a JSON file strictly (see :func:`parse_json`).

    Raises
    ------
    InputFileError
        The file is missing, unreadable, larger than ``max_bytes``, or not strict JSON.
    NonFiniteError
        A non-finite number token or a number overflowing binary64.

    Guarantee: exact (as :func:`parse_json`).
    """
    return parse_json(_read_bytes(path, max_bytes), os.fspath(path))


# --- structure: the shipped JSON Schemas --------------------------------------------------------

_NUMBER = [{"type": "number"}, {"type": "string", "minLength": 1}]
"""The ``oneOf`` of the schemas' ``$defs/number`` (a JSON number, or a non-empty string)."""


def _is_number(x: Any) -> bool:
    t = type(x)  # bool is not a JSON number (type(True) is bool, not int)
    return t is int or t is float or (t is str and x != "")


@functools.cache
def _schema_validator(kind: str) -> Any:
    """A Draft 2020-12 validator of the shipped schema ``kind``: jsonschema's own, with a fast
    path that accepts in one Python loop an array whose items all satisfy the schema's
    ``$defs/number`` (or are arrays of such numbers); anything else, and every error, goes
    through jsonschema's ``items`` (the result is the same, ~50x faster on big arrays)."""
    import jsonschema  # lazily: ``import certified`` does not load it

    from certified.schemas import schema

    root = schema(kind)
    number = root.get("$defs", {}).get("number", {})
    plain = number.get("oneOf") == _NUMBER
    base = jsonschema.Draft202012Validator
    standard = base.VALIDATORS["items"]
    fast: dict[int, Any] = {}

    def predicate(sub: Any) -> Any:
        if not isinstance(sub, dict):
            return None
        if id(sub) not in fast:
            test = None
            if plain and sub == {"$ref": "#/$defs/number"}:
                test = _is_number
            elif sub.get("type") == "array" and set(sub) <= {"type", "minItems", "items",
                                                              "description"}:  # fmt: skip
                inner, least = predicate(sub.get("items")), sub.get("minItems", 0)
                if inner is not None:
                    test = lambda r: type(r) is list and len(r) >= least and all(map(inner, r))  # noqa: E731
            fast[id(sub)] = test
        return fast[id(sub)]

    def items(validator: Any, sub: Any, instance: Any, where: Any) -> Any:
        test = predicate(sub)
        if test is None or "prefixItems" in where or type(instance) is not list:
            yield from standard(validator, sub, instance, where)
        elif not all(map(test, instance)):
            yield from standard(validator, sub, instance, where)

    return jsonschema.validators.extend(base, {"items": items})(root)


def _json_path(parts: Any, where: str = "") -> str:
    out = where
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}" if out else str(p)
    return out


def _describe(sub: Any, defs: dict[str, Any]) -> str:
    """``"a list of numbers"``, ``"a list of rows, each a list of numbers"``, ... of a schema
    (``defs``: the schema's ``$defs``, for references)."""
    if not isinstance(sub, dict):
        return "a value"
    if sub.get("$ref") == "#/$defs/number" or sub.get("oneOf") == _NUMBER:
        return "a number"
    ref = sub.get("$ref", "")
    if ref.startswith("#/$defs/") and ref[8:] in defs:
        return _describe(defs[ref[8:]], defs)
    kind = sub.get("type")
    if kind == "array":
        inner = sub.get("items")
        if isinstance(inner, dict) and inner.get("type") == "array":
            row = _describe(inner, defs)
            return "a list of lists" if row == "a list" else f"a list of rows, each {row}"
        what = _describe(inner, defs)
        plural = {"a number": "numbers", "an object": "objects", "a string": "strings"}
        return f"a list of {plural.get(what, 'elements')}" if inner else "a list"
    if isinstance(kind, list):
        return " or ".join(_describe({**sub, "type": k}, defs) for k in kind)
    if kind == "object" or "properties" in sub:
        return "an object"
    return {"string": "a string", "integer": "an integer", "boolean": "true or false"}.get(
        kind, "a value"
    )


def _schema_problem(e: Any, classes: tuple[type[InputError], ...], where: str,
                    defs: dict[str, Any]) -> InputError:  # fmt: skip
    """The package's exception for one jsonschema ``ValidationError``: ``path: message``
    (``classes``: structure, shape and bound errors)."""
    error, shape, bound = classes
    path, key, value, inst, sub = (
        _json_path(e.absolute_path, where), e.validator, e.validator_value, e.instance, e.schema
    )  # fmt: skip

    def named(cls: type[InputError], message: str) -> InputError:
        return cls(f"{path}: {message}" if path else message)

    if key == "oneOf" and isinstance(sub, dict) and sub.get("oneOf") == _NUMBER:
        to_fmpq(inst, path or "value")  # raises what the number readers raise for it
        return named(NumberFormatError, f"expected a number, got {_json_type(inst)}")
    if key == "oneOf" and e.context:  # the alternative that got furthest
        deepest = max(e.context, key=lambda c: len(c.absolute_path))
        if len(deepest.absolute_path) > len(e.absolute_path):
            return _schema_problem(deepest, classes, where, defs)
        return named(error, _one_of(sub, inst))
    props = list(sub.get("properties", {})) if isinstance(sub, dict) else []
    if key == "type" and value == "object":
        keys = f" with keys {', '.join(props)}" if props else ""
        return named(error, f"expected a JSON object{keys}, got {_json_type(inst)}")
    if key == "type":
        cls = shape if value == "array" else error
        return named(cls, f"expected {_describe(sub, defs)}, got {_json_type(inst)}")
    if key == "minItems":
        if not inst:
            item = _describe(sub.get("items"), defs).replace("a list of rows, each ", "")
            item = {"a list of numbers": "row", "a number": "number"}.get(item, "element")
            least = f"one {item}" if value == 1 else f"{value} {item}s"
            return named(shape, f"empty; give at least {least}")
        return named(shape, f"expected at least {value} elements, got {len(inst)}")
    if key == "required":
        missing = next(k for k in value if k not in inst)
        return named(error, f"missing key {missing!r}; required keys: {', '.join(value)}")
    if key == "dependentRequired":
        needs = next(k for k, keys in value.items() if k in inst and set(keys) - set(inst))
        return named(error, f"key {needs!r} needs the keys {', '.join(value[needs])}")
    if key == "additionalProperties" and value is False:
        unknown = next(k for k in inst if k not in props)
        return named(error, f"unknown key {unknown!r}; allowed keys: {', '.join(props)}")
    if key == "enum":
        names = ", ".join(map(str, value))
        if isinstance(inst, str):
            return named(error, f"unknown value {inst!r}; use one of {names}")
        return named(error, f"expected one of the names {names}, got {_json_type(inst)}")
    if key == "const":
        return named(error, f"expected {json.dumps(value)}, got {json.dumps(inst)[:40]}")
    if key in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        relation = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=",
                    "exclusiveMaximum": "<"}[key]  # fmt: skip
        return named(bound, f"{inst} is out of range; it must be {relation} {value}")
    if key == "not" and isinstance(value, dict) and list(value) == ["required"]:
        return named(error, f"give only one of the keys {', '.join(value['required'])}")
    return named(error, " ".join(e.message.split())[:200])


def _scalar(inst: Any) -> bool:
    return inst is None or isinstance(inst, (bool, int, float, str))


def _branch_form(branch: dict[str, Any]) -> str:
    """A ``oneOf`` alternative in words: ``"causal"``, ``an array``, ``an object with 'a'``."""
    if "const" in branch:
        return json.dumps(branch["const"])
    if branch.get("required"):
        return "an object with " + " + ".join(map(repr, branch["required"]))
    kind = branch.get("type")
    if isinstance(kind, str):
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    return branch.get("description", "another form")[:40]


def _one_of(sub: dict[str, Any], inst: Any) -> str:
    """The message of an object matching none of the alternatives of a ``oneOf`` (each an
    object with its own required keys: ``{"gaussian": ...}`` or ``{"uniform": ...}``)."""
    branches = [b for b in sub.get("oneOf", []) if isinstance(b, dict)]
    if not all(b.get("required") for b in branches):  # alternatives that are not objects
        forms = " or ".join(_branch_form(b) for b in branches)
        got = json.dumps(inst)[:40] if _scalar(inst) else _json_type(inst)
        return f"expected {forms}, got {got}"
    forms = " or ".join(" + ".join(map(repr, b["required"])) for b in branches)
    if not isinstance(inst, dict):
        return f"expected an object with exactly one of {forms}, got {_json_type(inst)}"
    known = {k for b in branches for k in b.get("properties", {})}
    unknown = [k for k in inst if k not in known]
    if unknown:
        return f"unknown key {unknown[0]!r}; give exactly one of {forms}"
    got = ", ".join(map(repr, inst)) or "no key"
    return f"give exactly one of {forms}, got {got}"


def validate_json(
    obj: Any,
    kind: str,
    source: str | os.PathLike[str] | None = None,
    *,
    where: str = "",
    error: type[InputError] | None = None,
    shape_error: type[InputError] = ShapeError,
    bound_error: type[InputError] | None = None,
) -> Any:
    """Check the structure of decoded JSON ``obj`` against the shipped JSON Schema ``kind``
    (:func:`certified.schemas.schema`), with :mod:`jsonschema` (imported on first use).

    Only structure is checked (keys, nesting, JSON types, non-empty arrays); numbers are
    converted exactly by the readers afterwards. The first error (the shallowest in the
    document) becomes one exception whose one-line message names the file and the JSON path
    of the offending element (``s.json: pieces[2].W: expected a list of rows, each a list of
    numbers, got a string``).

    Parameters
    ----------
    source : str or path, optional
        The file name that starts the message.
    where : str
        Path of ``obj`` inside a larger document (``"schedule"``), prefixed to every path.
    error : type, default :class:`SchemaError`
        The exception of a missing, unknown or mistyped key (the reader's own class).
    shape_error : type, default :class:`~certified.errors.ShapeError`
        The exception of an array of the wrong type or an empty array.
    bound_error : type, default ``error``
        The exception of an integer out of range (``dimension`` below 1).

    Returns
    -------
    object
        ``obj`` unchanged.

    Raises
    ------
    SchemaError, ShapeError, NumberFormatError, InputError (or the classes given)
        A number of the wrong JSON type (``null``, ``true``, ``[]``) raises what the exact
        number reader raises for it (:func:`~certified.arith.exact.to_fmpq`).

    Guarantee: exact (validation only).
    """
    error = SchemaError if error is None else error
    validator = _schema_validator(kind)
    best: tuple[tuple[int, int, int], Any] | None = None
    for n, e in enumerate(validator.iter_errors(obj)):
        rank = (len(e.absolute_path), _RANK.get(e.validator, len(_RANK)), n)
        if best is None or rank < best[0]:
            best = (rank, e)
        if n >= 100:  # a badly broken file: the shallowest of the first hundred errors
            break
    if best is None:
        return obj
    try:
        classes = (error, shape_error, bound_error or error)
        exc = _schema_problem(best[1], classes, where, validator.schema.get("$defs", {}))
    except InputError as raised:  # a number: the exception of the exact number reader
        exc = raised
    if source is None:
        raise exc
    name = os.fspath(source)
    raise _named(type(exc)(f"{name}: {exc}"), name)


_RANK = {"type": 0, "additionalProperties": 1, "required": 2}
"""Order of errors at the same depth: a wrong type first, then unknown keys, then missing ones
(the order of :func:`check_keys`)."""


# --- structure of JSON objects and exact arrays -----------------------------------------------


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, (bool, np.bool_)):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, (int, float, np.integer, np.floating, flint.fmpq, flint.fmpz)):
        return "a number"
    return f"a {type(value).__name__}"


def check_keys(
    obj: Any, field: str, required: Sequence[str], optional: Sequence[str] = ()
) -> dict[str, Any]:
    """Check that ``obj`` is a JSON object with all ``required`` keys and no others than
    ``required`` and ``optional``.

    Parameters
    ----------
    field : str
        Name of the object in messages (``"pieces[2]"``); ``""`` for the top level.

    Raises
    ------
    SchemaError
        ``obj`` is not a dict, a key is missing or a key is unknown (first one in file order).

    Guarantee: exact.
    """
    where = f"{field}: " if field else ""
    allowed = [*required, *optional]
    if not isinstance(obj, dict):
        raise SchemaError(
            f"{where}expected a JSON object with keys {', '.join(allowed)}, got {_json_type(obj)}"
        )
    for key in obj:
        if key not in allowed:
            raise SchemaError(f"{where}unknown key {key!r}; allowed keys: {', '.join(allowed)}")
    for key in required:
        if key not in obj:
            raise SchemaError(f"{where}missing key {key!r}; required keys: {', '.join(required)}")
    return obj


def _is_row_sequence(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (isinstance(value, np.ndarray) and value.ndim > 0)


def _fmpq_object_array(values: list[Any], shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def exact_vector(
    value: Any,
    field: str,
    *,
    length: int | None = None,
    what: str = "entries",
    nonempty: bool = True,
) -> np.ndarray:
    """Exact 1-D array of :class:`flint.fmpq` from a list or 1-D numpy array of numbers.

    As :func:`exact_matrix` for one row: ``length`` is the required length, ``what`` the plural
    noun of the elements in messages (``weights: expected 3 weights, got 2``), elements are
    named ``field[i]``.

    Raises
    ------
    ShapeError
        Not a list / 1-D array, wrong length, or empty (with ``nonempty``).
    NonFiniteError, NumberFormatError, InputError
        An element.

    Guarantee: exact.
    """
    if isinstance(value, np.ndarray) and value.dtype != object:
        value = value.tolist()  # keeps exact values (longdouble stays longdouble)
    if not _is_row_sequence(value):
        raise ShapeError(f"{field}: expected a list of {what}, got {_json_type(value)}")
    n = len(value)
    if length is not None and n != length:
        raise ShapeError(f"{field}: expected {length} {what}, got {n}")
    if nonempty and n == 0:
        raise ShapeError(f"{field}: empty; give at least one of the {what}")
    return _fmpq_object_array([to_fmpq(v, f"{field}[{i}]") for i, v in enumerate(value)], (n,))


def exact_matrix(
    value: Any,
    field: str,
    *,
    rows: int | None = None,
    cols: int | None = None,
    row_what: str = "rows",
    col_what: str = "entries",
    nonempty: bool = True,
) -> np.ndarray:
    """Exact 2-D array of :class:`flint.fmpq` from a list of rows or a 2-D numpy array.

    Parameters
    ----------
    value : list of lists, or 2-D numpy array, of numbers accepted by
        :func:`~certified.arith.exact.to_fmpq`
    field : str
        Name in messages; rows are ``field[i]``, entries ``field[i][j]``.
    rows, cols : int, optional
        Required numbers of rows and of entries per row (default: as many entries as row 0).
    row_what, col_what : str
        Plural nouns in messages (``"points"``, ``"coordinates"``:
        ``X[3]: expected 2 coordinates, got 3``).
    nonempty : bool
        Reject zero rows or zero columns.

    Raises
    ------
    ShapeError
        Not a list of lists / 2-D array, ragged rows, wrong numbers of rows or columns, empty.
    NonFiniteError, NumberFormatError, InputError
        An entry (named ``field[i][j]``).

    Guarantee: exact.
    """
    if isinstance(value, np.ndarray) and value.dtype != object:
        if value.ndim != 2:
            raise ShapeError(
                f"{field}: expected a 2-dimensional array ({row_what} × {col_what}), "
                f"got shape {value.shape}"
            )
        value = value.tolist()
    if not _is_row_sequence(value):
        raise ShapeError(
            f"{field}: expected a list of {row_what} (each a list of {col_what}), "
            f"got {_json_type(value)}"
        )
    n = len(value)
    if rows is not None and n != rows:
        raise ShapeError(f"{field}: expected {rows} {row_what}, got {n}")
    if nonempty and n == 0:
        raise ShapeError(f"{field}: empty; give at least one of the {row_what}")
    width = cols
    entries: list[Any] = []
    for i, row in enumerate(value):
        if not _is_row_sequence(row):
            raise ShapeError(f"{field}[{i}]: expected a list of {col_what}, got {_json_type(row)}")
        if width is None:
            width = len(row)
        if len(row) != width:
            raise ShapeError(f"{field}[{i}]: expected {width} {col_what}, got {len(row)}")
        entries.extend(to_fmpq(v, f"{field}[{i}][{j}]") for j, v in enumerate(row))
    width = 0 if width is None else width
    if nonempty and width == 0:
        raise ShapeError(f"{field}[0]: empty; give at least one of the {col_what}")
    return _fmpq_object_array(entries, (n, width))


# --- points, datasets, measures ----------------------------------------------------------------


def _suffix(path: str | os.PathLike[str]) -> str:
    return Path(path).suffix.lower()


def _unsupported(name: str, suffix: str, allowed: str) -> InputError:
    return _file_error(
        InputFileError, name, f"unsupported file type {suffix or '(no extension)'!r}; use {allowed}"
    )


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_ .()\[\]-]{0,63}")


def _is_name(text: str) -> bool:
    """A column name of a CSV header: starts with a letter, and is not a spelling of a
    non-finite number (a row of NaNs is data, refused as such, never skipped as a header)."""
    t = text.strip()
    return bool(_NAME.fullmatch(t)) and t.lower().lstrip("+-") not in {"nan", "inf", "infinity"}


def _read_csv(path: str | os.PathLike[str], max_bytes: int) -> np.ndarray:
    name = os.fspath(path)
    text = _decode(_read_bytes(path, max_bytes), name)
    entries: list[Any] = []
    width: int | None = None
    n = 0
    with prefixed_errors(name):
        for line_no, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                continue  # blank lines and numpy.savetxt-style comments
            fields = stripped.split(",")
            if width is None and n == 0 and all(map(_is_name, fields)):
                width = len(fields)  # a header row of names (not one field is a number)
                continue
            if width is None:
                width = len(fields)
            if len(fields) != width:
                raise ShapeError(
                    f"line {line_no}: X[{n}]: expected {width} coordinates, got {len(fields)}"
                )
            entries.extend(to_fmpq(f, f"line {line_no}: X[{n}][{j}]") for j, f in enumerate(fields))
            n += 1
        if n == 0:
            raise ShapeError("X: no points; give one comma-separated point per line")
    return _fmpq_object_array(entries, (n, width or 0))


def _read_npz(path: str | os.PathLike[str], max_bytes: int, names: set[str]) -> dict[str, Any]:
    name = os.fspath(path)
    data = _read_bytes(path, max_bytes)
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except zipfile.BadZipFile as exc:
        raise _file_error(InputFileError, name, f"not a valid .npz file ({exc})") from None
    total = 0
    for info in infos:
        key = info.filename.removesuffix(".npy")
        if key not in names:
            raise _file_error(
                SchemaError,
                name,
                f"unknown array {key!r}; allowed arrays: {', '.join(sorted(names))}",
            )
        total += info.file_size
    if total > max_bytes:
        raise _file_error(
            InputFileError,
            name,
            f"arrays larger than the limit of {max_bytes} bytes once uncompressed; "
            "split the data into smaller files",
        )
    arrays: dict[str, Any] = {}
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            for key in npz.files:
                arrays[key] = npz[key]
    except ValueError as exc:
        raise _file_error(
            InputFileError, name, f"cannot load the arrays ({exc}); save numeric arrays"
        ) from None
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise _file_error(InputFileError, name, f"not a valid .npz file ({exc})") from None
    return arrays


def _read_xy(
    path: str | os.PathLike[str], *, need_y: bool, max_bytes: int
) -> tuple[np.ndarray, np.ndarray | None]:
    name = os.fspath(path)
    suffix = _suffix(path)
    if suffix == ".csv":
        if need_y:
            raise _file_error(
                SchemaError,
                name,
                "a .csv file holds the points X alone; a dataset needs X and Y: "
                "use a .json or .npz file",
            )
        return _read_csv(path, max_bytes), None
    if suffix == ".json":
        obj = read_json(path, max_bytes=max_bytes)
        with prefixed_errors(name):
            validate_json(obj, "dataset" if need_y else "points")
            obj = check_keys(obj, "", ["X", "Y"] if need_y else ["X"], [] if need_y else ["Y"])
    elif suffix == ".npz":
        obj = _read_npz(path, max_bytes, {"X", "Y"})
        with prefixed_errors(name):
            required = ("X", "Y") if need_y else ("X",)
            for key in required:
                if key not in obj:
                    raise SchemaError(
                        f"missing array {key!r}; required arrays: {', '.join(required)}"
                    )
    else:
        raise _unsupported(name, suffix, ".json, .npz or .csv")
    with prefixed_errors(name):
        X = exact_matrix(obj["X"], "X", row_what="points", col_what="coordinates")
        Y = None
        if "Y" in obj:
            n, d = X.shape
            Y = exact_matrix(
                obj["Y"],
                "Y",
                rows=n,
                cols=d,
                row_what="points (as many as X)",
                col_what="coordinates",
            )
    return X, Y


def read_points(path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES) -> np.ndarray:
    """Read a points file exactly: ``.json`` ``{"X": n×d}`` (an optional ``"Y"`` is validated
    and ignored), ``.npz`` with array ``X`` (and optionally ``Y``), or ``.csv`` with one point
    per line (comma-separated; blank lines and lines starting with ``#`` are skipped).

    Returns
    -------
    numpy.ndarray
        ``dtype=object``, shape ``(n, d)`` with ``n, d >= 1``, every entry a
        :class:`flint.fmpq`.

    Raises
    ------
    InputFileError, SchemaError, ShapeError, NonFiniteError, NumberFormatError
        See the module docstring; messages name the file and the field.

    Guarantee: exact (JSON/NPZ floats are their binary64 values, strings and CSV fields the
    rationals they spell).
    """
    X, _ = _read_xy(path, need_y=False, max_bytes=max_bytes)
    return X


def read_boxes(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES
) -> tuple[np.ndarray, np.ndarray]:
    """Read a boxes file exactly: ``.json`` ``{"lo": n×d, "hi": n×d}`` or ``.npz`` with arrays
    ``lo`` and ``hi``; box i is the product of the intervals ``[lo[i][k], hi[i][k]]``.

    Returns
    -------
    lo, hi : numpy.ndarray
        ``dtype=object`` arrays of :class:`flint.fmpq` of the same shape ``(n, d)``, lo <= hi.

    Raises
    ------
    InputFileError, SchemaError, ShapeError, NonFiniteError, NumberFormatError
        As :func:`read_dataset`; :class:`SchemaError` when some ``lo`` exceeds its ``hi``.

    Guarantee: exact.
    """
    name = os.fspath(path)
    suffix = _suffix(path)
    if suffix == ".json":
        obj = read_json(path, max_bytes=max_bytes)
        with prefixed_errors(name):
            validate_json(obj, "boxes")
            obj = check_keys(obj, "", ["lo", "hi"], [])
    elif suffix == ".npz":
        obj = _read_npz(path, max_bytes, {"lo", "hi"})
        with prefixed_errors(name):
            for key in ("lo", "hi"):
                if key not in obj:
                    raise SchemaError(f"missing array {key!r}; required arrays: lo, hi")
    else:
        raise _unsupported(name, suffix, ".json or .npz")
    with prefixed_errors(name):
        lo = exact_matrix(obj["lo"], "lo", row_what="boxes", col_what="coordinates")
        n, d = lo.shape
        hi = exact_matrix(
            obj["hi"], "hi", rows=n, cols=d, row_what="boxes (as many as lo)",
            col_what="coordinates",
        )  # fmt: skip
        for i in range(n):
            for k in range(d):
                if lo[i, k] > hi[i, k]:
                    raise SchemaError(
                        f"lo[{i}][{k}] = {lo[i, k]} exceeds hi[{i}][{k}] = {hi[i, k]}; "
                        "give lo <= hi"
                    )
    return lo, hi


def read_dataset(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES
) -> tuple[np.ndarray, np.ndarray]:
    """Read a dataset file exactly: ``.json`` ``{"X": n×d, "Y": n×d}`` or ``.npz`` with arrays
    ``X`` and ``Y``.

    Returns
    -------
    X, Y : numpy.ndarray
        ``dtype=object`` arrays of :class:`flint.fmpq` of the same shape ``(n, d)``.

    Raises
    ------
    InputFileError, SchemaError, ShapeError, NonFiniteError, NumberFormatError
        See the module docstring (a ``.csv`` file is a :class:`SchemaError`: it has no ``Y``).

    Guarantee: exact.
    """
    X, Y = _read_xy(path, need_y=True, max_bytes=max_bytes)
    assert Y is not None
    return X, Y


def exact_weights(
    value: Any, field: str, n: int, *, normalize: bool = False
) -> tuple[np.ndarray, flint.fmpq | None]:
    """Exact weights of a measure with ``n`` atoms: ``>= 0`` and summing to exactly 1, or, with
    ``normalize`` (``--normalize``), divided exactly by their sum ``S > 0``.

    Returns
    -------
    weights : numpy.ndarray
        ``dtype=object`` of :class:`flint.fmpq`, shape ``(n,)``, summing to 1 exactly.
    normalized_from : flint.fmpq or None
        ``S`` when the weights were divided by it (``normalize`` and ``S != 1``), else None.

    Raises
    ------
    ShapeError, NonFiniteError, NumberFormatError
        Not a list of ``n`` numbers.
    InputError
        A negative weight; weights whose exact sum is not 1 (the message gives the sum and
        names ``--normalize``); with ``normalize``, weights that are all zero.

    Guarantee: exact.
    """
    weights = exact_vector(value, field, length=n, what="weights (one per point)")
    for k, w in enumerate(weights):
        if w < 0:
            raise InputError(f"{field}[{k}]: {fmpq_to_str(w)} is negative; weights are >= 0")
    total = sum(weights, flint.fmpq(0))
    if normalize and total == 0:
        raise InputError(f"{field}: all zero; --normalize needs weights with a positive sum")
    if normalize and total != 1:  # --normalize: divided exactly by their sum
        return _fmpq_object_array([w / total for w in weights], (n,)), total
    if total != 1:
        excess = total - 1
        sign = "+" if excess > 0 else "-"
        try:
            about = f" (about {sign}{fmpq_to_float(abs(excess), 'nearest'):.3g})"
        except RangeOverflowError:
            about = ""
        raise InputError(
            f"{field}: sum to {fmpq_to_str(total)} = 1 {sign} {fmpq_to_str(abs(excess))}"
            f"{about}, not exactly 1; rescale them, writing inexact values as strings such "
            'as "1/3" or "0.1", or pass --normalize to divide them exactly by their sum'
        )
    return weights, None


def normalized_from_sum(
    obj: dict[str, Any], where: str, total: flint.fmpq | None
) -> flint.fmpq | None:
    """The sum that a measure's original weights were divided by: the object's own record
    ``"normalized_from_sum"`` (a measure of a certificate read back as input; exact, > 0, only
    next to weights) times ``total``, the sum this reading divided them by (None: not rescaled).
    None when there is neither, or when the product is 1.

    Raises
    ------
    SchemaError
        A record without weights.
    NonFiniteError, NumberFormatError, InputError
        A record that is not an exact number > 0.

    Guarantee: exact.
    """
    key = f"{where}.normalized_from_sum" if where else "normalized_from_sum"
    if "normalized_from_sum" not in obj:
        return total
    if "weights" not in obj:
        raise SchemaError(f"{key}: records a rescaling of given weights; give them or remove it")
    recorded = to_fmpq(obj["normalized_from_sum"], key)
    if recorded <= 0:
        raise InputError(f"{key}: {fmpq_to_str(recorded)} is not > 0; a sum of weights is > 0")
    product = recorded if total is None else recorded * total
    return None if product == 1 else product


class MeasureFile(NamedTuple):
    """A measure file as read by :func:`read_measure_file`."""

    points: np.ndarray
    """``dtype=object`` of :class:`flint.fmpq`, shape ``(n, d)``."""
    weights: np.ndarray
    """``dtype=object`` of :class:`flint.fmpq`, shape ``(n,)``, summing to 1 exactly."""
    normalized_from: flint.fmpq | None
    """The exact sum of the file's weights when they were divided by it (``--normalize``,
    sum not 1; times the file's own ``"normalized_from_sum"`` record), else None; certificates
    record it as ``"normalized_from_sum"``."""


def read_measure_file(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES, normalize: bool = False
) -> MeasureFile:
    """As :func:`read_measure`, also returning the sum the weights were divided by.

    Guarantee: exact.
    """
    name = os.fspath(path)
    suffix = _suffix(path)
    if suffix != ".json":
        raise _unsupported(name, suffix, ".json")
    obj = read_json(path, max_bytes=max_bytes)
    with prefixed_errors(name):
        validate_json(obj, "measure")
        check_keys(obj, "", ["points"], ["weights", "normalized_from_sum"])
        points = exact_matrix(obj["points"], "points", row_what="points", col_what="coordinates")
        n = points.shape[0]
        if "weights" not in obj:
            normalized_from_sum(obj, "", None)  # a record without weights is refused
            return MeasureFile(points, _fmpq_object_array([flint.fmpq(1, n)] * n, (n,)), None)
        weights, total = exact_weights(obj["weights"], "weights", n, normalize=normalize)
        total = normalized_from_sum(obj, "", total)
    return MeasureFile(points, weights, total)


def read_measure(
    path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES, normalize: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Read a discrete probability measure ``Σ_k weights[k] δ_{points[k]}`` from JSON
    ``{"points": n×d, "weights": n}``.

    Weights are optional (uniform: exactly ``1/n`` each). Given weights must be ``>= 0`` and
    sum to exactly 1 in rational arithmetic: JSON doubles such as ten times ``0.1`` do not
    (their exact sum exceeds 1); write such weights as strings (``"1/10"`` or ``"0.1"``), or
    pass ``normalize=True`` (``--normalize``) to divide them exactly by their sum
    (:func:`read_measure_file` also returns that sum). Repeated points are allowed.

    Returns
    -------
    points : numpy.ndarray
        ``dtype=object`` of :class:`flint.fmpq`, shape ``(n, d)``.
    weights : numpy.ndarray
        ``dtype=object`` of :class:`flint.fmpq`, shape ``(n,)``, summing to 1 exactly.

    Raises
    ------
    InputError
        A negative weight, or weights whose exact sum is not 1 (the message gives the sum and
        names ``--normalize``).
    InputFileError, SchemaError, ShapeError, NonFiniteError, NumberFormatError
        See the module docstring.

    Guarantee: exact.
    """
    points, weights, _ = read_measure_file(path, max_bytes=max_bytes, normalize=normalize)
    return points, weights


# --- atomic output -----------------------------------------------------------------------------


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, indent: int | None = None) -> None:
    """Write ``obj`` as JSON to ``path`` atomically: readers see the old file or the complete
    new one, never a partial file, and on any failure nothing is left behind.

    The JSON text is produced first (``allow_nan=False``), then written by
    :func:`certified.certificates.writer.write_atomic`: a fresh temporary file in the same
    directory (the usual permissions, subject to the umask), flushed to disk and renamed over
    ``path`` with :func:`os.replace`.

    Raises
    ------
    NonFiniteError
        ``obj`` contains a NaN or an infinity (JSON has none); nothing is written.
    TypeError
        ``obj`` contains a value that is not JSON (e.g. an fmpq: convert with
        :func:`~certified.arith.exact.fmpq_to_str`); nothing is written.
    OutputFileError
        The file cannot be written (missing directory, permission, disk full).

    Guarantee: exact (the file holds exactly ``json.dumps(obj)``, or is unchanged).
    """
    name = os.fspath(path)
    try:
        text = json.dumps(obj, indent=indent, allow_nan=False, ensure_ascii=False) + "\n"
    except ValueError as exc:
        raise NonFiniteError(f"{name}: cannot write {exc}; JSON has no NaN or infinity") from None
    from certified.certificates.writer import write_atomic  # the one atomic writer

    try:
        write_atomic(name, text.encode("utf-8"))
    except OSError as exc:
        raise _file_error(
            OutputFileError, name, f"cannot write ({exc.strerror or exc}); check the path"
        ) from None
