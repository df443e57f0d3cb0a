#!/usr/bin/env bash
# dev.sh — the two commands of the README.
#   ./dev.sh run    install what is missing, build, start the pipescope app
#   ./dev.sh test   install what is missing, build, run the whole test suite
# Both are idempotent and quiet when all is well: apt-get runs only when a
# package is missing, meson configures once, ninja rebuilds what changed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build="${PIPESCOPE_BUILD_DIR:-$here/build}"
# ccache (meson's build, tests/fuzz/run-fuzz.sh): paths under the checkout
# hashed relative to it and the build folder not hashed, so that a fresh
# clone elsewhere (CI's) reuses what an earlier one compiled; without these
# every clone missed (test-fuzz's sanitizer build 88 s instead of 22 s).
# The objects' debug info then names the first clone's folders.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$here}" CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"

# Debian 12 packages the build and the tests need (ccache: meson and
# tests/fuzz/run-fuzz.sh compile through it where it is, so a second run
# rebuilds only what changed).
packages=(gcc pkg-config meson ninja-build python3 python3-venv python3-dev libglib2.0-dev libopenblas-dev zlib1g-dev
          libopenmpi-dev openmpi-bin
          libcairo2-dev libgtk-4-dev libadwaita-1-dev
          xvfb xauth dbus-x11 desktop-file-utils appstream clang ccache)

die() { echo "dev.sh: $*" >&2; exit 1; }

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  command -v apt-get >/dev/null || die "apt-get not found; install by hand: ${missing[*]}"
  echo "dev.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq >/dev/null || die "apt-get update failed"
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

build_all() {
  local log="$build/dev-build.log"
  mkdir -p "$build"
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$here" >"$log" 2>&1 || { cat "$log" >&2; die "meson setup failed (log above)"; }
  fi
  ninja -C "$build" >"$log" 2>&1 || { cat "$log" >&2; die "build failed (log above)"; }
}

