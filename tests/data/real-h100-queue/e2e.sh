#!/bin/bash
# Device check: the collector as a node runs it. Its wheel (built by `make dist`) installed
# with its pinned dependencies, the `clusterui-collector` console script with a node key,
# the real Slurm prolog/epilog scripts from the wheel, the real NVML, shipping to a real
# Redis (Debian's redis-server 7.0.15, carried). The queue's raw messages come back in $OUT.
# Run as root from the repository's root, with .devcheck/ holding: dist/ (`make dist`'s
# wheels), wheels/ (redis==8.1.0 and nvidia-ml-py==13.615.71), redis/ (Debian bookworm's
# /usr/bin/redis-server with its liblzf.so.1 and libjemalloc.so.2) and node.key (the node's
# key: `manage.py ingest_key derive device h100-devnode` for a cluster secret; README).
# NVML, SIMWHEEL, RPORT and WORKLOAD were only for trying the script without a GPU.
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  .devcheck/dist/clusterui_collector-0.1.0-py3-none-any.whl .devcheck/wheels/*.whl ${SIMWHEEL:-} || exit 1
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
cd /tmp  # not the repository: the collector must run from its wheel alone
R=$OLDPWD/.devcheck/redis
LD_LIBRARY_PATH=$R $R/redis-server --port ${RPORT:-6379} --bind 127.0.0.1 --save "" --appendonly no --daemonize yes --logfile /tmp/redis.log || exit 1
sleep 0.5
python3 -c "import collectors, redis, pynvml; print('collector from', collectors.__file__, 'redis-py', redis.__version__)"
MAP=/tmp/clusterui-jobs; mkdir -p $MAP /tmp/spool
export CLUSTERUI_CLUSTER=device CLUSTERUI_NODE=h100-devnode CLUSTERUI_INTERVAL=1 CLUSTERUI_FLUSH=10 \
  CLUSTERUI_BROKER_URL=redis://127.0.0.1:${RPORT:-6379}/0 CLUSTERUI_SPOOL_DIR=/tmp/spool \
  CLUSTERUI_INGEST_KEY_ID=device-1 CLUSTERUI_INGEST_KEY_FILE=$OLDPWD/.devcheck/node.key \
  CLUSTERUI_JOB_MAP_DIR=$MAP CLUSTERUI_NVML=${NVML:-nvml}
P=/tmp/site/collectors/scripts
clusterui-collector > $OUT/collector.log 2>&1 &
COL=$!
sleep 3
# Slurm runs the prolog as root with the job's variables, before the job's processes.
env SLURM_JOB_ID=4246 SLURM_JOB_UID=1000 SLURM_JOB_USER=alice SLURM_JOB_PARTITION=gpu \
  SLURM_JOB_GPUS=0 SLURM_JOB_NUM_NODES=1 SLURM_JOB_CPUS_PER_NODE=16 bash $P/slurm-prolog.sh
ls -l $MAP
${WORKLOAD:-python3 $OLDPWD/tests/data/real-h100-cgroup/workload.py 14} > $OUT/workload.log 2>&1
env SLURM_JOB_ID=4246 SLURM_JOB_UID=1000 SLURM_JOB_USER=alice bash $P/slurm-epilog.sh; ls -l $MAP
sleep 6
kill -TERM $COL; wait $COL; echo "collector exit $?"
python3 - <<'PY'
import json, os, redis
r = redis.Redis(host="127.0.0.1", port=int(os.environ.get("RPORT", 6379)), db=0)
print("redis keys", r.keys("*"))
[queue] = [k for k in r.keys("*") if r.type(k) == b"list"]
items = r.lrange(queue, 0, -1)
print("queue", queue)
print("messages", len(items), "bytes", [len(i) for i in items])
with open(os.environ["OUT"] + "/messages.jsonl", "wb") as out:
    for raw in reversed(items):  # LPUSH: oldest last
        out.write(raw + b"\n")
PY
ls /tmp/spool
