#!/usr/bin/env bash
# The grader after Blackwell rubrics moved to the PTX simulator: the Hopper path must be what it
# was, and the emulation path (now `--on-gpu`) must still work. On an H100/H200, from the
# repository root, with R=path/to/runner (default target/release/runner); builds nothing.
# 1. The Hopper parts of the selftest (the step-0 class, every stock twin, steps 3 and 5's twins
#    under their rubrics): every row "yes", as before.
# 2. The Blackwell parts (on the simulator; they need no GPU but run here too): every row "yes".
# 3. `--on-gpu`: step 3's Blackwell kernel under the tcgen05 emulation: tests passed, speed and
#    the two executed requirements skipped (the native code never runs under the emulation);
#    the nvvm-reflect cheat refused by the emulation's screen (compile status "rejected").
set -u
R=${R:-target/release/runner}
out="$OUT/simgrade6"
mkdir -p "$out"
start=$(date +%s)
note() { echo "$*" >>"$out/summary.txt"; }
hopper=class,step1-hopper,step2-hopper,step3-hopper,step4-hopper,step5-hopper,step6-hopper,step3-hopper-rubric,step5-hopper-rubric
WORKBOOK_GRADE_SELFTEST_ONLY=$hopper timeout 420 "$R" grade --selftest --out "$out/hopper" \
  >"$out/hopper-stdout.txt" 2>"$out/hopper-stderr.txt"
note "hopper parts: exit $? after $(( $(date +%s) - start )) s"
cp "$out/hopper/selftest.md" "$out/hopper-selftest.md" 2>/dev/null
tail -n 1 "$out/hopper-stdout.txt" >>"$out/summary.txt" 2>/dev/null
WORKBOOK_GRADE_SELFTEST_ONLY=step0-blackwell,step3-blackwell timeout 240 "$R" grade --selftest \
  --out "$out/blackwell" >"$out/blackwell-stdout.txt" 2>"$out/blackwell-stderr.txt"
note "blackwell parts (simulator): exit $? after $(( $(date +%s) - start )) s"
cp "$out/blackwell/selftest.md" "$out/blackwell-selftest.md" 2>/dev/null
tail -n 1 "$out/blackwell-stdout.txt" >>"$out/summary.txt" 2>/dev/null
secret="$out/secret.txt"
echo "simgrade6 on-gpu check: not a real secret" >"$secret"
mkdir -p "$out/sub/stock" "$out/sub/reflect"
cp steps/step3_collective_mma/src/kernel.cu "$out/sub/stock/kernel.cu"
sed 's|  const int num_k_blocks = K / TILE_K;|  const int num_k_blocks = __nvvm_reflect("__CUDA_ARCH") >= 1000 ? K / TILE_K / 2 : K / TILE_K;|' \
  steps/step3_collective_mma/src/kernel.cu >"$out/sub/reflect/kernel.cu"
for s in stock reflect; do
  timeout 240 "$R" grade "$out/sub/$s" --rubric rubrics/step3-blackwell.toml --on-gpu \
    --secret-file "$secret" --out "$out/on-gpu-$s" >"$out/on-gpu-$s.txt" 2>&1
  note "on-gpu $s: exit $?"
  head -n 12 "$out/on-gpu-$s.txt" >>"$out/summary.txt"
done
timeout 60 tar -C "$out" -czf "$out/selftests.tgz" hopper blackwell && rm -rf "$out/hopper" "$out/blackwell"
cat "$out/summary.txt"
