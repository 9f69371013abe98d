#!/bin/sh
# ClusterUI: Slurm Prolog. Records which job owns each of this node's GPUs, for the
# collector (config key job_map_dir). One file per GPU index, written atomically:
#
#   <jobid> <uid>
#   user=<name>  name=<job name>  account=...  partition=...  start_time=<unix>
#   cpus=<cpus on this node>  nodes=<node count>          (one key=value per line)
#
# Directory: $CLUSTERUI_JOB_MAP_DIR, or the first argument, or /run/clusterui-jobs.
# Install: Prolog=/usr/libexec/clusterui/slurm-prolog.sh in slurm.conf (runs as root).
# A failure here must never fail the job: every error path exits 0.

dir="${1:-${CLUSTERUI_JOB_MAP_DIR:-/run/clusterui-jobs}}"
[ -n "$SLURM_JOB_ID" ] || exit 0
gpus="${SLURM_JOB_GPUS:-}"
[ -n "$gpus" ] || exit 0
mkdir -p "$dir" 2>/dev/null || exit 0

cpus="${SLURM_CPUS_ON_NODE:-${SLURM_JOB_CPUS_PER_NODE:-}}"
cpus="${cpus%%[,(]*}"

content=$(
  printf '%s %s\n' "$SLURM_JOB_ID" "${SLURM_JOB_UID:-}"
  [ -n "$SLURM_JOB_USER" ] && printf 'user=%s\n' "$SLURM_JOB_USER"
  [ -n "$SLURM_JOB_NAME" ] && printf 'name=%s\n' "$(printf '%s' "$SLURM_JOB_NAME" | tr '\n' ' ')"
  [ -n "$SLURM_JOB_ACCOUNT" ] && printf 'account=%s\n' "$SLURM_JOB_ACCOUNT"
  [ -n "$SLURM_JOB_PARTITION" ] && printf 'partition=%s\n' "$SLURM_JOB_PARTITION"
  [ -n "$SLURM_JOB_START_TIME" ] && printf 'start_time=%s\n' "$SLURM_JOB_START_TIME"
  [ -n "$cpus" ] && printf 'cpus=%s\n' "$cpus"
  [ -n "$SLURM_JOB_NUM_NODES" ] && printf 'nodes=%s\n' "$SLURM_JOB_NUM_NODES"
  true
)

# SLURM_JOB_GPUS is a comma list of node-global indexes; accept "a-b" ranges too.
for item in $(printf '%s' "$gpus" | tr ',' ' '); do
  case "$item" in
    *-*) first="${item%-*}"; last="${item#*-}" ;;
    *) first="$item"; last="$item" ;;
  esac
  case "$first$last" in *[!0-9]*) continue ;; esac
  i="$first"
  while [ "$i" -le "$last" ]; do
    tmp="$dir/.$i.$SLURM_JOB_ID.tmp"
    printf '%s\n' "$content" > "$tmp" 2>/dev/null && mv -f "$tmp" "$dir/$i" 2>/dev/null
    i=$((i + 1))
  done
done
exit 0
