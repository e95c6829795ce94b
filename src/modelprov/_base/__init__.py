"""Leaf helpers any layer may use; they import nothing of modelprov but ``errors``: pausing
the garbage collector, reading small regular input files."""
