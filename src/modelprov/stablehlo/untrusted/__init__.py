"""Untrusted input: MLIR text checked before MLIR's parser, bytecode made text in a
resource-limited child, and what the readers take."""
