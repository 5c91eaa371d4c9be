#!/usr/bin/env python3
"""The CPU simulator's speed targets, measured on this machine and written as
assets/results/sim-speed-DATE.{json,md}.

Targets (benchmarks, not timed tests):
  - step 0 at 256x256x128 f16 simulated and verified in under 5 s;
  - step 6 at 512x512x256 f16 in under 30 s;
  - the whole seeded-bug set (every seeded bug on every step it applies to, each exploring
    4 schedules under 2 schedule seeds, as `runner check sim` runs it) in under 5 minutes;
  - a deadlock reported within 1 s of the last thread blocking.

Each figure is the median of --runs runs. The two steps are timed as a learner waits for them
(`runner step N --sim --json`, the whole process: NVRTC's sm_100a compile, the simulation, the
fp64 reference and verification) and as the simulation alone (the report's `sim.wall_s`). The
seeded-bug set is `runner check sim`'s bug cases: their summed seconds (one thread each, so the
time on one core) and the whole check's wall time with 2 jobs. The deadlock latency comes from
the `deadlock_latency` benchmark of the sim crate (steps/sim/tests/bench.rs): a seeded deadlock
run whole minus the same schedule stopped just before the instruction after which the deadlock
was found.

Usage: scripts/sim-speed.py [--runs 3] [--check-runs N] [--runner target/release/runner]
                            [--out assets/results] [--note "what else the machine was doing"]
       scripts/sim-speed.py --md-from assets/results/sim-speed-DATE.json (the .md again)
Needs a release build of the runner (cargo build --release -p runner) and cargo on PATH.
"""

import argparse
import datetime
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(cmd, **kw):
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, **kw)


def machine(note):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "memory_gb": mem_gb,
        "gpu": "none",
        "os": f"{platform.system()} {platform.release()}",
        "note": note,
    }


def load():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def cpu_children():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def median(xs):
    return round(statistics.median(xs), 4)


def step_bench(runner, step, m, n, k, runs):
    """`runner step STEP --sim` at MxNxK f16, `runs` times."""
    cmd = [runner, "step", str(step), "--sim", "--m", str(m), "--n", str(n), "--k", str(k),
           "--dtype", "f16", "--json"]
    walls, sims, cpus, facts = [], [], [], None
    for _ in range(runs):
        c0, t0 = cpu_children(), time.perf_counter()
        p = sh(cmd)
        wall, cpu = time.perf_counter() - t0, cpu_children() - c0
        if p.returncode != 0:
            sys.exit(f"error: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
        r = json.loads(p.stdout)["runs"][0]
        if not r["verification"]["passed"]:
            sys.exit(f"error: step {step} did not verify on the simulator")
        walls.append(wall)
        cpus.append(cpu)
        sims.append(r["sim"]["wall_s"])
        facts = {
            "grid": r["grid"],
            "cluster": r["cluster"],
            "block": r["block"],
            "instructions": r["sim"]["instructions"],
            "clusters_run": r["sim"]["clusters"],
        }
    return {
        "command": " ".join(["runner"] + cmd[1:]),
        "shape": f"{m}x{n}x{k}",
        "dtype": "f16",
        "verified": True,
        **facts,
        "process_wall_s": [round(x, 4) for x in walls],
        "process_cpu_s": [round(x, 4) for x in cpus],
        "simulation_s": [round(x, 4) for x in sims],
        "median_process_wall_s": median(walls),
        "median_simulation_s": median(sims),
    }


def bug_set_bench(runner, runs):
    """`runner check sim` (its default set) `runs` times: the seeded-bug cases' seconds."""
    out = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix="sim-speed-") as d:
            c0, t0 = cpu_children(), time.perf_counter()
            p = sh([runner, "check", "sim", "--jobs", "2", "--out", d])
            wall, cpu = time.perf_counter() - t0, cpu_children() - c0
            try:
                with open(os.path.join(d, "sim.json")) as f:
                    v = json.load(f)
            except OSError:
                sys.exit(f"error: runner check sim wrote no sim.json: {p.stderr.strip()[-500:]}")
        cases = v["cases"]
        bugs = [c for c in cases if c.get("mutation")]
        stock = [c for c in cases if not c.get("mutation")]
        out.append({
            "check_exit": p.returncode,
            "cases": len(cases),
            "as_expected": sum(1 for c in cases if c.get("met_expectation")),
            "bug_cases": len(bugs),
            "bug_cases_as_expected": sum(1 for c in bugs if c.get("met_expectation")),
            "bug_cases_seconds_one_core": round(sum(c["seconds"] for c in bugs), 2),
            "stock_cases_seconds_one_core": round(sum(c["seconds"] for c in stock), 2),
            "whole_check_wall_s_2_jobs": round(wall, 2),
            "whole_check_cpu_s": round(cpu, 2),
        })
    return {
        "command": "runner check sim --jobs 2",
        "runs": out,
        "median_bug_cases_seconds_one_core": median(
            [r["bug_cases_seconds_one_core"] for r in out]),
        "median_whole_check_wall_s_2_jobs": median(
            [r["whole_check_wall_s_2_jobs"] for r in out]),
        "median_whole_check_cpu_s": median([r["whole_check_cpu_s"] for r in out]),
    }


