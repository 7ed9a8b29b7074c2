#!/usr/bin/env bash
# Installs the Python client side of SREGym into /opt/sregym-venv (or $SREGYM_VENV), at the versions
# SREGym's own uv.lock pins, so the compatibility tests can run SREGym's agents and MCP clients
# unmodified against `collector live`. Called by tests/install.
#
# SREGym's code is not installed: it is run from the snapshot in shared/ (commit ba07faf1a322,
# ../shared/conformance/sregym seen from the project root, see SREGYM-SNAPSHOT.md there), with this
# venv's python and that folder as the working directory, e.g.
#   cd ../shared/conformance/sregym && /opt/sregym-venv/bin/python -m clients.stratus.stratus_agent.driver.driver
# What is installed is only what these modules import, directly or on the paths they run (kubernetes
# for Stratus's ClusterStateOracle, imported lazily; tiktoken, litellm, pandas for Stratus), with the
# dependencies of those, closed over uv.lock for CPython on x86_64 Linux:
#   clients.autosubmit.autosubmit_agent, clients.demo.driver, clients.stratus.stratus_agent.driver.driver,
#   clients.claudecode.driver, clients.codex.driver (and llm_backend/, logger/, clients/harness/),
#   and its MCP server mcp_server.sregym_mcp_server (bashlex parses the kubectl lines it is given).
# None of SREGym's server side (ansible, azure-*, docker, locust, opentelemetry-*, ...) is installed.
#
# The pins are listed below rather than read from uv.lock at install time, so that this script
# installs the same set wherever it runs; the list was computed from uv.lock (sha256 a06aec28b66a...)
# by walking its dependency graph from the roots fastmcp, mcp, langgraph, langchain-core,
# langchain-litellm, litellm, openai, pandas, requests, pyyaml, rich, tiktoken, pydantic,
# pydantic-core, anyio, typing-extensions and kubernetes, with markers evaluated for Linux.
#
# Idempotent: the venv is rebuilt only when it is missing or its marker (a hash of the pin list and of
# the interpreter's version) differs. Wheels only (--only-binary), no dependency resolution
# (--no-deps): exactly these 102 distributions, nothing else but the venv's own pip where there is one.
set -euo pipefail

VENV="${SREGYM_VENV:-/opt/sregym-venv}"
MARKER="$VENV/.faultline-sregym-pins"
# uv installs the 102 wheels in seconds where pip takes about 40 s on two cores; it is itself
# installed from PyPI at a pinned version into a throwaway venv, and pip is the fallback.
UV_VERSION=0.9.5

PINS=$(cat <<'EOF'
aiohappyeyeballs==2.6.1
aiohttp==3.13.3
aiosignal==1.4.0
annotated-doc==0.0.4
annotated-types==0.7.0
anyio==4.9.0
attrs==25.3.0
authlib==1.6.8
bashlex==0.18
cachetools==5.5.2
certifi==2025.4.26
cffi==1.17.1
charset-normalizer==3.4.2
click==8.2.1
cryptography==45.0.3
distro==1.9.0
exceptiongroup==1.3.1
fastmcp==2.9.2
fastuuid==0.14.0
filelock==3.18.0
frozenlist==1.8.0
fsspec==2025.5.1
google-auth==2.40.2
h11==0.16.0
hf-xet==1.3.1
httpcore==1.0.9
httpx==0.28.1
httpx-sse==0.4.3
huggingface-hub==1.4.1
idna==3.10
importlib-metadata==8.6.1
jinja2==3.1.6
jiter==0.13.0
jsonpatch==1.33
jsonpointer==3.0.0
jsonschema==4.23.0
jsonschema-specifications==2025.9.1
kubernetes==30.1.0
langchain-core==1.2.16
langchain-litellm==0.5.1
langgraph==1.0.9
langgraph-checkpoint==4.0.0
langgraph-prebuilt==1.0.8
langgraph-sdk==0.3.9
langsmith==0.7.7
litellm==1.91.0
markdown-it-py==3.0.0
markupsafe==3.0.2
mcp==1.9.4
mdurl==0.1.2
multidict==6.4.4
numpy==1.26.4
oauthlib==3.2.2
openai==2.24.0
openapi-pydantic==0.5.1
orjson==3.11.7
ormsgpack==1.12.2
packaging==26.0
pandas==2.2.3
propcache==0.4.1
pyasn1==0.6.2
pyasn1-modules==0.4.2
pycparser==3.0
pydantic==2.11.5
pydantic-core==2.33.2
pydantic-settings==2.13.1
pygments==2.19.1
python-dateutil==2.9.0.post0
python-dotenv==1.1.0
python-multipart==0.0.20
pytz==2025.2
pyyaml==6.0.2
referencing==0.36.2
regex==2024.11.6
requests==2.32.5
requests-oauthlib==2.0.0
requests-toolbelt==1.0.0
rich==13.9.4
rpds-py==0.30.0
rsa==4.9.1
shellingham==1.5.4
six==1.17.0
sniffio==1.3.1
sse-starlette==3.0.3
starlette==0.46.2
tenacity==9.1.4
tiktoken==0.13.0
tokenizers==0.22.2
tqdm==4.67.1
typer==0.16.0
typer-slim==0.21.2
typing-extensions==4.13.2
typing-inspection==0.4.1
tzdata==2025.2
urllib3==2.6.3
uuid-utils==0.14.1
uvicorn==0.34.2
websocket-client==1.8.0
xxhash==3.6.0
yarl==1.20.0
zipp==3.23.0
zstandard==0.25.0
EOF
)

