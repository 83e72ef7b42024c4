"""Attention maps in ball arithmetic, their Jacobians, certified spectral norms and
three-valued Lipschitz verdicts (theorems.md section 5)."""
