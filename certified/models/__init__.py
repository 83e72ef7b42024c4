"""Vector fields and maps: neural ODE schedules (sphere fields and attention to come)."""

from certified.models.schedule import DEFAULT_LEAKY_SLOPE, Activation, Piece, Schedule

__all__ = ["DEFAULT_LEAKY_SLOPE", "Activation", "Piece", "Schedule"]
