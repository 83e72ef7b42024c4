"""The ``certified`` command (see ``README.md`` and the CLI contract in the design notes).

Exit codes: 0 success, 1 a check failed (REJECTED / not verified), 2 usage, input or I/O error;
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 141 standard output closed early
(``certified ... | head``), 70 an internal error (a bug: one line, ``--debug`` shows the
traceback). Errors print one line on stderr; nothing is written on failure or interruption.

Files are safe: before any work, ``--out`` naming one of the command's input files (compared
by device and inode, so symlinks and ``./`` do not slip through) is refused, and so is an
existing ``--out`` file unless ``--force``; a missing output directory is named.

Subcommands come from the registry (``certified.commands.registry``). Only the chosen
subcommand's options are declared, so its family is imported only when it runs (or for its own
``--help``): ``certified --help`` and ``certified check`` import no producer.
"""

from __future__ import annotations

import os
import signal
import sys

from certified import _is_the_command
from certified._loading import install, keep_freed_memory, while_loading

if __name__ == "__main__" or _is_the_command():  # the command (certified/_loading.py)
    install()

import argparse
from pathlib import Path

from certified import __version__
from certified.commands.registry import COMMANDS, command
from certified.errors import CertifiedError

__all__ = ["full_parser", "main"]


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors exit 2 with one line, as argparse does
        self.print_usage(sys.stderr)
        self.exit(2, f"certified: error: {message}\n")


def _chosen_command(argv: list[str]) -> str | None:
    # the top-level parser has no option taking a value: its first positional is the command
    for arg in map(str, argv):
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


def full_parser() -> argparse.ArgumentParser:
    """The parser with every command's arguments (imports every family): the source of the
    CLI reference in the documentation, so that it cannot drift from ``--help``."""
    return _build_parser(every=True)


