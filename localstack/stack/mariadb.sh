#!/usr/bin/env bash
# mariadb.sh controls the local MariaDB for fault-injection tests
# (SLUICE_MARIADB_CTL in env.sh):
#
#   mariadb.sh start     start mariadbd if it is not running; wait until it answers
#   mariadb.sh stop      clean shutdown (SIGTERM); wait until it is gone
#   mariadb.sh restart   stop, then start
#   mariadb.sh kill      SIGKILL (a crash), then start; crash recovery included
#   mariadb.sh status    exit 0 when it answers
#
# It works on the mariadbd that up.sh started, or on the one listening on
# 127.0.0.1:3306. Data, users and grants survive every command.
set -euo pipefail
# shellcheck source=localstack/stack/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start() {
	if mariadb_pid >/dev/null && mariadb_ready; then
		return 0
	fi
	local holder
	holder=$(port_holder "$MARIADB_PORT")
	if [[ -n $holder ]] && ! mariadb_pid >/dev/null; then
		die "mariadb: port $MARIADB_PORT is taken by pid $holder ($(pid_desc "$holder"))"
	fi
	mariadb_pid >/dev/null || mariadb_start || die "mariadb: did not start"
	wait_ready mariadb 60 "" mariadb_ready || die "mariadb: not ready"
}

[[ ${1:-} == status ]] || stack_lock
case ${1:-} in
start) start ;;
stop) mariadb_stop ;;
restart)
	mariadb_stop
	start
	;;
kill)
	if pid=$(mariadb_pid); then
		log "mariadb: SIGKILL pid $pid"
		kill -KILL "$pid"
		while pid_alive "$pid"; do sleep 0.1; done
		rm -f "$STACK_RUN/mariadb.pid"
	fi
	start
	;;
status) mariadb_pid >/dev/null && mariadb_ready ;;
*)
	echo "usage: $0 start|stop|restart|kill|status" >&2
	exit 2
	;;
esac
