"""The validated Taylor method for smooth fields (rule ``taylor-lohner``).

* :mod:`~certified.flow.taylor.lohner` -- the stepping loop: Picard a priori boxes, Taylor
  polynomial and remainder, variational equation, QR-Lohner sets (:func:`lohner_flow`, reached
  through :func:`certified.flow.enclose_flow`);
* ``_lohner_kernels`` -- its compiled float64 interval kernels (53 bits, many sets at once);
* ``_lohner_arb`` -- the same sets in arb at any precision, through the checker's reference
  step :func:`certified.checker.lohner.lohner_step`;
* :mod:`~certified.flow.taylor.float64` -- the same Taylor steps in plain float64, without
  enclosures (:func:`float_taylor_flow`: the benchmarks' baseline, a sampler of trajectories).

Nothing loads here: the modules (and their compiled kernels) load when first used.
"""
