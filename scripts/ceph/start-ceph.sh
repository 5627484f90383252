#!/usr/bin/env bash
# Starts a throwaway single-node Ceph cluster with an S3 gateway (RADOS Gateway) on 127.0.0.1, for
# the store's S3 tests and benchmark. Monitor, one memstore OSD and radosgw, each started with -f in
# the background and stopped by its PID (stop-ceph.sh); no manager, no systemd.
#
# Usage: bash scripts/ceph/start-ceph.sh [DATA_DIR]
#   DATA_DIR defaults to a fresh mktemp -d /tmp/splitzip-ceph.XXXXXX (it must not hold a cluster).
#   Prints DATA_DIR as the last line of stdout. DATA_DIR/env holds the AWS_* variables to source;
#   DATA_DIR/pids/*.pid the daemons' PIDs; DATA_DIR/rgw-start.sh restarts the gateway alone.
#   On failure it stops what it started, prints why (and the daemon logs' tails) and exits non-zero.
# Settings: ../shared/notes/ceph-s3.md (crc messenger mode, fast paxos, memstore, short rgw gc).
set -euo pipefail

START_TIMEOUT_S="${CEPH_START_TIMEOUT_S:-90}"
DIR="${1:-}"
if [ -z "$DIR" ]; then DIR="$(mktemp -d /tmp/splitzip-ceph.XXXXXX)"; fi
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
if [ -e "$DIR/ceph.conf" ]; then echo "start-ceph: $DIR already holds a cluster (stop-ceph.sh it, or pass a new dir)" >&2; exit 1; fi
for bin in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool node; do
  command -v "$bin" >/dev/null 2>&1 || { echo "start-ceph: $bin not found (run scripts/ceph/install-ceph.sh)" >&2; exit 1; }
done
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$DIR"/{mon,osd/ceph-0,rgw,run,log,pids}

free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
MON_PORT="$(free_port)"
RGW_PORT="$(free_port)"
while [ "$RGW_PORT" = "$MON_PORT" ]; do RGW_PORT="$(free_port)"; done
FSID="$(cat /proc/sys/kernel/random/uuid)"
CONF="$DIR/ceph.conf"
CEPH=(ceph -c "$CONF" --connect-timeout 10)

cat > "$CONF" <<CONF
[global]
fsid = $FSID
mon host = [v2:127.0.0.1:$MON_PORT]
mon initial members = a
auth cluster required = none
auth service required = none
auth client required = none
# Without crc, radosgw asks for secure mode, which auth none cannot give, and hangs at start.
ms mon client mode = crc
ms client mode = crc
ms service mode = crc
ms cluster mode = crc
# Start-up in ~3 s instead of ~15 s.
paxos propose interval = 0.01
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon max pg per osd = 1000
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = 8589934592
run dir = $DIR/run
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
mon data = $DIR/mon/\$cluster-\$id
osd data = $DIR/osd/\$cluster-\$id
[client.rgw.a]
# tcp_nodelay: without it every small response waited out a delayed ACK (Nagle), ~40-48 ms per
# request on loopback instead of 3-5 ms, so request latency, not the code under test, set the pace.
rgw frontends = beast endpoint=127.0.0.1:$RGW_PORT tcp_nodelay=1
rgw data = $DIR/rgw
# memstore otherwise keeps deleted objects' data in RAM for hours.
rgw gc obj min wait = 5
rgw gc processor period = 5
CONF

