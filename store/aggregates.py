"""Partial results keyed by sub-window version.

A query reads sub-windows one at a time in any order. Each read yields a *contribution* (the
sub-window's share of every aggregate: scalars, or per-key arrays when grouping; what each
function contributes is defined in functions.py); a `Partial` keeps contributions keyed by the
sub-window's version, so

- merging is a union and independent of read order (finishing combines in version order, so
  even float sums are bit-identical whatever the order of reads);
- removing a sub-window's contribution (the re-scan-instead-of-abort scheduler) drops one key;
- finishing does the vectorised combine once: cheap sums stay O(n_Q), holistic aggregates
  (COUNT DISTINCT, exact QUANTILE) concatenate the values their contributions kept.
"""
from __future__ import annotations

from typing import Any


class Partial:
    """Contributions of the sub-windows read so far, by version."""

    __slots__ = ("contributions",)

    def __init__(self) -> None:
        self.contributions: dict[int, Any] = {}

    def add(self, version: int, contribution: Any) -> None:
        self.contributions[version] = contribution

    def remove(self, version: int) -> None:
        del self.contributions[version]

    def merge(self, other: "Partial") -> "Partial":
        out = Partial()
        out.contributions = {**self.contributions, **other.contributions}
        return out

    def versions(self) -> list[int]:
        return sorted(self.contributions)

    def ordered(self) -> list[Any]:
        c = self.contributions
        return [c[v] for v in sorted(c)]
