"""`make bench`: runs every benchmark section, writes bench/results/latest.md and .json."""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
from pathlib import Path

SECTIONS = ["store", "server", "durability", "spark", "floor"]


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
    (out / "latest.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1, default=float))
    lines = [f"# Benchmark results ({stamp}, {meta['cores']} cores, Python {meta['python']})", ""]
    for name, rows in results.items():
        lines += [f"## {name}", "", "| measurement | result | target |", "|---|---|---|"]
        lines += [f"| {r['name']} | {r['shown']} | {r['target']} |" for r in rows]
        lines.append("")
    (out / "latest.md").write_text("\n".join(lines))
    print(f"written: {out / 'latest.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
