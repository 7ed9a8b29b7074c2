#!/usr/bin/env bash
# Installs Harbor and faultline's Harbor integration (editable, from this
# checkout) into a virtualenv: $HARBOR_VENV, default /opt/harbor-venv.
# Idempotent: does nothing when both are there at the right versions.
set -euo pipefail

VENV=${HARBOR_VENV:-/opt/harbor-venv}
HARBOR_VERSION=0.25.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
OWN_VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$HERE/pyproject.toml" | head -n 1)
PYENV_VERSIONS=${PYENV_ROOT:-$HOME/.pyenv}/versions

is_new_enough() {  # Harbor needs Python >= 3.12
    "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null
}

find_python() {
    local candidate
    for candidate in /usr/bin/python3.13 /usr/bin/python3.12 \
        "$PYENV_VERSIONS"/3.12*/bin/python3.12 "$PYENV_VERSIONS"/3.13*/bin/python3.13; do
        if [ -x "$candidate" ] && is_new_enough "$candidate"; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

up_to_date() {  # harbor and faultline-harbor at their versions, the latter from this checkout
    "$VENV/bin/python" - "$HARBOR_VERSION" "$OWN_VERSION" "$HERE" <<'PY' 2>/dev/null
import importlib.metadata as metadata, importlib.util, sys
harbor, own, here = sys.argv[1:]
spec = importlib.util.find_spec("faultline_harbor")
ok = (
    metadata.version("harbor") == harbor
    and metadata.version("faultline-harbor") == own
    and spec is not None
    and spec.origin.startswith(here + "/")
)
sys.exit(0 if ok else 1)
PY
}

if [ -x "$VENV/bin/python" ]; then
    if ! is_new_enough "$VENV/bin/python"; then
        echo "error: $VENV has $("$VENV/bin/python" --version 2>&1); Harbor needs Python >= 3.12." >&2
        echo "Remove $VENV or set HARBOR_VENV to another path." >&2
        exit 1
    fi
    if up_to_date; then
        echo "harbor $HARBOR_VERSION and faultline-harbor $OWN_VERSION already in $VENV"
        exit 0
    fi
else
    if ! PYTHON=$(find_python); then
        echo "error: no Python >= 3.12 found (tried /usr/bin/python3.13, /usr/bin/python3.12," >&2
        echo "$PYENV_VERSIONS/3.12*, $PYENV_VERSIONS/3.13*)." >&2
        echo "Install one, e.g. 'apt-get install python3.12 python3.12-venv' or 'pyenv install 3.12'." >&2
        exit 1
    fi
    echo "creating $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
fi

"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    "harbor==$HARBOR_VERSION" --editable "$HERE"
echo "installed harbor $HARBOR_VERSION and faultline-harbor $OWN_VERSION (editable, $HERE) in $VENV"
