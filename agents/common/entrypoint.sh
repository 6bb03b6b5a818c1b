#!/bin/sh
# uplink's agent entrypoint: PID 1 of the agent container, started as root inside the
# Kata guest.
#
#   uplink-entrypoint CMD [ARG...]  install the session CA, create the host user, start the
#                                   nested dockerd, run CMD under tmux as that user in
#                                   $WORKDIR, wait for it and exit with its exit code
#   uplink-entrypoint --attach      (what `kubectl exec -it` runs) attach to that tmux
#                                   session as the user, once it exists (UPLINK_ATTACH_WAIT
#                                   seconds at most, 60); if the agent ended, prints what it
#                                   left on its screen and exits 86
#   uplink-entrypoint --run CMD...  (inside tmux) run CMD and keep its exit code for PID 1
#                                   and its last screen for --attach; when no client attached
#                                   yet, that screen waits for one (UPLINK_ATTACH_LINGER
#                                   seconds at most, 10)
#
# One script for every agent image (agents/common/). Environment, set by uplinkd in the pod
# spec: UPLINK_UID, UPLINK_GID, USERNAME, UPLINK_HOME, WORKDIR, UPLINK_CA_CERT (the session
# CA's certificate), UPLINK_AGENT_DIRS (the agent's folders under the home, space
# separated, e.g. ".claude": made the user's so that files can be mounted in them). For tests:
# UPLINK_ROOT prefixes every path this script writes outside the home, and
# UPLINK_DOCKERD_WAIT is how many seconds it waits for dockerd's socket (30).
set -u

ROOT=${UPLINK_ROOT:-}
STATE=$ROOT/run/uplink
SOCK=$STATE/tmux.sock
EXIT_FILE=$STATE/agent.exit
# Made by --attach: a client has attached (run_agent's linger ends).
ATTACHED=$STATE/attached
# What the agent left in its pane, history included, trailing blank lines dropped.
SCREEN_FILE=$STATE/agent.screen
SESSION=uplink
DOCKER_SOCK=$ROOT/var/run/docker.sock
DOCKER_ROOT=$ROOT/var/lib/docker
DOCKER_LOG=$ROOT/tmp/dockerd.log
CA_DEST=$ROOT/usr/local/share/ca-certificates/uplink-session-ca.crt
# --attach's exit code when the agent's session ended (rather than the user detaching);
# client/cmd-session.c then waits for the agent's exit code.
ATTACH_ENDED=86

log() {
	printf 'uplink-entrypoint: %s\n' "$*" >&2
}

die() {
	log "$*"
	exit 125
}

as_user() {
	if [ "$UPLINK_UID" = 0 ]; then
		"$@"
	else
		runuser -u "$USERNAME" -- "$@"
	fi
}

check_env() {
	for v in UPLINK_UID UPLINK_GID USERNAME UPLINK_HOME WORKDIR; do
		eval "val=\${$v:-}"
		[ -n "$val" ] || die "\$$v is not set (uplinkd sets it in the pod spec)"
	done
	case $UPLINK_UID:$UPLINK_GID in
	*[!0-9:]*) die "UPLINK_UID and UPLINK_GID must be numbers, not '$UPLINK_UID' and '$UPLINK_GID'" ;;
	esac
	case $USERNAME in
	-* | *[!A-Za-z0-9._-]*) die "USERNAME '$USERNAME' is not a user name" ;;
	esac
	case $UPLINK_HOME$WORKDIR in
	*//* | *..*) die "UPLINK_HOME and WORKDIR must be plain absolute paths" ;;
	esac
}

install_ca() {
	if [ -z "${UPLINK_CA_CERT:-}" ] || [ ! -f "$UPLINK_CA_CERT" ]; then
		log "no session CA at '${UPLINK_CA_CERT:-}': HTTPS through the proxy will fail"
		return 0
	fi
	mkdir -p "${CA_DEST%/*}" && cp "$UPLINK_CA_CERT" "$CA_DEST" ||
		die "cannot copy the session CA to $CA_DEST"
	out=$(update-ca-certificates 2>&1) || die "update-ca-certificates failed: $out"
}

