#!/bin/sh
# check-math.sh — include/opforge_math.h: does it compile everywhere, and does
# every function vectorize?
#
#   scripts/check-math.sh            header compiles (C11 gcc/clang, C++17 g++/clang++,
#                                    nvcc when found), then the vectorization table
#   scripts/check-math.sh --bench    bench/math_bench.c built with gcc -O3 (and clang), run
#
# The vectorization check compiles, per compiler and per target (baseline,
# target("avx2,fma"), target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")),
# one loop `y[i] = opf_<fn>(x[i])` per function and dtype at -O3 with
# `#pragma GCC ivdep`, as opforge compiles an author's loop, and reports for
# each: "vec" when the compiler says the loop was vectorized (gcc
# -fopt-info-vec-optimized, clang -Rpass=loop-vectorize) and the function's
# code has no call instruction (no libm call, nothing left un-inlined);
# "CALL" when a call remains; "-" when the loop stayed scalar. sqrt is checked
# twice: plain, and with -fno-math-errno, which it needs.
# Exits non-zero if anything fails to vectorize other than plain sqrt and, with
# GCC for the x86-64 baseline (SSE2), the double functions (see the notes printed).
set -eu
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "${1:-}" = --bench ]; then
    for cc in gcc clang; do
        command -v $cc >/dev/null || continue
        echo "== bench/math_bench.c, $cc -O3"
        $cc -std=c11 -D_POSIX_C_SOURCE=200809L -O3 -Wall -Wextra -Werror -Wno-unknown-pragmas -Iinclude \
            bench/math_bench.c -o "$tmp/math_bench" -lm
        "$tmp/math_bench"
    done
    exit 0
fi

WARN="-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes"
status=0

echo "== the header compiles"
printf '#include "opforge_math.h"\nint opf_math_check_main(void);\nint opf_math_check_main(void) { return (int)opf_exp(1.0f); }\n' >"$tmp/h.c"
for cc in gcc clang; do
    if command -v $cc >/dev/null; then
        $cc -std=c11 $WARN -pedantic -Iinclude -c "$tmp/h.c" -o "$tmp/h.o" && echo "  $cc -std=c11 -pedantic: ok"
    fi
done
printf '#include "opforge_math.h"\nint main() { return (int)(opf_exp(1.0f) + opf_erf(0.5) + opf_select(true, 1.0f, 2.0f)); }\n' >"$tmp/h.cpp"
for cxx in g++ clang++; do
    if command -v $cxx >/dev/null; then
        $cxx -std=c++17 -Wall -Wextra -Werror -Wshadow -Iinclude -c "$tmp/h.cpp" -o "$tmp/h.o" && echo "  $cxx -std=c++17: ok"
    fi
done
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
if [ -x "$nvcc" ]; then
    cat >"$tmp/h.cu" <<'EOF'
#include "opforge_math.h"
__global__ void k(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = opf_erf(x[i]) + opf_tanh(x[i]) + opf_log1p(opf_exp(x[i])) + (float)opf_sigmoid((double)x[i]);
}
int main() { return (int)opf_exp(1.0f); }
EOF
    "$nvcc" -std=c++17 -Iinclude -Xcompiler -Wall,-Wextra,-Werror -c "$tmp/h.cu" -o "$tmp/h.o" && echo "  nvcc (host and device): ok"
fi

