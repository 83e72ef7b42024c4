"""The ``certified`` command (see ``README.md`` and the CLI contract in the design notes).

Exit codes: 0 success, 1 a check failed (REJECTED / not verified), 2 usage, input or I/O error.
Errors print one line on stderr; nothing is written on failure.

Subcommands come from the registry (``certified.commands.registry``). Only the chosen
subcommand's options are declared, so its family is imported only when it runs (or for its own
``--help``): ``certified --help`` and ``certified check`` import no producer.
"""

from __future__ import annotations

import argparse
import sys

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
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _build_parser(_chosen_command(argv))
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return command(args.command).run(args)
    except CertifiedError as exc:
        print(f"certified {args.command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"certified {args.command}: I/O error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
