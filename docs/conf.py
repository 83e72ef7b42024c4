"""Sphinx configuration of the documentation site (``certified[docs]``).

Build: ``python -m sphinx -W -b html docs docs/_build/html`` (warnings are errors). Notebooks
are rendered with their stored outputs (never executed at build time); the CLI reference is
generated from the parser (``certified.cli.full_parser``), so it cannot drift from ``--help``.
"""

from __future__ import annotations

import certified

project = "certified"
author = "the certified developers"
release = version = certified.__version__
copyright = "2026, the certified developers"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinxarg.ext",
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "bench/*.md"]
nb_execution_mode = "off"  # notebooks are shown with their stored outputs
myst_enable_extensions = ["dollarmath", "deflist", "colon_fence"]
myst_heading_anchors = 3
autodoc_typehints = "description"
autodoc_member_order = "bysource"
autosummary_generate = True
napoleon_numpy_docstring = True
html_theme = "pydata_sphinx_theme"
html_title = "certified"
html_theme_options = {"navigation_depth": 2, "show_toc_level": 2}
# the EBNF blocks of proofs/ are not valid input for Pygments' EBNF lexer (highlighting only);
# sphinx-argparse's domain does not implement MyST's any-xref lookup
suppress_warnings = ["misc.highlighting_failure", "myst.domains"]


def _guarantee_paragraph(app, what, name, obj, options, lines):
    """Every public docstring ends with a ``Guarantee: ...`` paragraph (the package's
    convention). After a numpy section (Parameters, Raises, Attributes, ...), napoleon would
    read that paragraph as one more entry of the section: two blank lines end the section
    first (napoleon's section break), and the label is set in bold."""
    for i, line in enumerate(lines):
        if not line.startswith("Guarantee:"):
            continue
        lines[i] = "**Guarantee:**" + line[len("Guarantee:") :]
        underlines = [k for k in range(1, i) if lines[k - 1].strip() and _is_underline(lines[k])]
        if underlines:  # a numpy section precedes: end it
            k = i
            while k > 0 and not lines[k - 1].strip():
                k -= 1
            lines[k:i] = ["", ""]
        break


def _is_underline(line: str) -> bool:
    return bool(line.strip()) and set(line.strip()) == {"-"}


def setup(app):
    # before napoleon (priority 500), which turns the numpy sections into reST
    app.connect("autodoc-process-docstring", _guarantee_paragraph, priority=400)
