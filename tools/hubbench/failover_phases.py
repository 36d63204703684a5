#!/usr/bin/env python3
"""Phases of the failovers of a failover_faults.sh run, from its directory:
the benchmark's per-round lines (bench.err: when the holder left, how long
the failover took), the role transitions both hubds logged, and the faults'
times (faults.log, Unix ms).

For each round: cut -> revoke (the holder's detach grace and its release),
revoke -> the successor's reservation, reservation -> the successor's ACK
(each the earliest time either hub logged it). Prints p50/p90/max of each
phase, the slowest rounds with the faults and the hint failures
(`*_hint_not_sent`) logged between the cut and the ACK."""
import collections
import datetime
import re
import sys


def millis(line):
    stamp = line.split()[0][len("ts="):].rstrip("Z")
    return datetime.datetime.fromisoformat(stamp + "+00:00").timestamp() * 1000


def main(w):
    left = {}
    for line in open(f"{w}/bench.err"):
        m = re.search(r"round (\d+) left at (\d+) ms took ([\d.]+)", line)
        if m:
            left[int(m.group(1))] = (int(m.group(2)), float(m.group(3)))
    with open(f"{w}/bench.err") as f:
        failures = collections.Counter(
            line.strip() for line in f if line.startswith("failover: ")
            and "left at" not in line and "skipped" not in line)
    faults = [int(x) for x in open(f"{w}/faults.log").read().split()]
    seen = collections.defaultdict(dict)
    hints = []
    transition = re.compile(
        r"event=role_transition role=\S+ from=(\S+) to=(\S+) epoch=\d+ "
        r"holder=(\S*) reason=(\S+)")
    for hub in (0, 1):
        for line in open(f"{w}/hubd{hub}.log"):
            if not line.startswith("ts="):
                continue
            t = millis(line)
            if "_hint_not_sent" in line:
                hints.append((t, hub, re.search(r"event=(\S+)", line).group(1)))
            m = transition.search(line)
            if not m:
                continue
            frm, to, holder, _ = m.groups()
            r = re.search(r"role=(\S+)", line).group(1)
            key = None
            if frm == "active" and to == "electable":
                key = "revoked"
            elif to == "elected-probing" and holder.startswith("fo-b-"):
                key = "reserved"
            elif to == "active" and holder.startswith("fo-b-"):
                key = "acked"
            elif to == "active" and holder.startswith("fo-a-"):
                seen[r]["round"] = int(holder.rsplit("-", 1)[1])
            if key:
                seen[r][key] = min(seen[r].get(key, t), t)
    rows = []
    for phases in seen.values():
        rnd = phases.get("round")
        if rnd not in left or not all(
                k in phases for k in ("revoked", "reserved", "acked")):
            continue
        cut, took = left[rnd]
        rows.append((took, rnd, cut, phases["revoked"] - cut,
                     phases["reserved"] - phases["revoked"],
                     phases["acked"] - phases["reserved"]))
    if not rows:
        print("no complete round")
        return
    rows.sort()

    def q(i, p):
        v = sorted(r[i] for r in rows)
        return v[min(len(v) - 1, int(p * len(v)))]

    print(f"{len(rows)} of {len(left)} rounds with every phase logged; "
          f"{len(faults)} faults; {len(hints)} hints not sent")
    for name, i in (("cut -> revoke", 3), ("revoke -> reserve", 4),
                    ("reserve -> ACK", 5), ("total (bench)", 0)):
        print(f"  {name:18s} p50 {q(i, .5):7.0f}  p90 {q(i, .9):7.0f}  "
              f"max {max(r[i] for r in rows):7.0f} ms")
    print("slowest rounds (ms from the cut):")
    for took, rnd, cut, a, b, c in rows[-5:]:
        near = [round(f - cut) for f in faults if cut - 1000 <= f <= cut + took]
        lost = [(round(t - cut), f"hub{h}", e) for t, h, e in hints
                if cut <= t <= cut + took]
        print(f"  round {rnd}: {took:.0f} = {a:.0f} + {b:.0f} + {c:.0f}; "
              f"faults at {near}; hints not sent {lost}")
    for line, n in failures.most_common(5):
        print(f"  {n} x {line[:160]}")


if __name__ == "__main__":
    main(sys.argv[1])
