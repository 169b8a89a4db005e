#!/usr/bin/env bash
# A single-node Slurm on 127.0.0.1 for system tests: slurm-local.sh start | stop | status
#
# Runs without systemd or cgroups (CI containers have neither): each daemon is started by hand and
# writes a pid file under the state directory; `stop` signals only the pids in those files, never
# processes found by name, so a developer's own Slurm or munge is left alone.
#
# Environment:
#   HPCSTAGE_SLURM_STATE    state directory (default /var/run/hpcstage-slurm)
#   HPCSTAGE_SLURM_WAIT_S   how long `start` waits for the controller and the node (default 60)
#   HPCSTAGE_SLURM_REST     1 (default) also runs slurmrestd with JWT auth; 0 skips it
#   HPCSTAGE_SLURMRESTD_PORT  port for slurmrestd on 127.0.0.1 (default 6820)
#
# One local Slurm per machine: it owns /etc/slurm/slurm.conf (refusing to overwrite a file it did
# not write) and the standard ports 6817/6818.
set -euo pipefail

STATE_DIR="${HPCSTAGE_SLURM_STATE:-/var/run/hpcstage-slurm}"
WAIT_S="${HPCSTAGE_SLURM_WAIT_S:-60}"
WITH_REST="${HPCSTAGE_SLURM_REST:-1}"
REST_PORT="${HPCSTAGE_SLURMRESTD_PORT:-6820}"
SLURM_CONF_FILE=/etc/slurm/slurm.conf
CONF_MARKER="# Written by hpcstage scripts/slurm-local.sh; rewritten on start."
NODE=localhost
MUNGE_SOCKET_DIR=/run/munge

CTLD_PID="$STATE_DIR/slurmctld.pid"
SLURMD_PID="$STATE_DIR/slurmd.pid"
MUNGED_PID="$STATE_DIR/munge/munged.pid"
RESTD_PID="$STATE_DIR/slurmrestd.pid"
JWT_KEY="$STATE_DIR/jwt_hs256.key"

log() { printf 'slurm-local: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

require_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (installs packages and starts daemons)"
}

# --- installation ----------------------------------------------------------------------------

packages_wanted() {
    local pkgs=(slurmctld slurmd slurm-client munge)
    [[ $WITH_REST == 1 ]] && pkgs+=(slurmrestd slurm-wlm-jwt-plugin)
    printf '%s\n' "${pkgs[@]}"
}

packages_missing() {
    local pkg
    if ! command -v dpkg-query >/dev/null; then
        # Not Debian: accept a Slurm installed some other way if its programs are on PATH.
        for pkg in slurmctld slurmd sbatch munged; do command -v "$pkg" >/dev/null || echo "$pkg"; done
        [[ $WITH_REST != 1 ]] || command -v slurmrestd >/dev/null || echo slurmrestd
        return 0
    fi
    while read -r pkg; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || echo "$pkg"
    done < <(packages_wanted)
}