setup_user() {
	if [ "$UPLINK_UID" = 0 ]; then
		USERNAME=root
		return 0
	fi
	group=$(getent group "$UPLINK_GID" | cut -d: -f1)
	if [ -z "$group" ]; then
		group=$USERNAME
		getent group "$group" >/dev/null && group=uplink-$UPLINK_GID
		groupadd -g "$UPLINK_GID" "$group" || die "groupadd -g $UPLINK_GID $group failed"
	fi
	old=$(getent passwd "$UPLINK_UID" | cut -d: -f1)
	if [ -n "$old" ]; then
		# the image's user with this uid (node's "node") becomes the host user
		if [ "$old" != "$USERNAME" ]; then
			usermod -l "$USERNAME" "$old" || die "cannot rename user $old to $USERNAME"
		fi
		usermod -d "$UPLINK_HOME" -g "$UPLINK_GID" -s /bin/bash "$USERNAME" ||
			die "usermod $USERNAME failed"
	elif getent passwd "$USERNAME" >/dev/null; then
		usermod -u "$UPLINK_UID" -d "$UPLINK_HOME" -g "$UPLINK_GID" -s /bin/bash "$USERNAME" ||
			die "cannot give user $USERNAME the uid $UPLINK_UID"
	else
		useradd -M -N -u "$UPLINK_UID" -g "$UPLINK_GID" -d "$UPLINK_HOME" -s /bin/bash \
			"$USERNAME" || die "useradd $USERNAME (uid $UPLINK_UID) failed"
	fi
	if getent group docker >/dev/null; then
		usermod -aG docker "$USERNAME" || log "cannot add $USERNAME to group docker"
	fi
}

