#!/usr/bin/env bash
# Stop the single-node SLURM that scripts/slurm-up.sh started: slurmd, slurmctld, then munged,
# each by the pid in its pid file (never by name). Safe to call when nothing runs.
set -u
STATE=${RICHLAZY_SLURM_STATE:-/var/lib/richlazy-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by richlazy scripts/slurm-up.sh"
[ -f "$CONF" ] && grep -qF "$MARK" "$CONF" || { echo "slurm: not started by slurm-up.sh"; exit 0; }

gone() {  # true once the process is gone or a zombie (PID 1 here may not reap it)
    [ -r "/proc/$1/stat" ] || return 0
    [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]
}

stop() {  # stop PIDFILE: TERM, wait up to 10 s, then KILL
    [ -f "$1" ] || return 0
    pid=$(cat "$1" 2>/dev/null) || return 0
    case $pid in ''|*[!0-9]*) rm -f "$1"; return 0;; esac
    kill -TERM "$pid" 2>/dev/null || { rm -f "$1"; return 0; }
    for _ in $(seq 100); do gone "$pid" && break; sleep 0.1; done
    gone "$pid" || kill -KILL "$pid" 2>/dev/null
    rm -f "$1"
}

stop "$STATE/slurmd.pid"
stop "$STATE/slurmctld.pid"
stop /run/munge/munged.pid
echo "slurm: down"
