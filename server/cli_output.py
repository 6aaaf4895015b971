"""How the `windowstore` client commands print: `--output table` (aligned, labelled columns, times
readable), `csv` or `json` (values as they are, for scripts). Pure formatting: no calls."""
from __future__ import annotations

import csv
import datetime as dt
import json
import sys
from decimal import Decimal
from typing import Any, Iterable

OUTPUTS = ("table", "csv", "json")
# fields that hold epoch milliseconds: shown as times in tables (kept as numbers in csv and json)
TIME_FIELDS = {"window_start_ms", "window_end_ms", "next_slide_ms", "created_ms", "answered_ms", "time_ms"}


def fmt_time(ms: float | int | None, utc: bool) -> str:
    """Epoch ms as ISO 8601 with milliseconds, in UTC (`Z`) or local time (with its offset)."""
    if ms is None:
        return "-"
    t = dt.datetime.fromtimestamp(ms / 1000.0, tz=dt.timezone.utc)
    if not utc:
        t = t.astimezone()
    text = t.isoformat(timespec="milliseconds")
    return text.replace("+00:00", "Z") if utc else text


def fmt_number(x: float | int) -> str:
    """A number as its shortest text that reads back as the same value (a whole double below 2^53
    without its `.0`): a table shows what the answer holds, never a rounding of it."""
    if isinstance(x, float) and x.is_integer() and abs(x) < 2.0**53:
        return str(int(x))
    return repr(x) if isinstance(x, float) else str(x)


def fmt_value(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):  # (SQL's spelling)
        return "true" if x else "false"
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(fmt_value(v) for v in x) + "]"
    return str(x)


def _json_value(x: Any):
    if isinstance(x, Decimal):
        return str(x)
    if isinstance(x, (dt.date, dt.datetime)):
        return x.isoformat()
    return x


def table(columns: list[str], rows: Iterable[Iterable[Any]], out=None) -> None:
    """Aligned columns under their labels."""
    out = out or sys.stdout
    text_rows = [[fmt_value(x) for x in r] for r in rows]
    widths = [max([len(str(c))] + [len(r[i]) for r in text_rows]) for i, c in enumerate(columns)]
    print("  ".join(str(c).ljust(w) for c, w in zip(columns, widths)).rstrip(), file=out)
    print("  ".join("-" * w for w in widths), file=out)
    for r in text_rows:
        print("  ".join(x.ljust(w) for x, w in zip(r, widths)).rstrip(), file=out)


def records(items: list[dict], output: str, columns: list[str] | None = None, utc: bool = False, out=None) -> None:
    """A list of records (streams, queries, stats): one row each."""
    out = out or sys.stdout
    if output == "json":
        print(json.dumps(items, default=_json_value, indent=1), file=out)
        return
    columns = columns or list(dict.fromkeys(k for it in items for k in it))
    rows = [[it.get(c) for c in columns] for it in items]
    if output == "csv":
        w = csv.writer(out)
        w.writerow(columns)
        w.writerows([[_json_value(x) for x in r] for r in rows])
        return
    shown = [[fmt_time(x, utc) if c in TIME_FIELDS and isinstance(x, (int, float)) else x for c, x in zip(columns, r)]
             for r in rows]
    table(columns, shown, out)


def answer(a, output: str, utc: bool = False, out=None, header: str | None = None) -> None:
    """A query's answer: its rows, then what it reflects (slide, window, staleness, response)."""
    out = out or sys.stdout
    meta = {"slide": a.slide, "window_start_ms": a.window_start_ms, "window_end_ms": a.window_end_ms,
            "staleness_ms": a.staleness_ms, "response_ms": a.response_ms, "restarts": a.restarts,
            "policy": a.policy, "access": a.access, "exact": a.exact}
    if getattr(a, "query_id", ""):
        meta.update(query_id=a.query_id, execution=a.execution)
    bounds = getattr(a, "bounds", None) or []
    if bounds:
        meta["bounds"] = [{k: v for k, v in vars(b).items() if v is not None} for b in bounds]
    if output == "json":
        print(json.dumps({"columns": list(a.columns), "rows": [list(r) for r in a.rows], **meta},
                         default=_json_value), file=out)
        return
    if output == "csv":
        w = csv.writer(out)
        w.writerow(a.columns)
        w.writerows([[_json_value(x) for x in r] for r in a.rows])
        return
    if header:
        print(header, file=out)
    table(list(a.columns), a.rows, out)
    window = ("empty" if a.window_start_ms is None else
              f"[{fmt_time(a.window_start_ms, utc)}, {fmt_time(a.window_end_ms, utc)})")
    staleness = "-" if a.staleness_ms is None else f"{a.staleness_ms:.1f} ms"
    extra = "" if a.exact else "; approximate" + {True: ", guaranteed", False: ", not guaranteed"}.get(a.guaranteed, "")
    print(f"({len(a.rows)} row{'s' if len(a.rows) != 1 else ''}; slide {a.slide}, window {window}, "
          f"staleness {staleness}, response {a.response_ms:.2f} ms, {a.access}/{a.policy}{extra})", file=out)
    for b in bounds:
        print(bound_text(a, b), file=out)


def bound_text(a, b) -> str:
    """One approximate cell's error bound in words (docs/approximate.md)."""
    cell = f"row {b.row + 1} {a.columns[b.column]} = {a.rows[b.row][b.column]}"
    if b.rank_error is not None:
        return f"{cell}: true rank within +-{b.rank_error:.4g} of the one asked ({b.confidence:.4g} confidence, {b.sketch})"
    what = {"frequent": "count", "top-k lists": "value"}.get(b.sketch, "distinct count")
    est = f", estimate {fmt_number(b.estimate)}" if b.sketch == "frequent" and b.estimate is not None else ""
    est += f", delta {fmt_number(b.delta)}" if getattr(b, "delta", None) is not None else ""
    return (f"{cell}: true {what} in [{fmt_number(b.lower)}, {fmt_number(b.upper)}]{est} "
            f"({b.confidence:.4g} confidence, {b.sketch})")
