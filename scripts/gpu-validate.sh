#!/usr/bin/env bash
# gpu-validate.sh: proves gpugate against a real NVIDIA driver and real CUDA contexts.
#
# What an operator runs on a new host before trusting gpugate in ExecStartPre=. Given the packed
# gpugate tarball (or an installed package) and a Node.js binary, it checks, each step bounded:
#   identity   gpugate status --json against nvidia-smi's CSV (and pynvml when importable)
#   processes  a real CUDA context holding a known amount: gpugate lists its pid, memory, class active
#   race       gpugate wait --min-free 0.9 --stable 2s --timeout 120s while the holder runs; SIGKILL
#              the holder; gpugate must return 0 only after the memory is back
#   latency    gpugate bench: gpugate's poll latency against nvidia-smi on this host
#   open-cost  what NVML in gpugate's helper process adds to opening NVML, against NVML in the
#              process itself: first opens in fresh processes (what one `gpugate check` pays) and
#              repeated opens in one (needs the package: --tarball, --package or a built checkout)
#   doctor     gpugate doctor --json: its findings recorded (exit 0, 75 and 69 are results); the
#              document must be well-formed and every GPU's health read or an NVML code given
#   select     gpugate select --count 1 --json, with --no-lease and then leasing under the run's
#              own temp dir (select-lease): the choice recorded, the document judged well-formed
#   driver     what the driver does where gpugate's facts are unverified, read straight from NVML
#              (driver-facts.py): v2 memory semantics (and whether gpugate reads the same), process
#              list readability, the recovery action, CUDA's total and one CUDA context's cost
#   driver-abi what the NVML library itself does where gpugate's simulator imitates a driver: its
#              exports against the simulator profile of its version (and `nm -D`), its NVML and CUDA
#              versions, utilisation of a GPU in MIG mode, DriverModel_v2 and AddressingMode
# then prints one summary table and writes a JSON report. The whole run stays under 5 minutes.
#
# Read-only towards the GPUs: it only reads through NVML and nvidia-smi queries and starts one
# ordinary CUDA process; it never changes persistence, clocks, power limits, compute mode or MIG,
# and never resets a GPU. It writes only under its own temp dir (select's leases included).
#
# With --simulate it runs the same steps without a GPU: gpugate reads gpugate's NVML simulator,
# nvidia-smi is a stand-in reading the same library, and the holder is a real process whose pid a
# generated scenario lists as holding memory (see scripts/gpu-validate/sim-holder.cjs).
#
# Exit status: 0 every step passed or was skipped with a reason, 1 a check failed, 64 usage error,
# 69 a prerequisite is missing (no Node.js, no gpugate to run, simulator not built).
set -euo pipefail

SCRIPT_DIR=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
readonly SCRIPT_DIR
readonly HELPERS="$SCRIPT_DIR/gpu-validate"
REPO_ROOT=$(cd -- "$SCRIPT_DIR/.." && pwd)
readonly REPO_ROOT
readonly TOTAL_BUDGET_S=290
readonly WAIT_TIMEOUT_S=120

usage() {
  cat <<'EOF'
usage: gpu-validate.sh [--tarball FILE | --package DIR | --gpugate CMD] [options]
       gpu-validate.sh --simulate [options]

Validates gpugate on this host against nvidia-smi, pynvml and a real CUDA context.

What to validate (real mode; default: the `gpugate` command on PATH):
  --tarball FILE      the packed gpugate tarball (with prebuilds); installed offline into a temp prefix
  --package DIR       an installed gpugate package directory (holds package.json and dist/cli/main.js)
  --gpugate CMD       a gpugate executable to run as is
  --node PATH         the Node.js binary to use (default: node on PATH)

Options:
  --simulate          run against gpugate's NVML simulator and a stand-in nvidia-smi (no GPU needed);
                      uses this checkout's build (dist/cli/main.js, build/Release/gpugate_sim.so)
  --sim-library PATH  the simulator library for --simulate (default: build/Release/gpugate_sim.so)
  --nvidia-smi CMD    the nvidia-smi to compare with (default: nvidia-smi on PATH; the stand-in
                      scripts/gpu-validate/nvidia-smi-standin.c,
                      compiled with cc, with --simulate)
  --gpu INDEX         NVML index of the GPU used for the process and race steps (default 0)
  --hold-mib N        memory the CUDA holder allocates (default: 20% of that GPU's total)
  --tolerance-mib N   allowed difference of a process's memory, gpugate vs nvidia-smi (default 4)
  --used-tolerance-mib N  allowed difference of device used memory between readers (default 64)
  --report FILE       where to write the JSON report (default: a new temp dir; the path is printed)
  --skip STEPS        steps not to run, comma separated: processes, race, latency, open-cost, doctor,
                      select, driver (identity always runs)
  --keep              keep the work directory (logs of every command) and print its path
  -h, --help          show this help

Exit status: 0 passed (skips allowed), 1 a check failed, 64 usage error, 69 prerequisite missing.
EOF
}

die() {
  local code=$1
  shift
  printf 'gpu-validate: %s\n' "$*" >&2
  exit "$code"
}

require_integer() {
  [[ $2 =~ ^[0-9]+$ ]] || die 64 "$1 '$2': expected a non-negative integer"
}

MODE=real
TARBALL=""
PACKAGE_DIR=""
GPUGATE_CMD=""
NODE_BIN=""
SIM_LIBRARY=""
NVSMI=""
GPU_INDEX=0
HOLD_MIB=""
TOLERANCE_MIB=4
USED_TOLERANCE_MIB=64
REPORT=""
KEEP=0
SKIP=","

while (($# > 0)); do
  arg=$1
  shift
  value=""
  has_value=0
  if [[ $arg == --*=* ]]; then
    value=${arg#*=}
    arg=${arg%%=*}
    has_value=1
  fi
  case $arg in
    --simulate | --keep | -h | --help)
      ((has_value == 0)) || die 64 "option $arg takes no value"
      case $arg in
        --simulate) MODE=simulate ;;
        --keep) KEEP=1 ;;
        *) usage; exit 0 ;;
      esac
      ;;
    --tarball | --package | --gpugate | --node | --sim-library | --nvidia-smi | --gpu | --hold-mib | --tolerance-mib | --used-tolerance-mib | --report | --skip)
      if ((has_value == 0)); then
        (($# > 0)) || die 64 "option $arg needs a value (see --help)"
        value=$1
        shift
      fi
      [[ -n $value ]] || die 64 "option $arg needs a non-empty value"
      case $arg in
        --tarball) TARBALL=$value ;;
        --package) PACKAGE_DIR=$value ;;
        --gpugate) GPUGATE_CMD=$value ;;
        --node) NODE_BIN=$value ;;
        --sim-library) SIM_LIBRARY=$value ;;
        --nvidia-smi) NVSMI=$value ;;
        --gpu) require_integer --gpu "$value"; GPU_INDEX=$value ;;
        --hold-mib) require_integer --hold-mib "$value"; HOLD_MIB=$value ;;
        --tolerance-mib) require_integer --tolerance-mib "$value"; TOLERANCE_MIB=$value ;;
        --used-tolerance-mib) require_integer --used-tolerance-mib "$value"; USED_TOLERANCE_MIB=$value ;;
        --report) REPORT=$value ;;
        --skip)
          IFS=, read -r -a skipped <<<"$value"
          for name in "${skipped[@]}"; do
            [[ $name =~ ^(processes|race|latency|open-cost|doctor|select|driver)$ ]] || die 64 "--skip $value: '$name' is not a step that can be skipped (expected processes, race, latency, open-cost, doctor, select or driver)"
            SKIP="$SKIP$name,"
          done
          ;;
      esac
      ;;
    *) die 64 "unknown argument '$arg' (expected an option; see --help)" ;;
  esac
