"""Section 5 of Lee and Lee (Sensors 2010) on store/timing.py: execution time, response time and
buffer length against the arrival rate, the lazy block size's effect and the look-up table's hit
ratio, and execution time against the confidence threshold on time-ordered input.

    python -m bench.timing_experiment [--quick] [--out docs/timing]

Workload (times in ms, as the paper's pi = 200 and rho = 20 suggest): two streams sharing a Poisson
arrival process of the given total rate, each row's interval length uniform over [rho, pi], each
row arriving up to 100 ms after its latest time (out of order; none for the time-ordered input),
the watermark 100 ms behind the arrival clock. One simulated processor: a row is handled at
max(its arrival, the processor free), taking the thread CPU time its expire + insert measured (1:1
with stream time), and a match's response time is its completion minus the later of the two
rows' latest times. The execution time is the total measured CPU time.

The same workload then runs as a one-time join query in the store (store/join/timing.py): each
access path forced, and the planner's choice, over two streams' windows holding the whole run.
"""
from __future__ import annotations

import argparse
import gc
import json
import random
import time
from pathlib import Path

from windowstore.store import timing as T

RHO, PI, LAG = 20, 200, 100


def workload(rate: float, seconds: float, seed: int, ordered: bool = False):
    """[(side, Row, arrival ms)] in arrival order."""
    rng = random.Random(seed)
    out, t, i = [], 0.0, 0
    while t < seconds * 1000:
        t += rng.expovariate(rate / 1000)
        hi = int(t)
        ln = rng.randint(RHO, PI)
        arrival = hi if ordered else hi + rng.randint(0, LAG)
        out.append((rng.choice(("left", "right")), T.Row(i, hi - ln, hi), arrival))
        i += 1
    out.sort(key=lambda e: (e[2], e[1].hi))
    return out


def simulate(alg: T.Correlator, events) -> dict:
    """One run; `exec_s` also holds the garbage collector's time outside the algorithm's calls
    (a collection the algorithm's objects cause may fall after it returns, e.g. after Lazy's block
    has paused the collector: store/gc_pause.py), so that no strategy hides it."""
    T.regions.cache_clear()  # each run pays for its own regions
    clock = time.thread_time
    outside = [0.0, 0.0, True]  # collector seconds outside the calls, its start, whether outside

    def on_gc(phase, info):
        if phase == "start":
            outside[1] = clock()
        elif outside[2]:
            outside[0] += clock() - outside[1]
    gc.callbacks.append(on_gc)
    try:
        r = _simulate(alg, events, clock, outside)
    finally:
        gc.callbacks.remove(on_gc)
    r["exec_s"] += outside[0]
    r["gc_outside_s"] = outside[0]
    return r


def _simulate(alg: T.Correlator, events, clock, outside) -> dict:
    free = 0.0
    busy = 0.0
    resp_sum, matches, buf_sum = 0.0, 0, 0
    for side, row, arrival in events:
        start = max(float(arrival), free)
        outside[2] = False
        t0 = clock()
        ms = alg.expire(arrival - LAG)
        ms += alg.insert(side, row, arrival)
        dt = clock() - t0
        outside[2] = True
        busy += dt
        free = start + dt * 1000
        for m in ms:
            resp_sum += free - max(m.left.hi, m.right.hi)
        matches += len(ms)
        buf_sum += alg.buffered()
    outside[2] = False
    t0 = clock()
    ms = alg.flush()
    dt = clock() - t0
    outside[2] = True
    busy += dt
    free += dt * 1000
    for m in ms:
        resp_sum += free - max(m.left.hi, m.right.hi)
    matches += len(ms)
    return {"exec_s": busy, "response_ms": resp_sum / max(matches, 1), "matches": matches,
            "buffer": buf_sum / max(len(events), 1), "evaluations": alg.evaluations,
            "probes": alg.probes, "hits": alg.hits,
            "hit_ratio": alg.hits / alg.probes if alg.probes else 0.0}


def make(name: str, cond, block: int = 1000, interval: float | None = 1000.0) -> T.Correlator:
    kw = {"block": block, "interval": interval} if name.startswith("lazy") else {}
    return T.ALGORITHMS[name](cond, RHO, PI, **kw)


def by_rate(rates, seconds, skip_simple_above):
    cond = T.mutual(500, 0.8)
    rows = []
    for rate in rates:
        events = workload(rate, seconds, seed=rate)
        ref = None
        for name in T.ALGORITHMS:
            if name in ("simple", "ssort") and rate > skip_simple_above:
                continue
            r = simulate(make(name, cond), events)
            ref = ref if ref is not None else r["matches"]
            assert r["matches"] == ref, (rate, name, r["matches"], ref)
            rows.append({"rate": rate, "alg": name, **r})
            print(f"rate {rate:>5} {name:<12} exec {r['exec_s']:8.3f} s  resp {r['response_ms']:10.1f} ms  "
                  f"buf {r['buffer']:7.0f}  evals {r['evaluations']:>9}", flush=True)
    return rows


