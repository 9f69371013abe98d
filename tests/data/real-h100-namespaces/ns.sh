#!/bin/bash
set -u; export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
J=/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4247
for d in /sys/fs/cgroup /sys/fs/cgroup/system.slice /sys/fs/cgroup/system.slice/slurmstepd.scope $J $J/step_0 $J/step_0/user; do
  mkdir -p $d; echo "+cpu +memory" > $d/cgroup.subtree_control 2>/dev/null; done
mkdir -p $J/step_0/user/task_0 /tmp/emptymap
( echo $BASHPID > $J/step_0/user/task_0/cgroup.procs && exec env SLURM_JOB_ID=4247 python3 tests/data/real-h100-cgroup/workload.py 25 ) > /dev/null 2>&1 &
sleep 8
echo "== host namespaces"; python3 tests/data/real-h100-namespaces/nsprobe.py
echo "== private PID namespace (unshare --pid --fork --mount-proc)"; unshare --pid --fork --mount-proc python3 tests/data/real-h100-namespaces/nsprobe.py
echo "== private cgroup namespace (unshare --cgroup)"; unshare --cgroup python3 tests/data/real-h100-namespaces/nsprobe.py
echo "== both"; unshare --cgroup --pid --fork --mount-proc python3 tests/data/real-h100-namespaces/nsprobe.py
wait
