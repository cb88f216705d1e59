#!/usr/bin/env bash
# gpu-check.sh — everything opforge's CUDA part can check on a GPU machine, in
# one run (`make gpu-check` runs this; steps 1-5 took under 5 minutes on an H200):
#
#   1. build libopforge with CUDA from source (make CUDA=1 lib);
#   2. build and run tests/cuda/test_cuda (GPU vs CPU for every CUDA row);
#   3. the same test (quick set) under compute-sanitizer memcheck (stopped
#      after $OPFORGE_MEMCHECK_TIMEOUT seconds, default 120: not a failure);
#   4. bench/gpu_bench.py: checks against torch's CUDA built-ins, then timings;
#      bench/relu_variants.cu: forms of the relu kernel vs the device copy;
#   5. the C kernel tests at AVX-512 where the host CPU has it;
#   6. the framework adapters' CUDA paths: opforge built in place with this
#      Python, then tests/torch/test_cuda.py and tests/jax/test_jax_cuda.py
#      (build/test dependencies it lacks from build/wheelhouse, see
#      scripts/gpu-wheelhouse.sh).
#
# Everything goes to stdout, ready to paste into docs/gpu.md ("Measured").
# Needs: make, cc, nvcc (PATH, $CUDA_HOME or /usr/local/cuda), python3 with
# torch (CUDA) (and jax with CUDA for step 6). No network. Exit status: 0 if
# every required step passed.
set -euo pipefail
cd "$(dirname "$0")/.."

status=0
fail() {
    echo "GPU-CHECK FAILED STEP: $*"
    status=1
}
step() { echo; echo "=== $* ($(date -u '+%Y-%m-%d %H:%M:%S UTC'))"; }

PY=${PYTHON:-python3}
JOBS=$(nproc 2>/dev/null || echo 4)

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "nvidia-smi failed"
if [[ -z "${CUDA_HOME:-}" ]] && ! command -v nvcc >/dev/null && [[ -x /usr/local/cuda/bin/nvcc ]]; then
    export CUDA_HOME=/usr/local/cuda
fi
NVCC=$(command -v nvcc || echo "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc")
"$NVCC" --version | tail -2 || true
"$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "| torch", torch.__version__, "| CUDA", torch.version.cuda, "| cuda available:", torch.cuda.is_available())' ||
    echo "python3/torch not usable"

# cuBLASLt: the copy PyTorch loads (read from /proc/self/maps after a GEMM),
# else any nvidia pip package's, else the toolkit's. The C test needs it
# named; in Python the library also finds the copy torch already loaded.
step "locating libcublasLt.so.13"
if [[ -z "${OPFORGE_CUBLASLT:-}" ]]; then
    OPFORGE_CUBLASLT=$("$PY" - <<'EOF' 2>/dev/null || true
import glob, os, site, sys
path = ""
try:
    import torch
    if torch.cuda.is_available():
        a = torch.ones(8, 8, device="cuda")
        (a @ a).sum().item()
        for line in open("/proc/self/maps"):
            if "libcublasLt.so" in line:
                path = line.split()[-1]
                break
except Exception:
    pass
if not path:
    roots = list(sys.path) + site.getsitepackages()
    for root in roots:
        hits = sorted(glob.glob(os.path.join(root, "nvidia", "**", "libcublasLt.so.13"), recursive=True))
        if hits:
            path = hits[0]
            break
print(path)
EOF
)
    if [[ -z "$OPFORGE_CUBLASLT" ]]; then
        for c in "${CUDA_HOME:-/usr/local/cuda}/lib64/libcublasLt.so.13" /usr/local/cuda/lib64/libcublasLt.so.13; do
            if [[ -e "$c" ]]; then OPFORGE_CUBLASLT=$c; break; fi
        done
    fi
fi
export OPFORGE_CUBLASLT
echo "OPFORGE_CUBLASLT=${OPFORGE_CUBLASLT:-(not found: dense will report OPF_E_UNSUPPORTED)}"

# If the build fails with warnings as errors (another host compiler may warn
# where ours does not), that is reported as a failure and the build is retried
# with warnings allowed, so the checks below still run.
MAKE_RELAXED=()
step "build: make CUDA=1 lib (-j$JOBS)"
if ! make -j"$JOBS" CUDA=1 lib; then
    fail "build with warnings as errors"
    MAKE_RELAXED=(WARN="-Wall -Wextra" NVCC_WARN="-Xcompiler -Wall,-Wextra")
    echo "retrying with warnings allowed"
    make -j"$JOBS" CUDA=1 "${MAKE_RELAXED[@]}" lib || { fail "build"; exit 1; }