# The interpreter: the system's, under /usr, first: the venv runs its interpreter through a link, and
# the agents run in a sandbox that shows /usr but no user's home (a pyenv build under /root would be
# unreachable there, and to an unprivileged user). uv.lock says requires-python >= 3.12, but every
# pin has a wheel for 3.11 and the five modules import and run under 3.11; $SREGYM_PYTHON overrides.
find_python() {
  local c candidates=()
  if [ -n "${SREGYM_PYTHON:-}" ]; then
    candidates=("$SREGYM_PYTHON")
  else
    # pyenv's shims are on PATH for every version it has, but a shim whose version is not selected
    # fails when run: each candidate is run, and the venv gets the real executable it reports.
    candidates=(/usr/bin/python3.13 /usr/bin/python3.12 /usr/bin/python3 python3.12 python3.13
      "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12
      "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.13*/bin/python3.13
      python3)
  fi
  for c in "${candidates[@]}"; do
    "$c" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 11) else 1)' >/dev/null 2>&1 \
      && { "$c" -c 'import sys; print(sys.executable)'; return; }
  done
  echo "error: no Python >= 3.11 found for the SREGym client venv" >&2
  return 1
}

PY=$(find_python)
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
WANT=$(printf '%s\npython=%s\n' "$PINS" "$PYVER" | sha256sum | cut -d' ' -f1)

if [ -x "$VENV/bin/python" ] && [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "$WANT" ]; then
  echo "SREGym client venv $VENV is up to date (python $PYVER)"
  exit 0
fi

echo "building the SREGym client venv $VENV with python $PYVER ($PY)"
start=$(date +%s)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
printf '%s\n' "$PINS" >"$TMP/pins.txt"
# A half-built venv must never look finished: the marker is written last, after the checks.
rm -rf "$VENV"

if "$PY" -m venv "$TMP/uv" >/dev/null 2>&1 \
  && "$TMP/uv/bin/python" -m pip install -q --disable-pip-version-check "uv==$UV_VERSION" >/dev/null 2>&1; then
  # Never let uv fetch an interpreter of its own (the machine reaches package registries only).
  export UV_PYTHON_DOWNLOADS=never
  "$TMP/uv/bin/uv" venv -q --python "$PY" "$VENV"
  "$TMP/uv/bin/uv" pip install -q --python "$VENV/bin/python" --no-deps --only-binary :all: \
    -r "$TMP/pins.txt"
  "$TMP/uv/bin/uv" pip check -q --python "$VENV/bin/python"
else
  echo "uv could not be installed; installing with pip" >&2
  "$PY" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    -r "$TMP/pins.txt"
  "$VENV/bin/python" -m pip check
fi

# The imports SREGym's clients make, and the two versions its MCP clients are known by. litellm
# would fetch its model price map from the network on import: it is told to use its bundled copy.
LITELLM_LOCAL_MODEL_COST_MAP=True "$VENV/bin/python" - <<'PY'
import importlib.metadata as md
import fastmcp, mcp, langgraph, langchain_core, langchain_litellm, litellm, openai  # noqa: F401
import pandas, requests, yaml, rich, tiktoken, pydantic, anyio, kubernetes, bashlex  # noqa: F401
for name, version in (("fastmcp", "2.9.2"), ("mcp", "1.9.4")):
    assert md.version(name) == version, (name, md.version(name))
PY

echo "$WANT" >"$MARKER"
echo "SREGym client venv $VENV built in $(( $(date +%s) - start )) s"