# PyTorch for the tests of PyTorch jobs (tests/pytorch/): pinned, from PyPI,
# into virtual environments kept in the user's cache and reused (each wheel
# brings its CUDA libraries: about 5 GB, once; the tests use the CPU and
# gloo).  2.15 is the newest; 2.11 is what the GPU machine has.
# PIPESCOPE_NO_TORCH=1 skips them, and those tests then skip.
torch_venv() {   # VERSION VARIABLE
  local version=$1 var=$2
  local venv="${XDG_CACHE_HOME:-$HOME/.cache}/pipescope/torch-$version"
  [ "$version" = 2.15.0 ] && [ -n "${PIPESCOPE_TORCH_VENV:-}" ] && venv=$PIPESCOPE_TORCH_VENV
  if [ ! -f "$venv/.pipescope-ready" ]; then
    echo "dev.sh: installing PyTorch $version into $venv (once, about 5 GB)" >&2
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv" || die "python3 -m venv failed (apt-get install python3-venv)"
    "$venv/bin/pip" install -q --disable-pip-version-check "torch==$version" numpy \
      >"$venv.log" 2>&1 || { tail -5 "$venv.log" >&2; die "pip install torch==$version failed (log: $venv.log); PIPESCOPE_NO_TORCH=1 skips the PyTorch tests"; }
    "$venv/bin/python" -c "import torch.distributed.pipelining" \
      || die "PyTorch in $venv does not import"
    touch "$venv/.pipescope-ready"
  fi
  export "$var=$venv/bin/python"
}
# megatron-core for the tests of Megatron-LM jobs (tests/pytorch/megatron-*):
# without its optional dependencies (its schedules need torch and packaging
# only), into the same environments, behind a marker of its own so that an
# environment made before this step gets it without reinstalling PyTorch.
# 0.16 is the newest that installs under Python 3.11; 0.13 an older line a
# user may still run.  It failing skips the Megatron tests, not the others.
megatron_core() {   # VENV_PYTHON VERSION
  local py=$1 version=$2
  local venv; venv=$(dirname "$(dirname "$py")")
  local marker="$venv/.pipescope-megatron-${version%.\*}"
  [ -f "$marker" ] && return 0
  echo "dev.sh: installing megatron-core $version into $venv (once, small)" >&2
  if "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "megatron-core==$version" packaging \
       >"$venv.megatron.log" 2>&1 \
     && "$py" -c "import megatron.core.pipeline_parallel.schedules" >>"$venv.megatron.log" 2>&1; then
    touch "$marker"
  else
    echo "dev.sh: megatron-core $version did not install (log: $venv.megatron.log); the Megatron tests will skip" >&2
  fi
}
# The environment's PyTorch version (2.15.0 of 2.15.0+cu132), to hold it
# while pip installs a package that would move it.
torch_version() {   # VENV_PYTHON
  "$1" -c "import torch; print(torch.__version__.split('+')[0])"
}
# DeepSpeed for the tests of DeepSpeed pipeline jobs (tests/pytorch/
# deepspeed-*): 0.19.8 (the newest) into the PyTorch 2.15 environment and
# 0.16.9 (an older line users still run) into the 2.11 one, each
# behind a marker of its own, without its compiled ops (DS_BUILD_OPS=0; the
# test job leaves out the one op deepspeed.comm would JIT-build on CPU).
# It failing skips the DeepSpeed tests, not the others.
deepspeed_pkg() {   # VENV_PYTHON VERSION
  local py=$1 version=$2
  local venv; venv=$(dirname "$(dirname "$py")")
  local marker="$venv/.pipescope-deepspeed-$version"
  [ -f "$marker" ] && return 0
  echo "dev.sh: installing DeepSpeed $version into $venv (once, small)" >&2
  if "$venv/bin/pip" install -q --disable-pip-version-check wheel setuptools >"$venv.deepspeed.log" 2>&1 \
     && DS_BUILD_OPS=0 "$venv/bin/pip" install -q --disable-pip-version-check --no-build-isolation \
          "deepspeed==$version" "torch==$(torch_version "$py")" \
          >>"$venv.deepspeed.log" 2>&1 \
     && DS_ACCELERATOR=cpu "$py" -c "import deepspeed.runtime.pipe.engine" >>"$venv.deepspeed.log" 2>&1; then
    touch "$marker"
  else
    echo "dev.sh: DeepSpeed $version did not install (log: $venv.deepspeed.log); the DeepSpeed tests will skip" >&2
  fi
}
# torchtitan for the test of its own trainer (tests/pytorch/titan-*): with its
# dependencies (datasets, tokenizers, tyro, ...; about 400 MB), into the
# PyTorch 2.15 environment, behind a marker of its own; PyTorch held at the
# environment's version (torchtitan declares no pin).  It failing skips
# that test, not the others.
torchtitan() {   # VENV_PYTHON VERSION
  local py=$1 version=$2
  local venv; venv=$(dirname "$(dirname "$py")")
  local marker="$venv/.pipescope-torchtitan-$version"
  [ -f "$marker" ] && return 0
  echo "dev.sh: installing torchtitan $version into $venv (once, about 400 MB)" >&2
  if "$venv/bin/pip" install -q --disable-pip-version-check "torchtitan==$version" "torch==$(torch_version "$py")" \
       >"$venv.torchtitan.log" 2>&1 \
     && "$py" -c "import torchtitan.train, tokenizers" >>"$venv.torchtitan.log" 2>&1; then
    touch "$marker"
  else
    echo "dev.sh: torchtitan $version did not install (log: $venv.torchtitan.log); the torchtitan test will skip" >&2
  fi
}
torch_venvs() {
  [ -n "${PIPESCOPE_NO_TORCH:-}" ] && return 0
  torch_venv 2.15.0 PIPESCOPE_TORCH_PYTHON
  torch_venv 2.11.0 PIPESCOPE_TORCH211_PYTHON
  megatron_core "$PIPESCOPE_TORCH_PYTHON" '0.16.*'
  megatron_core "$PIPESCOPE_TORCH211_PYTHON" '0.13.*'
  deepspeed_pkg "$PIPESCOPE_TORCH_PYTHON" 0.19.8
  deepspeed_pkg "$PIPESCOPE_TORCH211_PYTHON" 0.16.9
  torchtitan "$PIPESCOPE_TORCH_PYTHON" 0.3.0
}

case "${1:-}" in
  run)
    shift
    install_missing
    build_all
    # The main job is the app: it opens and starts a default run at once.
    # Arguments go to the app (a trace file, --attach JOB).  Without a
    # display (ssh, CI) it cannot open a window: show the schedule demo of
    # the command line instead, GPipe on 4 GPUs with 6 micro-batches.
    if [ -x "$build/app/gui/pipescope" ] && [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      exec "$build/app/gui/pipescope" "$@"
    fi
    if [ $# -eq 0 ]; then
      [ -x "$build/app/gui/pipescope" ] \
        && echo "dev.sh: no display for the app; here is pipescope-cli's schedule demo instead" >&2
      set -- schedule --schedule GPipe --ranks 4 --microbatches 6
    fi
    exec "$build/app/cli/pipescope-cli" "$@"
    ;;
  test)
    shift
    install_missing
    build_all
    torch_venvs
    exec meson test -C "$build" --no-rebuild --print-errorlogs -q "$@"
    ;;
  *)
    echo "usage: ./dev.sh run [pipescope-cli arguments] | ./dev.sh test [meson test arguments]" >&2
    exit 2
    ;;
esac
