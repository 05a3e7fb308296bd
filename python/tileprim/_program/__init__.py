"""Tile programs: several primitives traced into one plan. ``trace`` records the steps (the op
functions call it while a program is traced), ``tile`` is the value a step makes, ``plan`` the
ProgramPlan, ``program`` tp.program and its calls. No re-exports here: the op functions import
``trace`` while the call memo, which ``program`` builds on, is still loading."""
