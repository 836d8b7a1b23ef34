#!/usr/bin/env bash
# Gather here what the lent GPU machine lacks, into .devkit/ (git-ignored), so that
# benchmarks/gpu_acceptance.sh runs there: `device` run with carry [".devkit"].
#
#   bash benchmarks/device_kit.sh [--python 3.12] [--mamba GIT_DIR] [--causal-conv1d GIT_DIR]
#
# That machine (/work/.library/device/KINDS.md) has Python 3.12, torch, triton, nvcc, ninja,
# einops, pandas, pyarrow, matplotlib, pyyaml and pytest, but no pydantic, optuna or Ray, and it
# reaches no package registry. This machine does. Into .devkit/ go:
#   wheels/     pydantic, optuna and Ray's missing needs, each at the version installed here
#               (what the tests ran with), built for CPython --python on manylinux x86-64;
#   ray.tar.xz  Ray at this version, installed for that Python into a folder, without its Java
#               jars and the libraries a sweep never imports (rllib, serve, llm): its 79 MB
#               wheel is over the 64 MiB a device call carries, this is ~36 MB;
#   src/mamba, src/causal-conv1d
#               `git archive` of state-spaces/mamba v2.3.2.post1 and Dao-AILab/causal-conv1d
#               v1.6.1.post4 from local clones (the `fetch` tool's mirrors), for
#               benchmarks/build_cuda_refs.py to compile there (the side-by-side columns).
# benchmarks/device_setup.sh installs it all on the GPU machine. The kit is rebuilt from
# scratch each time; it ends by printing its size beside the repository's (64 MiB a call).
set -euo pipefail
cd "$(dirname "$0")/.."
PYV=3.12
MAMBA_GIT=/work/.mirror/state-spaces+mamba/repo
CONV_GIT=/work/.mirror/Dao-AILab+causal-conv1d/repo
MAMBA_TAG=v2.3.2.post1
CONV_TAG=v1.6.1.post4
while [[ $# -gt 0 ]]; do
  case "$1" in
    --python) PYV="$2"; shift 2 ;;
    --mamba) MAMBA_GIT="$2"; shift 2 ;;
    --causal-conv1d) CONV_GIT="$2"; shift 2 ;;
    *) echo "device_kit: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
PY="${PYTHON:-python}"
KIT=.devkit
# pydantic's, optuna's and Ray's needs that the GPU image lacks or holds too old
NAMES=(pydantic pydantic-core annotated-types typing-inspection typing-extensions
       optuna alembic sqlalchemy mako colorlog
       jsonschema jsonschema-specifications referencing rpds-py tensorboardX)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
FOREIGN=(--only-binary=:all: --no-deps --python-version "$PYV" --implementation cp
         "${PLATFORMS[@]}")

version() { "$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }

rm -rf "$KIT"
mkdir -p "$KIT/wheels" "$KIT/src"
for name in "${NAMES[@]}"; do
  "$PY" -m pip download -q "${FOREIGN[@]}" -d "$KIT/wheels" "$name==$(version "$name")"
done

RAY="$(version ray)"
"$PY" -m pip install -q "${FOREIGN[@]}" --target "$KIT/ray-site" "ray==$RAY"
rm -rf "$KIT/ray-site/ray/jars" "$KIT/ray-site/ray/rllib" "$KIT/ray-site/ray/serve" \
       "$KIT/ray-site/ray/llm"
tar -C "$KIT/ray-site" -cf - . | xz -6 -T0 > "$KIT/ray.tar.xz"
rm -rf "$KIT/ray-site"

stage() {  # stage GIT_DIR TAG NAME PATHS...: the tagged tree's PATHS under $KIT/src/NAME
  local git="$1" tag="$2" name="$3"; shift 3
  if [[ ! -d "$git" ]]; then
    echo "device_kit: no clone at $git: $name is not staged (the side-by-side columns need it)" >&2
    return
  fi
  mkdir -p "$KIT/src/$name"
  git --git-dir="$git" archive "$tag" "$@" | tar -x -C "$KIT/src/$name"
}
stage "$MAMBA_GIT" "$MAMBA_TAG" mamba mamba_ssm csrc/selective_scan
stage "$CONV_GIT" "$CONV_TAG" causal-conv1d causal_conv1d csrc

echo "kit: $(du -sh "$KIT" | cut -f1) in $KIT (wheels $(ls "$KIT/wheels" | wc -l), ray $RAY for" \
     "CPython $PYV); repository files: $(git ls-files -z | du -ch --files0-from=- | tail -1 | cut -f1);" \
     "a device call carries 64 MiB"
