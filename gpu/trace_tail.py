#!/usr/bin/env python3
"""The end of a traced persistent launch, cluster by cluster (gpu/ladder.sh, stage round2).

    gpu/trace_tail.py TRACE.json [...]

For each trace written by `runner step --trace`: the SM clock fitted per CTA, and for every
recorded cluster the consumers' last items (tile, start, end, time spent after the last MMA
wait: the accumulator wait, a stream-K fix-up, the epilogue) and when they finished. Whether a
tail change (stream-K, whole waves) shortens the launch shows in the spread of those ends.
"""
import json
import sys
from collections import defaultdict

CONSUMER_WARPS = range(4, 12)  # warpgroups 1 and 2


def summary(path):
    d = json.load(open(path))
    od = d["otherData"]
    clocks = [c["clock_mhz"] for c in od.get("clocks", [])]
    print(f"== {path}: {od.get('kernel')} {od.get('shape')} {od.get('dtype')} grid {od.get('grid')}")
    if clocks:
        print(f"   SM clock fitted per CTA: {min(clocks):.0f}-{max(clocks):.0f} MHz; cut short: {od.get('cut_short')}")
    ends = defaultdict(float)
    items = defaultdict(list)
    after_mma = defaultdict(float)  # (cta, tile) -> us in accumulator wait and epilogue phases
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and e["tid"] in CONSUMER_WARPS and e["name"] not in ("teardown", "exit"):
            ends[e["pid"]] = max(ends[e["pid"]], e["ts"] + e["dur"])
        if e.get("ph") == "i" and e.get("cat") == "tile" and e["tid"] == 4:
            items[e["pid"]].append((e["ts"], e["args"]["until_us"], e["args"]["tile"]))
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and e["tid"] == 4 and e["name"] in (
            "wait for the accumulator",
            "wait for a free output tile",
            "epilogue",
        ):
            for ts, until, tile in items[e["pid"]]:
                if ts <= e["ts"] < until:
                    after_mma[(e["pid"], tile)] += e["dur"]
    last = max(ends.values()) if ends else 0.0
    for cta in sorted(ends):
        tail = sorted(items[cta])[-3:]
        desc = "; ".join(
            f"tile {t} {s:.1f}-{u:.1f} ({u - s:.1f} us, {after_mma[(cta, t)]:.1f} after MMAs)"
            for s, u, t in tail
        )
        print(f"   CTA {cta:3d} ends {ends[cta]:8.1f} us ({last - ends[cta]:5.1f} before the last): {desc}")
    print(f"   last consumer ends at {last:.1f} us; first at {min(ends.values()):.1f} us")


for p in sys.argv[1:]:
    try:
        summary(p)
    except (OSError, KeyError, ValueError) as e:
        print(f"error: {p}: {e}")
