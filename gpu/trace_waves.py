#!/usr/bin/env python3
"""Wave by wave, what a traced persistent launch of step 6 (or a variant) did (gpu/ladder3.sh).

    gpu/trace_waves.py TRACE.json [...]

For each trace written by `runner step 6 --arch sm_90a --trace`: whether every recorded cluster
visited its tiles in step 6's order (cluster c: tiles c, c + C, c + 2C, ... with C clusters),
then per wave (a cluster's i-th item) over the recorded CTAs' first consumer warp:
  - when the wave's items started (mean, in us after the first record),
  - how long an item took, in us (the trace's per-CTA fitted time axis) and in kilocycles
    (%clock64 between the item's start and the next one's),
  - the SM clock it ran at: those cycles over the %globaltimer between the same two records.
The last two need the raw readings the runner writes since commit 6d740f0 (tile args `clock`,
`timer_us`); without them the cycles come from the fitted axis and the clock is left out.
So a slower wave shows whether it took more cycles (the code, the memory system) or the same
cycles at a lower clock (the power cap).
"""
import json
import statistics
import sys
from collections import defaultdict

CONSUMER_WARP = 4  # the first warp of warpgroup 1


def fmt(xs, scale=1.0, digits=1):
    if not xs:
        return "-"
    xs = [x * scale for x in xs]
    return f"{statistics.mean(xs):.{digits}f} [{min(xs):.{digits}f}-{max(xs):.{digits}f}]"


def summary(path):
    d = json.load(open(path))
    od = d["otherData"]
    grid = od["grid"][0] * od["grid"][1] * od["grid"][2]
    clusters = grid // od.get("cluster", 2)
    fitted = {c["cta"]: c["clock_mhz"] for c in od.get("clocks", [])}
    print(f"== {path}: {od.get('kernel')} {od.get('shape')} {od.get('dtype')}, {clusters} clusters")
    if fitted:
        print(f"   SM clock fitted per CTA (one line over the launch): "
              f"{min(fitted.values()):.0f}-{max(fitted.values()):.0f} MHz")
    items = defaultdict(list)  # cta -> [(ts, until, tile, clock, timer_us)]
    for e in d["traceEvents"]:
        if e.get("ph") == "i" and e.get("cat") == "tile" and e["tid"] == CONSUMER_WARP:
            a = e["args"]
            items[e["pid"]].append((e["ts"], a["until_us"], a["tile"], a.get("clock"), a.get("timer_us")))
    raw = all(it[3] is not None for its in items.values() for it in its)
    out_of_order = []
    waves = defaultdict(lambda: defaultdict(list))  # wave -> what -> values
    for cta, its in sorted(items.items()):
        its.sort()
        cluster = cta // od.get("cluster", 2)
        tiles = [t for _, _, t, _, _ in its]
        step6 = [cluster + i * clusters for i in range(len(tiles))]
        # Whole tiles come first; a stream-K tail's pieces follow (their tiles repeat or skip).
        whole = 0
        while whole < len(tiles) and tiles[whole] == step6[whole]:
            whole += 1
        if whole < len(tiles) and whole < len(tiles) - 2:
            out_of_order.append((cta, tiles[:whole + 3]))
        for i, (ts, until, tile, clock, timer) in enumerate(its):
            w = waves[i]
            w["start"].append(ts)
            w["us"].append(until - ts)
            if i + 1 < len(its):
                nts, _, _, nclock, ntimer = its[i + 1]
                if raw:
                    cycles = nclock - clock
                    w["kcycles"].append(cycles / 1e3)
                    if ntimer > timer:
                        w["mhz"].append(cycles / (ntimer - timer))
                elif cta in fitted:
                    w["kcycles"].append((nts - ts) * fitted[cta] / 1e3)
    print(f"   tile order: {'step 6 order (c, c + C, ...) on every recorded CTA' if not out_of_order else 'DIFFERS from step 6 on ' + str(out_of_order[:4])}")
    print("   wave  items  starts at us      item us             kcycles to the next item   MHz (cycles / globaltimer)")
    for i in sorted(waves):
        w = waves[i]
        print(f"   {i:4d}  {len(w['us']):5d}  {fmt(w['start']):>16}  {fmt(w['us']):>18}  "
              f"{fmt(w['kcycles']):>24}   {fmt(w['mhz'], digits=0) if raw else 'n/a (no raw readings)'}")
    ends = defaultdict(float)
    for e in d["traceEvents"]:
        if e.get("ph") == "X" and 4 <= e["tid"] < 12 and e["name"] not in ("teardown", "exit"):
            ends[e["pid"]] = max(ends[e["pid"]], e["ts"] + e["dur"])
    if ends:
        print(f"   consumers end: first {min(ends.values()):.1f} us, last {max(ends.values()):.1f} us")


for p in sys.argv[1:]:
    try:
        summary(p)
    except (OSError, KeyError, ValueError, TypeError) as e:
        print(f"error: {p}: {e}")
