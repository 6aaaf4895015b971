"""The thesis's experiment of 8.5 (figures 8.7-8.10) on the sharing core: throughput and latency
per scheduler for 40-240 periodic queries at two data rates (txn/sharing/experiment.py). Writes
docs/sharing/experiment.json and, with matplotlib, docs/sharing/*.png.

    python -m bench.sharing_experiment [--out docs/sharing] [--updates 600] [--due-only] [--phasing held]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from windowstore.txn.sharing.cost import Phasing
from windowstore.txn.sharing.experiment import CAPACITY, MODES, grid


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/sharing")
    ap.add_argument("--updates", type=int, default=600)
    ap.add_argument("--capacity", type=float, default=CAPACITY, help="cost units between two synopsis updates at rate 1")
    ap.add_argument("--due-only", action="store_true",
                    help="run only what is due (no early executions with the budget left: Algorithm 9 runs them)")
    ap.add_argument("--phasing", choices=[p.value for p in Phasing], default=Phasing.DRIFTING.value,
                    help="how the hybrid costs separately run sub-groups (cost.Phasing)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [dataclasses.asdict(o) for o in grid(updates=args.updates, capacity=args.capacity, early=not args.due_only,
                                                 phasing=Phasing(args.phasing))]
    (out / "experiment.json").write_text(json.dumps(rows, indent=1) + "\n")
    for r in rows:
        print(json.dumps(r))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    for rate, label in ((1.0, "1500"), (2.0, "3000")):
        for key, ylabel, name in (("throughput", "queries re-executed per update", "throughput"),
                                  ("latency", "updates beyond SLIDE, average per query", "latency")):
            fig, ax = plt.subplots(figsize=(6, 4))
            for m in MODES:
                pts = [(r["queries"], r[key]) for r in rows if r["mode"] == m.value and r["rate"] == rate]
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=m.value)
            ax.set_xlabel("periodic queries")
            ax.set_ylabel(ylabel)
            ax.set_title(f"{name}, data rate x{rate:g} ({label} tuples/s in the thesis)")
            ax.legend()
            fig.tight_layout()
            fig.savefig(out / f"{name}_{label}.png", dpi=90)
            plt.close(fig)


if __name__ == "__main__":
    main()
