#!/usr/bin/env bash
# The GPU acceptance in one command: every figure that still has none (benchmarks/README.md,
# "Running on a GPU"), run on a CUDA machine, into one markdown summary.
#
#   bash benchmarks/gpu_acceptance.sh [--minutes M] [OUT_DIR]   # default: gpu-acceptance-<UTC time>/
#   bash benchmarks/gpu_acceptance.sh --list                    # the steps, without running them
#   bash benchmarks/gpu_acceptance.sh --only scan-sweep,gpu-width-transfer [--minutes M] [OUT_DIR]
#
# Steps, most wanted first: the GPU tests (pytest -m gpu); the scan kernels' registers,
# spills and instructions per element under this machine's triton (seconds, no GPU: what a
# short scan figure is read against); one sweep cell trained twice per scan backend, its
# losses compared bit for bit (benchmarks/gpu_repro.py); benchmarks/memory_estimate.py (the
# cost model's peak memory against a measured step); benchmarks/data_throughput.py (the token
# cache's loader); these five need no mamba_ssm and run while its kernels build (on an H200:
# 311 s); mutransfer doctor (each scan backend, mamba_ssm's too, against the reference,
# timed; auto's choice); benchmarks/scan.py (the scan table); benchmarks/train_gpu.py
# (tokens/s beside mamba_ssm); train_gpu.py --profile 1024;
# scan.py --sweep (launch configurations); and sweeps/gpu_width.yaml as a transfer search,
# last, stopped as Ctrl-C stops it before the deadline (its store resumes) and analysed as far
# as it got.
# With --minutes M (or GPU_ACCEPT_MINUTES) no step starts after M minutes from the start and a
# running one is stopped there: the lent machine's time is short. Each step's output goes to
# OUT_DIR/<step>.log and into OUT_DIR/summary.md; a failing step is recorded and the others
# still run; the exit code is 1 when any step failed.
# On the lent GPU machine (no registry, no Ray, pydantic or optuna) carry the kit that
# benchmarks/device_kit.sh makes here (.devkit/): it is installed first
# (benchmarks/device_setup.sh) and mamba_ssm's and causal-conv1d's CUDA extensions are compiled
# from its sources in the background (benchmarks/build_cuda_refs.py) while the GPU tests run;
# doctor and the side-by-side columns wait for them. Elsewhere mamba_ssm's columns need its
# CUDA build at hand (MAMBA_INSTALL=1 builds it from the registry first: nvcc and a CUDA torch,
# minutes).
# Without CUDA it says so in one line and exits 2, having run and written nothing.
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
MINUTES="${GPU_ACCEPT_MINUTES:-}"
LIST=0
ONLY=""
ARGS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --list) LIST=1; shift ;;
    --only)
      [[ $# -gt 1 ]] || { echo "gpu_acceptance: --only needs step names, comma-separated (see --list)" >&2; exit 2; }
      ONLY="$2"; shift 2 ;;
    --minutes)
      [[ $# -gt 1 ]] || { echo "gpu_acceptance: --minutes needs a number of minutes" >&2; exit 2; }
      MINUTES="$2"; shift 2 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
# the CLI from the checkout where it is not installed (the lent machine runs the repository)
MT="mutransfer"
command -v mutransfer > /dev/null 2>&1 || MT="$PY -m mutransfer.cli"

# name|command; wait-cuda-refs waits for the background build of the reference kernels; $LEFT
# is the seconds left before the deadline when the step starts
STEPS=(
  "gpu-tests|$PY -m pytest -m gpu -q -p no:cacheprovider"
  "compile-check|$PY -m mutransfer.ops.triton_compile_check --dtype bf16"
  "gpu-repro|$PY benchmarks/gpu_repro.py --steps 100"
  "memory-estimate|$PY benchmarks/memory_estimate.py"
  "data-throughput|$PY benchmarks/data_throughput.py"
  "wait-cuda-refs|wait_cuda_refs"
  "doctor|$MT doctor"
  "scan|$PY benchmarks/scan.py --json \$OUT/scan.json"
  "train-gpu|$PY benchmarks/train_gpu.py"
  "train-gpu-profile|$PY benchmarks/train_gpu.py --profile 1024"
  "scan-sweep|$PY benchmarks/scan.py --sweep"
  "gpu-width-transfer|timeout -s INT -k 60 \$((LEFT > 180 ? LEFT - 90 : LEFT / 2)) $MT sweep \$OUT/gpu_width_transfer.yaml --no-analysis; $MT analyze \$OUT/gpu_width_transfer"
)

if [[ -n "$MINUTES" ]] && ! [[ "$MINUTES" =~ ^[1-9][0-9]*$ ]]; then
  echo "gpu_acceptance: --minutes '$MINUTES': give whole minutes, at least 1" >&2
  exit 2
fi
if [[ -n "$ONLY" ]]; then  # the named steps, in the order above (a later device call's rest)
  IFS=',' read -ra WANTED <<< "$ONLY"
  NAMES="${STEPS[*]%%|*}"
  for w in "${WANTED[@]}"; do
    [[ " $NAMES " == *" $w "* ]] || {
      echo "gpu_acceptance: --only: no step '$w' (the steps: $NAMES)" >&2; exit 2; }
  done
  PICKED=()
  for s in "${STEPS[@]}"; do
    [[ ",$ONLY," == *",${s%%|*},"* ]] && PICKED+=("$s")
  done
  STEPS=("${PICKED[@]}")
fi
if [[ $LIST == 1 ]]; then
  for s in "${STEPS[@]}"; do echo "${s%%|*}: ${s#*|}"; done
  exit 0
fi

if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_acceptance: no CUDA device here (torch.cuda.is_available() is False): its figures need a GPU; nothing was run" >&2
  exit 2
fi

START=$(date +%s)
DEADLINE=$(( START + ${MINUTES:-100000} * 60 ))
OUT="${ARGS[0]:-gpu-acceptance-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
export OUT
SUMMARY="$OUT/summary.md"

KIT_LINE="none"
BUILD_PIDS=()
if [[ -d .devkit ]]; then
  # shellcheck source=benchmarks/device_setup.sh
  if . benchmarks/device_setup.sh .devkit > "$OUT/device-setup.log" 2>&1; then
    KIT_LINE="$(tail -n 1 "$OUT/device-setup.log")"
    if [[ " ${STEPS[*]%%|*} " == *" wait-cuda-refs "* ]] \
        && ! "$PY" -c "import selective_scan_cuda" 2>/dev/null && [[ -d .devkit/src/mamba ]]; then
      # the two extensions in two processes at once: each compiles its files in parallel, and
      # the scan's ten are done before the conv's four would start one after the other
      MAX_JOBS=$(( $(nproc) - 6 > 4 ? $(nproc) - 6 : 4 )) "$PY" benchmarks/build_cuda_refs.py \
        --src .devkit/src --out "$DEVKIT_BUILD" --only selective_scan_cuda \
        > "$OUT/build-cuda-refs.log" 2>&1 &
      BUILD_PIDS+=($!)
      MAX_JOBS=4 "$PY" benchmarks/build_cuda_refs.py --src .devkit/src --out "$DEVKIT_BUILD" \
        --only causal_conv1d_cuda > "$OUT/build-cuda-refs-conv.log" 2>&1 &
      BUILD_PIDS+=($!)
    fi
  else
    KIT_LINE="failed: $(tail -n 1 "$OUT/device-setup.log")"
  fi
fi
wait_cuda_refs() {  # the background builds' outcome, waited for no longer than the deadline
  if [[ ${#BUILD_PIDS[@]} == 0 ]]; then echo "no build of the reference kernels was started"; return 0; fi
  local pid rc=0
  for pid in "${BUILD_PIDS[@]}"; do
    while kill -0 "$pid" 2>/dev/null && (( $(date +%s) < DEADLINE )); do sleep 2; done
    if kill -0 "$pid" 2>/dev/null; then
      kill "$pid"
      echo "a build of the reference kernels was still running at the deadline: stopped"
    fi
    wait "$pid" || rc=$?
  done
  cat "$OUT/build-cuda-refs.log" "$OUT/build-cuda-refs-conv.log"
  return $rc
}

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
  echo "- versions: $("$PY" -c 'from mutransfer.results.store import versions; print(versions())' 2>&1 | tail -n 1)"
  echo "- device kit: $KIT_LINE"
  echo "- budget: ${MINUTES:-none} minutes"
  echo
  echo "| step | exit | seconds |"
  echo "|---|---|---|"
} > "$SUMMARY"

failed=0
BODY="$OUT/.body.md"
: > "$BODY"
for s in "${STEPS[@]}"; do
  name="${s%%|*}"
  LEFT=$(( DEADLINE - $(date +%s) ))
  if (( LEFT < 30 )); then
    echo "| $name | skipped (budget) | 0 |" >> "$SUMMARY"
    echo "== $name: skipped, the budget (${MINUTES} min) is spent"
    continue
  fi
  cmd="$(eval echo "\"${s#*|}\"")"
  echo "== $name: $cmd"
  start=$(date +%s)
  if [[ "$name" == wait-cuda-refs ]]; then
    wait_cuda_refs > "$OUT/$name.log" 2>&1
  else
    timeout "$LEFT" bash -c "$cmd" > "$OUT/$name.log" 2>&1
  fi
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
