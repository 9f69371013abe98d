#!/bin/bash
# Device check: two Slurm-shaped jobs sharing the GPU through CUDA MPS (job 4244: two
# processes; job 4245: one), each in slurmstepd's task cgroups; what the real NVML lists
# and what the collector attributes, with no mapping file.
set -u
export PYTHONUNBUFFERED=1
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY /tmp/emptymap
uname -r; nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv,noheader
nvidia-cuda-mps-control -d && echo "MPS control daemon started" || echo "MPS control daemon FAILED"
S=/sys/fs/cgroup/system.slice/slurmstepd.scope
for d in /sys/fs/cgroup /sys/fs/cgroup/system.slice $S; do mkdir -p $d; echo "+cpu +memory +cpuset" > $d/cgroup.subtree_control; done
start() {  # job task user
  local J=$S/job_$1
  for d in $J $J/step_0 $J/step_0/user; do mkdir -p $d; echo "+cpu +memory" > $d/cgroup.subtree_control 2>/dev/null; done
  mkdir -p $J/step_0/user/task_$2
  ( echo $BASHPID > $J/step_0/user/task_$2/cgroup.procs &&
    exec env SLURM_JOB_ID=$1 SLURM_JOB_USER=$3 SLURM_JOB_UID=100$2 SLURM_JOB_NAME=mps-$1 \
      SLURM_JOB_PARTITION=shared SLURM_STEP_ID=0 SLURM_PROCID=$2 python3 tests/data/real-h100-cgroup/workload.py 16 ) \
    > $OUT/wl_$1_$2.log 2>&1 &
}
start 4244 0 carol; start 4244 1 carol; start 4245 0 dave
sleep 7
echo "== nvidia-smi"; nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
echo "== NVML lists"; python3 tests/data/real-h100-mps/nvml_lists.py
echo "== capture (no mapping file)"
CLUSTERUI_NVML=nvml CLUSTERUI_INTERVAL=1 CLUSTERUI_CLUSTER=device CLUSTERUI_NODE=h100-devnode \
  CLUSTERUI_JOB_MAP_DIR=/tmp/emptymap PYTHONPATH=. \
  python3 tests/data/real-h200/capture.py 6 $OUT/mps6.json 2>&1 | tail -8
wait
echo quit | nvidia-cuda-mps-control; sleep 1
tail -n 3 $OUT/wl_*.log; echo "== MPS log"; tail -n 12 $CUDA_MPS_LOG_DIRECTORY/control.log 2>&1; tail -n 5 $CUDA_MPS_LOG_DIRECTORY/server.log 2>&1
python3 - <<'PY'
import json, os
b = json.load(open(os.environ["OUT"] + "/mps6.json"))
print("jobs", json.dumps(b["jobs"])); f = b["gpu_samples"]["fields"]
print("gpu job column", [dict(zip(f, r))["job"] for r in b["gpu_samples"]["rows"]])
print("sm", [round(dict(zip(f, r))["sm_active_pct"] or -1, 1) for r in b["gpu_samples"]["rows"]])
print("job_samples", json.dumps(b["job_samples"]["rows"][-2:]))
PY