echo "== vectorization (-O3, #pragma GCC ivdep; vec = vectorized, no call left)"
FUNS1="exp expm1 log log1p tanh erf sigmoid softplus fabs sqrt"
FUNS2="fmin fmax minimum maximum"
gen() { # $1 = target attribute or empty, $2 = extra suffix
    # (a target build says it has FMA, as opforge's kernel builds do)
    [ -n "$1" ] && fma="    OPF_MATH_USE_FMA" || fma=""
    echo '#include "opforge_math.h"'
    for t in f32 f64; do
        [ $t = f32 ] && T=float || T=double
        for f in $FUNS1; do
            echo "$1 void k_${f}_$t(long n, const $T *restrict x, $T *restrict y);"
            echo "$1 void k_${f}_$t(long n, const $T *restrict x, $T *restrict y) {"
            echo "$fma"
            echo "#pragma GCC ivdep"
            echo "    for (long i = 0; i < n; i++) y[i] = opf_${f}_$t(x[i]); /* LOOP k_${f}_$t */"
            echo "}"
        done
        for f in $FUNS2; do
            echo "$1 void k_${f}_$t(long n, const $T *restrict x, $T *restrict y);"
            echo "$1 void k_${f}_$t(long n, const $T *restrict x, $T *restrict y) {"
            echo "#pragma GCC ivdep"
            echo "    for (long i = 0; i < n; i++) y[i] = opf_${f}_$t(x[i], y[i]); /* LOOP k_${f}_$t */"
            echo "}"
        done
        echo "$1 void k_log1pexp_$t(long n, const $T *restrict x, $T *restrict y);"
        echo "$1 void k_log1pexp_$t(long n, const $T *restrict x, $T *restrict y) {"
        echo "$fma"
        echo "#pragma GCC ivdep"
        echo "    for (long i = 0; i < n; i++) y[i] = opf_select(x[i] > 20, x[i], opf_log1p(opf_exp(x[i]))); /* LOOP k_log1pexp_$t */"
        echo "}"
    done
}

names() { grep -o 'LOOP k_[a-z0-9_]*' "$1" | sed 's/LOOP //'; }

# $1 = compiler, $2 = label, $3 = target attribute, $4 = extra flags
check() {
    cc=$1 label=$2 attr=$3 extra=$4
    src="$tmp/v_${cc}_$label.c"
    gen "$attr" >"$src"
    obj="$tmp/v_${cc}_$label.o"
    log="$tmp/v_${cc}_$label.log"
    if [ "$cc" != clang ]; then
        $cc -std=c11 -O3 $WARN $extra -Iinclude -c "$src" -o "$obj" -fopt-info-vec-optimized 2>"$log"
    else
        # clang does not know `#pragma GCC ivdep` (restrict suffices for it)
        clang -std=c11 -O3 $WARN -Wno-unknown-pragmas $extra -Iinclude -c "$src" -o "$obj" -Rpass=loop-vectorize 2>"$log"
    fi
    line="  $cc $label:"
    objdump=objdump calls='^call'
    case $cc in aarch64-*) objdump=aarch64-linux-gnu-objdump calls='^blr?$' ;; esac
    for name in $(names "$src"); do
        ln=$(grep -n "LOOP $name " "$src" | cut -d: -f1)
        if grep -q "^$src:$ln:.*\(optimized: loop vectorized\|remark: vectorized loop\)" "$log"; then
            if $objdump -d --no-show-raw-insn "$obj" | awk -v f="<$name>:" '$2 == f {p = 1; next} /^$/ {p = 0} p {print $2}' |
                grep -qE "$calls"; then
                r=CALL
            else
                r=vec
            fi
        else
            r=-
        fi
        short=$(echo "$name" | sed 's/^k_//')
        line="$line $short=$r"
        case "$cc:$label:$name:$r:$extra" in
        *:k_sqrt_*:*:) ;;            # plain sqrt: reported, not required
        gcc:baseline:k_*_f64:*) ;;   # GCC 12 on SSE2: see the note below
        *:vec:*) ;;
        *) status=1 ;;
        esac
    done
    echo "$line"
}

for cc in gcc clang; do
    command -v $cc >/dev/null || continue
    check $cc baseline "" ""
    check $cc avx2 '__attribute__((target("avx2,fma")))' ""
    check $cc avx512 '__attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))' ""
    check $cc avx2-no-math-errno '__attribute__((target("avx2,fma")))' "-fno-math-errno"
done
if command -v aarch64-linux-gnu-gcc >/dev/null; then
    check aarch64-linux-gnu-gcc neon "" ""
    check aarch64-linux-gnu-gcc neon-no-math-errno "" "-fno-math-errno"
fi
echo "notes: sqrt needs -fno-math-errno; GCC 12 does not vectorize the double functions for the x86-64"
echo "  baseline (SSE2): it cannot blend 64-bit lanes under a double comparison mask without SSE4.2"
echo "  (clang does; AVX2, AVX-512 and NEON builds are vectorized by both)"
[ $status = 0 ] && echo "all vectorized (apart from the notes)" || echo "NOT ALL VECTORIZED"
exit $status
