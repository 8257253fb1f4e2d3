#!/usr/bin/env bash
# fresh_machine.sh: times a newcomer's command (`make demo`, `make test`) on a bare Debian 12, as
# a chroot made by debootstrap (minbase, plus make, git and ca-certificates: what cloning and
# typing `make` take). The tree is a fresh clone of this repository's HEAD; apt downloads from
# Debian's archive as on a new machine; nothing of this machine's packages, ccache or build is
# reused. Prints the command's output and its wall time. Run as root; needs debootstrap.
#
#   bench/fresh_machine.sh [--keep] [--base DIR] [make target ...]     (default: demo)
#
# --base DIR keeps the bare system in DIR between runs (made once, copied for each run);
# --keep leaves the run's chroot in place (its path is printed) for a look inside.
set -euo pipefail

base=/var/tmp/tessera-fresh-base
keep=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --keep) keep=1 ;;
    --base) base=$2; shift ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    -*) echo "fresh_machine.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1") ;;
  esac
  shift
done
[ ${#targets[@]} -gt 0 ] || targets=(demo)
[ "$(id -u)" = 0 ] || { echo "fresh_machine.sh: run as root (chroot, mounts, apt)" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "fresh_machine.sh: needs debootstrap (apt-get install debootstrap)" >&2; exit 1; }
src=$(cd "$(dirname "$0")/.." && pwd)

if [ ! -x "$base/usr/bin/make" ]; then
  echo "== making the bare system in $base (once)"
  rm -rf "$base"
  debootstrap --variant=minbase --include=make,git,ca-certificates bookworm "$base" http://deb.debian.org/debian
fi

root=$(mktemp -d /var/tmp/tessera-fresh-XXXXXX)
mounted=()
cleanup() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
  # And what the tests mounted inside (ip netns binds run/netns), deepest first, before rm -rf.
  awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r |
    while read -r m; do umount -l "$m" 2>/dev/null || true; done
  if [ "$keep" = 1 ]; then echo "== kept: $root"; else rm -rf "$root"; fi
}
trap cleanup EXIT
cp -a "$base/." "$root/"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# Its root a mount point of its own, as a machine's / is: bubblewrap (the platform's sandboxes)
# changes the propagation of / and fails with "Failed to make / slave" on a mere directory.
mount --bind "$root" "$root"
mounted+=("$root")
for m in proc sys dev dev/pts dev/shm; do
  mkdir -p "$root/$m"
  mount --bind "/$m" "$root/$m"
  mounted+=("$root/$m")
done
# The control groups (sandboxed jobs, limits), mounted below /sys, as a machine has them.
if mountpoint -q /sys/fs/cgroup; then
  mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
  mount --make-rslave "$root/sys/fs/cgroup"
  mounted+=("$root/sys/fs/cgroup")
fi
git clone -q "$src" "$root/home/tessera"
# Where this machine reaches the internet through a TLS-inspecting proxy, the bare system must
# trust the same local certificate authorities (apt's http needs none; npm's https does).
extra_env=()
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  chroot "$root" update-ca-certificates >/dev/null
  extra_env=(NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
fi

for t in "${targets[@]}"; do
  echo "== make $t in a fresh clone on bare Debian 12 ($(nproc) cores)"
  start=$(date +%s)
  chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "${extra_env[@]}" \
    make -C /home/tessera "$t" || status=$?
  echo "== make $t: $(( $(date +%s) - start )) s${status:+ (failed: exit $status)}"
  [ -z "${status:-}" ] || exit "$status"
done
