#!/bin/sh
# ClusterUI: Slurm Epilog. Removes the GPU mapping files the prolog wrote for this job,
# and only those whose first word is still this job's id (a newer job may own the GPU).
# Directory: $CLUSTERUI_JOB_MAP_DIR, or the first argument, or /run/clusterui-jobs.
# Install: add to the directory your Epilog= glob names, e.g. /etc/slurm/epilog.d/*
# (docs/collector.md). Always exits 0.

dir="${1:-${CLUSTERUI_JOB_MAP_DIR:-/run/clusterui-jobs}}"
[ -n "$SLURM_JOB_ID" ] || exit 0
[ -d "$dir" ] || exit 0
for f in "$dir"/*; do
  [ -f "$f" ] || continue
  read -r owner _rest < "$f" 2>/dev/null || continue
  [ "$owner" = "$SLURM_JOB_ID" ] && rm -f "$f"
done
exit 0
