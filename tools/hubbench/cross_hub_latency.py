#!/usr/bin/python3
"""How long a role change written through one hubd takes to reach a
WatchRoles stream on another hubd of the same PostgreSQL database.

    bazel build -c opt //hub:hubd
    /usr/bin/python3 tools/hubbench/cross_hub_latency.py \\
        --hubd=bazel-bin/hub/hubd [--changes=400] [--load=4] [--no-durable]

Starts a throw-away PostgreSQL 15 (tests/e2e/hubtest.py's: a Unix socket
only, fsync, full-page writes and synchronous_commit on unless
--no-durable), two hubds A and B on one new database, and a WatchRoles
stream on A. Then, one change at a time, a CompareAndSetRole of one role
through B, timed from the moment B's answer arrives (the write is durable)
to the moment A's stream delivers that version; and the same through A
(A's own commit, for comparison). Each phase runs idle, then with --load
writers per hubd compare-and-setting other roles as fast as they can.
Prints p50/p90/p99/max per phase; the stream's arrival is read on a thread
of its own, so each figure includes Python's own scheduling.
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "e2e"))
import hubtest  # noqa: E402
from hubtest import guards  # noqa: E402

PROJECT = "prj_AAAAAAAAAAAAAAAAAAAAAA"
CAS = "hub.v1.RoleService/CompareAndSetRole"
RESERVE = "hub.v1.RoleService/ReserveRole"
GET_ROLE = "hub.v1.RoleService/GetRole"
WATCH = "hub.v1.RoleService/WatchRoles"


def lead(n):
    return {"projectId": PROJECT, "kind": "ROLE_KIND_LEAD",
            "scopeId": "scp_%s" % ("%022d" % n)}


class Arrivals:
    """The arrival time of every version of one role on a watch."""

    def __init__(self, api, wire):
        self.wire = wire
        self.cond = threading.Condition()
        self.seen = {}
        self.snapshot_done = False
        self.stream = api.stream(WATCH, {"roleKeyWire": wire}, timeout=3600)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for item in self.stream:
            now = time.monotonic()
            change = item.get("change")
            if "snapshotEnd" in item:
                with self.cond:
                    self.snapshot_done = True
                    self.cond.notify_all()
            if change is None or change.get("kind") == "ROLE_CHANGE_KIND_SNAPSHOT":
                continue
            with self.cond:
                self.seen[int(change["role"].get("version", "0"))] = now
                self.cond.notify_all()

    def wait_snapshot(self, timeout=30):
        with self.cond:
            if not self.cond.wait_for(lambda: self.snapshot_done, timeout):
                raise RuntimeError("the watch sent no snapshot")

    def wait(self, version, timeout=30):
        with self.cond:
            if not self.cond.wait_for(lambda: version in self.seen, timeout):
                raise RuntimeError("version %d never arrived" % version)
            return self.seen[version]


def percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(writer, arrivals, key, changes):
    """`changes` compare-and-sets of `key` through `writer`, one at a time;
    the milliseconds from each answer to its arrival on the watch."""
    role = writer.call(GET_ROLE, {"roleKey": key})["role"]
    out = []
    for i in range(changes):
        role = writer.call(CAS, {"roleKey": key, **guards(role),
                                 "patch": {"lastReason": "probe %d" % i}})["role"]
        answered = time.monotonic()
        arrived = arrivals.wait(int(role.get("version", "0")))
        out.append((arrived - answered) * 1000)
    return out


def load(apis, per_hub, stop, counts):
    """`per_hub` writers per hubd, each compare-and-setting a role of its own."""
    def run(api, n):
        key = lead(1000 + n)
        api.call(RESERVE, {"roleKey": key, "patch": {"state": "ROLE_STATE_ELECTABLE"}})
        role = api.call(GET_ROLE, {"roleKey": key})["role"]
        while not stop.is_set():
            role = api.call(CAS, {"roleKey": key, **guards(role),
                                  "patch": {"lastReason": "load"}})["role"]
            counts[n] += 1
    threads = []
    for h, api in enumerate(apis):
        for k in range(per_hub):
            n = h * per_hub + k
            threads.append(threading.Thread(target=run, args=(api, n), daemon=True))
    for t in threads:
        t.start()
    return threads


def report(name, ms, extra=""):
    print("%-34s n=%d  p50 %.1f  p90 %.1f  p99 %.1f  max %.1f ms%s" % (
        name, len(ms), percentile(ms, 0.5), percentile(ms, 0.9), percentile(ms, 0.99),
        max(ms), extra))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hubd", default=os.environ.get("HUBD", "bazel-bin/hub/hubd"))
    parser.add_argument("--changes", type=int, default=400)
    parser.add_argument("--load", type=int, default=4, help="writers per hubd")
    parser.add_argument("--no-durable", action="store_true")
    args = parser.parse_args()
    os.environ["HUBD"] = os.path.abspath(args.hubd)
    pg = hubtest.Postgres(durable=not args.no_durable)
    hubds = []
    try:
        pg.create_database("latency")
        import tempfile
        logs = tempfile.mkdtemp(prefix="hub-latency.")
        for name in ("a", "b"):
            os.makedirs(os.path.join(logs, name))
            hubds.append(hubtest.Hubd(pg.url("latency"), log_dir=os.path.join(logs, name)))
        a, b = (hubtest.Api(h.address) for h in hubds)
        key = lead(1)
        wire = b.call(RESERVE, {"roleKey": key, "patch": {
            "state": "ROLE_STATE_ELECTABLE"}})["role"]["roleKeyWire"]
        arrivals = Arrivals(a, wire)
        arrivals.wait_snapshot()
        print("cross_hub_latency: %s UTC, %d cores, load %s, PostgreSQL %s, %d changes "
              "per phase, %d load writers per hubd" % (
                  time.strftime("%F %T", time.gmtime()), os.cpu_count(),
                  " ".join(open("/proc/loadavg").read().split()[:3]),
                  "durable" if not args.no_durable else "fsync off", args.changes,
                  args.load))
        measure(b, arrivals, key, 20)  # warm-up
        report("idle: written through B, seen on A", measure(b, arrivals, key, args.changes))
        report("idle: written through A, seen on A", measure(a, arrivals, key, args.changes))
        stop = threading.Event()
        counts = [0] * (2 * args.load)
        started = time.monotonic()
        threads = load([a, b], args.load, stop, counts)
        through_b = measure(b, arrivals, key, args.changes)
        through_a = measure(a, arrivals, key, args.changes)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        rate = " (load %.0f CAS/s)" % (sum(counts) / (time.monotonic() - started))
        report("load: written through B, seen on A", through_b, rate)
        report("load: written through A, seen on A", through_a, rate)
        arrivals.stream.cancel()
    finally:
        for h in hubds:
            h.stop()
        pg.stop()


if __name__ == "__main__":
    main()
