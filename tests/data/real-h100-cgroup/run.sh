#!/bin/bash
# Device check: the collector's attribution through a real kernel's cgroup v2 and the
# real NVML process list (no mapping file), plus the job's CPU and memory from the cgroup.
set -u
export PYTHONUNBUFFERED=1
echo "== machine"; uname -r; nvidia-smi --query-gpu=name,memory.total,driver_version,power.limit --format=csv
python3 -c "import pynvml; print('nvidia-ml-py', pynvml.__version__ if hasattr(pynvml,'__version__') else '?')" 2>&1
echo "cgroup fs: $(stat -fc %T /sys/fs/cgroup)"; cat /proc/self/cgroup
cat /sys/fs/cgroup/cgroup.controllers 2>&1; cat /sys/fs/cgroup/cgroup.subtree_control 2>&1
J=/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4243
echo "== cgroup"
mkdir -p /sys/fs/cgroup/system.slice 2>&1
for d in /sys/fs/cgroup /sys/fs/cgroup/system.slice /sys/fs/cgroup/system.slice/slurmstepd.scope $J $J/step_0 $J/step_0/user; do
  mkdir -p $d; echo "+cpu +memory +cpuset" > $d/cgroup.subtree_control 2>&1 || echo "subtree_control failed at $d"
done
mkdir -p $J/step_0/user/task_0
echo 0-3 > $J/cpuset.cpus 2>&1 || echo "cpuset.cpus failed"
ls $J | head -50 | tr '\n' ' '; echo
mkdir -p /tmp/emptymap
echo "== workload in $J/step_0/user/task_0"
( echo $BASHPID > $J/step_0/user/task_0/cgroup.procs && cat /proc/self/cgroup &&
  exec env SLURM_JOB_ID=4243 SLURM_JOB_USER=bob SLURM_JOB_UID=1001 SLURM_JOB_NAME=train-resnet \
    SLURM_JOB_ACCOUNT=vision SLURM_JOB_PARTITION=gpu SLURM_CPUS_ON_NODE=4 SLURM_JOB_NUM_NODES=1 \
    SLURM_STEP_ID=0 python3 tests/data/real-h100-cgroup/workload.py 17 ) > $OUT/workload.log 2>&1 &
WL=$!
sleep 4
echo "workload pid $WL; cgroup $(cat /proc/$WL/cgroup 2>&1)"; cat $J/cpu.stat 2>&1 | head -3; cat $J/memory.current 2>&1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv
echo "== capture (no mapping file)"
CLUSTERUI_NVML=nvml CLUSTERUI_INTERVAL=1 CLUSTERUI_CLUSTER=device CLUSTERUI_NODE=h100-devnode \
  CLUSTERUI_JOB_MAP_DIR=/tmp/emptymap PYTHONPATH=. \
  python3 tests/data/real-h100-cgroup/capture2.py 10 $OUT/cgroup10.json $J 4 $OUT/after4.json 2>&1 | tail -25
wait $WL; cat $OUT/workload.log
python3 - <<'PY'
import json, os
b = json.load(open(os.environ["OUT"] + "/cgroup10.json"))
print("gpus", json.dumps(b["gpus"])); print("jobs", json.dumps(b["jobs"]))
print("job_samples", json.dumps(b["job_samples"]))
f = b["gpu_samples"]["fields"]
print("gpu job column", [dict(zip(f, r))["job"] for r in b["gpu_samples"]["rows"]])
print("events", json.dumps(b["events"])[:400]); print("health", json.dumps(b["gpu_health"]["rows"][:1]))
a = json.load(open(os.environ["OUT"] + "/after4.json"))
print("after: jobs", json.dumps(a["jobs"])); f = a["gpu_samples"]["fields"]
print("after: gpu job column", [dict(zip(f, r))["job"] for r in a["gpu_samples"]["rows"]])
print("after: job_samples", json.dumps(a["job_samples"]["rows"]))
PY