done

sources=0
[[ -n $TARBALL ]] && sources=$((sources + 1))
[[ -n $PACKAGE_DIR ]] && sources=$((sources + 1))
[[ -n $GPUGATE_CMD ]] && sources=$((sources + 1))
((sources <= 1)) || die 64 "--tarball, --package and --gpugate exclude each other: give at most one"
[[ -z $SIM_LIBRARY || $MODE == simulate ]] || die 64 "--sim-library only makes sense with --simulate"
[[ -n $HOLD_MIB && $HOLD_MIB -eq 0 ]] && die 64 "--hold-mib 0: expected at least 1 MiB"

# ---------------------------------------------------------------------------------------------
# Prerequisites and the work directory

if [[ -n $NODE_BIN ]]; then
  [[ -x $NODE_BIN ]] || die 69 "--node $NODE_BIN: not an executable file"
  NODE_BIN=$(cd -- "$(dirname -- "$NODE_BIN")" && pwd)/$(basename -- "$NODE_BIN")
  PATH="$(dirname -- "$NODE_BIN"):$PATH"
  export PATH
else
  NODE_BIN=$(command -v node) || die 69 "no 'node' on PATH: pass --node PATH (Node.js 22.14 or newer)"
fi
command -v timeout >/dev/null || die 69 "the coreutils 'timeout' command is required"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/gpu-validate.XXXXXX")
readonly WORK
readonly LOGS="$WORK/logs" STEPS="$WORK/steps" SCRATCH="$WORK/scratch"
mkdir -p "$LOGS" "$STEPS" "$SCRATCH"
[[ -n $REPORT ]] || REPORT="$WORK/report.json"
START_MS=$(date +%s%3N)
readonly START_MS

HOLDER_PID=""     # the process holding GPU memory (SIGKILLed by the race)
LAUNCHER_PID=""   # what started it: the holder itself (real) or sim-holder.cjs (simulate)
WAIT_PID=""       # the background `gpugate wait`

