"""Attaching: provenance and user keys onto the lowered ops (typed numbers, constants named
by their consumer, XLA's frontend attributes)."""
