#!/usr/bin/env bash
# alf vs Sample Factory 2.1.1: Atari Breakout training throughput, side by side, on one
# GPU machine without network (issue 31; docs/benchmarks.md, "alf and Sample Factory on a
# 16-core GPU machine"). On a machine with pip access, first fetch the wheels:
#
#     bash bench/gpu_side_by_side/fetch_wheels.sh        # -> bench/gpu_side_by_side/wheels/
#
# then copy the repository (wheels included) to the GPU machine and, from the repository
# root, with OUT naming an empty folder:
#
#     OUT=/path/to/empty bash bench/gpu_side_by_side/run.sh
#
# Writes $OUT/log.txt (every command's full output, in order), $OUT/summary.json (one
# record per run), $OUT/monitor.csv (epoch s, load average, GPU util %, GPU MiB every
# 2 s) and $OUT/learner_host_cost*.json (the learner's host time per phase). Every run
# is under `timeout` (which signals the run's whole process group), so one failure never
# stops the script, and the script ends within BUDGET_S seconds (480 by
# default) however slow the runs are. PRECISION_ROWS=0 leaves out the bf16 rows.
#
# PROFILE=local runs the same steps shrunk for a 2-core CPU machine: device cpu, few envs
# and workers, short runs. ONLY="name ..." runs those steps.
set -u
export PYTHONUNBUFFERED=1
export PY=${PY:-python3}
PROFILE=${PROFILE:-remote}
OUT=${OUT:?set OUT to an empty output folder}
ONLY=${ONLY:-}
BUDGET_S=${BUDGET_S:-480}
PRECISION_ROWS=${PRECISION_ROWS:-1}
export GPU_DIR=$PWD/bench/gpu_side_by_side   # this folder; the repository root is $PWD
export ALF_SRC=$PWD
export WHEELS=${WHEELS:-$GPU_DIR/wheels}
export SITE_ALF=${SITE_ALF:-/tmp/site_alf}
export SITE_SF=${SITE_SF:-/tmp/site_sf}
export WORK=${WORK:-/tmp/gpubench}   # run dirs, per-step logs and exit codes (not in $OUT)
mkdir -p "$OUT"
LOG=$OUT/log.txt
T0=$(date +%s)
DEADLINE=$((T0 + BUDGET_S))
rm -rf "$WORK" && mkdir -p "$WORK/steps"
: > "$WORK/steps.tsv"

if [ "$PROFILE" = local ]; then
  ALF_DEVICE=cpu; SF_DEVICE=cpu
  A_ARGS="--device cpu --iterations 10"; A_CAP=60
  B_WARM=1; B_ITERS=2; B_CAP=85
  C_ENVS=8; C_WORKERS=1; C_GROUPS=2; C_PWS="1 0"; C_WARM=1; C_ITERS=2; C_CAP=85
  D_NW=2; D_NEPW=4; D_SPLITS=2; D_SECS=65
  E_EXTRA="--num_workers=2"; E_SECS=35
else
  ALF_DEVICE=cuda; SF_DEVICE=gpu
  A_ARGS="--device cuda --iterations 60"; A_CAP=40
  B_WARM=3; B_ITERS=36; B_CAP=60
  C_ENVS=96; C_WORKERS=12; C_GROUPS=2; C_PWS="1 0 2"; C_WARM=2; C_ITERS=6; C_CAP=120
  D_NW=12; D_NEPW=8; D_SPLITS=2; D_SECS=75
  E_EXTRA=""; E_SECS=50
fi
export ALF_DEVICE SF_DEVICE C_ENVS C_WORKERS C_GROUPS C_WARM C_ITERS

say() { echo "$*" | tee -a "$LOG"; }
elapsed() { echo $(( $(date +%s) - T0 )); }
wanted() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }

