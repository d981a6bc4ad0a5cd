"""Rigid-body dynamics algorithms and their analytical derivatives (NumPy and CasADi)."""