def deadlock_bench(runs):
    cmd = ["cargo", "test", "--release", "-p", "sim", "--test", "bench", "--",
           "--ignored", "--nocapture", "--exact", "deadlock_latency"]
    p = sh(cmd, env={**os.environ, "SIM_BENCH_RUNS": str(max(runs, 5))})
    m = re.search(r"^deadlock-latency (\{.*\})$", p.stdout, re.M)
    if p.returncode != 0 or not m:
        sys.exit(f"error: the deadlock benchmark failed: {p.stderr.strip()[-800:]}")
    return {"command": " ".join(cmd), **json.loads(m.group(1))}


def write_md(path, r):
    s0, s6, bugs, dl = r["step0"], r["step6"], r["seeded_bugs"], r["deadlock"]
    mach = r["machine"]

    def verdict(x, limit):
        return "met" if x < limit else "missed"

    # A difference of two noisy medians can come out below zero: the bound is the worst pair.
    diff = dl["median_whole_s"] - dl["median_to_last_block_s"]
    bound = max(dl["whole_run_s"]) - min(dl["run_to_last_block_s"])

    lines = [
        f"# Simulator speed, {r['date']} (commit {r['commit']})",
        "",
        f"Machine: {mach['cpu']}, {mach['cores']} cores, {mach['memory_gb']} GB, no GPU "
        f"({mach['os']}). {mach['note']} Load average (1, 5, 15 min) before: "
        f"{r['load_before']}, after: {r['load_after']}. Medians of {r['runs']} runs "
        f"({len(bugs['runs'])} of the whole check); "
        f"every figure below was measured by `scripts/sim-speed.py`, which wrote this file.",
        "",
        "| target | measured (median) | limit | |",
        "| --- | --- | --- | --- |",
        f"| step 0, {s0['shape']} f16, simulated and verified | {s0['median_process_wall_s']:.2f} s "
        f"whole `runner step` process, {median(s0['process_cpu_s']):.2f} s of CPU "
        f"(simulation alone {s0['median_simulation_s']:.2f} s) | 5 s "
        f"| {verdict(s0['median_process_wall_s'], 5)} |",
        f"| step 6, {s6['shape']} f16 | {s6['median_process_wall_s']:.2f} s whole process, "
        f"{median(s6['process_cpu_s']):.2f} s of CPU "
        f"(simulation alone {s6['median_simulation_s']:.2f} s; grid {s6['grid']}, "
        f"{s6['clusters_run']} clusters) | 30 s | {verdict(s6['median_process_wall_s'], 30)} |",
        f"| the seeded-bug set ({bugs['runs'][0]['bug_cases']} cases of `runner check sim`), "
        f"wall | {bugs['median_bug_cases_seconds_one_core']:.1f} s: its cases' wall seconds "
        f"summed (each on one thread) | 300 s | "
        f"{verdict(bugs['median_bug_cases_seconds_one_core'], 300)} |",
        f"| the seeded-bug set, CPU | at most {bugs['median_whole_check_cpu_s']:.0f} s: the "
        f"whole check's CPU seconds, its {bugs['runs'][0]['cases'] - bugs['runs'][0]['bug_cases']}"
        f" stock cases included | 300 s | {verdict(bugs['median_whole_check_cpu_s'], 300)} |",
        f"| a deadlock reported after the last thread blocks | {diff * 1000:+.1f} ms, the "
        f"difference of medians ({dl['median_whole_s']:.3f} s whole run minus "
        f"{dl['median_to_last_block_s']:.3f} s up to the block, {dl['runs']} runs each); at "
        f"most {bound * 1000:.1f} ms (slowest whole run minus fastest run up to the block) "
        f"| 1 s | {verdict(bound, 1)} |",
        "",
        f"The whole `runner check sim` ({bugs['runs'][0]['cases']} cases: stock kernels and "
        f"seeded bugs, 2 jobs) took {bugs['median_whole_check_wall_s_2_jobs']:.0f} s of wall "
        f"time and {bugs['median_whole_check_cpu_s']:.0f} s of CPU (user and system, all "
        f"its threads); its cases as expected: "
        + ", ".join(f"{x['as_expected']} of {x['cases']}" for x in bugs["runs"]) + ".",
        "",
        "Where the machine is shared, a case's wall seconds include the time other work held "
        "the cores, so the CPU seconds are the closer measure of the simulator's own cost. "
        "The step timings include NVRTC's compile of the kernel to sm_100a PTX and the fp64 "
        "reference, as a learner waits for them. The deadlock latency is a difference of two "
        "medians of runs of about the same length, so it carries their noise (the runs' "
        "spread), which here is larger than the latency itself; it measures the instruction that blocks, the retirement of the "
        "operations still pending, the detection, and the writing of the hang report.",
        "",
        f"Deadlock case: {dl['case']}, found after {dl['instructions_to_deadlock']} "
        "executed instructions.",
        "",
    ]
    with open(path, "w") as f:
        f.write("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--runner", default=os.path.join(ROOT, "target/release/runner"))
    ap.add_argument("--out", default=os.path.join(ROOT, "assets/results"))
    ap.add_argument("--check-runs", type=int, default=None,
                    help="runs of the whole runner check sim (default: --runs)")
    ap.add_argument("--note", default="")
    ap.add_argument("--md-from", metavar="JSON",
                    help="write the .md beside JSON again from its figures (no measuring)")
    ap.add_argument("--no-build", dest="build", action="store_false",
                    help="use the runner as built (default: cargo build --release -p runner first)")
    a = ap.parse_args()
    if a.md_from:
        with open(a.md_from) as f:
            r = json.load(f)
        md = os.path.splitext(a.md_from)[0] + ".md"
        write_md(md, r)
        print(f"wrote {md}")
        return
    if a.runs < 1:
        sys.exit("error: --runs must be at least 1")
    # The commit measured: taken before anything is built or run.
    commit = sh(["git", "rev-parse", "--short", "HEAD"]).stdout.strip()
    if sh(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip():
        commit += "+uncommitted"
    if a.build:
        # The runner measured is the one this commit builds.
        b = sh(["cargo", "build", "--release", "-p", "runner"])
        if b.returncode != 0:
            sys.exit(f"error: cargo build --release -p runner failed: {b.stderr.strip()[-800:]}")
    if not os.path.exists(a.runner):
        sys.exit(f"error: no runner at {a.runner}: cargo build --release -p runner")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    r = {
        "schema": "sim-speed/1",
        "date": date,
        "time_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%H:%M"),
        "commit": commit,
        "machine": machine(a.note),
        "runs": a.runs,
        "load_before": load(),
    }
    r["deadlock"] = deadlock_bench(a.runs)
    r["step0"] = step_bench(a.runner, 0, 256, 256, 128, a.runs)
    r["step6"] = step_bench(a.runner, 6, 512, 512, 256, a.runs)
    r["seeded_bugs"] = bug_set_bench(a.runner, max(1, a.check_runs or a.runs))
    r["load_after"] = load()
    os.makedirs(a.out, exist_ok=True)
    base = os.path.join(a.out, f"sim-speed-{date}")
    with open(base + ".json", "w") as f:
        json.dump(r, f, indent=2)
        f.write("\n")
    write_md(base + ".md", r)
    print(f"wrote {base}.json and {base}.md")


if __name__ == "__main__":
    main()
