#!/bin/sh
# ab.sh — the library at a revision against the working tree's, in one process
# (bench/ab.c): each case timed alternately on both builds, with a copy of its
# input timed beside it, on one thread and on all.
#
#   scripts/ab.sh [REV] [CASE ...]      (make ab BASE=REV CASES='...')
#
# REV (default HEAD) is built from `git archive` into build/ab/REV-<hash>
# (CPU only, kept for the next run); the working tree into build/ab/worktree. Without
# CASEs it runs the transformer block's forward rows and a few gradients at
# [8192, 4096] and at [262144, 64] (rows of 16 KiB and of 256 bytes take
# different paths: a change can move one and not the other), the row ops at
# [2097152, 8] (a router's softmax over 8 experts: rows that cost little
# beside the engine's work per call), and the elementwise ops at 16M elements. A CASE is OP:SHAPE[,SHAPE...] (bench/ab.c).
# Each case: REV's build, the working tree's, then REV's again (its ratio to
# the first is the noise of this run: on a shared 2-core VM, identical code
# has measured 0.88-1.5x itself at 15 reps), best of REPS (default 30) each.
# Times move by tens of percent between runs on a shared machine; the ratios
# of one run, and the "per copy" column, are the figures to read.
set -eu
cd "$(dirname "$0")/.."
rev=${1:-HEAD}
[ $# -gt 0 ] && shift
hash=$(git rev-parse --short "$rev")
base="build/ab/$(printf '%s' "$rev" | tr -c 'A-Za-z0-9._-' '_')-$hash"
jobs=$(nproc 2>/dev/null || echo 2)

if [ ! -e "$base/libopforge.so" ]; then
    echo "== building $rev ($hash) into $base"
    rm -rf "$base.src" && mkdir -p "$base.src"
    git archive "$rev" | tar -x -C "$base.src"
    make -C "$base.src" -j"$jobs" lib CUDA=0 BUILD="$(pwd)/$base" >/dev/null
    rm -rf "$base.src"
fi
work=build/ab/worktree
echo "== building the working tree into $work"
make -j"$jobs" lib "$work/bench/ab" CUDA=0 BUILD="$work" >/dev/null

if [ $# -eq 0 ]; then
    big=8192x4096
    short=262144x64
    set --
    for shape in $big $short; do
        m=${shape#*x}
        set -- "$@" softmax:$shape log_softmax:$shape "layer_norm:$shape,$m,$m" "rms_norm:$shape,$m" \
            gelu:$shape silu:$shape "add:$shape,$m" "softmax_grad:$shape,$shape" "rms_norm_grad:$shape,${shape%x*},$shape,$m"
    done
    set -- "$@" softmax:2097152x8 log_softmax:2097152x8 rms_norm:2097152x8,8 relu:16777216 scale:16777216 \
        add:16777216,16777216
fi
# REV's build comes a second time, last: its ratio to the first line is this
# run's noise, the yardstick for the working tree's.
for threads in 1 "$jobs"; do
    "$work/bench/ab" -t "$threads" -n "${REPS:-30}" -copy "$base/libopforge.so" "$work/libopforge.so" \
        "$base/libopforge.so" -- "$@"
done
