#!/bin/sh
# systemd-ns.sh — the init of tests/test_systemd.c's namespace: run as PID 1 of
# new PID, mount, network, UTS, IPC and cgroup namespaces (unshare --pid
# --fork --kill-child --mount --net --uts --ipc --cgroup), it makes every file
# system a booting systemd could change private to the namespace, then execs
# systemd into pivfarm-test.target, which starts dbus and polkit and nothing
# else (no unit of the host's, no generator but pivfarm's).
#
#   systemd-ns.sh DIR    DIR/inst: 'make install PREFIX=/usr DESTDIR=DIR/inst'
#                        DIR/farm: the farm (watch root, archive, results)
#                        DIR/pivfarm.conf: the farm's configuration
#
# What the host keeps unchanged: / is made rprivate first (no mount leaves
# the namespace), then rshared again inside (as on a host booted by systemd,
# so that a tmpfs mounted by pivfarm-tmpfs@.service reaches the units'
# namespaces); /etc, /usr and /var are overlays whose upper layers are in
# DIR/ovl; /tmp, /run, /var/tmp, /var/log/journal, /dev/shm, /srv and
# /etc/systemd/system are fresh tmpfs; /dev is a tmpfs holding binds of the
# few device nodes needed and a new devpts instance; /proc/sys and /sys are
# read-only; /sys/fs/cgroup is the cgroup2 subtree the test made for this
# run (the cgroup namespace's root). The unit path (SYSTEMD_UNIT_PATH) and
# the generator path (SYSTEMD_GENERATOR_PATH) are private directories under
# /run; systemd-tmpfiles and the other early-boot units are masked there too.
# Services' output goes to DIR/services.log, systemd's own to its stderr.
# With 'manual' as second argument the script stops before exec (a shell).
set -eu

dir=${1:?usage: systemd-ns.sh DIR}
[ "$$" = 1 ] || {
    echo "systemd-ns.sh: not PID 1 of a new PID namespace: run it under unshare --pid --fork" >&2
    exit 2
}
say() { echo "systemd-ns.sh: $*" >&2; }

# Nothing mounted here leaves the namespace (a fresh shared tree at the end).
mount --make-rprivate /

# The test directory stays reachable as /srv/t once /tmp is covered; the
# farm is /srv/pivfarm.
mount -t tmpfs -o mode=0755,size=16m pivfarm-srv /srv
mkdir /srv/t /srv/pivfarm /srv/dev
mount --bind "$dir" /srv/t
mount --bind "$dir/farm" /srv/pivfarm

# /etc, /usr (with the installed farm on top) and /var: overlays.
for d in etc usr var; do mkdir -p "$dir/ovl/$d/upper" "$dir/ovl/$d/work"; done
mount -t overlay pivfarm-etc -o "lowerdir=/etc,upperdir=$dir/ovl/etc/upper,workdir=$dir/ovl/etc/work" /etc
mount -t overlay pivfarm-usr -o "lowerdir=$dir/inst/usr:/usr,upperdir=$dir/ovl/usr/upper,workdir=$dir/ovl/usr/work" /usr
mount -t overlay pivfarm-var -o "lowerdir=/var,upperdir=$dir/ovl/var/upper,workdir=$dir/ovl/var/work" /var
for d in /tmp /var/tmp; do mount -t tmpfs -o mode=1777,size=64m pivfarm-tmp "$d"; done
[ ! -d /var/log/journal ] || mount -t tmpfs -o mode=0755,size=16m pivfarm-journal /var/log/journal
mount -t tmpfs -o mode=0755,size=64m pivfarm-run /run
mount -t tmpfs -o mode=0755,size=4m pivfarm-units /etc/systemd/system

# /dev: the device nodes a service needs, binds of the host's; a new devpts.
mount -t tmpfs -o mode=0755,nosuid,size=1m pivfarm-dev /srv/dev
for n in null zero full random urandom tty; do
    touch "/srv/dev/$n"
    mount --bind "/dev/$n" "/srv/dev/$n"
done
mkdir /srv/dev/pts /srv/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /srv/dev/pts
ln -s pts/ptmx /srv/dev/ptmx
ln -s /proc/self/fd /srv/dev/fd
mount -t tmpfs -o mode=1777,nosuid,nodev,size=16m pivfarm-shm /srv/dev/shm
mount --move /srv/dev /dev

# The kernel's settings stay the host's; the cgroup tree is ours.
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount -o remount,bind,ro /sys
mount -t cgroup2 -o nsdelegate cgroup2 /sys/fs/cgroup 2>/dev/null ||
    mount -t cgroup2 cgroup2 /sys/fs/cgroup

# The user pivfarm, in the private /etc if the host has none.
id pivfarm >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin pivfarm
mkdir -p /etc/pivfarm
cp /srv/t/pivfarm.conf /etc/pivfarm/pivfarm.conf
chown pivfarm:pivfarm /srv/pivfarm/data /srv/pivfarm/archive /srv/pivfarm/results

# The private unit path: the targets boot needs, dbus, polkit, the
# installed pivfarm units; pivfarm-test.target pulls dbus and polkit only.
units=/run/pivfarm-test/units
gens=/run/pivfarm-test/generators
mkdir -p "$units" "$gens" "$units/service.d"
for u in basic.target sysinit.target sockets.target paths.target timers.target \
    slices.target local-fs.target local-fs-pre.target remote-fs.target remote-fs-pre.target \
    network.target network-pre.target network-online.target nss-user-lookup.target \
    shutdown.target umount.target final.target -.slice system.slice \
    dbus.socket dbus.service polkit.service; do
    [ ! -e "/usr/lib/systemd/system/$u" ] || cp "/usr/lib/systemd/system/$u" "$units/"
done
cp /usr/lib/systemd/system/pivfarm-* "$units/"
for u in systemd-tmpfiles-setup.service systemd-tmpfiles-setup-dev.service \
    systemd-tmpfiles-clean.service systemd-tmpfiles-clean.timer systemd-sysctl.service \
    systemd-sysusers.service systemd-journald.service systemd-journald.socket \
    systemd-udevd.service systemd-modules-load.service systemd-remount-fs.service \
    systemd-binfmt.service systemd-random-seed.service systemd-update-utmp.service \
    systemd-journal-flush.service systemd-firstboot.service systemd-machine-id-commit.service \
    ldconfig.service tmp.mount; do
    ln -s /dev/null "$units/$u"
done
cat >"$units/pivfarm-test.target" <<'EOF'
[Unit]
Description=pivfarm test boot (tests/test_systemd.c): dbus and polkit, nothing else
Requires=basic.target dbus.socket
Wants=dbus.service polkit.service
After=basic.target dbus.socket
EOF
# No journald: every service writes to the test's log.
cat >"$units/service.d/pivfarm-test-log.conf" <<'EOF'
[Service]
StandardOutput=append:/srv/t/services.log
StandardError=inherit
EOF
ln -s /usr/lib/systemd/system-generators/pivfarm-generator "$gens/"

# As on a host systemd booted: mounts propagate into the units' namespaces
# (a tmpfs of pivfarm-tmpfs@.service reaches the watcher's and the broker's).
mount --make-rshared /
say "namespace ready; booting systemd into pivfarm-test.target"
[ "${2:-}" != manual ] || exec /bin/sh
exec env -i container=pivfarm-test PATH=/usr/sbin:/usr/bin:/sbin:/bin \
    SYSTEMD_UNIT_PATH="$units:/run/systemd/generator" SYSTEMD_GENERATOR_PATH="$gens" \
    /lib/systemd/systemd --system --unit=pivfarm-test.target --log-target=console \
    --log-level=info --show-status=no