def by_block(blocks, seconds):
    rows = []
    events = workload(500, seconds, seed=500)
    for ct in (0.8, 0.5):
        cond = T.mutual(500, ct)
        for block in blocks:
            for name in ("lazy", "lazy-lookup"):
                r = simulate(make(name, cond, block=block, interval=None), events)
                rows.append({"ct": ct, "block": block, "alg": name, **r})
                print(f"ct {ct} block {block:>5} {name:<12} exec {r['exec_s']:7.3f} s  hit {r['hit_ratio']:.3f}", flush=True)
    return rows


def by_threshold(cts, seconds):
    rows = []
    events = workload(500, seconds, seed=7, ordered=True)
    for ct in cts:
        cond = T.mutual(1000, ct)
        for name in ("eager", "lazy", "lazy-lookup"):
            r = simulate(make(name, cond), events)
            rows.append({"ct": ct, "alg": name, **r})
            print(f"ct {ct} {name:<12} exec {r['exec_s']:7.3f} s  evals {r['evaluations']:>8}  hit {r['hit_ratio']:.3f}", flush=True)
    return rows


def in_store(rates, seconds, skip_simple_above):
    """The same workload as a one-time join query over two streams' sliding windows (1 s
    sub-windows, the whole run in the window): the planner's choice against each access path
    forced, the CPU time of one evaluation (each plan fresh), all answers checked equal."""
    from windowstore.store import Stream, WindowSpec
    from windowstore.store.join import plan_join, run_join
    from windowstore.store.parser import parse_statement

    text = ("SELECT a.id, b.id FROM a JOIN b ON PROB(ABS(INTERVAL(a.lo, a.hi) - INTERVAL(b.lo, b.hi)) "
            "<= 500 ms) >= 0.8")
    schema = {"ts": "int64", "id": "int64", "lo": "int64", "hi": "int64"}
    rows = []
    for rate in rates:
        streams = {n: Stream(n, schema, WindowSpec(subwindows=seconds, subwindow_ms=1000, clock="manual"),
                             created_ms=0) for n in ("a", "b")}
        events = workload(rate, seconds, seed=rate)
        for j in range(seconds):
            for n, side in (("a", "left"), ("b", "right")):
                part = [r for sd, r, arr in events if sd == side and j * 1000 <= arr < (j + 1) * 1000]
                if part:
                    streams[n].append({"ts": [int(r.hi) for r in part], "id": [r.id for r in part],
                                       "lo": [int(r.lo) for r in part], "hi": [int(r.hi) for r in part]})
                streams[n].window.slide((j + 1) * 1000)
        ref = None
        for alg in (None, *T.ALGORITHMS):
            if alg in ("simple", "ssort") and rate > skip_simple_above:
                continue
            T.regions.cache_clear()
            plan = plan_join(parse_statement(text), streams, cache=False)
            plan.timing_algorithm = alg
            t0 = time.thread_time()
            ans = run_join(plan, streams)
            dt = time.thread_time() - t0
            got = sorted(ans.rows)
            ref = ref if ref is not None else got
            assert got == ref, (rate, alg)
            tot = plan.stats.timing
            chosen = ",".join(sorted(tot.by_algorithm))
            rows.append({"rate": rate, "alg": alg or f"planner ({chosen})", "chosen": chosen, "exec_s": dt,
                         "pairs": len(got), "evaluations": tot.evaluations})
            print(f"store rate {rate:>5} {alg or 'planner -> ' + chosen:<22} exec {dt:8.3f} s  "
                  f"evals {tot.evaluations:>9}  pairs {len(got)}", flush=True)
    return rows


