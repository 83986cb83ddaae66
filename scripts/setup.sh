#!/usr/bin/env bash
# Idempotent setup for gradcomp on Debian/Ubuntu: installs the system packages that are
# missing (as root, or with passwordless sudo; otherwise prints the exact command and
# stops), checks the Rust toolchain, and creates .venv for analysis/.
set -euo pipefail
cd "$(dirname "$0")/.."

PKGS=(libopenmpi-dev openmpi-bin libclang1-14 libclang-common-14-dev libopenblas-dev pkg-config python3-venv)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# python3-venv is only needed when the python3 on PATH cannot create a venv.
if [[ " ${missing[*]-} " == *" python3-venv "* ]] && python3 -m venv --help >/dev/null 2>&1 && python3 -c 'import ensurepip' 2>/dev/null; then
  missing=("${missing[@]/python3-venv}")
fi
want=()
for p in "${missing[@]-}"; do [[ -n "$p" ]] && want+=("$p"); done
if ((${#want[@]})); then
  cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${want[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    echo "[setup] installing: ${want[*]}"
    bash -c "$cmd"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "[setup] installing with sudo: ${want[*]}"
    sudo bash -c "$cmd"
  else
    echo "[setup] missing Debian packages: ${want[*]}" >&2
    echo "[setup] run as root:  $cmd" >&2
    exit 1
  fi
fi

if ! command -v cargo >/dev/null; then
  echo "[setup] cargo not found: install the Rust toolchain (https://rustup.rs, stable) and re-run" >&2
  exit 1
fi
# `make test` starts with `cargo fmt --check` and `cargo clippy` (make lint).
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  echo "[setup] cargo fmt or cargo clippy is missing: run  rustup component add rustfmt clippy" >&2
  exit 1
fi

# Python venv for analysis/ (re-installed when requirements change).
if [[ ! -x .venv/bin/python ]]; then
  echo "[setup] creating .venv"
  python3 -m venv .venv
fi
req=analysis/requirements.txt
stamp=.venv/.requirements.sha256
if [[ ! -f $stamp ]] || ! sha256sum --status -c "$stamp" 2>/dev/null; then
  echo "[setup] installing analysis requirements into .venv"
  .venv/bin/python -m pip install -q --disable-pip-version-check -r "$req"
  sha256sum "$req" > "$stamp"
fi
