"""Audit and diff: what provenance a model carries, and what a step kept."""

from modelprov.audit._diff import DiffReport, Recall, diff

__all__ = ["DiffReport", "Recall", "diff"]
