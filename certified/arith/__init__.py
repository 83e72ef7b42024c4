"""Rigorous arithmetic: exact numbers, balls over python-flint, vectorised float64 intervals."""

from certified.arith import interval
from certified.arith.interval import Interval
from certified.arith.tri import Tri, TriArray

__all__ = ["Interval", "Tri", "TriArray", "interval"]
