"""NumericsReport: per joined value, how far the candidate is from the reference."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

from modelprov._base._versioned import header_problem
from modelprov.core._printable import printable_json, printable_lines
from modelprov.core._sources import Source
from modelprov.errors import MetadataError
from modelprov.keys import NUMERICS_FORMAT
from modelprov.numerics._metrics import Discrepancy

__all__ = ["NUMERICS_VERSION", "ModuleNumerics", "NumericsReport", "NumericsRow", "worst_of"]

NUMERICS_VERSION = 1


@dataclasses.dataclass(frozen=True)
class NumericsRow:
    """One candidate value compared with the reference value of the source producing it."""

    source: Source
    node: str
    """The candidate node producing the value."""
    value: str
    """The candidate value's name."""
    shape: tuple[int, ...]
    max_abs_error: float
    max_rel_error: float
    """max |c - r| / max |r|."""
    mean_abs_error: float
    cosine_similarity: float
    sqnr_db: float
    diverges: bool
    """The error exceeds the tolerance (``atol + rtol · max |reference|``)."""
    starts_divergence: bool
    """It diverges while every compared value upstream of it is within the tolerance."""
    upstream: tuple[int, ...] = ()
    """Indices (in ``NumericsReport.rows``) of the nearest compared values it reads."""
    node_modules: tuple[str, ...] = ()
    """Module paths of every source the candidate node computes (a fused Conv + BN names
    both): where to look when the value diverges."""
    own_max_rel_error: float | None = None
    """With ``isolate=True``: the error its node adds when fed the reference's inputs."""
    own_sqnr_db: float | None = None

    @property
    def module_path(self) -> str:
        return self.source.module_path or ""

    @classmethod
    def of(
        cls,
        source: Source,
        node: str,
        value: str,
        shape: tuple[int, ...],
        error: Discrepancy,
        *,
        diverges: Sequence[bool],
        position: int,
        upstream: Iterable[int],
        node_modules: tuple[str, ...] = (),
        own: Discrepancy | None = None,
    ) -> NumericsRow:
        """The row of a measured value: ``diverges`` holds every row's verdict by position,
        so the row knows whether it starts the divergence (it diverges, nothing it reads does)."""
        reads = tuple(sorted(upstream))
        return cls(
            source=source,
            node=node,
            value=value,
            shape=shape,
            max_abs_error=error.max_abs_error,
            max_rel_error=error.max_rel_error,
            mean_abs_error=error.mean_abs_error,
            cosine_similarity=error.cosine_similarity,
            sqnr_db=error.sqnr_db,
            diverges=diverges[position],
            starts_divergence=diverges[position] and not any(diverges[i] for i in reads),
            upstream=reads,
            node_modules=node_modules,
            own_max_rel_error=None if own is None else own.max_rel_error,
            own_sqnr_db=None if own is None else own.sqnr_db,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.id,
            "fx_node": self.source.fx_node,
            "module": self.module_path,
            "module_type": self.source.module_type,
            "target": self.source.target,
            "file": self.source.file,
            "line": self.source.line,
            "node": self.node,
            "value": self.value,
            "shape": list(self.shape),
            "max_abs_error": _finite(self.max_abs_error),
            "max_rel_error": _finite(self.max_rel_error),
            "mean_abs_error": _finite(self.mean_abs_error),
            "cosine_similarity": _finite(self.cosine_similarity),
            "sqnr_db": _finite(self.sqnr_db),
            "diverges": self.diverges,
            "starts_divergence": self.starts_divergence,
            "upstream": list(self.upstream),
            "node_modules": list(self.node_modules),
            "own_max_rel_error": _optional(self.own_max_rel_error),
            "own_sqnr_db": _optional(self.own_sqnr_db),
        }


