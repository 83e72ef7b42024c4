"""Certified flows of ReLU and leaky-ReLU neural ODEs (rule ``relu-regions``, laminar maps).

* :mod:`~certified.flow.relu.engine` -- the public engine: :func:`relu_flow` (arb regions and
  hyperplane crossings, points and boxes), :func:`laminar_flow_exact`,
  :func:`relu_flow_float64`, :func:`gronwall_bound`, :func:`gronwall_lipschitz`,
  :func:`relu_flow_jacobian`; re-exported here;
* ``_model`` (pieces for one slope, input parsing), ``_laminar`` (the one exact laminar map),
  ``_region`` (arb regions and windows), ``_points`` and ``_boxes`` (one piece from points,
  from boxes), ``_float`` (plain float64 baseline);
* ``_vec`` and ``_vec_kernels`` -- the vectorised 53-bit engine (``enclose_flow(...,
  method="vectorised")``) and its compiled kernels; ``_vec_plan`` -- its steps as hints of
  the checker rule ``relu-vectorised``; ``_mv`` -- boxes in mean-value form (zonotopes whose
  planes cost one generator each, ``hints.form``, proofs/bounds.md#relu-mv); ``_split`` --
  those boxes split into certified sub-boxes (``hints.partition``).

Methods and lemmas: proofs/bounds.md, section "ReLU flows".
"""

from certified.flow.relu.engine import (
    DEFAULT_PREC,
    FlowLipschitzBound,
    NotLaminarError,
    gronwall_bound,
    gronwall_lipschitz,
    laminar_flow_exact,
    relu_flow,
    relu_flow_float64,
    relu_flow_jacobian,
)

__all__ = [
    "DEFAULT_PREC",
    "FlowLipschitzBound",
    "NotLaminarError",
    "gronwall_bound",
    "gronwall_lipschitz",
    "laminar_flow_exact",
    "relu_flow",
    "relu_flow_float64",
    "relu_flow_jacobian",
]
