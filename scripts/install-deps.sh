#!/usr/bin/env bash
# install-deps.sh — installs the Debian packages `make test` needs and a fresh
# machine may lack. Runs apt-get only when something is missing; needs root
# (or sudo) then. `make test` and `make demo` call it first.
set -euo pipefail

missing=()
need() { # need COMMAND PACKAGE, or need /PATH/TO/FILE PACKAGE
    if [[ $1 == */* ]]; then
        [[ -e $1 ]] || missing+=("$2")
    else
        command -v "$1" >/dev/null 2>&1 || missing+=("$2")
    fi
}
need cc gcc
need make make
need pkg-config pkg-config
need valgrind valgrind
need clang-format clang-format
python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
for extra in "$@"; do # extra COMMAND:PACKAGE (or /FILE:PACKAGE) pairs from the Makefile
    need "${extra%%:*}" "${extra#*:}"
done

if ((${#missing[@]} == 0)); then
    exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=()
if [[ $(id -u) != 0 ]]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -qq
"${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
