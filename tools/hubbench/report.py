#!/usr/bin/env python3
"""Side-by-side tables from hubbench's JSON result lines.

    report.py RESULTS.jsonl

One table per workload: a row per layout, hub, the no-op ceiling and etcd in
columns, then hub/ceiling and hub/etcd; then, where hubbench read the server
(--server_pid), each server's CPU per operation over the window (utime +
stime, µs), hub's over the ceiling's, and each server's resident memory at
the window's end (MiB), and below the table each server's threads (CPU and
context switches per operation, by thread name). With several runs of a row (run.sh --repeat=N) every
figure is the median of the runs. A row the hub does not serve yet shows
"n/a".

Results of an A/B (run.sh --ab: targets "A" and "B", two hubd binaries)
print one table per workload with A, B and B/A instead, for the main figure
and for the server's CPU per operation.
"""
import json
import statistics
import sys

TARGETS = ("hub", "noop", "etcd")
WORKLOADS = (
    ("register", "registrations/s (hub RegisterAgent, noop Unary, "
                 "etcd LeaseGrant)"),
    ("heartbeat", "round trips/s, p50/p99 ms (hub Attach heartbeat, "
                  "noop Stream echo, etcd LeaseKeepAlive)"),
    ("idle", "server memory per idle stream KiB, server CPU % of one core"),
    ("cas", "successful compare-and-set/s (hub CompareAndSetRole, "
            "noop Unary, etcd Txn on mod_revision)"),
    ("publish", "durable publishes/s, publish-to-arrival p50/p99 ms on the "
                "recipients' streams (hub Publish, noop Unary)"),
    ("failover", "ms from holder gone to successor active, p50/p99 (hub: "
                 "holder's stream killed, grace included; etcd: leader's "
                 "lease revoked under v3election Campaign); ratio of p99"),
)


def median(rows, field):
    values = [r[field] for r in rows if r.get("status") == "ok" and field in r]
    return statistics.median(values) if values else None


def cell(rows, workload):
    """Text of one target's cell and its main figure (None when absent)."""
    if not rows:
        return "-", None
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        status = rows[0].get("status", "error")
        return ("n/a" if status == "not_served" else status), None
    runs = f" x{len(ok)}" if len(ok) > 1 else ""
    if workload == "failover":
        p50, p99 = median(ok, "p50_ms"), median(ok, "p99_ms")
        return f"{p50:.1f}/{p99:.1f}{runs}", p99
    if workload == "idle":
        kib, cpu = median(ok, "per_stream_kib"), median(ok, "cpu_pct")
        return f"{kib:.1f} KiB {cpu:.2f}%{runs}", kib
    ops = median(ok, "ops_per_s")
    text = f"{ops:,.0f}"
    p50, p99 = median(ok, "p50_us"), median(ok, "p99_us")
    if workload == "heartbeat" and p50 is not None:
        text += f" ({p50 / 1000:.2f}/{p99 / 1000:.2f})"
    if workload == "publish" and median(ok, "delivery_p50_us") is not None:
        d50, d99 = median(ok, "delivery_p50_us"), median(ok, "delivery_p99_us")
        text += f" ({d50 / 1000:.2f}/{d99 / 1000:.2f})"
    if workload == "cas" and median(ok, "lost"):
        text += f" lost {median(ok, 'lost') / median(ok, 'duration_s'):,.0f}/s"
    return text + runs, ops


def server(rows, field, scale=1.0, fmt="{:.0f}"):
    """One target's median of a server_* field, as text and number."""
    value = median(rows, field)
    if value is None:
        return "-", None
    return fmt.format(value * scale), value


