#!/usr/bin/env bash
# A real Slurm on loopback for the integration tests: munge, slurmctld and several `slurmd -N NAME`
# standing for the nodes of a cluster. Run as root. Idempotent: a second run with everything up only
# checks that the nodes are idle (it restarts what is missing).
#
#   bash scripts/slurm-ci.sh            # install if needed, start, wait until the nodes are idle
#   bash scripts/slurm-ci.sh stop       # stop every daemon this script started
#
# Environment: SLURM_CI_NODES (default 3), SLURM_CI_PARTITION (default ci), SLURM_CI_PORT (first
# slurmd port, default 17001), SLURM_CI_CTLD_PORT (default 6817).
set -euo pipefail

NODES=${SLURM_CI_NODES:-3}
PARTITION=${SLURM_CI_PARTITION:-ci}
BASE_PORT=${SLURM_CI_PORT:-17001}
CTLD_PORT=${SLURM_CI_CTLD_PORT:-6817}
CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
STATE=/var/spool/slurmctld
LOGS=/var/log/slurm
MARK="# written by hyperpod-scheduler scripts/slurm-ci.sh"

say() { printf '[slurm-ci] %s\n' "$*"; }
die() { printf '[slurm-ci] error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"

node_names() { for i in $(seq 1 "$NODES"); do printf 'node%s ' "$i"; done; }

stop_slurm() {
    # Only the daemons this script starts, found by their pid files.
    for pidfile in /run/slurm-ci/slurm*.pid; do
        [ -e "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

stop_all() {
    stop_slurm
    if [ -f /run/slurm-ci/munged.pid ]; then
        kill "$(cat /run/slurm-ci/munged.pid)" 2>/dev/null || true
        rm -f /run/slurm-ci/munged.pid
    fi
}

if [ "${1:-}" = stop ]; then stop_all; say "stopped"; exit 0; fi

start=$(date +%s)

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
    say "installing slurm-wlm and munge"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # policy-rc.d 101: packages must not try to start services (no init system in a container).
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
    rm -f /usr/sbin/policy-rc.d
    say "installed in $(( $(date +%s) - start ))s"
fi

mkdir -p /run/slurm-ci "$CONF_DIR" "$STATE" "$LOGS" /var/spool/slurmd /run/munge /var/log/munge /var/lib/munge

# 2. Munge: a key, then the daemon (it refuses to run as root, so it runs as the munge user).
if [ ! -s /etc/munge/munge.key ]; then
    say "creating the munge key"
    if command -v mungekey >/dev/null; then mungekey --create --force --keyfile=/etc/munge/munge.key
    else dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; fi
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key && chmod 0755 /run/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    say "starting munged"
    rm -f /run/munge/munge.socket.2*
    # In the foreground, started in the background here: a daemonising munged reopens /dev/null as
    # the munge user, which fails on machines where /dev/null is root-only (seen on CI).
    setpriv --reuid=munge --regid=munge --init-groups -- /usr/sbin/munged --foreground \
        --pid-file=/run/munge/munged.pid </dev/null >>/var/log/munge/munged.out 2>&1 &
    echo $! >/run/slurm-ci/munged.pid
    for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
    munge -n | unmunge >/dev/null || die "munged did not come up (see /var/log/munge/munged.log)"
fi

# 3. slurm.conf for loopback: every node is localhost on its own port.
want_conf=$(mktemp)
{
    echo "$MARK"
    echo "ClusterName=hyperpod-ci"
    echo "SlurmctldHost=localhost(127.0.0.1)"
    echo "SlurmctldPort=$CTLD_PORT"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "AuthType=auth/munge"
    echo "StateSaveLocation=$STATE"
    echo "SlurmdSpoolDir=/var/spool/slurmd/%n"
    echo "SlurmctldPidFile=/run/slurm-ci/slurmctld.pid"
    echo "SlurmdPidFile=/run/slurm-ci/slurmd-%n.pid"
    echo "SlurmctldLogFile=$LOGS/slurmctld.log"
    echo "SlurmdLogFile=$LOGS/slurmd-%n.log"
    # No cgroups in a container: plain process tracking, no task binding, no accounting.
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "AccountingStorageType=accounting_storage/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SchedulerType=sched/backfill"
    echo "MpiDefault=none"
    echo "SwitchType=switch/none"
    echo "ReturnToService=2"
    echo "SlurmdParameters=config_overrides"
    echo "JobRequeue=1"
    echo "KillWait=5"
    echo "SlurmdTimeout=30"
    echo "MinJobAge=300"
    echo "SchedulerParameters=sched_interval=2"
    port=$BASE_PORT
    for n in $(node_names); do
        echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=1 RealMemory=100 State=UNKNOWN"
        port=$((port + 1))
    done
    echo "PartitionName=$PARTITION Nodes=$(node_names | xargs | tr ' ' ',') Default=YES MaxTime=INFINITE State=UP"
    # Two more partitions stand for two instance groups: gpu (every node but the last) and cpu (the last).
    all=$(node_names | xargs)
    last=${all##* }
    rest=$(echo "${all% *}" | tr ' ' ',')
    [ "$NODES" -gt 1 ] && echo "PartitionName=gpu Nodes=$rest MaxTime=INFINITE State=UP"
    echo "PartitionName=cpu Nodes=$last MaxTime=INFINITE State=UP"
} >"$want_conf"

reconfigured=0
if [ ! -f "$CONF" ] || ! cmp -s "$want_conf" "$CONF"; then
    say "writing $CONF ($NODES nodes, partition $PARTITION)"
    [ -f "$CONF" ] && ! grep -qF "$MARK" "$CONF" && cp "$CONF" "$CONF.before-slurm-ci"
    cp "$want_conf" "$CONF"
    # No cgroup.conf: slurmd autodetects; `CgroupPlugin=disabled` only exists from Slurm 23.02.
    reconfigured=1
fi
rm -f "$want_conf"

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

if [ "$reconfigured" = 1 ]; then stop_slurm; sleep 1; fi

# 4. slurmctld, then one slurmd per node name.
if ! alive /run/slurm-ci/slurmctld.pid; then
    say "starting slurmctld"
    slurmctld -i
fi
for _ in $(seq 1 100); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.2; done
scontrol ping | grep -q UP || die "slurmctld did not answer (see $LOGS/slurmctld.log)"

for n in $(node_names); do
    if ! alive "/run/slurm-ci/slurmd-$n.pid"; then
        say "starting slurmd -N $n"
        mkdir -p "/var/spool/slurmd/$n"
        slurmd -N "$n"
    fi
done

# 5. Wait until every node is idle (a node left drained by a test is resumed first).
for n in $(node_names); do
    state=$(sinfo -h -n "$n" -o '%T' 2>/dev/null || true)
    case "$state" in
        drain*|down*|fail*) scontrol update nodename="$n" state=resume 2>/dev/null || true ;;
    esac
done
for _ in $(seq 1 150); do
    idle=$(sinfo -h -N -p "$PARTITION" -o '%N %T' | awk '$2=="idle"' | wc -l)
    [ "$idle" -ge "$NODES" ] && break
    sleep 0.2
done
sinfo -N -o '%N %T %P'
idle=$(sinfo -h -N -p "$PARTITION" -o '%N %T' | awk '$2=="idle"' | wc -l)
[ "$idle" -ge "$NODES" ] || die "only $idle of $NODES nodes idle (see $LOGS/)"
say "ready: $NODES nodes idle in $(( $(date +%s) - start ))s"
say "this machine now has: /etc/slurm/slurm.conf and /etc/munge/munge.key, state in /var/spool/slurmctld,"
say "munged, slurmctld and $NODES slurmd running; stop them with: bash scripts/slurm-ci.sh stop"
say "(to remove Slurm and munge too: apt-get remove slurm-wlm munge)"
