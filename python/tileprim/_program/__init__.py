"""Tile programs: several primitives traced into one plan (tp.program, tp.Tile, ProgramPlan)."""
from .plan import ProgramPlan, StepPlan
from .program import Program, program
from .tile import Tile

__all__ = ["program", "Program", "Tile", "ProgramPlan", "StepPlan"]
