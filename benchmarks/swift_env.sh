#!/usr/bin/env bash
# Creates benchmarks/.venv-swift: ms-swift 4.6.0 in its own environment, for bench_scale.py's comparison row.
# ms-swift 4.6.0 requires datasets<4.8.5 and this package datasets 5, so the two never share a venv
# (pinned_venv.sh says how torch is kept to the CPU build).
#
#     bash benchmarks/swift_env.sh            # idempotent; prints the versions it ended with
#     SWIFT_VENV=/elsewhere bash benchmarks/swift_env.sh   # then SWIFT_PYTHON=/elsewhere/bin/python for bench_scale.py
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${SWIFT_VENV:-$HERE/.venv-swift}"
source "$HERE/pinned_venv.sh"
pinned_venv "$VENV" "ms-swift==4.6.0"

"$VENV/bin/python" - <<'PY'
import json
from importlib.metadata import version
print(json.dumps({p: version(p) for p in ("ms-swift", "torch", "datasets", "transformers", "pyarrow")}))
PY
