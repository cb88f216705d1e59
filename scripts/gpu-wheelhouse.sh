#!/usr/bin/env bash
# gpu-wheelhouse.sh — binary wheels of the Python build and test dependencies
# that the "framework adapters on the GPU" step of scripts/gpu-check.sh may
# need and a GPU machine without network may lack (`make gpu-wheelhouse`).
#
# Run it on a machine with PyPI access; it downloads, for CPython 3.12 on
# manylinux x86_64 (the GPU machine's Python), wheels of cffi, pytest,
# hypothesis, setuptools and wheel — at the versions pinned in
# requirements-dev.txt — and of their dependencies, into build/wheelhouse/
# (or $1). Not torch, jax or numpy: the GPU machine has them (numpy comes
# with jax). Carry that directory to the GPU machine; gpu-check.sh installs
# from it with `pip install --no-index --find-links build/wheelhouse`.
#
# Environment: PYTHON (the pip to run, default python3; any version),
# WHEELHOUSE_PYTHON_VERSION (default 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
DEST=${1:-build/wheelhouse}
PYVER=${WHEELHOUSE_PYTHON_VERSION:-3.12}
ABI="cp${PYVER//./}"
PACKAGES=(cffi pytest hypothesis setuptools wheel)

# name==version for each package pinned in requirements-dev.txt, else the bare name.
specs=()
for p in "${PACKAGES[@]}"; do
    pin=$(grep -iE "^${p}==[^ ;]+\s*$" requirements-dev.txt | head -1 | tr -d '[:space:]' || true)
    specs+=("${pin:-$p}")
done

mkdir -p "$DEST"
rm -f "$DEST"/*.whl
echo "downloading for CPython $PYVER manylinux x86_64 into $DEST: ${specs[*]}"
# --only-binary with --platform/--python-version: wheels only, resolved for
# the target interpreter, not for the one running pip. manylinux2014 and
# newer tags: pip accepts older manylinux tags under a newer platform.
"$PY" -m pip download --quiet --disable-pip-version-check --no-cache-dir \
    --only-binary=:all: --implementation cp --python-version "$PYVER" --abi "$ABI" --abi abi3 --abi none \
    --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform any \
    --dest "$DEST" "${specs[@]}"

echo "wheels:"
(cd "$DEST" && ls -1 ./*.whl | sed 's|^\./|  |')
echo "size of $DEST: $(du -sh "$DEST" | cut -f1) ($(du -sk "$DEST" | cut -f1) KiB; the device tool carries up to 64 MiB)"