fi
echo "NEEDED of build/libopforge.so:"
readelf -d build/libopforge.so | grep NEEDED || true
echo "exported symbols not named opf_*: $(nm -D --defined-only build/libopforge.so | awk '{print $3}' | grep -vc '^opf_' || true)"

step "build and run test_cuda"
if make -j"$JOBS" CUDA=1 "${MAKE_RELAXED[@]}" build/tests/test_cuda; then
    if ! build/tests/test_cuda 2>&1 | tee build/test_cuda.log; then
        fail "test_cuda"
    fi
else
    fail "build test_cuda"
fi

step "compute-sanitizer memcheck on test_cuda (quick set)"
SAN=$(command -v compute-sanitizer || true)
[[ -z "$SAN" && -x "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" ]] && SAN="${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer"
[[ -z "$SAN" && -x /usr/local/cuda/bin/compute-sanitizer ]] && SAN=/usr/local/cuda/bin/compute-sanitizer
if [[ -z "$SAN" ]]; then
    echo "compute-sanitizer not found: skipped"
elif [[ -x build/tests/test_cuda ]]; then
    set +e
    OPFORGE_TEST_QUICK=1 timeout "${OPFORGE_MEMCHECK_TIMEOUT:-120}" "$SAN" --tool memcheck --error-exitcode 97 --leak-check no \
        build/tests/test_cuda > build/memcheck.log 2>&1
    rc=$?
    set -e
    grep -E "^(FAIL|SKIP)|passed, .* failed|ERROR SUMMARY|=========" build/memcheck.log | head -60 || true
    case $rc in
    0) echo "memcheck: clean" ;;
    97) fail "compute-sanitizer memcheck reported errors (build/memcheck.log)" ;;
    124) echo "memcheck: timed out after ${OPFORGE_MEMCHECK_TIMEOUT:-120} s (not counted as a failure; see build/memcheck.log)" ;;
    *)
        if grep -q "passed, [1-9][0-9]* failed" build/memcheck.log; then
            fail "test_cuda failed under compute-sanitizer"
        else
            echo "compute-sanitizer could not run here (exit $rc); last lines:"
            tail -5 build/memcheck.log
        fi
        ;;
    esac
fi

step "bench/gpu_bench.py (checks against torch, then timings)"
if ! "$PY" bench/gpu_bench.py 2>&1 | tee build/gpu_bench.log; then
    fail "gpu_bench.py"
fi

step "bench/relu_variants.cu (elementwise kernel forms vs the device copy)"
if make CUDA=1 "${MAKE_RELAXED[@]}" build/bench/relu_variants >/dev/null; then
    if ! build/bench/relu_variants 2>&1 | tee build/relu_variants.log; then
        fail "relu_variants"
    fi
else
    fail "build relu_variants"
fi

# Not GPU work, but this host's CPU may have AVX-512, which the development
# machines lack: run the C kernel and op tests at that level here.
step "CPU kernels at ISA level avx512 on this host"
grep -m1 "model name" /proc/cpuinfo || true
if grep -q avx512bw /proc/cpuinfo; then
    for t in test_ukernels test_ops; do
        if make -j"$JOBS" CUDA=1 "${MAKE_RELAXED[@]}" "build/tests/$t" >/dev/null; then
            OPFORGE_ISA=avx512 "build/tests/$t" | grep -vE "^(PASS|SKIP)" || fail "$t at avx512"
        else
            fail "build $t"
        fi
    done
else
    echo "no AVX-512 on this CPU: skipped"
fi

