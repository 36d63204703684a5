#!/usr/bin/env python3
"""Helpers of tools/hubbench/postgres.sh: CPU snapshots from /proc and the
side-by-side report.

    postgres.py snapshot HUBD_PID POSTMASTER_PID   # JSON on stdout
    postgres.py line RESULT_JSON BEFORE AFTER VARIANT [NAMES]   # one line
    postgres.py report RESULTS.jsonl
    postgres.py statements RESULT_LINE TOP   # pg_stat_statements, per op
    postgres.py other_cpus LIST   # the CPUs this process may use, minus LIST

A snapshot holds hubd's utime+stime per thread name (clock ticks) and its
context switches, and PostgreSQL's CPU: the postmaster's own and reaped
children's (cutime+cstime: backends that exited), plus every live child's,
split into client backends ("postgres: USER DB ...") and the server's own
processes (walwriter, checkpointer, ...). A backend that exits inside the
window counts its whole life, so the PostgreSQL figure is slightly high when
connections come and go; hubd keeps its writer and idle readers open.
"""
import json
import os
import statistics
import sys

HZ = os.sysconf("SC_CLK_TCK")


def stat_fields(path):
    with open(path) as f:
        text = f.read()
    # comm may hold spaces and parentheses: split after the last ')'.
    return text[text.rindex(")") + 2:].split()


def ticks(fields, children=False):
    # fields[0] is state (field 3 of stat): utime is field 14 -> index 11.
    t = int(fields[11]) + int(fields[12])
    if children:
        t += int(fields[13]) + int(fields[14])
    return t


def snapshot(hubd_pids, pm_pid):
    """`hubd_pids`: "PID" or "PID,PID,...", several hubds over one database
    (their threads summed by name)."""
    threads = {}
    switches = 0
    tasks = [(pid, tid) for pid in hubd_pids.split(",")
             for tid in os.listdir(f"/proc/{pid}/task")]
    for hubd_pid, tid in tasks:
        base = f"/proc/{hubd_pid}/task/{tid}"
        try:
            with open(base + "/comm") as f:
                name = f.read().strip()
            t = ticks(stat_fields(base + "/stat"))
            with open(base + "/status") as f:
                for line in f:
                    if "ctxt_switches" in line:
                        switches += int(line.split()[1])
        except (FileNotFoundError, ProcessLookupError):
            continue
        # Numbered pools (grpcpp_sync_ser, ...) are summed by their name.
        threads[name] = threads.get(name, 0) + t
    pg = {"postmaster": 0, "backends": 0, "server": 0}
    backends = {}  # client backend pid -> ticks
    if pm_pid > 0:
        pg["postmaster"] = ticks(stat_fields(f"/proc/{pm_pid}/stat"), True)
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                fields = stat_fields(f"/proc/{pid}/stat")
                if int(fields[1]) != pm_pid:
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except (FileNotFoundError, ProcessLookupError, ValueError):
                continue
            # Client backends: "postgres: hub dbname [local] idle".
            kind = "backends" if cmd.startswith("postgres: hub ") else "server"
            pg[kind] += ticks(fields)
            if kind == "backends":
                backends[pid] = ticks(fields)
    return {"threads": threads, "switches": switches, "pg": pg,
            "backends": backends}


def line(result, before, after, variant, backend_names=""):
    """`backend_names`: "PID\tAPPLICATION_NAME" lines (pg_stat_activity) naming the
    client backends by the connection they serve."""
    r = json.loads(result)
    b, a = json.loads(before), json.loads(after)
    r["variant"] = variant
    ops = r.get("ops") or 0
    r["load"] = os.getloadavg()[0]
    if ops:
        us = 1e6 / HZ / ops
        names = set(a["threads"]) | set(b["threads"])
        per = {n: (a["threads"].get(n, 0) - b["threads"].get(n, 0)) * us
               for n in names}
        r["hubd_us_per_op"] = sum(per.values())
        r["hubd_threads_us_per_op"] = {
            n: round(v, 1) for n, v in sorted(per.items(), key=lambda x: -x[1])
            if v > 0}
        r["hubd_switches_per_op"] = (a["switches"] - b["switches"]) / ops
        pg = {k: (a["pg"][k] - b["pg"][k]) * us for k in a["pg"]}
        r["pg_us_per_op"] = sum(pg.values())
        r["pg_backends_us_per_op"] = pg["backends"]
        r["pg_server_us_per_op"] = pg["server"] + pg["postmaster"]
    if ops and backend_names:
        named = dict(l.split("\t", 1) for l in backend_names.splitlines()
                     if "\t" in l)
        per_conn = {}
        for pid, t in a.get("backends", {}).items():
            # "hubd writer" -> "writer"; a backend that named nothing, or
            # left before the names were read: "other".
            name = named.get(pid, "").removeprefix("hubd ").strip() or "other"
            used = (t - b.get("backends", {}).get(pid, 0)) * us
            per_conn[name] = per_conn.get(name, 0) + used
        r["pg_connections_us_per_op"] = {
            n: round(v, 1)
            for n, v in sorted(per_conn.items(), key=lambda x: -x[1])
            if v > 0}
    return json.dumps(r)


