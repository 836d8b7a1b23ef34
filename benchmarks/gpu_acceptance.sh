#!/usr/bin/env bash
# The GPU acceptance in one command: every figure that still has none (benchmarks/README.md,
# "Running on a GPU"), run on a CUDA machine, into one markdown summary.
#
#   bash benchmarks/gpu_acceptance.sh [OUT_DIR]     # default: gpu-acceptance-<UTC time>/
#   bash benchmarks/gpu_acceptance.sh --list        # the steps it runs, without running them
#
# Steps: mutransfer doctor (each scan backend against the reference, timed; auto's choice);
# the GPU tests (pytest -m gpu); benchmarks/scan.py (the scan table, then --sweep of launch
# configurations); benchmarks/train_gpu.py (tokens/s beside mamba_ssm, then --profile 1024);
# benchmarks/memory_estimate.py (the cost model's peak memory against a measured step);
# benchmarks/data_throughput.py (the token cache's loader); and sweeps/gpu_width.yaml as a
# transfer search. mamba_ssm's columns need its CUDA build (see benchmarks/README.md); with
# MAMBA_INSTALL=1 the script builds it first (nvcc and a CUDA torch needed; minutes).
# Each step's output goes to OUT_DIR/<step>.log and into OUT_DIR/summary.md; a failing step
# is recorded and the others still run; the exit code is 1 when any step failed.
# Without CUDA it says so in one line and exits 2, having run and written nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"

STEPS=(
  "doctor|mutransfer doctor"
  "gpu-tests|$PY -m pytest -m gpu -q -p no:cacheprovider"
  "scan|$PY benchmarks/scan.py --json \$OUT/scan.json"
  "scan-sweep|$PY benchmarks/scan.py --sweep"
  "train-gpu|$PY benchmarks/train_gpu.py"
  "train-gpu-profile|$PY benchmarks/train_gpu.py --profile 1024"
  "memory-estimate|$PY benchmarks/memory_estimate.py"
  "data-throughput|$PY benchmarks/data_throughput.py"
  "gpu-width-transfer|mutransfer sweep \$OUT/gpu_width_transfer.yaml --no-analysis && mutransfer analyze \$OUT/gpu_width_transfer"
)

if [[ "${1:-}" == "--list" ]]; then
  for s in "${STEPS[@]}"; do echo "${s%%|*}: ${s#*|}"; done
  exit 0
fi

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_acceptance: no CUDA device here (torch.cuda.is_available() is False): its figures need a GPU; nothing was run" >&2
  exit 2
fi

OUT="${1:-gpu-acceptance-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export OUT
SUMMARY="$OUT/summary.md"

if [[ "${MAMBA_INSTALL:-0}" == "1" ]] && ! "$PY" -c "import selective_scan_cuda" 2>/dev/null; then
  MAMBA_KEEP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE "$PY" -m pip install --no-build-isolation \
    'mamba-ssm>=2.2' > "$OUT/mamba-install.log" 2>&1 || echo "mamba-ssm build failed: $OUT/mamba-install.log"
fi

# the one-GPU width study as a transfer search (the full grid at 256, windows above it)
"$PY" - "$OUT" <<'PYEOF'
import sys, yaml
out = sys.argv[1]
doc = yaml.safe_load(open("sweeps/gpu_width.yaml"))
doc.update(name="gpu_width_transfer", storage=f"{out}/gpu_width_transfer",
           search={"kind": "transfer", "probe_stability": True})
open(f"{out}/gpu_width_transfer.yaml", "w").write(yaml.safe_dump(doc, sort_keys=False))
PYEOF

{
  echo "# GPU acceptance"
  echo
  echo "- date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), host: $(hostname)"
  echo "- GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | paste -sd ';' -)"
  echo "- git: $(git rev-parse --short=12 HEAD 2>/dev/null || echo none)$(git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo +)"
  echo "- versions: $("$PY" -c 'from mutransfer.results.store import versions; print(versions())')"
  echo "- mamba_ssm: $("$PY" -c 'import mamba_ssm, selective_scan_cuda; print(mamba_ssm.__version__)' 2>/dev/null || echo 'not available: its columns are -')"
  echo
  echo "| step | exit | seconds |"
  echo "|---|---|---|"
} > "$SUMMARY"

failed=0
BODY="$OUT/.body.md"
: > "$BODY"
for s in "${STEPS[@]}"; do
  name="${s%%|*}"
  cmd="$(eval echo "\"${s#*|}\"")"
  echo "== $name: $cmd"
  start=$(date +%s)
  bash -c "$cmd" > "$OUT/$name.log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  [[ $rc -ne 0 ]] && failed=1
  echo "| $name | $rc | $secs |" >> "$SUMMARY"
  {
    echo
    echo "## $name"
    echo
    echo "\`$cmd\` (exit $rc, $secs s; full log: $name.log)"
    echo
    echo '```text'
    tail -n 200 "$OUT/$name.log"
    echo '```'
  } >> "$BODY"
  echo "   exit $rc after $secs s"
done
cat "$BODY" >> "$SUMMARY"
rm -f "$BODY"
echo "summary: $SUMMARY"
exit $failed