# The adapters' CUDA paths, from Python: opforge built in place with this
# Python (its torch and xla adapters against this Python's torch and jax),
# then tests/torch/test_cuda.py and tests/jax/test_jax_cuda.py. Build and test
# dependencies this Python lacks come from a wheelhouse (`make gpu-wheelhouse`
# on a machine with network; carry build/wheelhouse), installed into a
# directory of its own that only this step puts on PYTHONPATH.
step "framework adapters on the GPU: opforge.torch and opforge.jax CUDA tests"
adapters_on_gpu() {
    local out=build/gpu-check wheelhouse=${OPFORGE_WHEELHOUSE:-build/wheelhouse}
    local pydeps=build/gpu-check/pydeps have_gpu=0 missing=() m
    rm -rf "$out"
    mkdir -p "$out"
    nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && have_gpu=1
    local deps_path=$PWD/$pydeps${PYTHONPATH:+:$PYTHONPATH}

    for m in cffi pycparser setuptools wheel pytest hypothesis; do
        "$PY" -c "import $m" 2>/dev/null || missing+=("$m")
    done
    if ((${#missing[@]} == 0)); then
        echo "build/test dependencies: all importable with $PY"
    elif [[ ! -d "$wheelhouse" ]]; then
        echo "missing with $PY: ${missing[*]}; no wheelhouse at $wheelhouse (make gpu-wheelhouse, then carry it)"
    elif "$PY" -m pip --version >/dev/null 2>&1; then
        echo "missing with $PY: ${missing[*]}: installing from $wheelhouse into $pydeps"
        PIP_ROOT_USER_ACTION=ignore "$PY" -m pip install --quiet --disable-pip-version-check \
            --no-index --find-links "$wheelhouse" --target "$pydeps" "${missing[@]}" ||
            echo "pip install from $wheelhouse failed"
    else
        # No pip: a wheel is a zip of what goes into site-packages.
        echo "missing with $PY: ${missing[*]}; no pip: unpacking every wheel of $wheelhouse into $pydeps"
        for m in "$wheelhouse"/*.whl; do "$PY" -m zipfile -e "$m" "$pydeps" || echo "unpacking $m failed"; done
    fi

    echo "\$ CUDA=1 $PY setup.py build_ext --inplace   (log: $out/build_ext.log)"
    if ! CUDA=1 PYTHONPATH=$deps_path "$PY" setup.py build_ext --inplace >"$out/build_ext.log" 2>&1; then
        tail -30 "$out/build_ext.log"
        fail "opforge build_ext --inplace"
        return
    fi
    echo "python/opforge/lib: $(cd python/opforge/lib && echo *)"

    # One pytest process per framework: jax and torch each hold GPU memory
    # (jax preallocates unless told not to), and a crash in one framework's
    # tests leaves the other's result standing.
    local label module file rc summary require
    for label in torch:torch:tests/torch/test_cuda.py jax:jax:tests/jax/test_jax_cuda.py; do
        IFS=: read -r label module file <<<"$label"
        require=0
        if "$PY" -c "import $module" 2>/dev/null; then
            require=1 # a missing adapter is then an error, not a skip
        else
            echo "$label: $module is not importable with $PY: its tests skip"
        fi
        echo "\$ OPFORGE_REQUIRE_FRAMEWORKS=$require $PY -m pytest -q -rfEs $file   (log: $out/pytest-$label.log)"
        set +e
        OPFORGE_REQUIRE_FRAMEWORKS=$require PYTHONPATH=$PWD/python:$deps_path XLA_PYTHON_CLIENT_PREALLOCATE=false \
            timeout 300 "$PY" -m pytest -q -rfEs -p no:cacheprovider "$file" >"$out/pytest-$label.log" 2>&1
        rc=$?
        set -e
        grep -E "^(FAILED|ERROR|SKIPPED)" "$out/pytest-$label.log" || true
        summary=$(grep -E "(passed|failed|skipped|error|no tests ran)" "$out/pytest-$label.log" | tail -1 || true)
        echo "$label CUDA tests: ${summary:-(no summary)} (exit $rc)"
        if [[ $rc == 5 && $require == 0 ]]; then
            : # nothing collected: the framework is absent, said above
        elif [[ $rc != 0 ]]; then
            [[ $rc == 124 ]] && echo "$label: timed out after 300 s"
            tail -40 "$out/pytest-$label.log"
            fail "$label CUDA tests ($file)"
        elif ((have_gpu)); then
            # On a GPU machine only the second-device test may skip.
            if ! grep -q " passed" <<<"$summary"; then
                fail "$label CUDA tests: none ran on a GPU machine"
            elif grep -E "^SKIPPED" "$out/pytest-$label.log" | grep -qv "two CUDA devices"; then
                fail "$label CUDA tests: skipped on a GPU machine"
            fi
        fi
    done
}
adapters_on_gpu

# The lines that go into docs/gpu.md, again at the end of the output.
step "summary"
grep -E "^(GPU-CHECK FAILED|FAIL)|checks: [0-9]+ failed|ratios|of copy|^(relu|dense) |^  (opforge|torch|y\.copy_)|CUDA tests:|memcheck:|^[0-9]+ (passed|failed|skipped)|^SKIP" \
    build/test_cuda.log build/memcheck.log build/gpu_bench.log build/relu_variants.log build/gpu-check/*.log 2>/dev/null | sed 's|^build/||' | head -60 || true
step "done: $([[ $status == 0 ]] && echo 'all required steps passed' || echo 'FAILURES above')"
exit $status