def med(rows, field):
    v = [r[field] for r in rows if field in r and r[field] is not None]
    return statistics.median(v) if v else None


def report(path):
    rows = [json.loads(x) for x in open(path) if x.strip()]
    variants = []
    for r in rows:
        if r["variant"] not in variants:
            variants.append(r["variant"])
    # Takeovers are one latency per run, reported apart below.
    takeovers = [r for r in rows if r["workload"] == "failover"]
    rows = [r for r in rows if r["workload"] != "failover"]
    if not rows:
        takeover_report(takeovers)
        return
    keys = []
    for r in rows:
        k = (r["workload"], r["layout"])
        if k not in keys:
            keys.append(k)
    print("medians of the runs; ops/s, p50/p99 ms (publish: publish-to-arrival "
          "on the recipient's stream), CPU us/op of hubd and of PostgreSQL "
          "(its backends + its own processes); load = 1-min average at the "
          "end of each run, min-max")
    head = ["row"] + [f"{v} ops/s" for v in variants] + \
        [f"{v} p50/p99" for v in variants] + \
        [f"{v} hubd/pg us/op" for v in variants]
    # Throughput of each later variant against the first.
    head += [f"{v}/{variants[0]}" for v in variants[1:]]
    head.append("runs, load")
    table = [head]
    for k in keys:
        out = [f"{k[0]} {k[1]}"]
        ops, lat, cpu, runs, loads = [], [], [], [], []
        for v in variants:
            sel = [r for r in rows if (r["workload"], r["layout"]) == k and
                   r["variant"] == v and r.get("status") == "ok"]
            runs.append(len(sel))
            loads += [r["load"] for r in sel]
            o = med(sel, "ops_per_s")
            ops.append(o)
            out_ops = f"{o:,.0f}" if o is not None else "-"
            out.append(out_ops)
            p50f, p99f = ("delivery_p50_us", "delivery_p99_us") \
                if k[0] == "publish" else ("p50_us", "p99_us")
            p50, p99 = med(sel, p50f), med(sel, p99f)
            lat.append(f"{p50 / 1000:.2f}/{p99 / 1000:.2f}"
                       if p50 is not None else "-")
            h, p = med(sel, "hubd_us_per_op"), med(sel, "pg_us_per_op")
            cpu.append(f"{h:.0f}/{p:.0f}" if h is not None else "-")
        out += lat + cpu
        out += [f"{o / ops[0]:.2f}" if ops[0] and o else "-" for o in ops[1:]]
        load = f"{min(loads):.1f}-{max(loads):.1f}" if loads else "-"
        out.append(f"x{'/'.join(map(str, runs))}, {load}")
        table.append(out)
    widths = [max(len(r[i]) for r in table) for i in range(len(head))]
    for r in table:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    # A paced row's figures hold only if it kept its pace.
    for k in keys:
        for v in variants:
            sel = [r for r in rows if (r["workload"], r["layout"]) == k and
                   r["variant"] == v and r.get("status") == "ok"]
            late = [r.get("late", 0) for r in sel if "late" in r]
            if any(late):
                print(f"  {k[0]} {k[1]} {v}: fell behind its pace: "
                      f"{', '.join(map(str, late))} publishes skipped per run")
            # A recipient whose acks fell behind: the rate is not one it
            # keeps up with (its inbox fills until publishes are refused).
            behind = [r["unacked"] for r in sel
                      if r.get("unacked", 0) > max(1000, r.get("ops", 0) // 100)]
            if behind:
                print(f"  {k[0]} {k[1]} {v}: the recipient's acks fell behind: "
                      f"{', '.join(map(str, behind))} messages unacknowledged "
                      "after the run")
    # Where hubd's CPU goes on each variant: thread names, medians.
    print("\nhubd CPU us/op by thread (medians; threads under 2 us/op left out)")
    for k in keys:
        for v in variants:
            sel = [r for r in rows if (r["workload"], r["layout"]) == k and
                   r["variant"] == v and r.get("status") == "ok"]
            if not sel:
                continue
            text = medians_by_name(sel, "hubd_threads_us_per_op")
            pgb = med(sel, "pg_backends_us_per_op")
            pgs = med(sel, "pg_server_us_per_op")
            split = medians_by_name(sel, "pg_connections_us_per_op")
            extra = (f"; postgres backends {pgb:.0f}"
                     f"{f' ({split})' if split else ''}, server {pgs:.0f}"
                     if pgb is not None and v != "sqlite" else "")
            print(f"  {k[0]} {k[1]} {v}: {text}{extra}")
    takeover_report(takeovers)


def medians_by_name(rows, field):
    """"name us, ..." for a field mapping names to us/op (hubd's threads,
    PostgreSQL's connections): medians over `rows`, costliest first, those
    under 2 us/op left out."""
    names = {n for r in rows for n in r.get(field, {})}
    per = {n: statistics.median(r.get(field, {}).get(n, 0) for r in rows)
           for n in names}
    return ", ".join(f"{n} {x:.0f}" for n, x in
                     sorted(per.items(), key=lambda x: -x[1]) if x >= 2)


def takeover_report(rows):
    """One line per variant over every takeover run: SIGKILL of the holder's
    hub -> the successor's ACK accepted on another hub."""
    variants = []
    for r in rows:
        if r["variant"] not in variants:
            variants.append(r["variant"])
    if not variants:
        return
    print("\ntakeover: the holder's hub SIGKILLed -> the successor's ACK "
          "accepted on another hub (lease + renewal + detach grace), ms")
    for v in variants:
        ms = sorted(r["p50_ms"] for r in rows
                    if r["variant"] == v and r.get("status") == "ok")
        failed = sum(1 for r in rows
                     if r["variant"] == v and r.get("status") != "ok")
        if not ms:
            print(f"  {v}: no run succeeded ({failed} failed)")
            continue
        p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
        print(f"  {v}: {len(ms)} runs, p50 {statistics.median(ms):,.1f}, "
              f"p99 {p99:,.1f}, min {ms[0]:,.1f}, max {ms[-1]:,.1f}"
              + (f", {failed} failed" if failed else ""))


def statements(result, top):
    """`top`: psql's tab-separated rows of calls, total_exec_time (ms), rows,
    toplevel and the query text, costliest first. Printed per operation of
    the row: a nested statement (toplevel f: run by a function or trigger)
    is also inside its caller's time."""
    ops = json.loads(result).get("ops") or 0
    if not ops:
        return
    print(f"    statements per operation ({ops} ops; nested = inside a "
          "function or trigger, its time also in its caller's):")
    for row in top.splitlines():
        calls, ms, nrows, toplevel, query = row.split("\t", 4)
        nested = "" if toplevel == "t" else " nested"
        print(f"    {int(calls) / ops:6.2f} calls {float(ms) * 1000 / ops:8.1f} us"
              f" {int(nrows) / ops:6.2f} rows{nested}: {query[:150]}")


def other_cpus(cpu_list):
    """The CPUs left for hubd and the load when PostgreSQL gets `cpu_list`
    (taskset's form: 1 or 0,2-3), comma-separated; exits with a message if
    the list is malformed, names a CPU this process may not use, or leaves
    none over."""
    usable = os.sched_getaffinity(0)
    db = set()
    try:
        for part in cpu_list.split(","):
            lo, _, hi = part.partition("-")
            db.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        sys.exit(f"postgres.sh: --db_cpus={cpu_list} is not a CPU list such as 1 or 0,2-3")
    rest = sorted(usable - db)
    if not db or not rest or not db <= usable:
        sys.exit(f"postgres.sh: --db_cpus={cpu_list} leaves no CPU for the rest or names one this machine lacks")
    return ",".join(map(str, rest))


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "snapshot" and len(sys.argv) == 4:
        print(json.dumps(snapshot(sys.argv[2], int(sys.argv[3]))))
    elif cmd == "line" and len(sys.argv) in (6, 7):
        print(line(*sys.argv[2:]))
    elif cmd == "statements" and len(sys.argv) == 4:
        statements(sys.argv[2], sys.argv[3])
    elif cmd == "other_cpus" and len(sys.argv) == 3:
        print(other_cpus(sys.argv[2]))
    elif cmd == "report" and len(sys.argv) == 3:
        report(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
