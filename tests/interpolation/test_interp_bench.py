"""``certified bench interpolation --quick`` runs end to end (figures are not asserted: speed is
measured by the bench itself, never in tests)."""

from __future__ import annotations

import json

from certified.cli import main


def test_quick_interpolation_bench_checks_the_written_file(capsys):
    assert main(["bench", "interpolation", "--quick", "--json"]) == 0
    rows = {b["name"].split(",")[0]: b for b in json.loads(capsys.readouterr().out)["benchmarks"]}
    build = rows["construct + exact verify"]
    assert build["exact"] and build["switches"] == build["formula_switches"] == 249
    check = rows["checker re-verifies the certificate file (python -m certified.checker)"]
    assert check["verified"] and check["checker_output"].startswith("VERIFIED interpolation ")
    assert check["certificate_bytes"] > 10**6
    export = rows["certified error of the float64 export"]
    # the certified bound really bounds the float64 evaluation's error
    assert float(export["certified_max_error"]) >= float(export["float64_max_error"])