install_packages() {
    local missing
    mapfile -t missing < <(packages_missing)
    [[ ${#missing[@]} -eq 0 ]] && return 0
    command -v apt-get >/dev/null || die "packages missing (${missing[*]}) and apt-get not found: install them by hand"
    log "installing ${missing[*]}"
    # Package scripts would start the daemons with the distribution's config; a policy-rc.d that
    # exits 101 forbids that. Reuse one already present (Docker images ship it), else add ours.
    local own_policy=0
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d
        chmod 755 /usr/sbin/policy-rc.d
        own_policy=1
    fi
    local rc=0
    if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
        apt-get update -q >&2 || rc=$?
    fi
    if [[ $rc -eq 0 ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 || rc=$?
    fi
    [[ $own_policy -eq 1 ]] && rm -f /usr/sbin/policy-rc.d
    [[ $rc -eq 0 ]] || die "apt-get failed (exit $rc) installing ${missing[*]}"
}

# --- configuration ---------------------------------------------------------------------------

real_memory_mb() {
    # slurmd drains a node that reports less memory than configured, so use what slurmd sees.
    local mem
    mem=$(slurmd -C 2>/dev/null | sed -n 's/.*RealMemory=\([0-9]\+\).*/\1/p' | head -n 1)
    if [[ -z $mem ]]; then
        mem=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
    fi
    echo "$mem"
}

write_slurm_conf() {
    if [[ -e $SLURM_CONF_FILE ]] && ! grep -qxF "$CONF_MARKER" "$SLURM_CONF_FILE"; then
        die "$SLURM_CONF_FILE exists and was not written by this script; move it aside to use the local Slurm"
    fi
    local cpus mem
    cpus=$(nproc)
    mem=$(real_memory_mb)
    mkdir -p "$(dirname "$SLURM_CONF_FILE")"
    cat >"$SLURM_CONF_FILE.tmp" <<EOF
$CONF_MARKER
ClusterName=hpcstage
SlurmctldHost=$NODE(127.0.0.1)
# Bind to loopback only: this Slurm is for tests on this machine.
CommunicationParameters=NoCtldInAddrAny,NoInAddrAny
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
$(auth_alt_lines)
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$STATE_DIR/slurmctld.log
SlurmdLogFile=$STATE_DIR/slurmd.log
# No systemd and no cgroups in CI containers.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
# CR_CPU: with CR_Core_Memory and no default memory, each job takes the whole node.
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
# Keep finished jobs visible to scontrol for an hour: there is no slurmdbd to ask afterwards.
MinJobAge=3600
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$STATE_DIR/jobcomp.log
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SlurmdTimeout=60
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
    mv "$SLURM_CONF_FILE.tmp" "$SLURM_CONF_FILE"
    chmod 644 "$SLURM_CONF_FILE"
}

auth_alt_lines() {
    if [[ $WITH_REST == 1 ]]; then
        echo "AuthAltTypes=auth/jwt"
        echo "AuthAltParameters=jwt_key=$JWT_KEY"
    fi
}

prepare_dirs() {
    mkdir -p "$STATE_DIR/ctld" "$STATE_DIR/slurmd" "$STATE_DIR/munge" "$MUNGE_SOCKET_DIR"
    chmod 755 "$STATE_DIR"
    chown munge:munge "$STATE_DIR/munge" "$MUNGE_SOCKET_DIR"
    if [[ ! -s /etc/munge/munge.key ]]; then
        log "creating /etc/munge/munge.key"
        mkdir -p /etc/munge
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key
    chmod 400 /etc/munge/munge.key
    if [[ $WITH_REST == 1 && ! -s $JWT_KEY ]]; then
        dd if=/dev/urandom of="$JWT_KEY" bs=32 count=1 status=none
    fi
    [[ -e $JWT_KEY ]] && chmod 600 "$JWT_KEY"
    return 0
}

# --- processes -------------------------------------------------------------------------------

# True if the pid file names a live (not zombie) process whose command name is $2.
# A dead daemon can linger as a zombie, and pids get reused, so kill -0 is not enough.
pid_alive() {
    local pidfile=$1 comm=$2 pid state
    [[ -s $pidfile ]] || return 1
    pid=$(<"$pidfile")
    [[ $pid =~ ^[0-9]+$ ]] || return 1
    [[ -r /proc/$pid/status ]] || return 1
    state=$(awk '/^State:/ { print $2 }' "/proc/$pid/status" 2>/dev/null) || return 1
    [[ $state != Z ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]]
}

start_munged() {
    pid_alive "$MUNGED_PID" munged && return 0
    log "starting munged"
    runuser -u munge -- munged --force --pid-file="$MUNGED_PID" --socket="$MUNGE_SOCKET_DIR/munge.socket.2"
}

start_slurmctld() {
    pid_alive "$CTLD_PID" slurmctld && return 0
    log "starting slurmctld"
    slurmctld
}

start_slurmd() {
    pid_alive "$SLURMD_PID" slurmd && return 0
    log "starting slurmd"
    slurmd -N "$NODE"
}

start_slurmrestd() {
    [[ $WITH_REST == 1 ]] || return 0
    pid_alive "$RESTD_PID" slurmrestd && return 0
    log "starting slurmrestd on 127.0.0.1:$REST_PORT"
    # slurmrestd refuses to run as root and stays in the foreground; SLURM_JWT=daemon makes it
    # authenticate each request with the client's token. Without slurmdbd the accounting plugins
    # abort (22.05's dbv*), so only the controller's plugin is named: openapi/slurmctld where it
    # exists (23.11 and later, serving the data_parser versions), else openapi/v0.0.38 (22.05).
    local plugin=openapi/v0.0.38
    if runuser -u nobody -- slurmrestd -s list 2>&1 | grep -qw 'openapi/slurmctld'; then
        plugin=openapi/slurmctld
    fi
    # From /: slurmrestd keeps the directory it was started in as its working directory and fails every
    # job submission ("getcwd failed") once that directory is deleted (a removed checkout or worktree).
    (cd / && SLURM_JWT=daemon exec setsid slurmrestd -u nobody -g nogroup -s "$plugin" -a rest_auth/jwt \
        "127.0.0.1:$REST_PORT" </dev/null >>"$STATE_DIR/slurmrestd.log" 2>&1) &
    echo $! >"$RESTD_PID"
}

all_running() {
    pid_alive "$MUNGED_PID" munged && pid_alive "$CTLD_PID" slurmctld && pid_alive "$SLURMD_PID" slurmd || return 1
    [[ $WITH_REST != 1 ]] || pid_alive "$RESTD_PID" slurmrestd
}

controller_up() { scontrol ping 2>/dev/null | grep -q 'is UP'; }

node_state() { sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n 1; }

# The node is usable once it is idle, or busy with jobs when start is called again.
node_ready() { [[ $(node_state) =~ ^(idle|mixed|allocated|completing)$ ]]; }

restd_up() {
    [[ $WITH_REST == 1 ]] || return 0
    # Accepting a connection is enough: the tests bring their own token.
    # shellcheck disable=SC2016 # $1 is expanded by the inner bash, on purpose
    timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1"' _ "$REST_PORT" 2>/dev/null
}

wait_ready() {
    local deadline=$((SECONDS + WAIT_S)) daemon
    local daemons=("$MUNGED_PID:munged" "$CTLD_PID:slurmctld" "$SLURMD_PID:slurmd")
    [[ $WITH_REST == 1 ]] && daemons+=("$RESTD_PID:slurmrestd")
    until controller_up && node_ready && restd_up; do
        if ((SECONDS >= deadline)); then
            log "not ready after ${WAIT_S}s: ping='$(scontrol ping 2>&1 | tr '\n' ' ')' node='$(node_state)'"
            show_logs
            die "local Slurm did not come up; logs are in $STATE_DIR"
        fi
        for daemon in "${daemons[@]}"; do
            pid_alive "${daemon%%:*}" "${daemon##*:}" || {
                show_logs
                die "${daemon##*:} exited during start-up; logs are in $STATE_DIR"
            }
        done
        sleep 0.2
    done
}

show_logs() {
    local f
    for f in "$STATE_DIR"/slurmctld.log "$STATE_DIR"/slurmd.log "$STATE_DIR"/slurmrestd.log; do
        [[ -e $f ]] && { log "--- last lines of $f"; tail -n 15 "$f" >&2; }
    done
    return 0
}

# Send TERM to the pid in the file (if it is the expected daemon), wait, then KILL.
stop_pidfile() {
    local pidfile=$1 comm=$2 pid i
    if ! pid_alive "$pidfile" "$comm"; then
        rm -f "$pidfile"
        return 0
    fi
    pid=$(<"$pidfile")
    log "stopping $comm (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pidfile" "$comm" || break
        sleep 0.1
    done
    if pid_alive "$pidfile" "$comm"; then
        log "$comm (pid $pid) ignored TERM for 10s; sending KILL"
        kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
}

# --- commands --------------------------------------------------------------------------------

cmd_start() {
    require_root
    if all_running && controller_up && node_ready && restd_up; then
        log "already running (state in $STATE_DIR)"
        return 0
    fi
    install_packages
    mkdir -p "$STATE_DIR"
    prepare_dirs
    write_slurm_conf
    start_munged
    start_slurmctld
    start_slurmd
    start_slurmrestd
    wait_ready
    log "up: controller $(scontrol ping | head -n 1 | tr -s ' '), node $NODE $(node_state), $(nproc) CPUs"
}

cmd_stop() {
    require_root
    stop_pidfile "$RESTD_PID" slurmrestd
    stop_pidfile "$SLURMD_PID" slurmd
    stop_pidfile "$CTLD_PID" slurmctld
    stop_pidfile "$MUNGED_PID" munged
    log "stopped"
}

cmd_status() {
    local rc=0 daemon
    for daemon in "$MUNGED_PID:munged" "$CTLD_PID:slurmctld" "$SLURMD_PID:slurmd" "$RESTD_PID:slurmrestd"; do
        if pid_alive "${daemon%%:*}" "${daemon##*:}"; then
            printf '%-11s running (pid %s)\n' "${daemon##*:}" "$(<"${daemon%%:*}")"
        elif [[ ${daemon##*:} == slurmrestd && $WITH_REST != 1 ]]; then
            printf '%-11s disabled\n' slurmrestd
        else
            printf '%-11s stopped\n' "${daemon##*:}"
            rc=3
        fi
    done
    if controller_up; then
        printf 'controller  UP; node %s %s\n' "$NODE" "$(node_state)"
    else
        printf 'controller  not answering\n'
        rc=3
    fi
    return $rc
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
status) cmd_status ;;
*)
    echo "usage: $0 start | stop | status" >&2
    exit 2
    ;;
esac