def plot(res: dict, out: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def series(rows, x, y, alg, **flt):
        pts = [(r[x], r[y]) for r in rows if r["alg"] == alg and all(r[k] == v for k, v in flt.items())]
        return [p[0] for p in pts], [p[1] for p in pts]

    algs = list(T.ALGORITHMS)
    for fig, y, label, log in (("fig3_exec_by_rate", "exec_s", "execution time (s, CPU)", True),
                               ("fig4_response_by_rate", "response_ms", "average response time (ms)", True),
                               ("fig5_buffer_by_rate", "buffer", "average buffered rows", True)):
        plt.figure(figsize=(6, 4))
        for a in algs:
            xs, ys = series(res["by_rate"], "rate", y, a)
            if xs:
                plt.plot(xs, ys, marker="o", label=a)
        plt.xscale("log")
        if log:
            plt.yscale("log")
        plt.xlabel("arrival rate (tuples/s)")
        plt.ylabel(label)
        plt.legend()
        plt.grid(alpha=.3)
        plt.tight_layout()
        plt.savefig(out / f"{fig}.png", dpi=110)
        plt.close()
    for fig, y, label, algs2 in (("fig6_exec_by_block", "exec_s", "execution time (s, CPU)", ("lazy", "lazy-lookup")),
                                 ("fig7_hit_ratio_by_block", "hit_ratio", "look-up hit ratio", ("lazy-lookup",))):
        plt.figure(figsize=(6, 4))
        for ct in (0.8, 0.5):
            for a in algs2:
                xs, ys = series(res["by_block"], "block", y, a, ct=ct)
                plt.plot(xs, ys, marker="o", label=f"{a}, ct {ct}")
        plt.xlabel("correlation block size (rows)")
        plt.ylabel(label)
        plt.legend()
        plt.grid(alpha=.3)
        plt.tight_layout()
        plt.savefig(out / f"{fig}.png", dpi=110)
        plt.close()
    if res.get("in_store"):
        plt.figure(figsize=(6, 4))
        for a in [*algs, "planner"]:
            pts = [(r["rate"], r["exec_s"]) for r in res["in_store"] if r["alg"].split(" ")[0] == a]
            if pts:
                plt.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a,
                         linestyle="--" if a == "planner" else "-")
        plt.xscale("log")
        plt.yscale("log")
        plt.xlabel("arrival rate (tuples/s), one-time join over the whole run")
        plt.ylabel("execution time (s, CPU)")
        plt.legend()
        plt.grid(alpha=.3)
        plt.tight_layout()
        plt.savefig(out / "fig9_store_join_by_rate.png", dpi=110)
        plt.close()
    plt.figure(figsize=(6, 4))
    for a in ("eager", "lazy", "lazy-lookup"):
        xs, ys = series(res["by_threshold"], "ct", "exec_s", a)
        plt.plot(xs, ys, marker="o", label=a)
    plt.xlabel("confidence threshold ct (d = 1,000 ms, time-ordered input)")
    plt.ylabel("execution time (s, CPU)")
    plt.legend()
    plt.grid(alpha=.3)
    plt.tight_layout()
    plt.savefig(out / "fig8_exec_by_threshold.png", dpi=110)
    plt.close()


# (rates, seconds by rate, blocks, seconds by block, cts, seconds by threshold, Simple/SSort up to
# this rate, seconds in the store): "paper" has every point of section 5 on short streams (make
# timing-experiment), "quick" fewer points, "long" longer streams and more thresholds.
SCALES = {
    "quick": ([12, 100, 400, 800], 2, [200, 600, 1200], 8, [1.0, 0.4], 4, 400, 2),
    "paper": ([12, 25, 50, 100, 200, 400, 800, 1600], 2, [200, 400, 600, 800, 1000, 1200], 6,
              [1.0, 0.7, 0.4, 0.1], 4, 800, 2),
    "long": ([12, 25, 50, 100, 200, 400, 800, 1600], 6, [200, 400, 600, 800, 1000, 1200], 24,
             [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], 8, 800, 3),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", choices=list(SCALES), default="paper",
                    help="quick: fewer points; paper: every point of section 5, short streams; long: longer streams")
    ap.add_argument("--quick", action="store_true", help="the same as --scale quick")
    ap.add_argument("--out", type=Path, default=None, help="write results.json and the figures here")
    a = ap.parse_args(argv)
    scale = "quick" if a.quick else a.scale
    rates, secs, blocks, bsecs, cts, tsecs, skip, ssecs = SCALES[scale]
    params = {"scale": scale, "rates": rates, "seconds_by_rate": secs, "blocks": blocks,
              "seconds_by_block": bsecs, "cts": cts, "seconds_by_threshold": tsecs,
              "simple_up_to_rate": skip, "seconds_in_store": ssecs, "rho": RHO, "pi": PI, "lag_ms": LAG}
    res = {"params": params,
           "by_rate": by_rate(rates, secs, skip),
           "by_block": by_block(blocks, bsecs),
           "by_threshold": by_threshold(cts, tsecs),
           "in_store": in_store(rates, ssecs, skip)}
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "results.json").write_text(json.dumps(res, indent=1) + "\n")
        plot(res, a.out)
    return res


if __name__ == "__main__":
    main()
