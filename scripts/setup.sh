#!/usr/bin/env bash
# Creates .venv and installs triforge with pinned dependencies (requirements.lock). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "error: triforge needs Python 3.11 or newer ($PY is $("$PY" --version 2>&1))" >&2
  exit 2
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
stamp=.venv/.triforge-installed
want=$(cat pyproject.toml requirements.lock | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing triforge and its pinned dependencies into .venv with pip (quiet; a line every 30 s)"
  t0=$SECONDS
  ( while sleep 30 </dev/null >/dev/null 2>&1; do echo "setup: pip is still installing ($((SECONDS - t0)) s)"; done ) &
  beat=$!
  trap 'kill "$beat" 2>/dev/null || true' EXIT
  # The lock pins torch's CPU build (no CUDA libraries to download on a CPU-only machine). Plain PyPI has only
  # the CUDA build; where pip's sources lack the pinned one, PyTorch's CPU index is added for it.
  extra=()
  torch_pin=$(grep -E '^torch==[^ ;]*\+cpu' requirements.lock || true)
  case ",${TRIFORGE_EXTRAS:-all}," in *,all,*|*,astra,*|*,gpu,*) ;; *) torch_pin="" ;; esac
  if [ -n "$torch_pin" ] && ! .venv/bin/python -m pip install --dry-run --no-deps --ignore-installed --quiet \
       --disable-pip-version-check "$torch_pin" >/dev/null 2>&1; then
    torch_index=${TRIFORGE_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}
    echo "setup: pip's sources here lack $torch_pin (PyPI has only the CUDA build): adding PyTorch's CPU index, $torch_index"
    extra=(--extra-index-url "$torch_index")
  fi
  if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -c requirements.lock "${extra[@]}" \
       -e ".[${TRIFORGE_EXTRAS:-all}]" 2>.venv/pip.log; then
    grep -v '^WARNING: Location' .venv/pip.log >&2 || true
    echo "error: pip could not install triforge's pinned dependencies (above; the whole log: .venv/pip.log)" >&2
    exit 1
  fi
  kill "$beat" 2>/dev/null || true
  echo "$want" > "$stamp"
  echo "setup: done in $((SECONDS - t0)) s"
fi