def threads(rows):
    """Medians of each server thread's CPU and switches per operation, as
    "name us/switches" items, busiest first (run.sh's rows read the server's
    threads in /proc), and the process's switches per operation."""
    ok = [r for r in rows if r.get("status") == "ok" and "server_threads" in r]
    if not ok:
        return None
    names = []
    for r in ok:
        names += [t["name"] for t in r["server_threads"] if t["name"] not in names]
    items = []
    for name in names:
        mine = [t for r in ok for t in r["server_threads"] if t["name"] == name]
        us = statistics.median(t["us_per_op"] for t in mine)
        n = statistics.median(t["switches_per_op"] for t in mine)
        if us >= 0.5:
            items.append((us, f"{name} {us:.0f}/{n:.2f}"))
    items.sort(reverse=True)
    total = median(ok, "server_switches_per_op")
    return ", ".join(text for _, text in items) + f"; {total:.2f} switches/op"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def layouts_of(rows):
    """The rows' layouts, in the order they first appear."""
    layouts = []
    for r in rows:
        if r["layout"] not in layouts:
            layouts.append(r["layout"])
    return layouts


def ab_tables(results):
    """run.sh --ab: A and B side by side, and B over A."""
    for workload, title in WORKLOADS:
        rows = [r for r in results if r.get("workload") == workload]
        if not rows:
            continue
        layouts = layouts_of(rows)
        table = [("layout", "A", "B", "B/A", "cpu us/op A/B", "B/A cpu")]
        for layout in layouts:
            cells, cpu = {}, {}
            for target in ("A", "B"):
                mine = [r for r in rows
                        if r["layout"] == layout and r["target"] == target]
                cells[target] = cell(mine, workload)
                cpu[target] = server(mine, "server_us_per_op")
            table.append((layout, cells["A"][0], cells["B"][0],
                          ratio(cells["B"][1], cells["A"][1]),
                          f"{cpu['A'][0]}/{cpu['B'][0]}",
                          ratio(cpu["B"][1], cpu["A"][1])))
        widths = [max(len(row[i]) for row in table) for i in range(6)]
        print(f"\n{workload}: {title}")
        for row in table:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        for r in rows:
            if r.get("status") == "error":
                print(f"  error: {r['target']} {r['layout']}: "
                      f"{r.get('error', '')}")


def main(path):
    results = [json.loads(line) for line in open(path) if line.startswith("{")]
    if any(r.get("target") in ("A", "B") for r in results):
        ab_tables(results)
        return
    for workload, title in WORKLOADS:
        rows = [r for r in results if r.get("workload") == workload]
        if not rows:
            continue
        layouts = layouts_of(rows)
        table = [("layout", "hub", "ceiling (noop)", "etcd", "hub/ceiling",
                  "hub/etcd", "cpu us/op hub/noop/etcd", "hub/noop cpu",
                  "rss MiB hub/noop/etcd")]
        for layout in layouts:
            cells, cpu, rss = {}, {}, {}
            for target in TARGETS:
                mine = [r for r in rows
                        if r["layout"] == layout and r["target"] == target]
                cells[target] = cell(mine, workload)
                cpu[target] = server(mine, "server_us_per_op")
                rss[target] = server(mine, "server_rss_kib", 1 / 1024)
            hub, noop, etcd = (cells[t][1] for t in TARGETS)
            table.append((layout, cells["hub"][0], cells["noop"][0],
                          cells["etcd"][0], ratio(hub, noop), ratio(hub, etcd),
                          "/".join(cpu[t][0] for t in TARGETS),
                          ratio(cpu["hub"][1], cpu["noop"][1]),
                          "/".join(rss[t][0] for t in TARGETS)))
        widths = [max(len(row[i]) for row in table) for i in range(9)]
        print(f"\n{workload}: {title}")
        for row in table:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
        lines = []
        for layout in layouts:
            for target in TARGETS:
                mine = [r for r in rows
                        if r["layout"] == layout and r["target"] == target]
                text = threads(mine)
                if text:
                    lines.append(f"  {layout} {target}: {text}")
        if lines:
            print("threads: CPU us/context switches per op, medians")
            print("\n".join(lines))
        errors = [r for r in rows if r.get("status") == "error"]
        for r in errors:
            print(f"  error: {r['target']} {r['layout']}: {r.get('error', '')}")
        # A recipient whose acks fell behind: the rate is not one it keeps
        # up with (its inbox fills until publishes are refused).
        for r in rows:
            if r.get("unacked", 0) > max(1000, r.get("ops", 0) // 100):
                print(f"  acks fell behind: {r['target']} {r['layout']}: "
                      f"{r['unacked']} messages unacknowledged after the run")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
