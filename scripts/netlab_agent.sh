#!/usr/bin/env bash
# Open MPI launch agent for scripts/netlab.sh (used as --mca plm_rsh_agent instead of ssh).
#
# Open MPI's rsh launcher calls it as `netlab_agent.sh [-x] HOST COMMAND...`, HOST being a
# node's address on the netlab bridge (10.217.0.K). It runs COMMAND (a shell command line,
# as ssh would) inside that node's network namespace ($NETLAB_PREFIX-nK-1) with its own
# UTS namespace and hostname, so each "node" looks like a separate host to Open MPI.
# Only addresses of the netlab subnet are accepted: it never enters another namespace.
set -euo pipefail
prefix=${NETLAB_PREFIX:-gcnl}
net=${NETLAB_NET:-10.217.0}
[[ $prefix =~ ^gcnl[a-z0-9]{0,3}$ ]] || { echo "netlab_agent: bad NETLAB_PREFIX '$prefix'" >&2; exit 2; }
while [[ ${1:-} == -* ]]; do shift; done   # ssh-style options (-x) mean nothing here
host=${1:?netlab_agent: no host}
shift
(($# > 0)) || { echo "netlab_agent: no command for $host" >&2; exit 2; }
[[ $host =~ ^${net//./\\.}\.([0-9]+)$ ]] || { echo "netlab_agent: $host is not a netlab node ($net.K)" >&2; exit 2; }
k=$((BASH_REMATCH[1] - 1))
ns=$prefix-n$k
[[ -e /run/netns/$ns ]] || { echo "netlab_agent: no namespace $ns for $host (netlab.sh up first)" >&2; exit 2; }
# $* is one shell command line, exactly what ssh would hand to the remote shell.
exec ip netns exec "$ns" unshare --uts -- /bin/sh -c "hostname $ns && exec /bin/sh -c \"\$0\"" "$*"