@dataclasses.dataclass(frozen=True)
class ModuleNumerics:
    """The rows of one module path, aggregated."""

    module_path: str
    rows: int
    diverging: int
    max_rel_error: float
    min_sqnr_db: float
    mean_cosine_similarity: float
    own_min_sqnr_db: float | None = None
    """With ``isolate=True``: the lowest SQNR its own nodes add (fed the reference's inputs)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "module": self.module_path,
            "rows": self.rows,
            "diverging": self.diverging,
            "max_rel_error": _finite(self.max_rel_error),
            "min_sqnr_db": _finite(self.min_sqnr_db),
            "mean_cosine_similarity": _finite(self.mean_cosine_similarity),
            "own_min_sqnr_db": _optional(self.own_min_sqnr_db),
        }


def _number(field: object) -> float:
    """A float written by :func:`_finite` (numbers, or "inf" / "-inf" / "nan")."""
    if isinstance(field, bool) or not isinstance(field, int | float | str):
        raise TypeError(f"expected a number, got {field!r}")
    if isinstance(field, str) and field not in ("inf", "-inf", "nan"):
        raise ValueError(f"expected a number, got {field!r}")
    return float(field)


def _row(item: dict[str, Any]) -> NumericsRow:
    line = item["line"]
    source = Source(
        id=str(item["source"]),
        fx_node=str(item["fx_node"]),
        module_path=str(item["module"]),
        module_type=str(item.get("module_type", "")),
        target=str(item.get("target", "")),
        file=None if item["file"] is None else str(item["file"]),
        line=None if line is None else int(line),
        stack_trace="",
    )
    own_rel, own_sqnr = item.get("own_max_rel_error"), item.get("own_sqnr_db")
    return NumericsRow(
        source=source,
        node=str(item["node"]),
        value=str(item["value"]),
        shape=tuple(int(d) for d in item["shape"]),
        max_abs_error=_number(item["max_abs_error"]),
        max_rel_error=_number(item["max_rel_error"]),
        mean_abs_error=_number(item["mean_abs_error"]),
        cosine_similarity=_number(item["cosine_similarity"]),
        sqnr_db=_number(item["sqnr_db"]),
        diverges=bool(item["diverges"]),
        starts_divergence=bool(item["starts_divergence"]),
        upstream=tuple(int(i) for i in item["upstream"]),
        node_modules=tuple(str(p) for p in item.get("node_modules", ())),
        own_max_rel_error=None if own_rel is None else _number(own_rel),
        own_sqnr_db=None if own_sqnr is None else _number(own_sqnr),
    )


def _optional(number: float | None) -> float | str | None:
    return None if number is None else _finite(number)


def _finite(number: float) -> float | str:
    """JSON has no inf/nan: those are written as the strings ``"inf"``, ``"-inf"``, ``"nan"``."""
    if math.isfinite(number):
        return number
    return "nan" if math.isnan(number) else ("inf" if number > 0 else "-inf")


@dataclasses.dataclass(frozen=True)
class NumericsReport:
    """What :func:`modelprov.compare` found: rows in the candidate's topological order."""

    rows: tuple[NumericsRow, ...]
    rtol: float
    atol: float
    reference: str
    candidate: str
    candidate_sources: int
    """Distinct sources whose output some candidate value is (what could be compared)."""
    skipped: tuple[tuple[str, str], ...] = ()
    """(candidate value, why) for joined values that could not be compared."""

    @property
    def first_divergence(self) -> NumericsRow | None:
        """The earliest row that diverges while everything it reads is within tolerance."""
        return next((row for row in self.rows if row.starts_divergence), None)

    @property
    def diverges(self) -> bool:
        return any(row.diverges for row in self.rows)

    @property
    def coverage(self) -> float:
        """Compared sources over the sources whose values the candidate computes."""
        compared = len({row.source.id for row in self.rows})
        return compared / self.candidate_sources if self.candidate_sources else 1.0

    def modules(self) -> list[ModuleNumerics]:
        """Per module path (innermost), in the order modules first appear."""
        grouped: dict[str, list[NumericsRow]] = {}
        for row in self.rows:
            grouped.setdefault(row.module_path, []).append(row)
        return [_aggregate(path, rows) for path, rows in grouped.items()]

    def module(self, path: str) -> ModuleNumerics | None:
        """The aggregate of the rows whose module path is ``path`` or inside it."""
        rows = [
            r for r in self.rows if r.module_path == path or r.module_path.startswith(path + ".")
        ]
        return _aggregate(path, rows) if rows else None

    def to_dict(self) -> dict[str, Any]:
        first = self.first_divergence
        return {
            "format": NUMERICS_FORMAT,
            "version": NUMERICS_VERSION,
            "reference": self.reference,
            "candidate": self.candidate,
            "rtol": self.rtol,
            "atol": self.atol,
            "coverage": self.coverage,
            "candidate_sources": self.candidate_sources,
            "first_divergence": None if first is None else self.rows.index(first),
            "rows": [row.to_dict() for row in self.rows],
            "modules": [module.to_dict() for module in self.modules()],
            "skipped": [{"value": value, "reason": why} for value, why in self.skipped],
        }

    def to_json(self) -> str:
        return printable_json(self.to_dict(), indent=1, allow_nan=False)

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "<numerics>") -> NumericsReport:
        """Reads back what :meth:`to_json` wrote (format ``modelprov.numerics-report``, version 1);
        anything else is a MetadataError naming ``where`` and the field."""
        try:
            document = json.loads(text)
            problem = header_problem(
                document, format=NUMERICS_FORMAT, versions=(NUMERICS_VERSION,)
            )
            if problem is not None and problem.field != "version":
                raise ValueError(f'"format" must be {NUMERICS_FORMAT!r}')
            if problem is not None:
                raise ValueError(f'"version" is {problem.found!r}, not 1')
            rows = tuple(_row(item) for item in document["rows"])
            return cls(
                rows=rows,
                rtol=float(document["rtol"]),
                atol=float(document["atol"]),
                reference=str(document["reference"]),
                candidate=str(document["candidate"]),
                candidate_sources=int(document["candidate_sources"]),
                skipped=tuple(
                    (str(item["value"]), str(item["reason"])) for item in document["skipped"]
                ),
            )
        except (ValueError, KeyError, TypeError, RecursionError) as error:
            raise MetadataError(
                f"{where}: not a modelprov.numerics-report document ({error}); write it with "
                "NumericsReport.to_json or modelprov compare --json"
            ) from None

    def to_text(self, *, limit: int = 20) -> str:
        """A summary: the first divergence, the worst rows and the per-module table."""
        lines = [
            f"compared {len(self.rows)} values of {self.candidate} against {self.reference} "
            f"(coverage {self.coverage:.2f} of {self.candidate_sources} sources; "
            f"tolerance {self.atol:g} + {self.rtol:g}·max|ref|)"
        ]
        first = self.first_divergence
        if first is None:
            lines.append("no value diverges")
        else:
            where = f"{first.source.file}:{first.source.line}" if first.source.file else ""
            computes = ", ".join(path or "<root>" for path in first.node_modules)
            lines.append(
                f"first divergence: {first.source.fx_node} in {first.module_path or '<root>'} "
                f"(node {first.node} computing {computes}; value {first.value}) max rel error "
                f"{first.max_rel_error:.3g}, SQNR {first.sqnr_db:.1f} dB {where}".rstrip()
            )
            lines.append(f"{sum(r.diverges for r in self.rows)} values diverge")
        worst = sorted(self.rows, key=lambda r: -_sortable(r.max_rel_error))[:limit]
        lines.append("")
        lines.append(
            _table(
                ("fx node", "module", "node", "max abs", "max rel", "SQNR dB", ""),
                [
                    (
                        r.source.fx_node,
                        r.module_path,
                        r.node,
                        f"{r.max_abs_error:.3g}",
                        f"{r.max_rel_error:.3g}",
                        f"{r.sqnr_db:.1f}",
                        "FIRST" if r is first else ("diverges" if r.diverges else ""),
                    )
                    for r in worst
                ],
            )
        )
        lines.append("")
        isolated = any(r.own_sqnr_db is not None for r in self.rows)
        lines.append(
            _table(
                ("module", "values", "diverging", "max rel", "min SQNR dB")
                + (("own SQNR dB",) if isolated else ()),
                [
                    (
                        m.module_path or "<root>",
                        str(m.rows),
                        str(m.diverging),
                        f"{m.max_rel_error:.3g}",
                        f"{m.min_sqnr_db:.1f}",
                    )
                    + ((_db(m.own_min_sqnr_db),) if isolated else ())
                    for m in self.modules()
                ],
            )
        )
        return printable_lines("\n".join(lines).split("\n"))


