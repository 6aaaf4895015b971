"""The window-level interval synopsis (IntervalSynopsis): MIN/MAX per numeric column over dyadic
blocks of slides, kept by the window at each slide and probed for any window length. It owns its
blocks and must not read the sub-windows (the window hands it each one's synopsis).
"""
from __future__ import annotations

from .synopsis import Synopsis


class IntervalSynopsis:
    """MIN/MAX per numeric column over dyadic blocks of slides (thesis 2.3.4): about 2n blocks,
    any window answered from O(log n) of them."""

    def __init__(self, n: int):
        self.n = n
        self.blocks: dict[tuple[int, int], dict[str, tuple]] = {}

    def add(self, slide: int, synopsis: Synopsis) -> None:
        self.blocks[(0, slide)] = {c: (s.min, s.max) for c, s in synopsis.columns.items()}
        level, index = 0, slide
        while index % 2 == 1:
            left, right = self.blocks.get((level, index - 1)), self.blocks[(level, index)]
            level, index = level + 1, index // 2
            if left is None:
                break
            self.blocks[(level, index)] = {c: _combine(left[c], right[c]) for c in right}
        # Slide `oldest - 1` just left the window: the blocks that end with it expire. A block
        # (level, i) covers slides [i << level, (i + 1) << level), so those are the levels whose
        # size divides `oldest` (O(log n) per slide; scanning every block made a slide cost O(n)).
        oldest = slide - self.n + 1
        level = 0
        while oldest > 0 and oldest % (1 << level) == 0:
            self.blocks.pop((level, (oldest >> level) - 1), None)
            level += 1

    def probe(self, column: str, lo: int, hi: int) -> tuple:
        """(min, max) of `column` over slides lo..hi inclusive."""
        acc: tuple = (None, None)
        pos = lo
        while pos <= hi:
            level = 0
            while pos % (2 << level) == 0 and pos + (2 << level) - 1 <= hi and (level + 1, pos >> (level + 1)) in self.blocks:
                level += 1
            acc = _combine(acc, self.blocks[(level, pos >> level)][column])
            pos += 1 << level
        return acc


def _combine(a: tuple, b: tuple) -> tuple:
    lo = b[0] if a[0] is None else a[0] if b[0] is None else min(a[0], b[0])
    hi = b[1] if a[1] is None else a[1] if b[1] is None else max(a[1], b[1])
    return lo, hi

