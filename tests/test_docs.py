"""The documentation site: it builds with warnings as errors, every format page's example file
is read by the package and valid against the shipped JSON Schema, and the CLI reference is the
parser itself."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from certified import io
from certified.attention.instance import read_attention_instance
from certified.cli import _build_parser, full_parser, main
from certified.commands import COMMANDS
from certified.errors import CertifiedError
from certified.fields import read_field
from certified.models import Schedule
from certified.schemas import NAMES, schema
from certified.sweep.spec import load_spec
from certified.transformers.stack_model import read_stack

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "formats" / "examples"

# format page -> (example file, the package's reader of that kind)
READERS = {
    "schedule": ("schedule.json", lambda p: Schedule.from_json(io.read_json(p))),
    "points": ("points.json", io.read_points),
    "boxes": ("boxes.json", io.read_boxes),
    "dataset": ("dataset.json", io.read_dataset),
    "measure": ("measure.json", io.read_measure),
    "attention-instance": ("attention-instance.json", read_attention_instance),
    "field": ("field.json", read_field),
    "tokens-instance": ("tokens-instance.json", lambda p: _command_reads(
        ["tokens", "--instance", str(p), "--C", "3", "--max-boxes", "50"])),
    "sweep-spec": ("sweep-spec.json", lambda p: load_spec(p)),
    "stack-model": ("stack-model.json", read_stack),
}  # fmt: skip


def _command_reads(argv: list[str]) -> None:
    """A file kind read only by its command: 0 or 1 (a verdict) means read, 2 raises."""
    if main(argv) == 2:
        raise CertifiedError(f"{argv[0]} refused the file")


def test_every_schema_is_valid_and_has_a_page():
    for name in NAMES:
        jsonschema.Draft202012Validator.check_schema(schema(name))
        assert (ROOT / "docs" / "formats" / f"{name}.md").is_file(), name
    with pytest.raises(KeyError, match="known"):
        schema("nope")


@pytest.mark.parametrize("name", sorted(READERS))
def test_each_format_example_is_read_and_valid(name, tmp_path):
    example, reader = READERS[name]
    path = EXAMPLES / example
    obj = json.loads(path.read_text())
    jsonschema.validate(obj, schema(name))
    reader(path)  # raises on any problem
    # an unknown key: refused by the schema and by the reader alike
    bad = copy.deepcopy(obj)
    bad["unexpected"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema(name))
    tmp = tmp_path / f"{name}.json"
    tmp.write_text(json.dumps(bad))
    with pytest.raises(CertifiedError):
        reader(tmp)


def test_the_csv_example_with_its_header_reads_like_the_json_one():
    a = io.read_points(EXAMPLES / "points.csv")
    b = io.read_points(EXAMPLES / "points.json")
    assert a.shape == b.shape and (a == b).all()


def test_the_cli_reference_is_what_help_prints():
    full = full_parser()
    sub = next(a for a in full._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    assert set(sub.choices) == {r.name for r in COMMANDS}
    for record in COMMANDS:
        alone = _build_parser(record.name)
        one = next(a for a in alone._actions if isinstance(getattr(a, "choices", None), dict))
        assert sub.choices[record.name].format_help() == one.choices[record.name].format_help()


def test_the_docs_build_with_warnings_as_errors(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         str(ROOT / "docs"), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    index = (tmp_path / "html" / "index.html").read_text()
    assert "Install and quick start" in index
    cli = (tmp_path / "html" / "cli.html").read_text()
    for record in COMMANDS:
        assert record.name in cli