def _build_parser(chosen: str | None = None, every: bool = False) -> argparse.ArgumentParser:
    p = _Parser(
        prog="certified",
        description="Rigorous numerics for neural ODEs and transformers: certified enclosures, "
        "theorem-instance verdicts and re-checkable certificates.",
    )
    p.add_argument("--version", action="version", version=f"certified {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for record in COMMANDS:
        kwargs = {} if record.description is None else {"description": record.description}
        parser = sub.add_parser(record.name, help=record.help, **kwargs)
        if every or record.name == chosen:
            record.add_arguments(parser)
            if record.output == "file" and any(a.dest == "out" for a in parser._actions):
                parser.add_argument(
                    "--force", action="store_true", help="replace existing output files"
                )
        parser.add_argument(
            "--debug", action="store_true", help="show the traceback of an internal error"
        )
    return p


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that writers remove their temporary files."""


_RECEIVED: list[int] = []  # the signals received while main runs (see main)


def _on_sigterm(signum, frame):
    _RECEIVED.append(signum)
    raise _Terminated


def _on_sigint(signum, frame):
    _RECEIVED.append(signum)
    raise KeyboardInterrupt


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def _output_problem(args: argparse.Namespace) -> str | None:
    """Why ``--out`` must not be written, or None: it names an input file, an existing file
    (without ``--force``), a directory, or a path in a directory that does not exist."""
    if command(args.command).output != "file":
        return None
    named = [(o, getattr(args, o, None)) for o in _OUTPUT_OPTIONS if getattr(args, o, None)]
    real = [os.path.realpath(p) for _, p in named]
    if len(set(real)) < len(real):  # two outputs, one file (even one that does not exist yet)
        flags = " and ".join("--" + o.replace("_", "-") for o, _ in named)
        return f"{flags}: name the same file; choose two files"
    for option in _OUTPUT_OPTIONS:
        out = getattr(args, option, None)
        problem = None if out is None else _one_output_problem(args, option, out)
        if problem is not None:
            return problem
    return None


_OUTPUT_OPTIONS = ("out", "enclosures")  # the options that name files a command writes


def _one_output_problem(args: argparse.Namespace, option: str, out) -> str | None:
    flag = "--" + option.replace("_", "-")
    target = Path(out)
    ident = _identity(target)
    if ident is not None:
        for name, value in sorted(vars(args).items()):
            is_path = isinstance(value, (str, os.PathLike))
            if name != option and is_path and _identity(value) == ident:
                kind = "output" if name in _OUTPUT_OPTIONS else "input"
                return (
                    f"{flag}: {out} is the --{name.replace('_', '-')} {kind}; choose another file"
                )
        if target.is_dir():
            return f"{flag}: {out} is a directory; name a file"
        if not getattr(args, "force", False):
            return f"{flag}: {out} exists; pass --force to replace it"
    parent = target.parent
    if not parent.is_dir():
        what = "is not a directory" if parent.exists() else "does not exist"
        return f"{flag}: the directory {os.fspath(parent)!r} {what}"
    return None


def main(argv: list[str] | None = None) -> int:
    """Run ``certified ARGV``; return the exit code (see the module docstring)."""
    previous, unraisable = None, sys.unraisablehook
    if hasattr(signal, "SIGTERM") and _in_main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        previous = signal.SIG_DFL if previous is while_loading else previous
        if signal.getsignal(signal.SIGINT) in (while_loading, signal.default_int_handler):
            signal.signal(signal.SIGINT, _on_sigint)
        sys.unraisablehook = _signal_again(unraisable)
    del _RECEIVED[:]
    try:
        keep_freed_memory()  # the replays' speed (process-wide: the command only)
        return _main(sys.argv[1:] if argv is None else list(argv))
    except _Terminated:  # before the command started: nothing can have been written
        print("certified: terminated (no partial or temporary file is left)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("certified: interrupted (no partial or temporary file is left)", file=sys.stderr)
        return 130
    except Exception:  # a signal inside an import (e.g. "PyCapsule_Import could not import
        if not _RECEIVED:  # module datetime", issue 11's trials) while the parser is built
            raise
        word, code = ("terminated", 143) if _RECEIVED[0] == signal.SIGTERM else ("interrupted", 130)
        print(f"certified: {word} (no partial or temporary file is left)", file=sys.stderr)
        return code
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
            if signal.getsignal(signal.SIGINT) is _on_sigint:
                signal.signal(signal.SIGINT, signal.default_int_handler)
            sys.unraisablehook = unraisable


def _signal_again(hook):
    """An unraisable-exception hook: a signal's exception raised inside a callback from C
    (llvmlite's object cache, ctypes), where Python can only print and drop it, is raised
    again 10 ms later by a one-shot SIGALRM (by then, back in Python code); other exceptions
    go to ``hook``. Found by the interrupt trials of issue 11 (a traceback on stderr, and the
    command went on)."""

    def handle(unraisable) -> None:
        exc = unraisable.exc_value
        if not isinstance(exc, (_Terminated, KeyboardInterrupt)) or not hasattr(signal, "SIGALRM"):
            hook(unraisable)
            return
        kind = type(exc)

        def again(signum, frame):
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            raise kind

        signal.signal(signal.SIGALRM, again)
        signal.setitimer(signal.ITIMER_REAL, 0.01)

    return handle


def _main(argv: list[str]) -> int:
    parser = _build_parser(_chosen_command(argv))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    name = f"certified {args.command}"
    problem = _output_problem(args)
    if problem is not None:
        print(f"{name}: {problem}", file=sys.stderr)
        return 2
    try:
        return command(args.command).run(args)
    except CertifiedError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `certified ... | head`: the reader left; say nothing more
        _silence_stdout()
        return 141
    except OSError as exc:
        print(f"{name}: I/O error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{name}: interrupted (no partial or temporary file is left)", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"{name}: terminated (no partial or temporary file is left)", file=sys.stderr)
        return 143
    except Exception as exc:
        signal_exc = _interruption_behind(exc)
        if signal_exc is not None:  # a signal raised inside compiled code (numba wraps it)
            what, code = ("terminated", 143) if signal_exc is _Terminated else ("interrupted", 130)
            print(f"{name}: {what} (no partial or temporary file is left)", file=sys.stderr)
            return code
        if getattr(args, "debug", False):
            raise
        print(
            f"{name}: internal error: {type(exc).__name__}: {exc} (a bug: please report it; "
            "--debug shows the traceback)",
            file=sys.stderr,
        )
        return 70


def _interruption_behind(exc: BaseException) -> type | None:
    """``_Terminated`` or ``KeyboardInterrupt`` if one of them caused EXC: a signal handler that
    raises while a numba kernel runs surfaces as ``SystemError(...returned a result with an
    exception set)`` whose cause is the handler's exception."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for kind in (_Terminated, KeyboardInterrupt):
            if isinstance(exc, kind):
                return kind
        exc = exc.__cause__ or exc.__context__
    return None


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
