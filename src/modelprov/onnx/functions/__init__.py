"""Functions: functionize, inline, structural hashes, find_calls and the provenance of
calls."""
