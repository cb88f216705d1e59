#!/bin/sh
# check-vectorized.sh — did the compiler vectorize every authored kernel's
# loop, in every ISA build?
#
#   scripts/check-vectorized.sh OBJECT...      (make check-vectorized; make test-neon
#                                               with OBJDUMP=aarch64-linux-gnu-objdump)
#
# OPF_ELTWISE_KERNEL and OPF_ROW_KERNEL compile an author's body once per ISA
# level (opf__ew_<name>_f32, _f32_avx2, _f32_avx512, the same for f64; rows:
# opf__row_<name>_...), and rely on the compiler to vectorize its loop. When
# it does not, nothing fails: the kernel computes the same values, 4-16 times
# slower (gelu's float build for AVX2 and SSE stayed scalar, 10 ns an element
# on a Zen 3, until its clamp was written as a blend: GCC could if-convert the
# conditional expression only with AVX-512's masks). This check disassembles
# the objects (objdump) and fails for a kernel build with floating-point
# arithmetic and none on whole vectors: for _avx2 no ymm register, for
# _avx512 no ymm or zmm, for the baseline no packed SSE arithmetic (addps,
# mulpd, ...); on AArch64, whose baseline build is the NEON one, no
# arithmetic on vector registers (fmla v0.4s, ...). A build with no floating-point arithmetic at all (one that
# calls another) is not checked, nor a baseline build that calls fma or fmaf:
# the x86-64 baseline has no FMA instruction, so a kernel that needs one
# rounding per a*b+c calls libm for it (the AVX2 and AVX-512 builds, and NEON's
# baseline, have the instruction). The other known exceptions are listed
# below, each with its reason.
set -eu
[ $# -gt 0 ] || { echo "usage: $0 OBJECT..." >&2; exit 2; }

# Kernel builds left scalar, known (a regular expression on the whole name)
# and why: the row ops' second-order rows and the forward mode of their
# gradient rows (softmax_grad_grad, rms_norm_grad_jvp, ...) in float, at
# every level, and in double for the baseline. They compute in double, with
# each optional input tested per element (absent: zero); GCC vectorizes the
# double builds for AVX2 and AVX-512, but not the float builds' conversions
# under those tests, nor SSE2's. They run only in second derivatives.
allowed='^opf__row_[a-z_]+_grad_(grad|jvp)[a-z_]*_f(32(_avx2|_avx512)?|64)$'

status=0
for obj in "$@"; do
    "${OBJDUMP:-objdump}" -dr --no-show-raw-insn "$obj" | awk -v obj="$obj" -v allowed="$allowed" '
        function flush() {
            if (name == "" || fp == 0 || (isa == "base" && fmacall)) { return }
            ok = (isa == "avx2") ? ymm > 0 : (isa == "avx512") ? ymm + zmm > 0 : packed > 0
            checked++
            if (!ok && name ~ allowed) { printf "scalar (allowed): %s %s\n", obj, name; return }
            if (!ok) {
                printf "NOT VECTORIZED: %s %s (%d floating-point instructions, none on whole vectors)\n", obj, name, fp
                bad++
            }
        }
        /^[0-9a-f]+ <.*>:$/ {
            flush()
            name = ""; fp = ymm = zmm = packed = fmacall = 0
            if (match($0, /opf__(ew|row)_[A-Za-z0-9_]*_f(32|64)(_avx2|_avx512)?/)) {
                name = substr($0, RSTART, RLENGTH)
                isa = name ~ /_avx512$/ ? "avx512" : name ~ /_avx2$/ ? "avx2" : "base"
            }
            next
        }
        name != "" && /R_X86_64_PLT32[ \t]+fmaf?[-+]/ { fmacall = 1; next }
        /file format elf64-littleaarch64/ { arm = 1 }
        name != "" && NF >= 2 && arm {
            if ($2 ~ /^f(add|sub|mul|div|sqrt|max|min|n?madd|n?msub|mla|mls)$/) {
                fp++
                packed += $3 ~ /^v[0-9]+\.[0-9]*[sd]/
            }
            next
        }
        name != "" && NF >= 2 {
            op = $2
            if (op ~ /^v?(add|sub|mul|div|sqrt|max|min|fn?m(add|sub)[0-9]*)[ps][sd]$/) { fp++ }
            if (op ~ /^v?(add|sub|mul|div|sqrt|max|min|fn?m(add|sub)[0-9]*)p[sd]$/) { packed++ }
            if ($0 ~ /%ymm/) { ymm++ }
            if ($0 ~ /%zmm/) { zmm++ }
        }
        END {
            flush()
            if (checked > 0) { printf "%s: %d kernel builds checked, %d not vectorized\n", obj, checked, bad }
            exit bad > 0
        }' || status=1
done
exit $status
