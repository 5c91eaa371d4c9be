#!/usr/bin/env bash
# The grader's identity, hidden-to-visible, timing and screen cases on a GPU. First only the
# parts they live in (WORKBOOK_GRADE_SELFTEST_ONLY=class,step0-blackwell): the step-0 class
# (stock, seeded bug, every cheat graded with it, among them metadata-in-submission,
# hidden-flag-signal, hidden-timing and the honest control honest-comments-and-literals) and
# the step-0 Blackwell group under the emulation (the arch-conditional cheats nv-if-target,
# nvvm-reflect, defined-header-macro, and the honest control honest-tmem-used). Then the whole
# selftest, if the time allows. Expect every row "yes"; the results.json of the new cases show
# one word per hidden test and an execution_time without hidden-timing's 12 s of spinning.
# Run from the repository root with R=path/to/runner (default target/release/runner).
set -u
R=${R:-target/release/runner}
out="$OUT/grade-selftest"
mkdir -p "$out"
part="$out/part"
start=$(date +%s)
WORKBOOK_GRADE_SELFTEST_ONLY=class,step0-blackwell timeout 400 "$R" grade --selftest --out "$part" \
  >"$out/part-stdout.txt" 2>"$out/part-stderr.txt"
echo "part: exit $? after $(( $(date +%s) - start )) s" >>"$out/summary.txt"
cp "$part/selftest.md" "$out/part-selftest.md" 2>/dev/null || tail -n 40 "$out/part-stderr.txt" >"$out/part-selftest.md"
tail -n 2 "$out/part-stdout.txt" >>"$out/summary.txt" 2>/dev/null
for c in metadata-in-submission hidden-flag-signal hidden-timing honest-comments-and-literals; do
  for f in grade.json results.json; do
    cp "$part/class-grades/cheat-$c/$f" "$out/$c-$f" 2>/dev/null
  done
done
grep -h '"execution_time"\|"elapsed_s"\|"visible_elapsed_s"\|"hidden_elapsed_s"' \
  "$out"/hidden-timing-*.json >>"$out/summary.txt" 2>/dev/null
timeout 60 tar -C "$out" -czf "$out/part.tgz" part && rm -rf "$part"
left=$(( 560 - ($(date +%s) - start) ))
if [ "$left" -gt 120 ]; then
  timeout "$left" "$R" grade --selftest --out "$out/all" >"$out/all-stdout.txt" 2>"$out/all-stderr.txt"
  echo "all: exit $? after $(( $(date +%s) - start )) s in all" >>"$out/summary.txt"
  cp "$out/all/selftest.md" "$out/all-selftest.md" 2>/dev/null
  tail -n 2 "$out/all-stdout.txt" >>"$out/summary.txt" 2>/dev/null
  timeout 30 tar -C "$out" -czf "$out/all.tgz" all && rm -rf "$out/all"
fi
cat "$out/summary.txt"
