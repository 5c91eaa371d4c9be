#!/bin/bash
# GPU check of the workshop branch (about 2 minutes on an H100). Run from the repository root
# with the runner at $R and WORKBOOK_CUDA set; writes $OUT/workshop/log.txt. Every line of the
# log starting with PASS or FAIL is one check; success is no FAIL line (the last line counts).
set -u
mkdir -p "$OUT/workshop"
LOG="$OUT/workshop/log.txt"
: > "$LOG"
fails=0
check() { # name, expected exit code, grep pattern on stdout+stderr (or ""), command...
    local name=$1 want=$2 pat=$3; shift 3
    local out rc
    out=$(timeout 120 "$@" 2>&1); rc=$?
    { echo "== $name: $*"; echo "$out" | tail -15; echo "rc=$rc"; } >> "$LOG"
    if [ "$rc" = "$want" ] && { [ -z "$pat" ] || echo "$out" | grep -q -- "$pat"; }; then
        echo "PASS $name" >> "$LOG"
    else
        echo "FAIL $name (rc $rc, want $want, pattern '$pat')" >> "$LOG"; fails=$((fails+1))
    fi
}
nvidia-smi --query-gpu=name,memory.total --format=csv >> "$LOG" 2>&1
total_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 | head -1)
# 1. A shape no H100 holds (103 GB) is refused from the GPU's free memory, before any compile.
if [ "${total_mib:-999999}" -lt 120000 ]; then
    check memory-bound 2 "GB free of" "$R" step 0 --arch sm_90a --m 131072 --n 131072 --k 64
    check memory-bound-bench 2 "GB free of" "$R" bench --steps 0 --shapes 131072x131072x64 --out "$OUT/workshop"
else
    echo "SKIP memory-bound: GPU 0 has ${total_mib} MiB (the 103 GB shape would fit)" >> "$LOG"
fi
# 2. --device on step and selftest.
check step-device 0 "verif" "$R" step 0 --arch sm_90a --device 0 --m 256 --n 256 --k 128 --iters 0
check selftest-device 0 "" "$R" selftest --device 0 --m 1024 --n 1024 --k 1024
# 3. --emu-seed: warned when nothing is emulated, silent when the Blackwell kernel is.
check emu-seed-twin 0 "warning: --emu-seed" "$R" step 0 --arch sm_90a --emu-seed 3 --m 256 --n 256 --k 128 --iters 0
out=$(timeout 120 "$R" step 0 --arch sm_100a --emu-seed 3 --m 256 --n 256 --k 128 --iters 0 2>&1); rc=$?
{ echo "== emu-seed-emulated"; echo "$out" | tail -8; echo "rc=$rc"; } >> "$LOG"
if [ $rc = 0 ] && ! echo "$out" | grep -q "warning: --emu-seed"; then echo "PASS emu-seed-emulated" >> "$LOG"; else echo "FAIL emu-seed-emulated" >> "$LOG"; fails=$((fails+1)); fi
# 4. A real grading leaves nothing in the temp folder (public tests only: no secret).
T=$(mktemp -d)
check grade-public 0 "points" env TMPDIR="$T" "$R" grade steps/step0_naive/src/kernel_sm90.cu --rubric rubrics/step0-hopper.toml --public-only
left=$(ls -A "$T" | wc -l)
if [ "$left" = 0 ]; then echo "PASS grade-leaves-no-temp" >> "$LOG"; else echo "FAIL grade-leaves-no-temp: $(ls -A "$T")" >> "$LOG"; fails=$((fails+1)); fi
rm -rf "$T"
echo "RESULT: $fails failed" >> "$LOG"
