"""`make bench`: runs every benchmark section, writes bench/results/latest.md and .json."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

SECTIONS = ["store", "server", "durability", "spark", "floor", "join", "peer", "slicing", "sketch",
            "replication", "partition", "sharing"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", action="append", choices=SECTIONS, help="run only these sections")
    args = ap.parse_args(argv)
    results = {}
    for name in args.only or SECTIONS:
        mod = __import__(f"bench.{name}_bench", fromlist=["run"])
        print(f"== {name}", flush=True)
        results[name] = mod.run()
        for r in results[name]:
            print(f"  {r['name']}: {r['shown']}" + (f"   (target {r['target']})" if r["target"] else ""), flush=True)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    stamp = dt.date.today().isoformat()
    meta = {"date": stamp, "python": sys.version.split()[0], "machine": platform.machine(), "cores": os.cpu_count()}
    # `--only` replaces its sections and keeps the others' figures (each section keeps its date)
    previous = {}
    if args.only and (out / "latest.json").exists():
        previous = json.loads((out / "latest.json").read_text())
    merged = dict(previous.get("results", {}))
    dates = dict(previous.get("meta", {}).get("section_dates", {}))
    for name in SECTIONS:
        if name in results:
            merged[name] = results[name]
            dates[name] = stamp
        elif name in merged and name not in dates:
            dates[name] = previous.get("meta", {}).get("date", "")
    merged = {name: merged[name] for name in SECTIONS if name in merged}
    meta["section_dates"] = dates
    (out / "latest.json").write_text(json.dumps({"meta": meta, "results": merged}, indent=1, default=float))
    lines = [f"# Benchmark results ({stamp}, {meta['cores']} cores, Python {meta['python']})", ""]
    for name, rows in merged.items():
        lines += [f"## {name} ({dates.get(name, stamp)})", "", "| measurement | result | target |", "|---|---|---|"]
        lines += [f"| {r['name']} | {r['shown']} | {r['target']} |" for r in rows]
        lines.append("")
    (out / "latest.md").write_text("\n".join(lines))
    print(f"written: {out / 'latest.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
