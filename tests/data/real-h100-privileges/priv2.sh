#!/bin/bash
# The collector unprivileged, as the shipped systemd unit runs it, reading a job that runs
# as an ordinary user (uid 1000, as Slurm runs jobs): which capabilities open its environ.
set -u; export PYTHONUNBUFFERED=1
J=/sys/fs/cgroup/system.slice/slurmstepd.scope/job_4249
for d in /sys/fs/cgroup /sys/fs/cgroup/system.slice /sys/fs/cgroup/system.slice/slurmstepd.scope $J $J/step_0 $J/step_0/user; do
  mkdir -p $d; echo "+cpu +memory" > $d/cgroup.subtree_control 2>/dev/null; done
mkdir -p $J/step_0/user/task_0 /tmp/emptymap /tmp/u1000
cp -r . /tmp/repo && chmod -R a+rX /tmp/repo /tmp/emptymap && chown 1000:1000 /tmp/u1000
( echo $BASHPID > $J/step_0/user/task_0/cgroup.procs && exec setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/tmp/u1000 SLURM_JOB_ID=4249 SLURM_JOB_USER=erin SLURM_JOB_NAME=priv-check SLURM_CPUS_ON_NODE=8 python3 /tmp/repo/tests/data/real-h100-cgroup/workload.py 24 ) > /tmp/wl.log 2>&1 &
sleep 9
ps -o pid,uid,comm -C python3 | head -3
P="env PYTHONPATH=/tmp/repo HOME=/tmp python3 /tmp/repo/tests/data/real-h100-privileges/privprobe.py"
for caps in "+sys_ptrace" "+dac_read_search" "+sys_ptrace,+dac_read_search"; do
  echo "== nobody with $caps"
  setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=$caps --ambient-caps=$caps $P 2>&1 | grep -v "^uid"
done
wait; tail -2 /tmp/wl.log
