"""The thesis's section 6.3 experiment: Algorithm 6 (store/frequent.py) against a brute-force count.

The thesis used a TCP trace with 1,647 distinct source addresses; that trace is not available, so
the stream here is synthetic: 1,647 keys whose popularity follows a Zipf law (rank r has weight
1 / r**s, s = 1 by default: the Zipf-like skew the thesis cites for Internet traffic), emitted in
packet trains (a key repeats for a geometric number of packets, mean --train, 1 = independent
packets) so that sub-windows see the burstiness of a traffic trace. N = 100,000, b in {20, 100,
500}, k = 1..10; each of --trials random start points in the trace gives one window. Each
sub-window's list is the store's own `top_k` over its exact counts; the answer is
`frequent_items` with Algorithm 6's threshold delta. Measured per (b, k), averaged over trials, as
the thesis's figure 6.3 (a)-(f): delta as a percentage of N, keys truly over delta, keys reported,
the percentage of over-delta keys reported, the list entries stored, and the mean relative error
(true - reported) / true of the reported keys' counts.

    python -m bench.frequent_experiment [--trials 100] [--train 1] [--zipf 1.0] [--out docs/frequent]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from windowstore.store.frequent import frequent_items
from windowstore.store.synopsis import top_k

KEYS = 1647
N = 100_000
BS = (20, 100, 500)
KS = tuple(range(1, 11))


def make_trace(length: int, zipf: float, train: float, seed: int) -> np.ndarray:
    """`length` packets: Zipf-distributed keys in trains of geometric length (mean `train`)."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, KEYS + 1) ** zipf
    perm = rng.permutation(KEYS)  # key ids unrelated to rank
    out, filled = [], 0
    while filled < length:
        n = max(1, int(length / train))
        keys = perm[rng.choice(KEYS, size=n, p=weights / weights.sum())]
        runs = rng.geometric(1.0 / train, size=n) if train > 1 else np.ones(n, dtype=np.int64)
        chunk = np.repeat(keys, runs)
        out.append(chunk)
        filled += len(chunk)
    return np.concatenate(out)[:length].astype(np.int64)


def one_window(window: np.ndarray, b: int) -> dict:
    """Algorithm 6 for every k over one window cut into sub-windows of b packets."""
    m = len(window) // b
    rows = np.arange(m).repeat(b)
    counts = np.bincount(rows * KEYS + window[: m * b], minlength=m * KEYS).reshape(m, KEYS)
    per_sub = []
    for row in counts:
        uniq = np.flatnonzero(row)
        per_sub.append((uniq, row[uniq]))
    true = np.bincount(window, minlength=KEYS)
    out = {}
    for k in KS:
        lists = [top_k(uniq, c, k) for uniq, c in per_sub]
        ans = frequent_items(lists)
        over = set(np.flatnonzero(true > ans.delta).tolist())
        reported = ans.keys
        assert set(reported) <= over, "a false positive"
        for item in ans.items:
            assert item.lower <= true[item.key] <= item.upper
        rel = [(int(true[i.key]) - i.lower) / int(true[i.key]) for i in ans.items]
        out[k] = {"delta_pct": 100.0 * ans.delta / len(window), "over": len(over), "reported": len(reported),
                  "found_pct": 100.0 * len(reported) / len(over) if over else None,
                  "space": sum(len(t.keys) for t in lists),
                  "rel_err_pct": 100.0 * float(np.mean(rel)) if rel else None}
    return out


def run(trials: int, zipf: float, train: float, seed: int, trace_len: int) -> dict:
    trace = make_trace(trace_len, zipf, train, seed)
    rng = np.random.default_rng(seed + 1)
    starts = rng.integers(0, len(trace) - N + 1, size=trials)
    acc = {b: {k: [] for k in KS} for b in BS}
    for t, s in enumerate(starts):
        window = trace[s: s + N]
        for b in BS:
            for k, r in one_window(window, b).items():
                acc[b][k].append(r)
        print(f"trial {t + 1}/{trials}", flush=True)
    result = {}
    for b in BS:
        result[b] = {}
        for k in KS:
            rs = acc[b][k]
            mean = lambda f: (float(np.mean(v)) if (v := [r[f] for r in rs if r[f] is not None]) else None)
            result[b][k] = {f: mean(f) for f in ("delta_pct", "over", "reported", "found_pct", "space",
                                                 "rel_err_pct")}
            over, rep = sum(r["over"] for r in rs), sum(r["reported"] for r in rs)
            result[b][k]["found_pct_pooled"] = 100.0 * rep / over if over else None
            result[b][k]["trials_with_miss"] = sum(1 for r in rs if r["reported"] < r["over"])
    return result


def plot(result: dict, out: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [("delta_pct", "(a) average threshold delta (% of N)"),
              ("over", "(b) keys over the threshold"),
              ("reported", "(c) keys reported over the threshold"),
              ("found_pct", "(d) % of over-threshold keys reported"),
              ("space", "(e) list entries stored"),
              ("rel_err_pct", "(f) mean relative error of reported counts (%)")]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for ax, (field, label) in zip(axes.flat, panels):
        for b in BS:
            ys = [result[b][k][field] for k in KS]
            ax.plot(KS, [np.nan if y is None else y for y in ys], marker="o", label=f"b = {b}")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("k")
        ax.set_xticks(KS)
        ax.grid(alpha=0.3)
        if field == "space":
            ax.set_yscale("log")
    axes.flat[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=100)
    p.add_argument("--zipf", type=float, default=1.0)
    p.add_argument("--train", type=float, default=1.0, help="mean packet-train length (1: independent packets)")
    p.add_argument("--seed", type=int, default=6)
    p.add_argument("--trace-len", type=int, default=1_000_000)
    p.add_argument("--out", type=Path, default=Path("docs/frequent"))
    p.add_argument("--name", default=None, help="file stem of the outputs (default from the parameters)")
    a = p.parse_args(argv)
    result = run(a.trials, a.zipf, a.train, a.seed, a.trace_len)
    stem = a.name or f"zipf{a.zipf:g}-train{a.train:g}"
    a.out.mkdir(parents=True, exist_ok=True)
    params = {"keys": KEYS, "N": N, "b": list(BS), "k": list(KS), "trials": a.trials, "zipf": a.zipf,
              "train": a.train, "seed": a.seed, "trace_len": a.trace_len}
    (a.out / f"{stem}.json").write_text(json.dumps({"params": params, "result": result}, indent=1) + "\n")
    plot(result, a.out / f"{stem}.png",
         f"Algorithm 6, {KEYS} keys, Zipf s = {a.zipf:g}, mean train {a.train:g}, N = {N}, {a.trials} windows")
    print(f"{'b':>4} {'k':>3} {'delta%':>7} {'over':>6} {'rep':>6} {'found%':>7} {'pooled%':>8} {'space':>7} "
          f"{'relerr%':>8}")
    for b in BS:
        for k in KS:
            r = result[b][k]
            f = lambda v, w=7, d=2: f"{'-':>{w}}" if v is None else f"{v:>{w}.{d}f}"
            print(f"{b:>4} {k:>3} {f(r['delta_pct'])} {f(r['over'], 6, 1)} {f(r['reported'], 6, 1)} "
                  f"{f(r['found_pct'])} {f(r['found_pct_pooled'], 8)} {f(r['space'], 7, 0)} {f(r['rel_err_pct'], 8, 3)}")


if __name__ == "__main__":
    main()