def _db(number: float | None) -> str:
    return "" if number is None else f"{number:.1f}"


def _sortable(number: float) -> float:
    return math.inf if math.isnan(number) else number


def _aggregate(path: str, rows: Sequence[NumericsRow]) -> ModuleNumerics:
    cosines = [r.cosine_similarity for r in rows if not math.isnan(r.cosine_similarity)]
    owns = [r.own_sqnr_db for r in rows if r.own_sqnr_db is not None]
    return ModuleNumerics(
        module_path=path,
        rows=len(rows),
        diverging=sum(r.diverges for r in rows),
        max_rel_error=max((_sortable(r.max_rel_error) for r in rows), default=0.0),
        min_sqnr_db=min((r.sqnr_db for r in rows), default=math.inf),
        mean_cosine_similarity=sum(cosines) / len(cosines) if cosines else math.nan,
        own_min_sqnr_db=min(owns) if owns else None,
    )


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=True)]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (header, *rows)
    )


def worst_of(reports: Sequence[NumericsReport]) -> NumericsReport:
    """One report from several batches of the same two models: per value, the batch's row
    with the largest relative error; where divergence starts is derived again from those."""
    first = reports[0]
    values = [row.value for row in first.rows]
    same = [report for report in reports if [row.value for row in report.rows] == values]
    rows = [
        max((report.rows[i] for report in same), key=lambda row: _sortable(row.max_rel_error))
        for i in range(len(values))
    ]
    fixed = tuple(
        dataclasses.replace(
            row, starts_divergence=row.diverges and not any(rows[i].diverges for i in row.upstream)
        )
        for row in rows
    )
    return dataclasses.replace(first, rows=fixed)
