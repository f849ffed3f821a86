#!/bin/sh
# dashboard.sh — serves the status page (bin/pivfarm.cgi of this tree) with
# lighttpd on 127.0.0.1, in the foreground until Ctrl-C or SIGTERM.
#   deploy/dashboard.sh [-c CONF] [-p PORT] [-d DIR]
# CONF: the pivfarm configuration (conf/pivfarm.conf); PORT: $PIVFARM_DASHBOARD_PORT,
# else 8080; DIR: where lighttpd keeps its logs (run/dashboard). Then open
# http://127.0.0.1:PORT/ (before any broker has run, the page says so);
# Prometheus scrapes http://127.0.0.1:PORT/metrics.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
conf="$here/conf/pivfarm.conf"
port=${PIVFARM_DASHBOARD_PORT:-8080}
dir="$here/run/dashboard"
while getopts c:p:d: opt; do
    case $opt in
    c) conf=$OPTARG ;;
    p) port=$OPTARG ;;
    d) dir=$OPTARG ;;
    *) echo "usage: $0 [-c CONF] [-p PORT] [-d DIR]" >&2; exit 2 ;;
    esac
done
case $port in
''|*[!0-9]*) echo "dashboard: bad port '$port'" >&2; exit 2 ;;
esac
lighttpd=$(command -v lighttpd || echo /usr/sbin/lighttpd)
if [ ! -x "$lighttpd" ]; then
    echo "dashboard: lighttpd is not installed (make deps installs it)" >&2
    exit 1
fi
if [ ! -x "$here/bin/pivfarm.cgi" ]; then
    echo "dashboard: '$here/bin/pivfarm.cgi' is not built (run make)" >&2
    exit 1
fi
case $conf in /*) ;; *) conf="$(pwd)/$conf" ;; esac
mkdir -p "$dir/www"
dir=$(cd "$dir" && pwd)

export PIVFARM_DASHBOARD_PORT="$port"
export PIVFARM_DASHBOARD_DIR="$dir"
export PIVFARM_CGI="$here/bin/pivfarm.cgi"
export PIVFARM_CONF="$conf"
echo "dashboard: http://127.0.0.1:$port/, metrics at /metrics (configuration $conf; logs in $dir)" >&2
exec "$lighttpd" -D -f "$here/deploy/lighttpd.conf"
