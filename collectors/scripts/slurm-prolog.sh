#!/bin/sh
# ClusterUI: Slurm Prolog (slurmd). Records which job owns each of this node's GPUs, for
# the collector (config key job_map_dir). One file per GPU, named by Slurm's GPU index
# (SLURM_JOB_GPUS), written atomically:
#
#   <jobid> <uid>
#   user=<name>  account=...  partition=...  cpus=<cpus on this node>  nodes=<count>
#   sluid=<SLUID, Slurm >= 26.05>                         (one key=value per line)
#
# Only what Slurm gives the slurmd Prolog is used (see docs/collector.md): it has no
# SLURM_JOB_NAME and no SLURM_CPUS_ON_NODE, and SLURM_JOB_ACCOUNT only with accounting.
# The job name is asked of scontrol by the collector, once per job, not here: Slurm asks
# prologs not to call Slurm commands that talk to slurmctld.
#
# Directory: $CLUSTERUI_JOB_MAP_DIR, or the first argument, or /run/clusterui-jobs.
# Install: add to the directory your Prolog= glob names, e.g. /etc/slurm/prolog.d/*,
# with PrologFlags=Alloc. A failure here must never fail the job: every path exits 0.

dir="${1:-${CLUSTERUI_JOB_MAP_DIR:-/run/clusterui-jobs}}"
[ -n "$SLURM_JOB_ID" ] || exit 0
gpus="${SLURM_JOB_GPUS:-}"
[ -n "$gpus" ] || exit 0
mkdir -p "$dir" 2>/dev/null || exit 0

# SLURM_JOB_CPUS_PER_NODE is per node in node-list order, runs compressed: "2(x3),1".
# This node's position in SLURM_NODELIST (scontrol expands it locally, no RPC).
position=0
nodelist="${SLURM_JOB_NODELIST:-${SLURM_NODELIST:-}}"
if [ "${SLURM_JOB_NUM_NODES:-1}" != 1 ] && [ -n "$nodelist" ] && [ -n "$SLURMD_NODENAME" ]; then
  position=$(scontrol show hostnames "$nodelist" 2>/dev/null |
             awk -v n="$SLURMD_NODENAME" '$0 == n { print NR - 1; found = 1; exit }
                                          END { if (!found) print -1 }')
fi
cpus=$(printf '%s' "${SLURM_JOB_CPUS_PER_NODE:-}" | awk -v want="${position:--1}" -F, '
  want < 0 { exit }
  { for (i = 1; i <= NF; i++) {
      count = $i; times = 1
      if (match($i, /\(x[0-9]+\)$/)) {
        times = substr($i, RSTART + 2, RLENGTH - 3); count = substr($i, 1, RSTART - 1)
      }
      if (count !~ /^[0-9]+$/) exit
      if (want < seen + times) { print count; exit }
      seen += times
  } }')

content=$(
  printf '%s %s\n' "$SLURM_JOB_ID" "${SLURM_JOB_UID:-}"
  [ -n "$SLURM_JOB_USER" ] && printf 'user=%s\n' "$SLURM_JOB_USER"
  [ -n "$SLURM_JOB_ACCOUNT" ] && printf 'account=%s\n' "$SLURM_JOB_ACCOUNT"
  [ -n "$SLURM_JOB_PARTITION" ] && printf 'partition=%s\n' "$SLURM_JOB_PARTITION"
  [ -n "$cpus" ] && printf 'cpus=%s\n' "$cpus"
  [ -n "$SLURM_JOB_NUM_NODES" ] && printf 'nodes=%s\n' "$SLURM_JOB_NUM_NODES"
  [ -n "$SLURM_JOB_SLUID" ] && printf 'sluid=%s\n' "$SLURM_JOB_SLUID"
  true
)

# SLURM_JOB_GPUS is a comma list of Slurm's GPU indexes; accept "a-b" ranges too.
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