# shellcheck disable=SC2317 # reached through the EXIT trap
cleanup() {
  # The holder first; then its launcher (sim-holder.cjs restores the scenario on SIGTERM).
  if [[ -n $HOLDER_PID ]]; then kill -KILL "$HOLDER_PID" 2>/dev/null || true; fi
  if [[ -n $LAUNCHER_PID ]]; then kill -TERM "$LAUNCHER_PID" 2>/dev/null || true; fi
  if [[ -n $WAIT_PID ]]; then kill -TERM "$WAIT_PID" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  if ((KEEP == 1)); then
    printf 'gpu-validate: work directory kept: %s\n' "$WORK" >&2
  elif [[ $REPORT == "$WORK"/* && -f $REPORT ]]; then
    rm -rf -- "$LOGS" "$STEPS" "$SCRATCH"
  else
    rm -rf -- "$WORK"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

now_ms() { date +%s%3N; }
elapsed_s() { echo $((($(now_ms) - START_MS) / 1000)); }
time_left_s() { echo $((TOTAL_BUDGET_S - $(elapsed_s))); }
say() { printf '%s\n' "$*"; }
heading() { printf '\n== %s (%ss elapsed)\n' "$*" "$(elapsed_s)"; }

# bounded SECONDS CMD...: run CMD, killing it after SECONDS (and SIGKILL 5 s later), or sooner
# when the run's whole budget would be spent: no command can push the run past TOTAL_BUDGET_S.
bounded() {
  local seconds
  seconds=$(capped "$1")
  shift
  if ((seconds < 1)); then
    printf 'gpu-validate: time budget spent, not running: %s\n' "$*" >&2
    return 124
  fi
  timeout --kill-after=5 "$seconds" "$@"
}

# capped SECONDS: SECONDS, or what is left of the run's budget if that is less (0 when spent).
capped() {
  local left=$((TOTAL_BUDGET_S - $(elapsed_s) - 5))
  ((left > 0)) || left=0
  echo $(($1 < left ? $1 : left))
}

# write_step N NAME STATUS SUMMARY: a step record decided here rather than by a helper.
write_step() {
  "$NODE_BIN" "$HELPERS/step-result.cjs" write "$STEPS/$1-$2.json" "$2" "$3" "$4"
  say "  $3: $4"
}

# helper STEPFILE NAME SCRIPT ARGS...: runs a step program; a crash becomes a failed step, not silence.
helper() {
  local file=$1 name=$2 script=$3 rc=0
  shift 3
  "$NODE_BIN" "$HELPERS/$script" "$@" --out "$STEPS/$file" 2>"$LOGS/$name.helper.err" || rc=$?
  if ((rc != 0)) || [[ ! -s $STEPS/$file ]]; then
    write_step "${file%%-*}" "$name" fail "internal error: $script exited $rc: $(tail_of "$LOGS/$name.helper.err")"
  fi
}

# gpu_field FIELD: uuid, totalBytes, freeBytes or usedBytes of the selected GPU in `gpugate status --json`.
gpu_field() {
  "$NODE_BIN" "$HELPERS/gpugate-json.cjs" gpu-field "$LOGS/status.json" "$GPU_INDEX" "$1"
}

# skipped STEP: true when --skip named STEP.
skipped() {
  [[ $SKIP == *",$1,"* ]]
}

# tail_of FILE: the last lines of a log, on one line, for a step summary.
tail_of() {
  tail -n 3 -- "$1" 2>/dev/null | tr '\n' ' ' | sed 's/ *$//' | cut -c1-400
}

# ---------------------------------------------------------------------------------------------
# Which gpugate, which nvidia-smi

GPUGATE=()
PACKAGE_ROOT=""   # the gpugate package whose public API library-info.cjs reads, when known
install_tarball() {
  local prefix="$SCRATCH/prefix" pkg npm_bin
  mkdir -p "$prefix"
  # A package.json of its own, so that npm installs here and never into a project above TMPDIR.
  printf '{ "name": "gpu-validate-prefix", "private": true }\n' >"$prefix/package.json"
  [[ -f $TARBALL ]] || die 69 "--tarball $TARBALL: no such file"
  TARBALL=$(cd -- "$(dirname -- "$TARBALL")" && pwd)/$(basename -- "$TARBALL")
  pkg="$prefix/node_modules/gpugate"
  npm_bin=$(command -v npm || true)
  if [[ -n $npm_bin ]] && (cd "$prefix" && bounded 120 "$npm_bin" install --prefix "$prefix" --offline --no-audit --no-fund --no-save "$TARBALL") \
    >"$LOGS/npm-install.log" 2>&1; then
    say "  installed $TARBALL with npm --offline into $prefix"
  else
    say "  npm install --offline did not work (${npm_bin:-no npm}; log: $(tail_of "$LOGS/npm-install.log")); unpacking instead"
    rm -rf -- "$pkg"
    mkdir -p "$pkg"
    tar -xzf "$TARBALL" -C "$pkg" --strip-components=1 || die 69 "--tarball $TARBALL: not a gzipped npm package tarball"
  fi
  local platform
  platform=$("$NODE_BIN" -p 'process.platform + "-" + process.arch')
  if [[ ! -d $pkg/prebuilds/$platform ]]; then
    say "  note: the tarball has no prebuilds/$platform: the addon would have to be compiled (see npm-install.log)"
  fi
  if ! "$NODE_BIN" -e 'require.resolve("node-gyp-build", { paths: [process.argv[1]] })' "$pkg" 2>/dev/null; then
    die 69 "gpugate's runtime dependency node-gyp-build is not installed next to $pkg and npm could not install it offline; install the tarball where a registry or npm cache is reachable and pass --package DIR, or put a node_modules holding node-gyp-build on NODE_PATH"
  fi
  PACKAGE_DIR=$pkg
}

resolve_gpugate() {
  if [[ -n $TARBALL ]]; then
    install_tarball
  fi
  if [[ -n $PACKAGE_DIR ]]; then
    [[ -f $PACKAGE_DIR/dist/cli/main.js ]] || die 69 "--package $PACKAGE_DIR: no dist/cli/main.js there (expected an installed gpugate package)"
    PACKAGE_ROOT=$(cd -- "$PACKAGE_DIR" && pwd)
    GPUGATE=("$NODE_BIN" "$PACKAGE_ROOT/dist/cli/main.js")
  elif [[ -n $GPUGATE_CMD ]]; then
    GPUGATE=("$GPUGATE_CMD")
    package_of_command "$GPUGATE_CMD"
  elif [[ $MODE == simulate ]]; then
    [[ -f $REPO_ROOT/dist/cli/main.js ]] || die 69 "--simulate needs this checkout built: $REPO_ROOT/dist/cli/main.js is missing (run: npm run build)"
    PACKAGE_ROOT=$REPO_ROOT
    GPUGATE=("$NODE_BIN" "$REPO_ROOT/dist/cli/main.js")
  else
    local found
    found=$(command -v gpugate) || die 69 "no gpugate to validate: pass --tarball FILE, --package DIR or --gpugate CMD"
    GPUGATE=("$found")
    package_of_command "$found"
  fi
}

# package_of_command CMD: when CMD is (a link to) an installed package's dist/cli/main.js, that
# package becomes PACKAGE_ROOT, so that its public API can report the bound symbol variants.
package_of_command() {
  local target root
  target=$(readlink -f -- "$(command -v -- "$1" || echo "$1")" 2>/dev/null) || return 0
  root=${target%/dist/cli/main.js}
  if [[ $root != "$target" && -f $root/package.json ]]; then
    PACKAGE_ROOT=$root
  fi
}

setup_simulator() {
  if [[ -z $SIM_LIBRARY ]]; then
    # The simulator of the gpugate being validated (a built checkout or a package's prebuilds).
    local root candidate platform
    platform=$("$NODE_BIN" -p 'process.platform + "-" + process.arch')
    for root in ${PACKAGE_ROOT:+"$PACKAGE_ROOT"} "$REPO_ROOT"; do
      for candidate in "$root/build/Release/gpugate_sim.so" "$root/prebuilds/$platform/gpugate_sim.so"; do
        if [[ -z $SIM_LIBRARY && -f $candidate ]]; then
          SIM_LIBRARY=$candidate
        fi
      done
    done
    [[ -n $SIM_LIBRARY ]] || die 69 "--simulate needs the simulator library: neither build/Release/gpugate_sim.so nor prebuilds/$platform/gpugate_sim.so exists (run: npm run build)"
  fi
  [[ -f $SIM_LIBRARY ]] || die 69 "--sim-library $SIM_LIBRARY: no such file"
  SIM_LIBRARY=$(cd -- "$(dirname -- "$SIM_LIBRARY")" && pwd)/$(basename -- "$SIM_LIBRARY")
  export GPUGATE_NVML_LIBRARY=$SIM_LIBRARY
  export GPUGATE_SIM_SCENARIO="$SCRATCH/scenario.json"
  "$NODE_BIN" "$HELPERS/sim-scenario.cjs" write-base "$GPUGATE_SIM_SCENARIO"
  # Unrelated NVML clients (pynvml) find the simulator under the driver's library name.
  mkdir -p "$SCRATCH/nvml"
  ln -s "$SIM_LIBRARY" "$SCRATCH/nvml/libnvidia-ml.so.1"
  if [[ -z $NVSMI ]]; then
    # The stand-in nvidia-smi, compiled from its one source (the benchmark uses the same).
    command -v cc >/dev/null || die 69 "--simulate needs cc to build the stand-in nvidia-smi (or pass --nvidia-smi CMD)"
    NVSMI="$SCRATCH/standin/nvidia-smi"
    mkdir -p "$SCRATCH/standin"
    cc -O2 -I "$REPO_ROOT/native" -o "$NVSMI" "$HELPERS/nvidia-smi-standin.c" -ldl >"$LOGS/nvidia-smi-standin.build" 2>&1 ||
      die 69 "--simulate: building the stand-in nvidia-smi failed (see $LOGS/nvidia-smi-standin.build)"
  fi
}

# nvsmi ARGS...: the nvidia-smi in use, bounded. Only --query-* reads are ever passed to it.
nvsmi() {
  bounded 30 "$NVSMI" "$@"
}

# ---------------------------------------------------------------------------------------------
# Steps

GPU_UUID=""
GPU_TOTAL_BYTES=""
GPU_FREE_BYTES=""
BASELINE_USED_MIB=""

step_identity() {
  heading "identity: gpugate status --json vs nvidia-smi and pynvml"
  local status_rc=0 smi_rc=0 smi_note="" py_args=()
  bounded 30 "${GPUGATE[@]}" status --json >"$LOGS/status.json" 2>"$LOGS/status.err" || status_rc=$?
  if ((status_rc != 0)); then
    write_step 10 identity fail "gpugate status --json exited $status_rc: $(tail_of "$LOGS/status.err")"
    return 1
  fi
  nvsmi --query-gpu=index,uuid,pci.bus_id,name,memory.total,memory.used,memory.reserved --format=csv \
    >"$LOGS/nvidia-smi.csv" 2>"$LOGS/nvidia-smi.err" || smi_rc=$?
  if ((smi_rc != 0)) && grep -q 'memory.reserved' "$LOGS/nvidia-smi.err"; then
    smi_note="this nvidia-smi does not know memory.reserved (older driver): compared used including reserved"
    smi_rc=0
    nvsmi --query-gpu=index,uuid,pci.bus_id,name,memory.total,memory.used --format=csv \
      >"$LOGS/nvidia-smi.csv" 2>"$LOGS/nvidia-smi.err" || smi_rc=$?
  fi
  if ((smi_rc != 0)); then
    write_step 10 identity fail "$NVSMI --query-gpu exited $smi_rc: $(tail_of "$LOGS/nvidia-smi.err")"
    return 1
  fi
  local py_rc=0
  if command -v python3 >/dev/null; then
    if [[ $MODE == simulate ]]; then
      LD_LIBRARY_PATH="$SCRATCH/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" bounded 30 python3 "$HELPERS/pynvml-query.py" \
        >"$LOGS/pynvml.json" 2>"$LOGS/pynvml.err" || py_rc=$?
    else
      bounded 30 python3 "$HELPERS/pynvml-query.py" >"$LOGS/pynvml.json" 2>"$LOGS/pynvml.err" || py_rc=$?
    fi
    case $py_rc in
      0) py_args=(--pynvml "$LOGS/pynvml.json") ;;
      3) py_args=(--pynvml-skip "$(tail_of "$LOGS/pynvml.err")") ;;
      *) py_args=(--pynvml-error "pynvml exited $py_rc: $(tail_of "$LOGS/pynvml.err")") ;;
    esac
  else
    py_args=(--pynvml-skip "no python3 on PATH")
  fi
  local extra=()
  [[ -n $smi_note ]] && extra=(--smi-note "$smi_note")
  # Which symbol variants bound: from the package's public API (session.library).
  if [[ -n $PACKAGE_ROOT ]] && bounded 30 "$NODE_BIN" "$HELPERS/library-info.cjs" "$PACKAGE_ROOT" \
    >"$LOGS/library.json" 2>"$LOGS/library.err"; then
    extra+=(--library "$LOGS/library.json")
  fi
  helper 10-identity.json identity identity.cjs --status "$LOGS/status.json" --smi "$LOGS/nvidia-smi.csv" \
    --used-tolerance-mib "$USED_TOLERANCE_MIB" "${py_args[@]}" ${extra[@]+"${extra[@]}"}

  # The GPU the next steps use, as gpugate saw it.
  if ! GPU_UUID=$(gpu_field uuid) || ! GPU_TOTAL_BYTES=$(gpu_field totalBytes) || ! GPU_FREE_BYTES=$(gpu_field freeBytes); then
    write_step 11 gpu-selection fail "--gpu $GPU_INDEX: gpugate status --json has no readable GPU with that index"
    return 1
  fi
  BASELINE_USED_MIB=$(gpu_used_mib) || BASELINE_USED_MIB=""
  say "  GPU $GPU_INDEX: $GPU_UUID, total $((GPU_TOTAL_BYTES / 1048576)) MiB, free $((GPU_FREE_BYTES / 1048576)) MiB, nvidia-smi used ${BASELINE_USED_MIB:-?} MiB"
}

# gpu_used_mib: memory.used of the selected GPU as nvidia-smi reports it, in MiB.
gpu_used_mib() {
  nvsmi --query-gpu=index,memory.used --format=csv,noheader,nounits |
    awk -F', ' -v gpu="$GPU_INDEX" '$1 == gpu { print $2; found = 1 } END { exit !found }'
}

# start_holder: starts a process with a real CUDA context (or the simulated one) holding HOLD_MIB
# on the selected GPU; sets HOLDER_PID, HOLD_BYTES, HOLDER_KIND, or returns 1 with SKIP_REASON.
HOLD_BYTES=""
HOLDER_KIND=""
SKIP_REASON=""
start_holder() {
  local out="$LOGS/holder.out" err="$LOGS/holder.err" deadline_s rc reasons=()
  if [[ $MODE == simulate ]]; then
    "$NODE_BIN" "$HELPERS/sim-holder.cjs" --scenario "$GPUGATE_SIM_SCENARIO" --gpu "$GPU_INDEX" \
      --hold-bytes $((HOLD_MIB * 1048576)) --drain-ms 1500 --max-ms $((TOTAL_BUDGET_S * 1000)) >"$out" 2>"$err" &
    LAUNCHER_PID=$!
    HOLDER_KIND="simulated (a real process listed by the simulator)"
    deadline_s=15
  else
    if command -v python3 >/dev/null; then
      CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$GPU_UUID python3 "$HELPERS/holder.py" "$HOLD_MIB" 240 >"$out" 2>"$err" &
      LAUNCHER_PID=$!
      if wait_for_ready "$out" 90; then
        HOLDER_KIND="python ($(awk '/^READY/ { print $4 }' "$out"))"
        return 0
      fi
      # Not ready: it exited (no torch or cupy, no GPU) or hangs past the deadline.
      kill -KILL "$LAUNCHER_PID" 2>/dev/null || true
      rc=0
      wait "$LAUNCHER_PID" 2>/dev/null || rc=$?
      LAUNCHER_PID=""
      reasons+=("python (exit $rc): $(tail_of "$err")")
    else
      reasons+=("no python3")
    fi
    if command -v nvcc >/dev/null; then
      if bounded 120 nvcc -O2 -o "$SCRATCH/holder" "$HELPERS/holder.cu" >"$LOGS/nvcc.log" 2>&1; then
        CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=$GPU_UUID "$SCRATCH/holder" "$HOLD_MIB" 240 >"$out" 2>"$err" &
        LAUNCHER_PID=$!
        HOLDER_KIND="nvcc-built CUDA program"
        deadline_s=60
      else
        reasons+=("nvcc failed: $(tail_of "$LOGS/nvcc.log")")
      fi
    else
      reasons+=("no nvcc")
    fi
    if [[ -z $LAUNCHER_PID ]]; then
      SKIP_REASON="no way to start a CUDA context: $(join_reasons "${reasons[@]}")"
      return 1
    fi
  fi
  if ! wait_for_ready "$out" "$deadline_s"; then
    local how="did not report READY within ${deadline_s}s"
    kill -0 "$LAUNCHER_PID" 2>/dev/null || how="exited without reporting READY"
    kill -KILL "$LAUNCHER_PID" 2>/dev/null || true
    rc=0
    wait "$LAUNCHER_PID" 2>/dev/null || rc=$?
    LAUNCHER_PID=""
    SKIP_REASON="the $HOLDER_KIND holder $how (exit $rc): $(tail_of "$err")"
    if [[ -n ${reasons[*]+set} ]]; then
      SKIP_REASON+="; before it, $(join_reasons "${reasons[@]}")"
    fi
    return 2
  fi
}

# join_reasons TEXT...: the texts separated by "; ".
join_reasons() {
  local joined
  joined=$(printf '%s; ' "$@")
  printf '%s' "${joined%; }"
}

# wait_for_ready FILE SECONDS: waits for the holder's `READY <pid> <bytes>` line; sets HOLDER_PID.
wait_for_ready() {
  local file=$1 limit_ms=$(($2 * 1000)) started
  started=$(now_ms)
  while (($(now_ms) - started < limit_ms)); do
    if grep -q '^READY ' "$file" 2>/dev/null; then
      HOLDER_PID=$(awk '/^READY/ { print $2; exit }' "$file")
      HOLD_BYTES=$(awk '/^READY/ { print $3; exit }' "$file")
      return 0
    fi
    kill -0 "$LAUNCHER_PID" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

step_processes() {
  heading "processes: a CUDA context holding a known amount"
  if skipped processes; then
    write_step 20 processes skip "--skip processes"
    return 1
  fi
  local left
  left=$(time_left_s)
  if ((left < 60)); then
    write_step 20 processes skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    return 1
  fi
  if [[ -z $HOLD_MIB ]]; then
    HOLD_MIB=$((GPU_TOTAL_BYTES / 1048576 / 5))
  fi
  if ((HOLD_MIB * 1048576 + 512 * 1048576 > GPU_FREE_BYTES)); then
    write_step 20 processes skip "GPU $GPU_INDEX has $((GPU_FREE_BYTES / 1048576)) MiB free, too little to hold $HOLD_MIB MiB (use --hold-mib or another --gpu)"
    return 1
  fi
  local rc=0
  start_holder || rc=$?
  if ((rc == 1)); then
    write_step 20 processes skip "$SKIP_REASON"
    return 1
  elif ((rc != 0)); then
    write_step 20 processes fail "$SKIP_REASON"
    return 1
  fi
  say "  holder: $HOLDER_KIND, pid $HOLDER_PID, allocated $((HOLD_BYTES / 1048576)) MiB on GPU $GPU_INDEX"
  # NVML lists a new context at once on a real driver; allow a few polls for slow hosts.
  local attempt
  for attempt in 1 2 3 4 5; do
    bounded 30 "${GPUGATE[@]}" holders --json --gpus "$GPU_INDEX" >"$LOGS/holders.json" 2>"$LOGS/holders.err" || true
    "$NODE_BIN" "$HELPERS/gpugate-json.cjs" has-holder "$LOGS/holders.json" "$HOLDER_PID" && break
    ((attempt < 5)) && sleep 1
  done
  nvsmi --query-compute-apps=gpu_uuid,pid,used_memory --format=csv >"$LOGS/compute-apps.csv" 2>"$LOGS/compute-apps.err" || true
  helper 20-processes.json processes processes.cjs --holders "$LOGS/holders.json" --smi-apps "$LOGS/compute-apps.csv" \
    --pid "$HOLDER_PID" --gpu-index "$GPU_INDEX" --gpu-uuid "$GPU_UUID" --hold-bytes "$HOLD_BYTES" \
    --tolerance-mib "$TOLERANCE_MIB"
}

step_race() {
  heading "race: gpugate wait while the holder runs, then SIGKILL it"
  if skipped race; then
    write_step 30 race skip "--skip race"
    return 0
  fi
  if [[ -z $HOLDER_PID ]]; then
    write_step 30 race skip "no holder is running (see the processes step)"
    return 0
  fi
  local left
  left=$(time_left_s)
  if ((left < WAIT_TIMEOUT_S + 15)); then
    write_step 30 race skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left, the race needs $((WAIT_TIMEOUT_S + 15))s"
    return 0
  fi
  if [[ -n $BASELINE_USED_MIB ]] && ((GPU_FREE_BYTES < GPU_TOTAL_BYTES * 9 / 10)); then
    write_step 30 race skip "GPU $GPU_INDEX was not idle before the holder started (free $((GPU_FREE_BYTES / 1048576)) MiB < 90% of $((GPU_TOTAL_BYTES / 1048576)) MiB): --min-free 0.9 could never be met"
    return 0
  fi
  if (((GPU_FREE_BYTES - HOLD_BYTES) * 10 >= GPU_TOTAL_BYTES * 9)); then
    write_step 30 race skip "the holder's $((HOLD_BYTES / 1048576)) MiB leave at least 90% of GPU $GPU_INDEX free, so --min-free 0.9 is met while it runs: use --hold-mib above $(((GPU_FREE_BYTES - GPU_TOTAL_BYTES * 9 / 10) / 1048576))"
    return 0
  fi
  local started_ms kill_ms last_held_ms released_ms="none" exit_ms wait_rc used t0 holder=$HOLDER_PID
  started_ms=$(now_ms)
  (
    # A subshell does not inherit the script's traps: pass a SIGTERM from cleanup on to gpugate.
    timeout --kill-after=5 "$(capped $((WAIT_TIMEOUT_S + 10)))" "${GPUGATE[@]}" wait --gpus "$GPU_INDEX" \
      --min-free 0.9 --stable 2s --timeout "${WAIT_TIMEOUT_S}s" -v --json >"$LOGS/wait.json" 2>"$LOGS/wait.err" &
    child=$!
    trap 'kill -TERM "$child" 2>/dev/null || true' TERM
    rc=0
    wait "$child" || rc=$?
    if kill -0 "$child" 2>/dev/null; then
      rc=0
      wait "$child" || rc=$?
    fi
    now_ms >"$SCRATCH/wait.exit-ms"
    echo "$rc" >"$SCRATCH/wait.rc"
  ) &
  WAIT_PID=$!
  # Let gpugate see the holder before killing it (its first progress line names it), at most 20 s.
  t0=$(now_ms)
  while (($(now_ms) - t0 < 20000)) && kill -0 "$WAIT_PID" 2>/dev/null; do
    grep -qE "holders=\"?([^ ]*,)?$HOLDER_PID/" "$LOGS/wait.err" 2>/dev/null && break
    sleep 0.1
  done
  sleep 0.5
  kill_ms=$(now_ms)
  last_held_ms=$kill_ms
  kill -KILL "$HOLDER_PID" 2>/dev/null || true
  say "  SIGKILLed holder pid $HOLDER_PID at +$((kill_ms - started_ms))ms after gpugate wait started"
  if [[ $MODE == real ]]; then
    wait "$LAUNCHER_PID" 2>/dev/null || true
    LAUNCHER_PID=""
  fi
  HOLDER_PID=""
  # Poll nvidia-smi until the memory is back (used within tolerance of the baseline).
  while (($(now_ms) - kill_ms < (WAIT_TIMEOUT_S + 5) * 1000)); do
    t0=$(now_ms)
    used=$(gpu_used_mib) || used=""
    if [[ -n $used && $used =~ ^[0-9]+$ ]] && ((used <= ${BASELINE_USED_MIB:-0} + USED_TOLERANCE_MIB)); then
      released_ms=$(now_ms)
      break
    fi
    last_held_ms=$t0
    sleep 0.1
  done
  wait "$WAIT_PID" 2>/dev/null || true
  WAIT_PID=""
  if [[ -n $LAUNCHER_PID ]]; then
    bounded 15 tail --pid="$LAUNCHER_PID" -f /dev/null || true
    wait "$LAUNCHER_PID" 2>/dev/null || true
    LAUNCHER_PID=""
  fi
  wait_rc=$(cat "$SCRATCH/wait.rc" 2>/dev/null || echo 70)
  exit_ms=$(cat "$SCRATCH/wait.exit-ms" 2>/dev/null || now_ms)
  helper 30-race.json race race.cjs --wait-stdout "$LOGS/wait.json" --wait-stderr "$LOGS/wait.err" \
    --wait-rc "$wait_rc" --pid "$holder" --gpu-index "$GPU_INDEX" \
    --started-ms "$started_ms" --kill-ms "$kill_ms" --last-held-ms "$last_held_ms" --released-ms "$released_ms" \
    --exit-ms "$exit_ms"
}

step_latency() {
  heading "latency: gpugate bench vs nvidia-smi"
  if skipped latency; then
    write_step 40 latency skip "--skip latency"
    return 0
  fi
  if ! bounded 20 "${GPUGATE[@]}" bench --help >"$LOGS/bench-help.txt" 2>&1; then
    write_step 40 latency skip "gpugate bench unavailable ($(tail_of "$LOGS/bench-help.txt"))"
    return 0
  fi
  local left rc=0
  left=$(time_left_s)
  if ((left < 20)); then
    write_step 40 latency skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    return 0
  fi
  # gpugate bench compares with the nvidia-smi it finds on PATH: make that the one in use here.
  mkdir -p "$SCRATCH/bin"
  ln -sf "$(command -v "$NVSMI")" "$SCRATCH/bin/nvidia-smi"
  local args=() format=text
  if grep -q -- '--json' "$LOGS/bench-help.txt"; then
    args+=(--json)
    format=json
  fi
  # The simulator needs no long series; a real host gets gpugate bench's own defaults.
  if [[ $MODE == simulate ]] && grep -q -- '--iterations' "$LOGS/bench-help.txt"; then
    args+=(--iterations 20)
  fi
  PATH="$SCRATCH/bin:$PATH" bounded 60 "${GPUGATE[@]}" bench ${args[@]+"${args[@]}"} \
    >"$LOGS/bench.out" 2>"$LOGS/bench.err" || rc=$?
  helper 40-latency.json latency latency.cjs --bench "$LOGS/bench.out" --format "$format" --bench-rc "$rc" \
    --bench-stderr "$LOGS/bench.err"
}

step_open_cost() {
  heading "open-cost: what the NVML helper process adds to opening NVML"
  if skipped open-cost; then
    write_step 45 open-cost skip "--skip open-cost"
    return 0
  fi
  if [[ -z $PACKAGE_ROOT ]]; then
    write_step 45 open-cost skip "no gpugate package to load the library from (pass --tarball or --package)"
    return 0
  fi
  local left
  left=$(time_left_s)
  if ((left < 20)); then
    write_step 45 open-cost skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    return 0
  fi
  # Its probes are bounded by the budget given (a probe stuck in the kernel is left, and named).
  helper 45-open-cost.json open-cost open-cost.cjs --package "$PACKAGE_ROOT" --node "$NODE_BIN" --budget-s "$(capped 40)"
}

# schema_dir COMMAND: the schemas/ of the gpugate being validated when it has COMMAND's (its
# documents' own), else this script's package's.
schema_dir() {
  if [[ -n $PACKAGE_ROOT && -f $PACKAGE_ROOT/schemas/$1.schema.json ]]; then
    echo "$PACKAGE_ROOT/schemas"
  else
    echo "$REPO_ROOT/schemas"
  fi
}

# has_command NAME: true when the gpugate being validated has the command (older versions lack some).
has_command() {
  bounded 20 "${GPUGATE[@]}" "$1" --help >"$LOGS/$1-help.txt" 2>&1
}

# status_args: --status FILE for a step program when the identity step read `gpugate status --json`.
status_args() {
  if [[ -s $LOGS/status.json ]]; then
    printf '%s\n' --status "$LOGS/status.json"
  fi
}

step_doctor() {
  heading "doctor: gpugate doctor --json on this host"
  if skipped doctor; then
    write_step 50 doctor skip "--skip doctor"
    return 0
  fi
  if ! has_command doctor; then
    write_step 50 doctor skip "gpugate doctor unavailable ($(tail_of "$LOGS/doctor-help.txt"))"
    return 0
  fi
  local left rc=0 extra=()
  left=$(time_left_s)
  if ((left < 30)); then
    write_step 50 doctor skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    return 0
  fi
  mapfile -t extra < <(status_args)
  # gpugate's own deadline per NVML call (--nvml-timeout) ends a hung call; this bound catches anything else.
  bounded 45 "${GPUGATE[@]}" doctor --json >"$LOGS/doctor.json" 2>"$LOGS/doctor.err" || rc=$?
  helper 50-doctor.json doctor doctor.cjs --doctor "$LOGS/doctor.json" --doctor-rc "$rc" --doctor-stderr "$LOGS/doctor.err" \
    --schemas "$(schema_dir doctor)" ${extra[@]+"${extra[@]}"}
}

step_select() {
  heading "select: gpugate select --count 1 --json, without and with a lease"
  if skipped select; then
    write_step 60 select skip "--skip select"
    write_step 61 select-lease skip "--skip select"
    return 0
  fi
  if ! has_command select; then
    write_step 60 select skip "gpugate select unavailable ($(tail_of "$LOGS/select-help.txt"))"
    write_step 61 select-lease skip "gpugate select unavailable"
    return 0
  fi
  local left rc=0 extra=() leases="$SCRATCH/leases"
  left=$(time_left_s)
  if ((left < 30)); then
    write_step 60 select skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    write_step 61 select-lease skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    return 0
  fi
  mapfile -t extra < <(status_args)
  bounded 30 "${GPUGATE[@]}" select --count 1 --no-lease --json >"$LOGS/select.json" 2>"$LOGS/select.err" || rc=$?
  helper 60-select.json select select.cjs --step select --select "$LOGS/select.json" --select-rc "$rc" \
    --select-stderr "$LOGS/select.err" --schemas "$(schema_dir select)" --count 1 ${extra[@]+"${extra[@]}"}
  # Leasing writes lease records: only into a directory of this run's, held by this shell (the
  # leases end when it exits) and removed once judged.
  rc=0
  GPUGATE_LEASE_DIR=$leases bounded 30 "${GPUGATE[@]}" select --count 1 --lease-pid $$ --json \
    >"$LOGS/select-lease.json" 2>"$LOGS/select-lease.err" || rc=$?
  helper 61-select-lease.json select-lease select.cjs --step select-lease --select "$LOGS/select-lease.json" --select-rc "$rc" \
    --select-stderr "$LOGS/select-lease.err" --schemas "$(schema_dir select)" --count 1 --lease-dir "$leases" --lease-pid $$ \
    ${extra[@]+"${extra[@]}"}
  rm -rf -- "$leases"
}

step_driver() {
  heading "driver: what this driver does where gpugate's facts are unverified (docs/hardware.md)"
  if skipped driver; then
    write_step 70 driver skip "--skip driver"
    return 0
  fi
  if ! command -v python3 >/dev/null; then
    write_step 70 driver skip "no python3 on PATH (driver-facts.py reads NVML and libcuda through ctypes)"
    return 0
  fi
  local rc=0 extra=() left
  left=$(time_left_s)
  if ((left < 30)); then
    write_step 70 driver skip "only ${left}s of the ${TOTAL_BUDGET_S}s budget left"
    return 0
  fi
  # gpugate's own reading of the same GPU (reservedInUsed), compared with the driver's semantics,
  # and its --for vllm view (CUDA's total, the context estimate), compared with CUDA's own figures
  # (the tiny fraction only makes the view appear; whether it passes does not matter here).
  bounded 30 "${GPUGATE[@]}" check --gpus "$GPU_INDEX" --max-used 100% --for vllm --min-free 0.01 --json >"$LOGS/driver-check.json" 2>"$LOGS/driver-check.err" || true
  [[ -s $LOGS/driver-check.json ]] && extra=(--check "$LOGS/driver-check.json")
  # One CUDA context on the chosen GPU (device 0 of CUDA_VISIBLE_DEVICES), created and destroyed.
  if [[ $MODE == simulate ]]; then
    LD_LIBRARY_PATH="$SCRATCH/nvml${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CUDA_VISIBLE_DEVICES="${GPU_UUID:-$GPU_INDEX}" \
      bounded 60 python3 "$HELPERS/driver-facts.py" "$GPU_INDEX" >"$LOGS/driver-facts.json" 2>"$LOGS/driver-facts.err" || rc=$?
  else
    CUDA_VISIBLE_DEVICES="${GPU_UUID:-$GPU_INDEX}" \
      bounded 60 python3 "$HELPERS/driver-facts.py" "$GPU_INDEX" >"$LOGS/driver-facts.json" 2>"$LOGS/driver-facts.err" || rc=$?
  fi
  helper 70-driver.json driver driver-facts.cjs --facts "$LOGS/driver-facts.json" --facts-rc "$rc" \
    --facts-stderr "$LOGS/driver-facts.err" ${extra[@]+"${extra[@]}"}
}

step_driver_abi() {
  heading "driver-abi: the library's exports, versions and quirks against the simulator's profile"
  local rc=0 names="$SCRATCH/table-functions.txt" nm_args=() library
  "$NODE_BIN" -e 'for (const s of require(process.argv[1]).readProfileTable().symbols) console.log(s.name)' \
    "$REPO_ROOT/sim/profile-table.cjs" >"$names"
  if ! command -v python3 >/dev/null; then
    rc=no-python
  else
    # The library gpugate reads: GPUGATE_NVML_LIBRARY when set (the simulator with --simulate), else the driver's.
    bounded 30 python3 "$HELPERS/driver-abi.py" "$names" >"$LOGS/driver-abi.json" 2>"$LOGS/driver-abi.err" || rc=$?
  fi
  # Every NVML function the library exports, for the ones the table does not know yet.
  library=$("$NODE_BIN" -e 'try { process.stdout.write(JSON.parse(require("node:fs").readFileSync(process.argv[1], "utf8")).libraryPath ?? "") } catch {}' \
    "$LOGS/driver-abi.json")
  if [[ -n $library ]] && command -v nm >/dev/null && nm -D --defined-only "$library" >"$LOGS/driver-abi.nm" 2>/dev/null; then
    nm_args=(--nm "$LOGS/driver-abi.nm")
  fi
  helper 71-driver-abi.json driver-abi driver-abi.cjs --facts "$LOGS/driver-abi.json" --facts-rc "$rc" \
    --facts-stderr "$LOGS/driver-abi.err" --table "$REPO_ROOT/sim/profile-table.cjs" ${nm_args[@]+"${nm_args[@]}"}
}

# ---------------------------------------------------------------------------------------------
# Run

say "gpu-validate: $MODE mode; work directory $WORK"
if [[ $MODE == real && -z $NVSMI ]]; then
  NVSMI=$(command -v nvidia-smi) || die 69 "no nvidia-smi on PATH: is the NVIDIA driver installed? (or pass --nvidia-smi CMD)"
fi
resolve_gpugate
if [[ $MODE == simulate ]]; then
  setup_simulator
fi
command -v "$NVSMI" >/dev/null || die 69 "--nvidia-smi $NVSMI: not an executable"

version_rc=0
GPUGATE_VERSION=$(bounded 20 "${GPUGATE[@]}" --version 2>"$LOGS/version.err") || version_rc=$?
((version_rc == 0)) || die 69 "${GPUGATE[*]} --version exited $version_rc: $(tail_of "$LOGS/version.err")"
say "gpugate: ${GPUGATE[*]} ($GPUGATE_VERSION); nvidia-smi: $NVSMI"

"$NODE_BIN" -e '
  const os = require("node:os");
  const [mode, startedMs, gpugate, version, nvidiaSmi, library, gpu, holdMib, toleranceMib, usedToleranceMib, skip] = process.argv.slice(1);
  process.stdout.write(JSON.stringify({
    mode, startedMs: Number(startedMs), startedAt: new Date(Number(startedMs)).toISOString(),
    host: { hostname: os.hostname(), kernel: os.release(), arch: process.arch, node: process.version },
    gpugate: { command: gpugate, version }, nvidiaSmi, simulatorLibrary: library || null,
    settings: {
      gpu: Number(gpu), holdMib: holdMib === "" ? "20% of total" : Number(holdMib),
      toleranceMib: Number(toleranceMib), usedToleranceMib: Number(usedToleranceMib),
      skip: skip.split(",").filter((s) => s !== ""),
    },
  }, null, 2));' "$MODE" "$START_MS" "${GPUGATE[*]}" "$GPUGATE_VERSION" "$NVSMI" "${SIM_LIBRARY:-}" \
  "$GPU_INDEX" "$HOLD_MIB" "$TOLERANCE_MIB" "$USED_TOLERANCE_MIB" "$SKIP" >"$SCRATCH/meta.json"

if step_identity; then
  step_processes || true
  step_race
else
  write_step 20 processes skip "the identity step could not read the GPUs"
  write_step 30 race skip "the identity step could not read the GPUs"
fi
step_latency
step_open_cost
step_doctor
step_select
step_driver
step_driver_abi

heading "summary"
report_rc=0
"$NODE_BIN" "$HELPERS/report.cjs" --steps "$STEPS" --meta "$SCRATCH/meta.json" --out "$REPORT" || report_rc=$?
exit "$report_rc"
