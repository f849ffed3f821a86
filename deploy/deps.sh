#!/bin/sh
# deps.sh — installs the Debian packages pivfarm needs to build and test;
# quick and silent when they are all present. Run by 'make deps'.
set -eu

PACKAGES="build-essential pkg-config libfftw3-dev libtiff-dev check libsubunit-dev
libczmq-dev libzmq3-dev libsodium-dev libjansson-dev libsqlite3-dev lighttpd chromium
slurmctld slurmd slurm-client munge iproute2 libsystemd-dev groff-base prometheus dbus polkitd
libhdf5-dev hdf5-tools python3-h5py python3-numpy python3-vtk9
libmatio-dev python3-xarray python3-h5netcdf python3-scipy netcdf-bin
libgsl-dev libxml2-dev"

missing=""
for p in $PACKAGES; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing="$missing $p"
    fi
done
[ -z "$missing" ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO="sudo"
    else
        echo "deps: missing packages:$missing; run 'make deps' as root" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists when they are absent or older than a day.
lists=/var/lib/apt/lists
if [ -z "$(find "$lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
    echo "deps: apt-get update"
    $SUDO apt-get update -q
fi
echo "deps: installing$missing"
$SUDO apt-get install -y -q --no-install-recommends $missing
# prometheus is here for promtool (the tests check the status page's metrics
# with it; Debian ships promtool in no other package). Its server, which the
# package enables and starts, is disabled and stopped: nothing is left
# running, nor started at the next boot.
case " $missing " in
*" prometheus "*)
    if command -v systemctl >/dev/null 2>&1; then
        $SUDO systemctl disable prometheus.service >/dev/null 2>&1 || true  # also without systemd
    fi
    if [ -d /run/systemd/system ]; then
        $SUDO systemctl stop prometheus.service >/dev/null 2>&1 || true
    elif [ -x /etc/init.d/prometheus ]; then
        $SUDO /etc/init.d/prometheus stop >/dev/null 2>&1 || true
        $SUDO update-rc.d prometheus disable >/dev/null 2>&1 || true
    fi
    ;;
esac
