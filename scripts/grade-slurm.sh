#!/usr/bin/env bash
# Grade a class on a Slurm cluster: an array of N tasks, one shard of the class each, then one
# job that merges the shards. Run it on the login node; it submits itself twice:
#
#   GRADE_SBATCH_ARGS="--gres=gpu:1 --time=02:00:00" RUNNER=path/to/runner \
#     scripts/grade-slurm.sh N CLASS RUBRIC OUT [grader options...]
#
# - an array job of N tasks: task I runs
#     runner grade --batch CLASS --rubric RUBRIC --shard I/N --out OUT/shard-I [grader options...]
# - a job that starts once every task has succeeded (--dependency=afterok) and runs
#     runner grade merge OUT/shard-* --out OUT
#   which writes OUT/summary.csv and OUT/summary.md, after checking that every student of CLASS
#   was graded exactly once.
#
# Grader options go to every task unchanged: `--secret-file FILE` for hidden tests (a file every
# node can read, outside the class folder), `--compile-only` for a pre-screen without a GPU
# (policy, compile and the rubric's SASS requirements). GRADE_SBATCH_ARGS (word-split) is given to
# both sbatch calls: the GPU, the partition, the time limit. RUNNER defaults to `runner` on the
# PATH; the tasks inherit the submitting shell's environment (sbatch's default --export=ALL).
# Each task's log is OUT/slurm-<array job>_<task>.out, the merge's OUT/slurm-<job>-merge.out.
# Prints the two job ids on its last line: `grade-slurm: array job A, merge job M`.
#
# The jobs run this same file with a first argument naming their part: `shard N CLASS RUBRIC OUT
# [grader options...]` (in a task of the array) and `merge N CLASS RUBRIC OUT` (which also works by
# hand, to merge again).
set -euo pipefail

RUNNER=${RUNNER:-runner}

usage() {
    echo "usage: $0 N CLASS RUBRIC OUT [grader options...]" >&2
    exit 2
}

# The students of CLASS as `runner grade --batch` counts them: subfolders not starting with a dot.
count_students() {
    find "$1" -mindepth 1 -maxdepth 1 -type d ! -name '.*' | wc -l
}

role=submit
case "${1:-}" in
shard | merge)
    role=$1
    shift
    ;;
esac

case "$role" in
submit)
    [ $# -ge 4 ] || usage
    n=$1 class=$2 rubric=$3 out=$4
    shift 4
    if ! [[ $n =~ ^[1-9][0-9]*$ ]]; then
        echo "error: N must be a positive whole number (got '$n')" >&2
        exit 2
    fi
    [ -d "$class" ] || { echo "error: the class folder $class does not exist" >&2; exit 2; }
    [ -f "$rubric" ] || { echo "error: the rubric $rubric does not exist" >&2; exit 2; }
    # Absolute paths: the jobs may start in another folder of another node.
    class=$(cd "$class" && pwd)
    rubric=$(cd "$(dirname "$rubric")" && pwd)/$(basename "$rubric")
    mkdir -p "$out"
    out=$(cd "$out" && pwd)
    self=$(readlink -f "$0")
    # shellcheck disable=SC2086 # GRADE_SBATCH_ARGS is a list of sbatch options
    array=$(sbatch --parsable ${GRADE_SBATCH_ARGS:-} \
        --job-name=grade-shards --array="0-$((n - 1))" \
        --output="$out/slurm-%A_%a.out" \
        "$self" shard "$n" "$class" "$rubric" "$out" "$@")
    array=${array%%;*}
    # shellcheck disable=SC2086
    merge=$(sbatch --parsable ${GRADE_SBATCH_ARGS:-} \
        --job-name=grade-merge --dependency="afterok:$array" --kill-on-invalid-dep=yes \
        --output="$out/slurm-%j-merge.out" \
        "$self" merge "$n" "$class" "$rubric" "$out")
    merge=${merge%%;*}
    echo "grade-slurm: array job $array, merge job $merge"
    ;;
shard)
    [ $# -ge 4 ] || usage
    n=$1 class=$2 rubric=$3 out=$4
    shift 4
    i=${SLURM_ARRAY_TASK_ID:?a shard task runs as a task of the array job}
    exec "$RUNNER" grade --batch "$class" --rubric "$rubric" --shard "$i/$n" \
        --out "$out/shard-$i" "$@"
    ;;
merge)
    [ $# -ge 4 ] || usage
    n=$1 class=$2 out=$4
    # A shard with no student (more tasks than students) writes no grade.json: merge the others.
    shards=()
    for ((i = 0; i < n; i++)); do
        if compgen -G "$out/shard-$i/*/grade.json" >/dev/null; then
            shards+=("$out/shard-$i")
        fi
    done
    [ ${#shards[@]} -gt 0 ] || { echo "error: no shard of $out holds a grade.json" >&2; exit 1; }
    log=$("$RUNNER" grade merge "${shards[@]}" --out "$out")
    printf '%s\n' "$log"
    graded=$(printf '%s\n' "$log" | sed -n 's/^merged \([0-9][0-9]*\) students into .*/\1/p')
    expected=$(count_students "$class")
    if [ "${graded:-0}" -ne "$expected" ]; then
        echo "error: $class has $expected students but the shards graded $graded" >&2
        exit 1
    fi
    echo "grade-slurm: $graded students merged into $out/summary.csv"
    ;;
esac
