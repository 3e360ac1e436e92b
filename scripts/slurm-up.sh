#!/usr/bin/env bash
# Start a single-node SLURM on this machine for richlazy's SLURM tests (tests/slurm/test_slurm.py):
# munge, slurmctld and slurmd from Debian's packages, installed first when missing.
#
#   scripts/slurm-up.sh      # install if needed, configure, start; prints "slurm: up ..."
#   scripts/slurm-down.sh    # stop what this script started
#
# Needs root (it writes /etc/slurm/slurm.conf and starts the daemons) and apt-get for the
# install. Exits 0 with "slurm: up" once `sinfo` shows the node idle; otherwise exits 1 with
# one line saying why ("slurm: cannot start: ..."), and the tests then skip with that reason.
# A machine that already runs its own SLURM (a slurm.conf this script did not write) is left
# alone: the script only checks that `sinfo` answers.
set -eu

STATE=${RICHLAZY_SLURM_STATE:-/var/lib/richlazy-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by richlazy scripts/slurm-up.sh"

fail() { echo "slurm: cannot start: $*" >&2; exit 1; }

if [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    if sinfo -h -o %t >/dev/null 2>&1; then echo "slurm: up (this machine's own SLURM)"; exit 0; fi
    fail "$CONF belongs to another SLURM installation, which does not answer"
fi
[ "$(id -u)" = 0 ] || fail "needs root (to configure and start munge, slurmctld, slurmd)"

start=$(date +%s)
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
        || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
    command -v apt-get >/dev/null || fail "slurmctld/slurmd/munge are missing and there is no apt-get"
    echo "slurm: installing slurmctld slurmd slurm-client munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null 2>&1 || fail "apt-get update failed"
    apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge \
        >/dev/null 2>&1 || fail "apt-get install slurmctld slurmd slurm-client munge failed"
fi

# already up (an earlier call): nothing to do
if [ -f "$STATE/slurmctld.pid" ] && sinfo -h -o %t 2>/dev/null | grep -q idle; then
    echo "slurm: up (already running)"; exit 0
fi

mkdir -p "$STATE/log" "$STATE/spool/slurmctld" "$STATE/spool/slurmd"
rm -rf "$STATE/spool/slurmctld/"* "$STATE/spool/slurmd/"*   # a clean start, job ids from 1

# munge: its key comes with the package; the daemon runs as user munge
[ -f /etc/munge/munge.key ] || fail "/etc/munge/munge.key is missing (reinstall munge)"
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged || fail "munged did not start"
    for _ in $(seq 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null 2>&1 || fail "munge does not answer"
fi

cpus=$(nproc)
mem=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.8}' /proc/meminfo)
mkdir -p /etc/slurm
cat > "$CONF" <<CONF
$MARK
ClusterName=richlazy
SlurmctldHost=localhost
SlurmUser=root
AuthType=auth/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd.log
StateSaveLocation=$STATE/spool/slurmctld
SlurmdSpoolDir=$STATE/spool/slurmd
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=5,bf_interval=5
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
MinJobAge=300
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF

slurmctld || fail "slurmctld did not start (see $STATE/log/slurmctld.log)"
slurmd -N localhost || fail "slurmd did not start (see $STATE/log/slurmd.log)"
for _ in $(seq 150); do
    if sinfo -h -o %t 2>/dev/null | grep -q idle; then
        echo "slurm: up in $(( $(date +%s) - start )) s (node localhost: $cpus CPUs, $mem MB; state in $STATE)"
        exit 0
    fi
    sleep 0.2
done
fail "the node did not become idle within 30 s (sinfo: $(sinfo -h -o %t 2>&1 | head -1))"
