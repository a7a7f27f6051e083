"""Half-open [start, end) intervals of epoch seconds: clip, merge, subtract."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[int, int]


def merge(intervals: Iterable[Interval], lo: int, hi: int) -> list[Interval]:
    """Clip to [lo, hi), drop empty pieces, and join overlapping or touching intervals, sorted."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e in intervals if s < hi and e > lo and s < e)
    out: list[Interval] = []
    for s, e in clipped:
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def subtract(keep: list[Interval], remove: list[Interval]) -> list[Interval]:
    """``keep`` minus ``remove``; both sorted and merged, and so is the result."""
    out: list[Interval] = []
    j = 0
    for s, e in keep:
        cur = s
        while j < len(remove) and remove[j][1] <= cur:
            j += 1
        k = j
        while k < len(remove) and remove[k][0] < e:
            rs, re_ = remove[k]
            if rs > cur:
                out.append((cur, rs))
            cur = max(cur, re_)
            k += 1
        if cur < e:
            out.append((cur, e))
    return out
