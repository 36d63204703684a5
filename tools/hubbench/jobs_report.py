#!/usr/bin/env python3
"""Prints jobs.sh's tables (Markdown) from its JSON result lines.

    jobs_report.py RESULTS.jsonl GRACE

Throughput: the median over rounds of each row's ops/s, and the ratios the
issue asks for (hub over the faster queue, hub jobs over hub's publish on
the same store). Latency: each row's p50 / p99 / max beside its target.
"""
import json
import statistics
import sys


def seconds(text):
    """'2s', '500ms', '1.5s' -> seconds."""
    if text.endswith("ms"):
        return float(text[:-2]) / 1000
    return float(text.rstrip("s"))


def main():
    path, grace = sys.argv[1], seconds(sys.argv[2])
    rows = [json.loads(line) for line in open(path) if line.strip()]
    errors = [r for r in rows if r.get("status") != "ok"]
    ok = [r for r in rows if r.get("status") == "ok"]

    tput = {}  # (label, layout) -> [ops/s]
    for r in ok:
        if r["workload"] not in ("throughput", "publish"):
            continue
        label = r["target"]
        if label == "hub":
            label = f"hub-{r['workload']}-{r['store']}"
        layout = r["layout"].split("/")[-1]
        tput.setdefault((label, layout), []).append(r["ops_per_s"])
    layouts = sorted({k[1] for k in tput}, key=lambda s: int(s[1:]))

    def med(label, layout):
        v = tput.get((label, layout))
        return statistics.median(v) if v else None

    def fmt(x):
        return "–" if x is None else f"{x:,.0f}"

    def ratio(a, b):
        return "–" if a is None or not b else f"{a / b:.2f}"

    if layouts:
        print("| workers | hub SQLite | hub PostgreSQL | pg-boss | graphile-worker | "
              "graphile-worker batched | hub publish SQLite | hub publish PostgreSQL | "
              "hub SQLite / best queue | hub PG / best queue | jobs / publish SQLite | "
              "jobs / publish PG | rounds |")
        print("|---|" + "---:|" * 12)
        for layout in layouts:
            hs, hp = med("hub-throughput-sqlite", layout), med("hub-throughput-postgres", layout)
            queues = [med(q, layout) for q in ("pgboss", "graphile", "graphile-batched")]
            best = max((q for q in queues if q is not None), default=None)
            ps, pp = med("hub-publish-sqlite", layout), med("hub-publish-postgres", layout)
            n = len(tput.get(("hub-throughput-sqlite", layout), []))
            print(f"| {layout[1:]} | {fmt(hs)} | {fmt(hp)} | {fmt(queues[0])} | {fmt(queues[1])} | "
                  f"{fmt(queues[2])} | {fmt(ps)} | {fmt(pp)} | {ratio(hs, best)} | "
                  f"{ratio(hp, best)} | {ratio(hs, ps)} | {ratio(hp, pp)} | {n} |")
        print()
        cpu = {}
        for r in ok:
            if r["target"] == "hub" and r.get("server_us_per_op", -1) > 0:
                key = (r["workload"], r["store"], r["layout"].split("/")[-1])
                cpu.setdefault(key, []).append(r["server_us_per_op"])
        if cpu:
            print("hubd CPU µs per op (median): " + "; ".join(
                f"{w} {s} {l}: {statistics.median(v):.0f}" for (w, s, l), v in sorted(cpu.items())))
            print()

    targets = {
        "dead_worker": ("worker SIGKILLed (presence stream dies) → claimed by another worker",
                        grace * 1000 + 50, f"p99 ≤ grace + 50 ms = {grace * 1000 + 50:,.0f} ms"),
        "fail": ("FailJob (retryable, initial_backoff 0) → claimed by another worker", 50, "p99 ≤ 50 ms"),
        "deregister": ("Deregister → claimed by another worker", 50, "p99 ≤ 50 ms"),
        "deadline": ("deadline passed → GetJob reads TIMED_OUT (1 s timeout)", 250,
                     "p99 ≤ deadline + 250 ms"),
        "child": ("parent's CompleteJob → child claimed by another worker", 50, "p99 ≤ 50 ms"),
    }
    lat = [r for r in ok if r["workload"] in targets or r["workload"] == "dead_worker"]
    if lat:
        print("| what | store | samples | p50 | p99 | max | target |")
        print("|---|---|---:|---:|---:|---:|---|")
        for w, (what, limit, text) in targets.items():
            for r in lat:
                if r["workload"] != w:
                    continue
                if r["target"] == "hub":
                    met = "met" if r["p99_ms"] <= limit else "not met"
                    print(f"| {what} | {r['store']} | {r['samples']} | {r['p50_ms']:,.1f} ms | "
                          f"{r['p99_ms']:,.1f} ms | {r['max_ms']:,.1f} ms | {text}: {met} |")
                else:
                    print(f"| {r['target']}: job of a SIGKILLed worker → fetched again "
                          f"({r.get('note', '')}) | postgres | {r['samples']} | "
                          f"{r['p50_ms']:,.1f} ms | {r['p99_ms']:,.1f} ms | {r['max_ms']:,.1f} ms | |")
        print()
    for r in errors:
        print(f"error: {r.get('target')} {r.get('workload')} {r.get('layout', '')}: "
              f"{r.get('error', '')}")


if __name__ == "__main__":
    main()