fail() {
  echo "start-ceph: FAILED: $*" >&2
  for log in "$DIR"/log/*.log "$DIR"/log/*.out; do
    [ -s "$log" ] || continue
    echo "---- tail of $log" >&2
    tail -n 25 "$log" >&2
  done
  bash "$HERE/stop-ceph.sh" "$DIR" >&2 || true
  exit 1
}
# Polls `$@` every 0.2 s until it succeeds or `seconds` pass.
wait_for() {
  local what="$1" seconds="$2"; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what did not happen within ${seconds}s"
    sleep 0.2
  done
}
# Starts a daemon in the background with -f and records its PID.
spawn() {
  local name="$1"; shift
  setsid "$@" >"$DIR/log/$name.out" 2>&1 < /dev/null &
  echo $! > "$DIR/pids/$name.pid"
}
alive() { kill -0 "$(cat "$DIR/pids/$1.pid")" 2>/dev/null; }
check_alive() { alive "$1" || fail "$1 exited"; }

# 1. Monitor.
monmaptool --create --clobber --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >"$DIR/log/monmaptool.out" 2>&1 || fail "monmaptool"
ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" >"$DIR/log/mon-mkfs.out" 2>&1 || fail "ceph-mon --mkfs"
spawn mon ceph-mon -c "$CONF" -i a -f
wait_for "monitor quorum" "$START_TIMEOUT_S" timeout 15 "${CEPH[@]}" mon stat
check_alive mon

# 2. One OSD on memstore.
OSD_ID="$(timeout 30 "${CEPH[@]}" osd create)" || fail "ceph osd create"
[ "$OSD_ID" = 0 ] || fail "expected osd id 0, got $OSD_ID"
timeout 30 "${CEPH[@]}" osd crush add-bucket localhost host >/dev/null 2>&1 || fail "crush add-bucket"
timeout 30 "${CEPH[@]}" osd crush move localhost root=default >/dev/null 2>&1 || fail "crush move"
timeout 30 "${CEPH[@]}" osd crush add osd.0 1.0 host=localhost >/dev/null 2>&1 || fail "crush add osd.0"
ceph-osd -c "$CONF" -i 0 --mkfs >"$DIR/log/osd-mkfs.out" 2>&1 || fail "ceph-osd --mkfs"
spawn osd ceph-osd -c "$CONF" -i 0 -f
osd_up() { timeout 15 "${CEPH[@]}" osd dump 2>/dev/null | grep -q '^osd\.0 up'; }
wait_for "osd.0 up" "$START_TIMEOUT_S" osd_up
check_alive osd

# 3. The S3 gateway, and a user with fixed keys.
cat > "$DIR/rgw-start.sh" <<RGW
#!/usr/bin/env bash
# Restarts the gateway of this cluster alone (tests stop it by PID to simulate an outage).
set -euo pipefail
setsid radosgw -c "$CONF" -n client.rgw.a -f >>"$DIR/log/rgw.out" 2>&1 < /dev/null &
echo \$! > "$DIR/pids/rgw.pid"
deadline=\$((SECONDS + $START_TIMEOUT_S))
until node -e 'fetch(process.argv[1]).then(r=>process.exit(r.status>0?0:1),()=>process.exit(1))' "http://127.0.0.1:$RGW_PORT/" 2>/dev/null; do
  kill -0 "\$(cat "$DIR/pids/rgw.pid")" 2>/dev/null || { echo "rgw-start: radosgw exited" >&2; tail -n 20 "$DIR/log/rgw.out" "$DIR/log/client.rgw.a.log" >&2 || true; exit 1; }
  [ "\$SECONDS" -lt "\$deadline" ] || { echo "rgw-start: gateway not answering on 127.0.0.1:$RGW_PORT within ${START_TIMEOUT_S}s" >&2; exit 1; }
  sleep 0.2
done
RGW
chmod +x "$DIR/rgw-start.sh"
bash "$DIR/rgw-start.sh" || fail "radosgw start"

ACCESS_KEY="SPLITZIPTESTACCESS01"
SECRET_KEY="splitzip-test-secret-key-0000000000000001"
timeout 60 radosgw-admin -c "$CONF" user create --uid=splitzip --display-name=splitzip \
  --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >"$DIR/log/user-create.out" 2>&1 || fail "radosgw-admin user create"

cat > "$DIR/env" <<ENV
export AWS_ENDPOINT_URL=http://127.0.0.1:$RGW_PORT
export AWS_ACCESS_KEY_ID=$ACCESS_KEY
export AWS_SECRET_ACCESS_KEY=$SECRET_KEY
export AWS_REGION=us-east-1
export SPLITZIP_CEPH_DIR=$DIR
ENV
echo "start-ceph: S3 gateway up at http://127.0.0.1:$RGW_PORT (cluster in $DIR, ${SECONDS}s)" >&2
echo "$DIR"
