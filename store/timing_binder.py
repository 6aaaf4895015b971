"""The semantic rules of a timing condition in a join's ON clause (timing_syntax.Timing): its four
columns resolve among the sources joined so far (SQL's scoping, as for equalities and bands), each
interval's two columns belong to one source and the two intervals to two different sources, the
columns are int64 or float64 (times in ms as the band offsets are), and `d` is exact as a float
(|d| <= 2**53). The bound form carries store.timing's TimingCondition, on D = I2 - I1 with I1 the
first INTERVAL written. Errors are QueryErrors at the token, as the join binder's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .timing_probability import TimingCondition, deadline, delay, mutual
from .timing_syntax import Timing

if TYPE_CHECKING:
    from .join_binder import ColumnRef, _JoinBinder

EXACT_FLOAT = 2**53  # times and lengths beyond this are not all exact as floats
TIME_TYPES = ("int64", "float64")


@dataclass(frozen=True)
class BoundTiming:
    """A timing condition between source `left` (I1 = [left_lo, left_hi]) and source `right`."""

    left_lo: ColumnRef
    left_hi: ColumnRef
    right_lo: ColumnRef
    right_hi: ColumnRef
    cond: TimingCondition
    text: str  # the condition as written back, for explain

    @property
    def left(self) -> int:
        return self.left_lo.source

    @property
    def right(self) -> int:
        return self.right_lo.source

    def columns(self, source: int) -> tuple[str, str]:
        """(lo, hi) column names of `source`'s interval."""
        if source == self.left:
            return self.left_lo.column, self.left_hi.column
        return self.right_lo.column, self.right_hi.column


def bind_timing(b: _JoinBinder, c: Timing, k: int) -> BoundTiming:
    refs = []
    for (lo, hi), loc in ((c.left, c.left_loc or c.loc), (c.right, c.right_loc or c.loc)):
        rlo, rhi = b.resolve(lo, loc, upto=k), b.resolve(hi, loc, upto=k)
        for ref in (rlo, rhi):
            if ref.type not in TIME_TYPES:
                b.fail(f"an INTERVAL's columns are int64 or float64 times; {ref.name} is {ref.type}", loc, ref.column)
        if rlo.source != rhi.source:
            b.fail(f"an INTERVAL's two columns belong to one source; {rlo.name} and {rhi.name} do not", loc)
        refs += [rlo, rhi]
    if refs[0].source == refs[2].source:
        b.fail(f"a timing condition relates two sources; both INTERVALs are of {b.sources[refs[0].source].name}",
               c.loc)
    if abs(c.d) > EXACT_FLOAT:
        b.fail(f"a timing condition's length must be within 2**53 ms, got {c.d}", c.loc)
    ct = float(c.ct)
    make = {"mutual": mutual, "deadline": deadline, "delay": delay}[c.kind]
    cond = make(float(c.d), ct)
    i1 = f"INTERVAL({refs[0].name}, {refs[1].name})"
    i2 = f"INTERVAL({refs[2].name}, {refs[3].name})"
    pred = {"mutual": f"ABS({i1} - {i2}) <= {c.d} ms", "deadline": f"{i1} + {c.d} ms >= {i2}",
            "delay": f"{i1} + {c.d} ms <= {i2}"}[c.kind]
    return BoundTiming(refs[0], refs[1], refs[2], refs[3], cond, f"PROB({pred}) >= {c.ct}")
