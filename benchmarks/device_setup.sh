# Install benchmarks/device_kit.sh's kit on the GPU machine; source it from the repository root:
#
#   . benchmarks/device_setup.sh [KIT]          # KIT: default .devkit
#
# Installs the kit's wheels and unpacks its Ray into DEVKIT_SITE (default /tmp/devkit-site),
# and puts on PYTHONPATH: that folder, the repository (the project runs from its checkout,
# `python -m mutransfer.cli`), the staged mamba and causal-conv1d sources (their Python
# packages) and DEVKIT_BUILD (default /tmp/devkit-build), where benchmarks/build_cuda_refs.py
# puts their compiled extensions. Prints one line; returns 1 (having changed nothing) without
# the kit. Sourced, so it returns rather than exits.
_kit="${1:-.devkit}"
if [[ ! -d "$_kit/wheels" || ! -f "$_kit/ray.tar.xz" ]]; then
  echo "device_setup: no kit at $_kit (make it with benchmarks/device_kit.sh, carry it)" >&2
  return 1 2>/dev/null || exit 1
fi
export DEVKIT_SITE="${DEVKIT_SITE:-/tmp/devkit-site}"
export DEVKIT_BUILD="${DEVKIT_BUILD:-/tmp/devkit-build}"
mkdir -p "$DEVKIT_SITE" "$DEVKIT_BUILD"
_t0=$(date +%s)
"${PYTHON:-python3}" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --upgrade --target "$DEVKIT_SITE" "$_kit"/wheels/*.whl \
  && tar -xJf "$_kit/ray.tar.xz" -C "$DEVKIT_SITE" \
  || { echo "device_setup: installing the kit failed" >&2; return 1 2>/dev/null || exit 1; }
# the sources the kit staged, by absolute path; none that is missing (an empty PYTHONPATH entry
# would put the working directory on the path)
_path="$DEVKIT_SITE:$PWD"
for _src in "$_kit/src/mamba" "$_kit/src/causal-conv1d"; do
  [[ -d "$_src" ]] && _path="$_path:$(cd "$_src" && pwd)"
done
export PYTHONPATH="$_path:$DEVKIT_BUILD${PYTHONPATH:+:$PYTHONPATH}"
export PATH="$DEVKIT_SITE/bin:$PATH"
echo "device_setup: kit installed in $(( $(date +%s) - _t0 )) s into $DEVKIT_SITE" \
     "($(ls "$_kit/wheels" | wc -l) wheels and Ray); PYTHONPATH set"
unset _kit _t0 _path _src
