#!/usr/bin/env bash
# Installs the Ceph daemons the store's S3 tests run against (a single-node RADOS Gateway on
# loopback, see start-ceph.sh). Idempotent: a no-op (about 3 s) when everything is there.
# Needs root (apt-get); about 65 MB downloaded and ~55 s on a fresh Debian 12 machine.
set -euo pipefail

PACKAGES=(ceph-mon ceph-osd radosgw ceph-common)
missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then missing+=("$pkg"); fi
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-ceph: already installed (${PACKAGES[*]})" >&2
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=(sudo); else echo "install-ceph: needs root (apt-get) for: ${missing[*]}" >&2; exit 1; fi
fi

echo "install-ceph: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Another apt may run at the same time (CI images, other scripts): wait for its lock, bounded.
APT_OPTS=(-o DPkg::Lock::Timeout=600 -o Acquire::Retries=3)
if ! "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install -y --no-install-recommends "${missing[@]}" >&2; then
  # The package lists may be missing or stale on a fresh machine.
  "${SUDO[@]}" apt-get "${APT_OPTS[@]}" update >&2
  "${SUDO[@]}" apt-get "${APT_OPTS[@]}" install -y --no-install-recommends "${missing[@]}" >&2
fi
for bin in ceph-mon ceph-osd radosgw radosgw-admin ceph monmaptool; do
  command -v "$bin" >/dev/null 2>&1 || { echo "install-ceph: $bin is missing after the install" >&2; exit 1; }
done
echo "install-ceph: done" >&2
