"""``python -m certified.checker FILE...``: see ``_cli.py`` for the output and exit codes."""

from ._cli import main

raise SystemExit(main())