# The home and the agent's folders exist only as the parents of the mounts; make them (not
# the mounts) the user's.
setup_home() {
	mkdir -p "$UPLINK_HOME" || die "cannot create $UPLINK_HOME"
	chown "$UPLINK_UID:$UPLINK_GID" "$UPLINK_HOME" 2>/dev/null ||
		log "cannot give $UPLINK_HOME to uid $UPLINK_UID"
	for d in ${UPLINK_AGENT_DIRS:-}; do
		case $d in
		/* | *..* | -*) die "UPLINK_AGENT_DIRS: '$d' is not a folder under the home" ;;
		esac
		mkdir -p "$UPLINK_HOME/$d" || die "cannot create $UPLINK_HOME/$d"
		# each folder on the way (.config of .config/opencode) is the user's too
		sub=$d
		while [ -n "$sub" ] && [ "$sub" != . ]; do
			chown "$UPLINK_UID:$UPLINK_GID" "$UPLINK_HOME/$sub" 2>/dev/null ||
				log "cannot give $UPLINK_HOME/$sub to uid $UPLINK_UID"
			case $sub in
			*/*) sub=${sub%/*} ;;
			*) sub= ;;
			esac
		done
	done
	# --ssh-key-dir mounts files into ~/.ssh one by one; the folder is the user's, for known_hosts.
	if [ -d "$UPLINK_HOME/.ssh" ]; then
		chown "$UPLINK_UID:$UPLINK_GID" "$UPLINK_HOME/.ssh" 2>/dev/null &&
			chmod 0700 "$UPLINK_HOME/.ssh" ||
			log "cannot give $UPLINK_HOME/.ssh to uid $UPLINK_UID"
	fi
}

start_dockerd() {
	if ! command -v dockerd >/dev/null 2>&1; then
		log "dockerd not found: docker is not available in this session"
		return 0
	fi
	mkdir -p "$DOCKER_ROOT" "${DOCKER_SOCK%/*}" "${DOCKER_LOG%/*}"
	dockerd --host="unix://$DOCKER_SOCK" --data-root="$DOCKER_ROOT" >"$DOCKER_LOG" 2>&1 &
	waited=0
	while [ ! -S "$DOCKER_SOCK" ]; do
		if [ "$waited" -ge "${UPLINK_DOCKERD_WAIT:-30}" ]; then
			log "dockerd did not start within ${waited}s (see $DOCKER_LOG); going on without it"
			return 0
		fi
		sleep 1
		waited=$((waited + 1))
	done
	{ chgrp docker "$DOCKER_SOCK" && chmod 0660 "$DOCKER_SOCK"; } 2>/dev/null ||
		log "cannot hand $DOCKER_SOCK to group docker"
}

# tmux shows the pane on the terminal's alternate screen, which goes when tmux gives the
# terminal back: an answer of `claude -p` would vanish with it. The pane as text is kept
# for --attach to print after tmux, where the terminal keeps it (its blank rows dropped).
keep_screen() {
	tmux -S "$SOCK" capture-pane -p -J -S - -t "${TMUX_PANE:-$SESSION}" 2>/dev/null |
		awk 'NF { while (blank > 0) { print ""; blank-- } print; next } { blank++ }' \
			>"$SCREEN_FILE.tmp" && mv -f "$SCREEN_FILE.tmp" "$SCREEN_FILE"
}

# The kept screen, read with the user's rights (the file is in the user's folder: root
# does not open what the user may have put there) and as plain text: no control bytes
# but tab and newline reach the terminal (capture-pane -p holds none; anything else came
# from someone else).
show_screen() {
	[ -s "$SCREEN_FILE" ] || return 0
	as_user cat -- "$SCREEN_FILE" 2>/dev/null | tr -d '\000-\010\013-\037\177'
}

run_agent() {
	"$@"
	rc=$?
	keep_screen || log "cannot keep the agent's last screen"
	# A quick agent (claude -p) may end before `uplink run`'s kubectl exec attaches: its last
	# screen waits for that client (UPLINK_ATTACH_LINGER seconds at most, 10), which then
	# sees it drawn, rather than a session that is already gone.
	waited=0
	while [ ! -e "$ATTACHED" ] && [ "$waited" -lt "${UPLINK_ATTACH_LINGER:-10}" ]; do
		sleep 1
		waited=$((waited + 1))
	done
	if [ "$waited" -gt 0 ] && [ -e "$ATTACHED" ]; then
		sleep 1 # the late client draws the screen
	fi
	printf '%s\n' "$rc" >"$EXIT_FILE.tmp" && mv -f "$EXIT_FILE.tmp" "$EXIT_FILE"
	exit "$rc"
}

start_agent() {
	mkdir -p "$STATE" || die "cannot create $STATE"
	if [ "$UPLINK_UID" != 0 ]; then
		chown "$UPLINK_UID:$UPLINK_GID" "$STATE" || die "cannot give $STATE to uid $UPLINK_UID"
	fi
	rm -f "$EXIT_FILE" "$ATTACHED" "$SCREEN_FILE"
	cd "$WORKDIR" || die "cannot enter the working directory $WORKDIR"
	[ $# -gt 0 ] || set -- bash -l
	# several arguments: tmux runs them as they are, with no shell in between
	as_user tmux -S "$SOCK" new-session -d -s "$SESSION" -x 200 -y 50 -c "$WORKDIR" \
		"$SELF" --run "$@" || die "cannot start the agent's tmux session"
}

# shellcheck disable=SC2317 # called by the trap
stop_agent() {
	as_user tmux -S "$SOCK" kill-server 2>/dev/null
	exit 143
}

wait_agent() {
	trap stop_agent TERM INT HUP
	while as_user tmux -S "$SOCK" has-session -t "$SESSION" 2>/dev/null; do
		sleep 1 &
		wait $!
	done
	if [ -s "$EXIT_FILE" ]; then
		rc=$(cat "$EXIT_FILE")
		case $rc in
		'' | *[!0-9]*) rc=1 ;;
		esac
		log "the agent exited with code $rc"
		exit "$rc"
	fi
	log "the agent's tmux session ended without an exit code"
	exit 1
}

# `kubectl exec` may come as soon as the container runs, before PID 1 made the user and
# the tmux session (dockerd alone may take seconds): wait for the session, then attach.
wait_session() {
	waited=0
	until as_user tmux -S "$SOCK" has-session -t "$SESSION" 2>/dev/null; do
		if [ "$waited" -ge "${UPLINK_ATTACH_WAIT:-60}" ]; then
			die "the agent's tmux session did not start within ${waited}s"
		fi
		[ "$waited" -gt 0 ] || log "waiting for the agent to start"
		sleep 1
		waited=$((waited + 1))
	done
}

case $0 in
/*) SELF=$0 ;;
*) SELF=$(pwd)/$0 ;;
esac

case ${1:-} in
--run)
	shift
	run_agent "$@"
	;;
--attach)
	check_env
	wait_session
	touch "$ATTACHED" 2>/dev/null || log "cannot create $ATTACHED"
	as_user tmux -S "$SOCK" attach-session -t "$SESSION"
	rc=$?
	# tmux returns when the user detaches and when the agent ends; tell uplink which.
	if ! as_user tmux -S "$SOCK" has-session -t "$SESSION" 2>/dev/null; then
		show_screen
		exit "$ATTACH_ENDED"
	fi
	exit "$rc"
	;;
esac

check_env
install_ca
setup_user
setup_home
start_dockerd
start_agent "$@"
wait_agent