# step NAME CAP RESERVE SIGNAL KILL_AFTER CMD...
# Runs CMD (a program or one of the exported functions below; stdout+stderr to $LOG and
# to $WORK/steps/NAME.log) under `timeout -s SIGNAL -k KILL_AFTER T`, with
# T = min(CAP, seconds left - RESERVE - KILL_AFTER): RESERVE is kept for the priority
# runs after it. Skipped when T < 15 s. Exit status in $WORK/steps/NAME.rc.
step() {
  local name=$1 cap=$2 reserve=$3 sig=$4 kill_after=$5; shift 5
  wanted "$name" || return 0
  local now left t s rc
  now=$(date +%s); left=$((DEADLINE - now - reserve - kill_after)); t=$cap
  [ "$left" -lt "$t" ] && t=$left
  if [ "$t" -lt 15 ]; then
    say "===== [$name] SKIPPED: only ${left}s of the ${BUDGET_S}s budget left for it (elapsed $(elapsed)s)"
    echo skipped > "$WORK/steps/$name.rc"
    printf '%s\t%s\t%s\n' "$name" "$now" "$now" >> "$WORK/steps.tsv"
    return 0
  fi
  say "===== [$name] $(date -u +%FT%TZ) elapsed $(elapsed)s; timeout -s $sig ${t}s (cap ${cap}s): $*"
  s=$(date +%s)
  { timeout -s "$sig" -k "$kill_after" "$t" bash -c '"$@"' _ "$@" 2>&1
    echo $? > "$WORK/steps/$name.rc"; } | tee -a "$LOG" > "$WORK/steps/$name.log"
  rc=$(cat "$WORK/steps/$name.rc")
  printf '%s\t%s\t%s\n' "$name" "$s" "$(date +%s)" >> "$WORK/steps.tsv"
  say "===== [$name] exit status $rc after $(( $(date +%s) - s ))s; elapsed $(elapsed)s"
}

# ---- the commands (exported: `step` runs them in `bash -c` under `timeout`)
alf_env() { echo "+ PYTHONPATH=$SITE_ALF:$ALF_SRC $*"; env PYTHONPATH="$SITE_ALF:$ALF_SRC" "$@"; }
sf_env() { echo "+ PYTHONPATH=$SITE_SF $*"; env PYTHONPATH="$SITE_SF" "$@"; }

