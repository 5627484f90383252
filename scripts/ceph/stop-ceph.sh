#!/usr/bin/env bash
# Stops the cluster start-ceph.sh started in DATA_DIR, by PID (gateway, OSD, monitor), and removes
# DATA_DIR unless KEEP_CEPH_DIR=1. Never fails: it runs from traps.
# Usage: bash scripts/ceph/stop-ceph.sh DATA_DIR
set -uo pipefail
DIR="${1:-}"
if [ -z "$DIR" ] || [ ! -d "$DIR/pids" ]; then echo "stop-ceph: no cluster in '${DIR}'" >&2; exit 0; fi
for name in rgw osd mon; do
  pidfile="$DIR/pids/$name.pid"
  [ -f "$pidfile" ] || continue
  pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$pidfile"
done
if [ "${KEEP_CEPH_DIR:-0}" != 1 ]; then
  case "$DIR" in
    /tmp/*) rm -rf "$DIR" ;;
    *) echo "stop-ceph: left $DIR in place (not under /tmp)" >&2 ;;
  esac
fi
exit 0
