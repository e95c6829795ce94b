"""Lowering: torch.export through torchax and JAX, one named scope per FX node, and each FX
node's provenance (the JAX and torchax internals fenced here)."""