install_wheels() {  # TARGET WHEEL_DIR (pip; a plain unzip if this python has no pip)
  rm -rf "$1"
  if "$PY" -m pip --version > /dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$1" "$2"/*.whl
  else
    echo "pip not found: unzipping the wheels into $1"
    "$PY" -c 'import sys, zipfile; [zipfile.ZipFile(w).extractall(sys.argv[1]) for w in sys.argv[2:]]' "$1" "$2"/*.whl
  fi
  ls "$1"
}

info() {
  nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  lscpu | grep -E "^(Model name|Socket|Core|Thread|CPU\(s\))"
  echo "bf16 CPU flags: $(grep -o -w -E 'amx_bf16|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
  echo "nproc: $(nproc)"; free -g | head -2; df -h /tmp /dev/shm; cat /proc/loadavg
  "$PY" -c 'import sys, torch, numpy; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__); print("torch.cuda.is_available():", torch.cuda.is_available()); print("device:", torch.cuda.get_device_name(0) if torch.cuda.is_available() else "-")'
  alf_env "$PY" -c 'import alf, gymnasium, ale_py, numpy, gin, optree; print("alf side:", alf.__file__, "gymnasium", gymnasium.__version__, "ale_py", ale_py.__version__, "numpy", numpy.__version__)'
  sf_env "$PY" -c 'import importlib.metadata as m, gymnasium, ale_py, numpy, sample_factory, faster_fifo, signal_slot, tensorboardX, cv2; print("sf side: sample-factory", m.version("sample-factory"), "gymnasium", gymnasium.__version__, "ale_py", ale_py.__version__, "numpy", numpy.__version__, "cv2", cv2.__version__)'
}

# alf's train command the way bench/train_runs.py runs it for throughput: summaries every
# iteration (progress.csv rows), no env-step horizon, no checkpoint or evaluation in the way.
alf_train() {  # ROOT_DIR WARM ITERS CONF [--conf_param ...]
  local root=$1 warm=$2 iters=$3 conf=$4; shift 4
  rm -rf "$root"
  alf_env "$PY" -m alf.bin.train --conf="$conf" --root_dir="$root" \
    --conf_param "TrainerConfig.device='$ALF_DEVICE'" \
    --conf_param "TrainerConfig.num_iterations=$((warm + iters))" \
    --conf_param "TrainerConfig.num_env_steps=0" \
    --conf_param "TrainerConfig.summary_interval=1" \
    --conf_param "TrainerConfig.checkpoint_interval=1000000" \
    --conf_param "TrainerConfig.evaluate=False" \
    --conf_param "TrainerConfig.progress_interval_seconds=5" "$@"
}

alf_appo() {  # NAME POLICY_WORKERS [--conf_param ...]: appo_atari.gin, C_ENVS envs in
              # C_WORKERS env workers x C_GROUPS groups
  local name=$1 pw=$2; shift 2
  alf_train "$WORK/alf/$name" "$C_WARM" "$C_ITERS" appo_atari.gin \
    --conf_param "create_environment.num_parallel_environments=$C_ENVS" \
    --conf_param "TrainerConfig.num_env_workers=$C_WORKERS" \
    --conf_param "TrainerConfig.env_groups_per_worker=$C_GROUPS" \
    --conf_param "TrainerConfig.num_policy_workers=$pw" "$@"
}
BF16=(--conf_param 'TrainerConfig.train_precision="bf16"' --conf_param 'TrainerConfig.act_precision="bf16"')
BF16_TRAIN=(--conf_param 'TrainerConfig.train_precision="bf16"')

sf_train() {  # EXPERIMENT ARGS...: Sample Factory 2.1.1's Atari example on Breakout
  local exp=$1; shift
  sf_env "$PY" "$GPU_DIR/sf_train_atari.py" --env=atari_breakout --experiment="$exp" \
    --train_dir="$WORK/sf" --restart_behavior=overwrite --device="$SF_DEVICE" --seed=0 \
    --with_wandb=False --save_every_sec=100000 "$@"
}
export -f alf_env sf_env install_wheels info alf_train alf_appo sf_train

say "===== gpu/run.sh profile=$PROFILE start $(date -u +%FT%TZ) budget ${BUDGET_S}s host $(hostname) cwd $PWD"

# GPU utilisation / memory and the load average every 2 s, for the whole script
( while :; do
    g=$(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
    echo "$(date +%s),$(cut -d' ' -f1 /proc/loadavg),${g:-,}"
    sleep 2
  done > "$OUT/monitor.csv" ) &
MON_PID=$!
trap 'kill $MON_PID 2>/dev/null' EXIT

# 1. wheels -> /tmp/site_alf, /tmp/site_sf
step install_alf 120 0 TERM 10 install_wheels "$SITE_ALF" "$WHEELS/whl_alf"
step install_sf 120 0 TERM 10 install_wheels "$SITE_SF" "$WHEELS/whl_sf"

# 2. the machine
step info 60 0 TERM 10 info

# Order and reserves: the rows the issue's table needs first (sync PPO, async APPO with the
# default and the fastest policy-worker counts, Sample Factory in the same shape), each
# keeping the worst case of the Sample Factory run (cap + kill grace) in reserve so a slow
# one cannot starve it; then the bf16 rows and the remaining counts with what is left.
R_D=$((D_SECS + 20))

# 3a. CUDA correctness smoke in bf16 (PPO / LSTM-PPO / A2C on CartPole, model on the
# device, TrainerConfig.train_precision / act_precision = "bf16"): every network call
# autocast to bf16 on the device, parameters and optimizer state fp32. FP32_SMOKE=1 adds
# the fp32 smoke.
[ "${FP32_SMOKE:-0}" = 1 ] && step a_cuda_check "$A_CAP" "$R_D" TERM 10 alf_env "$PY" "$ALF_SRC/bench/cuda_check.py" $A_ARGS
[ "$PRECISION_ROWS" = 1 ] && step a_cuda_check_bf16 "$A_CAP" "$R_D" TERM 10 alf_env "$PY" "$ALF_SRC/bench/cuda_check.py" $A_ARGS --precision bf16

# 3b. alf sync PPO: the shipped ppo_atari.gin (8 envs x 128 steps, 4 epochs of 256) on the
# device, fp32 then bf16 (training and acting)
step b_alf_ppo_sync "$B_CAP" "$R_D" TERM 15 \
  alf_train "$WORK/alf/b_alf_ppo_sync" "$B_WARM" "$B_ITERS" ppo_atari.gin
[ "$PRECISION_ROWS" = 1 ] && step b_alf_ppo_sync_bf16 "$B_CAP" "$R_D" TERM 15 \
  alf_train "$WORK/alf/b_alf_ppo_sync_bf16" "$B_WARM" "$B_ITERS" ppo_atari.gin "${BF16[@]}"

# 3c. alf async APPO (appo_atari.gin; ale_vector envs), one row per policy-worker count
# in C_PWS; the first two first (the default with a GPU, 1, and in-worker inference, 0)
for pw in $(echo $C_PWS | cut -d' ' -f1-2); do
  step "c_alf_appo_pw$pw" "$C_CAP" "$R_D" TERM 15 alf_appo "c_alf_appo_pw$pw" "$pw"
done

# 3d. Sample Factory APPO (async_rl=True), the same shape: D_NW workers x D_NEPW envs (2
# splits: double-buffered), rollout 128, 4 epochs of 4 x 256-sample mini-batches per 1,024
# samples (the Atari example's defaults), policy on the GPU. Stopped by SIGINT at its time
# limit (SF's clean Ctrl-C stop); SF 2.1.1's --train_for_seconds never fires
# (Runner.total_train_seconds is never updated).
step d_sf_appo "$D_SECS" 0 INT 20 sf_train sf_appo \
  --num_workers="$D_NW" --num_envs_per_worker="$D_NEPW" --worker_num_splits="$D_SPLITS" \
  --rollout=128 --batch_size=256 --num_batches_per_epoch=4 --num_epochs=4 --async_rl=True

# 3f. async APPO in bf16: in-worker inference with the GPU learner in bf16; one policy
# worker with learner and policy worker in bf16
if [ "$PRECISION_ROWS" = 1 ]; then
  step c_alf_appo_pw0_bf16train "$C_CAP" 0 TERM 15 alf_appo c_alf_appo_pw0_bf16train 0 "${BF16_TRAIN[@]}"
  step c_alf_appo_pw1_bf16 "$C_CAP" 0 TERM 15 alf_appo c_alf_appo_pw1_bf16 1 "${BF16[@]}"
fi

# 3c (continued): the other policy-worker counts
for pw in $(echo $C_PWS | cut -s -d' ' -f3-); do
  step "c_alf_appo_pw$pw" "$C_CAP" 0 TERM 15 alf_appo "c_alf_appo_pw$pw" "$pw"
done

# 3e. Sample Factory with its shipped Atari defaults (8 workers x 1 env, async_rl=False)
step e_sf_default "$E_SECS" 0 INT 20 sf_train sf_default $E_EXTRA

# 3g. where the learner's host time goes, per phase (copy, V-trace preprocess, mini-batch
# updates), with the aten op count and the GPU syncs per iteration
# (bench/learner_host_cost.py): C_ENVS trajectories per iteration, as the async rows
# train; then each phase synchronized (its wall time then holds its GPU time).
# LEARNER_HOST=0 leaves it out; ONLY="f_learner_host f_learner_host_synced" runs just it
# (the rows before it may leave too little of BUDGET_S).
if [ "${LEARNER_HOST:-1}" = 1 ]; then
  wanted f_learner_host && rm -f "$OUT/learner_host_cost.json"  # no stale json
  wanted f_learner_host_synced && rm -f "$OUT/learner_host_cost_synced.json"
  step f_learner_host 60 0 TERM 10 alf_env "$PY" "$ALF_SRC/bench/learner_host_cost.py" \
    --device "$ALF_DEVICE" --envs "$C_ENVS" --warmup 1 --iters 3 \
    --out "$OUT/learner_host_cost.json"
  step f_learner_host_synced 60 0 TERM 10 alf_env "$PY" "$ALF_SRC/bench/learner_host_cost.py" \
    --device "$ALF_DEVICE" --envs "$C_ENVS" --warmup 1 --iters 3 --sync_phases \
    --out "$OUT/learner_host_cost_synced.json"
fi

# 4. summary: agent steps/s (alf, from progress.csv, warm-up excluded) and frames/s (SF,
# frame skip 4: frames = 4 x agent steps), exit status, GPU utilisation during the run
say "===== summary (elapsed $(elapsed)s)"
WORK="$WORK" OUT="$OUT" B_WARM="$B_WARM" C_WARM="$C_WARM" PROFILE="$PROFILE" \
  "$PY" - <<'EOF' 2>&1 | tee -a "$LOG"
import csv, json, os, re, statistics, time
work, out = os.environ["WORK"], os.environ["OUT"]
steps = {}
with open(os.path.join(work, "steps.tsv")) as f:
    for line in f:
        name, s, e = line.split("\t")
        steps[name] = (int(s), int(e))
mon = []
try:
    with open(os.path.join(out, "monitor.csv")) as f:
        for row in csv.reader(f):
            try:
                mon.append((int(row[0]), float(row[1]), float(row[2]) if row[2].strip() else None,
                            float(row[3]) if row[3].strip() else None))
            except (ValueError, IndexError):
                pass
except OSError:
    pass

def rc_of(name):
    try:
        return open(os.path.join(work, "steps", name + ".rc")).read().strip()
    except OSError:
        return "not run"

def status(rc, planned_stop=False):
    return {"0": "ok", "124": "stopped at its time limit" + (" (planned)" if planned_stop else ""),
            "137": "killed (did not stop after the signal)", "skipped": "skipped (time budget)",
            "not run": "not run"}.get(rc, "FAILED")

def window(name):
    s, e = steps.get(name, (0, 0))
    rows = [m for m in mon if s <= m[0] <= e]
    util = [m[2] for m in rows if m[2] is not None]
    mem = [m[3] for m in rows if m[3] is not None]
    load = [m[1] for m in rows]
    return {"gpu_util_mean_pct": round(statistics.mean(util), 1) if util else None,
            "gpu_mem_max_mib": max(mem) if mem else None,
            "load1_mean": round(statistics.mean(load), 2) if load else None}

def alf_rate(name, warm):
    root = os.path.join(work, "alf", name)
    res = {"unit": "agent steps/s", "warmup_iterations": warm}
    try:
        with open(os.path.join(root, "progress.csv")) as f:
            rows = {int(r["iteration"]): r for r in csv.DictReader(f)}
    except (OSError, ValueError, KeyError) as e:
        res["error"] = f"no progress.csv ({e.__class__.__name__})"
        return res
    its = sorted(rows)
    res["iterations_logged"] = len(its)
    first = warm if warm in rows else None
    if first is None or its[-1] <= first:
        res["error"] = f"too few iterations after warm-up ({its[-1] if its else 0} logged)"
        return res
    a, b = rows[first], rows[its[-1]]
    steps_ = int(b["env_steps"]) - int(a["env_steps"])
    dt = float(b["wall_time_s"]) - float(a["wall_time_s"])
    res.update(value=round(steps_ / dt, 1), frames_per_s=round(4 * steps_ / dt, 1),
               measured_iterations=f"{first + 1}-{its[-1]}", measured_agent_steps=steps_,
               measured_seconds=round(dt, 2))
    try:
        log = open(os.path.join(work, "steps", name + ".log"), errors="replace").read()
        lags = re.findall(r"\| lag (\d+)/([\d.]+)/(\d+)", log)
        if lags:
            res["last_policy_lag_min_avg_max"] = "/".join(lags[-1])
        m = re.findall(r"\[alf\] async unroll \(\w+\):[^\n]*", log)
        if m:
            res["layout"] = m[-1]
    except OSError:
        pass
    return res

ANSI = re.compile(r"\x1b\[[0-9;]*m")
STAMP = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]"
def sf_rate(name):
    res = {"unit": "env frames/s (frame skip 4: agent steps/s = frames/s / 4)"}
    try:
        log = ANSI.sub("", open(os.path.join(work, "steps", name + ".log"), errors="replace").read())
    except OSError:
        res["error"] = "no log"
        return res
    pts = []
    for m in re.finditer(STAMP + r"\[\d+\] Fps is \(10 sec: ([\d.na]+), 60 sec: ([\d.na]+), "
                         r"300 sec: ([\d.na]+)\)\. Total num frames: (\d+)\. Throughput: 0: ([\d.na]+)", log):
        t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
        pts.append((t, float(m.group(3)), float(m.group(4)), int(m.group(6)), m.group(7)))
    res["fps_reports"] = len(pts)
    if pts:
        res["fps_10s_all"] = [None if p[1] != p[1] else p[1] for p in pts]
        res["last_fps_10s_60s"] = [None if x != x else x for x in pts[-1][1:3]]
        res["total_frames"] = pts[-1][3]
    started = [p for p in pts if p[3] > 0]
    if len(started) >= 2:
        # steady state: from 10 s after the first trained frames to the last report (all
        # reports with trained frames when that leaves fewer than two)
        t_start = started[0][0] + 10
        ss = [p for p in started if p[0] >= t_start]
        if len(ss) < 2:
            ss = started
        a, b = ss[0], ss[-1]
        if b[0] > a[0] and b[3] > a[3]:
            fps = (b[3] - a[3]) / (b[0] - a[0])
            res.update(value=round(fps, 1), agent_steps_per_s=round(fps / 4, 1),
                       measured_frames=b[3] - a[3], measured_seconds=round(b[0] - a[0], 1))
            # the frame count moves in steps of one training batch (4 x 1,024 frames here),
            # sampled every 5 s: a window of few steps is coarse
            if b[3] - a[3] < 20 * 4096:
                res["note"] = (f"short window: {(b[3] - a[3]) // 4096} training batches in "
                               f"{b[0] - a[0]:.0f} s, the number is coarse")
        tail10 = [p[1] for p in ss if p[1] == p[1]]
        if tail10:
            res["median_fps_10s_steady"] = statistics.median(tail10)
    m = re.findall(r"Collected \{[^}]*\}, FPS: ([\d.]+)", log)
    if m:
        res["whole_run_fps_incl_startup"] = float(m[-1])
    lag = re.findall(r"Policy #0 lag: \(min: ([-\d.]+), avg: ([-\d.]+), max: ([-\d.]+)\)", log)
    if lag:
        res["last_policy_lag_min_avg_max"] = "/".join(lag[-1])
    if "value" not in res:
        res["error"] = "no steady-state Fps reports"
    return res

records = []
for name in steps:
    if name in ("install_alf", "install_sf", "info"):
        rec = {"name": name}
    elif name.startswith("a_"):
        rec = {"name": name, "unit": "-"}
        try:
            log = open(os.path.join(work, "steps", name + ".log"), errors="replace").read()
            rec["lines"] = re.findall(r"^\S+\.gin: params on .*$", log, re.M)
        except OSError:
            pass
    elif name.startswith("p_"):
        rec = {"name": name, "unit": "-"}
        try:
            log = open(os.path.join(work, "steps", name + ".log"), errors="replace").read()
            rec["lines"] = [l for l in log.splitlines() if " passed" in l or " failed" in l][-1:]
        except OSError:
            pass
    elif name.startswith("b_"):
        rec = {"name": name, **alf_rate(name, int(os.environ["B_WARM"]))}
    elif name.startswith("c_"):
        rec = {"name": name, **alf_rate(name, int(os.environ["C_WARM"]))}
    elif name.startswith("f_"):  # learner_host_cost.py: host CPU-s per 1k agent steps
        rec = {"name": name, "unit": "-"}
        try:
            json_name = {"f_learner_host": "learner_host_cost.json",
                         "f_learner_host_synced": "learner_host_cost_synced.json"}[name]
            cost = json.load(open(os.path.join(out, json_name)))
            rec["host_cpu_s_per_1k"] = {k: round(v["cpu_s_per_1k"], 4)
                                        for k, v in cost["phases"].items()}
            rec["aten_ops_per_iteration"] = cost["aten_ops_per_iteration"]
            rec["gpu_syncs_per_iteration"] = sum(cost["sync_sites_per_iteration"].values())
        except (OSError, ValueError, KeyError) as e:  # KeyError: an f_ step not listed above
            rec["error"] = f"no learner_host_cost json ({e.__class__.__name__})"
    else:
        rec = {"name": name, **sf_rate(name)}
    rc = rc_of(name)
    rec.update(exit_status=rc, status=status(rc, name.startswith(("d_", "e_"))),
               seconds=steps[name][1] - steps[name][0], **window(name))
    records.append(rec)
json.dump({"profile": os.environ["PROFILE"], "runs": records}, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(f"{'run':22s} {'throughput':>12s}  unit                 exit  status / notes")
for r in records:
    v = r.get("value")
    vs = f"{v:12,.1f}" if isinstance(v, (int, float)) else f"{'-':>12s}"
    unit = r.get("unit", "")
    unit = ("agent steps/s" if unit.startswith("agent") else
            "env frames/s" if unit.startswith("env frames") else "")
    notes = [r["status"]]
    if "frames_per_s" in r:
        notes.append(f"= {r['frames_per_s']:,.0f} frames/s")
    if "agent_steps_per_s" in r:
        notes.append(f"= {r['agent_steps_per_s']:,.1f} agent steps/s")
    for k in ("host_cpu_s_per_1k", "aten_ops_per_iteration", "gpu_syncs_per_iteration",
              "last_policy_lag_min_avg_max", "measured_iterations", "median_fps_10s_steady",
              "whole_run_fps_incl_startup", "gpu_util_mean_pct", "error", "note"):
        if r.get(k) is not None:
            notes.append(f"{k}={r[k]}")
    print(f"{r['name']:22s} {vs}  {unit:20s} {r['exit_status']:>5s}  " + "; ".join(notes))
    for line in r.get("lines", []):
        print(f"{'':22s} {line}")
EOF
say "===== done: elapsed $(elapsed)s (budget ${BUDGET_S}s)"
