"""Error metrics between a reference value and a candidate value of the same tensor."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["Discrepancy", "measure"]


@dataclasses.dataclass(frozen=True)
class Discrepancy:
    """How far a candidate tensor is from its reference (all in float64)."""

    max_abs_error: float
    max_rel_error: float
    """max |c - r| / max |r| (the error relative to the tensor's scale)."""
    mean_abs_error: float
    cosine_similarity: float
    """1.0 for equal directions; nan when either tensor is all zeros."""
    sqnr_db: float
    """Signal-to-quantization-noise ratio, 10·log10(Σr² / Σ(c - r)²); inf when equal."""
    reference_scale: float
    """max |r|, the scale the tolerance is relative to."""

    def exceeds(self, *, rtol: float, atol: float) -> bool:
        """True when the largest error is beyond ``atol + rtol · max |reference|``, or the
        candidate holds a NaN/inf where the reference is finite."""
        if math.isnan(self.max_abs_error):
            return True
        return self.max_abs_error > atol + rtol * self.reference_scale


def measure(reference: np.ndarray, candidate: np.ndarray) -> Discrepancy:
    """The metrics of ``candidate`` against ``reference`` (same shape; any numeric dtype,
    compared in float64, so float16 and casts are compared as float32 values would be)."""
    ref = np.asarray(reference, dtype=np.float64).ravel()
    cand = np.asarray(candidate, dtype=np.float64).ravel()
    if ref.size == 0:
        return Discrepancy(0.0, 0.0, 0.0, 1.0, math.inf, 0.0)
    finite = np.isfinite(ref)
    both_nonfinite_equal = ~finite & (ref == cand)  # inf where torch has inf is no error
    diff = np.where(both_nonfinite_equal, 0.0, cand - ref)
    if not finite.all():
        ref = np.where(finite, ref, 0.0)
    abs_diff = np.abs(diff)
    max_abs = float(abs_diff.max()) if not np.isnan(abs_diff).any() else math.nan
    scale = float(np.abs(ref).max())
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    mean_abs = float(abs_diff.mean())
    signal = float(np.dot(ref, ref))
    noise = float(np.dot(diff, diff)) if not math.isnan(max_abs) else math.nan
    if math.isnan(noise):
        sqnr = -math.inf
    elif noise == 0:
        sqnr = math.inf
    elif signal == 0:
        sqnr = -math.inf
    else:
        sqnr = 10.0 * math.log10(signal / noise)
    cand_finite = np.where(np.isfinite(cand), cand, 0.0)
    norms = math.sqrt(signal) * float(np.linalg.norm(cand_finite))
    cosine = float(np.dot(ref, cand_finite)) / norms if norms > 0 else math.nan
    return Discrepancy(max_abs, max_rel, mean_abs, cosine, sqnr, scale)
