#!/bin/bash
# Runs as PID 1 of fresh PID, mount, UTS, IPC, network and cgroup namespaces (started by
# `unshare --fork --pid --mount --uts --ipc --net --cgroup`), builds a root for systemd and
# execs it:
#   - / as an overlay whose upper layer lives in a tmpfs: nothing systemd or a unit writes
#     reaches the host's files;
#   - private /proc, read-only /sys and /proc/sys, a cgroup2 hierarchy rooted at the cgroup
#     the harness made for this container, private /dev (with NVIDIA stand-in nodes), /dev/shm,
#     /run and /tmp;
#   - units that would touch the host or only cost time masked in the upper layer;
#   - STATE/rootfs copied into the upper layer (the test's units, settings and commands);
#   - STATE/shared bind-mounted at /e2e: the only directory shared with the harness;
#   - the checkout bind-mounted read-only at its own path: the units run gpugate, the simulator
#     and the stand-ins from it, and it may sit below /tmp or a folder only root can enter.
# Usage: boot-container.sh STATE_DIR
set -euo pipefail
state=$1
repo=$(cd "$(dirname "$0")/../.." && pwd)
layers=$state/layers
root=$state/root

mount --make-rprivate /
mount -t tmpfs -o mode=0755 e2e-layers "$layers"
mkdir -p "$layers/upper" "$layers/work"

# Masks and settings go into the upper layer before systemd ever reads /etc.
etc=$layers/upper/etc/systemd/system
mkdir -p "$etc"
for unit in \
  systemd-timesyncd.service systemd-pstore.service systemd-sysctl.service systemd-modules-load.service \
  systemd-binfmt.service proc-sys-fs-binfmt_misc.automount proc-sys-fs-binfmt_misc.mount \
  systemd-random-seed.service systemd-firstboot.service systemd-repart.service \
  systemd-machine-id-commit.service systemd-pcrphase.service systemd-pcrphase-sysinit.service \
  kmod-static-nodes.service systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
  systemd-udev-trigger.service systemd-hwdb-update.service systemd-remount-fs.service \
  sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount sys-fs-fuse-connections.mount \
  dev-hugepages.mount dev-mqueue.mount tmp.mount \
  getty.target console-getty.service getty@tty1.service serial-getty@.service \
  postgresql.service e2scrub_reap.service e2scrub_all.timer remote-fs.target \
  apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer fstrim.timer man-db.timer \
  systemd-logind.service dbus.service dbus.socket systemd-user-sessions.service \
  systemd-ask-password-wall.path systemd-ask-password-console.path cryptsetup.target \
  systemd-journal-flush.service systemd-update-utmp.service systemd-update-utmp-runlevel.service \
  systemd-tmpfiles-clean.timer systemd-networkd.service systemd-resolved.service networking.service \
  ssh.service cron.service rsyslog.service; do
  ln -sf /dev/null "$etc/$unit"
done
printf 'gpugate-e2e\n' >"$layers/upper/etc/hostname"
# The test's files (units, manager settings, commands), laid over the host's.
if [ -d "$state/rootfs" ]; then cp -a "$state/rootfs/." "$layers/upper/"; fi

mkdir -p "$root"
mount -t overlay e2e-root -o "lowerdir=/,upperdir=$layers/upper,workdir=$layers/work" "$root"

mount -t proc proc "$root/proc"
mount --bind "$root/proc/sys" "$root/proc/sys"
mount -o remount,bind,ro "$root/proc/sys"
mount -t sysfs -o ro sysfs "$root/sys"
mount -t cgroup2 -o nsdelegate cgroup2 "$root/sys/fs/cgroup"

mount -t tmpfs -o mode=0755,nosuid dev "$root/dev"
for node in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
  IFS=: read -r name major minor <<<"$node"
  mknod -m 0666 "$root/dev/$name" c "$major" "$minor"
done
# Stand-ins for the NVIDIA device nodes: a workload that "holds a GPU" opens one, as CUDA does.
for i in 0 1 2 3 4 5 6 7; do mknod -m 0666 "$root/dev/nvidia$i" c 1 3; done
mknod -m 0666 "$root/dev/nvidiactl" c 1 3
mknod -m 0666 "$root/dev/nvidia-uvm" c 1 3
mkdir -p "$root/dev/pts" "$root/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm"
ln -s /proc/self/fd "$root/dev/fd"
mount -t tmpfs -o mode=0755,nosuid,nodev run "$root/run"
mount -t tmpfs -o mode=1777,nosuid,nodev tmp "$root/tmp"

mkdir -p "$root$repo"
mount --bind "$repo" "$root$repo"
mount -o remount,bind,ro "$root$repo"

mkdir -p "$root/e2e"
mount --bind "$state/shared" "$root/e2e"

cd "$root"
mkdir -p .e2e-old-root
pivot_root . .e2e-old-root
cd /
umount -l /.e2e-old-root
rmdir /.e2e-old-root

exec env -i container=gpugate-e2e PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  /lib/systemd/systemd --log-target=journal --log-level=info --unit=gpugate-e2e.target
