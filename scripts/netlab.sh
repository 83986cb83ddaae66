#!/usr/bin/env bash
# netlab: an emulated cluster on one machine. N network namespaces ("nodes") on one bridge,
# every node's link shaped to RATE in both directions with tc tbf, and gradcomp launched
# over them by Open MPI's rsh launcher (scripts/netlab_agent.sh enters a node's namespace
# instead of ssh). Bandwidth only: no added latency (netem), no switch contention, no NIC
# offloads of a real port (see docs/reproduce.md, "A slow network on a laptop").
#
#   scripts/netlab.sh check                      # root, ip, tc, unshare, tbf, Open MPI here?
# What the machine lacks ends any command with one line and exit 3; other errors exit 1.
#   scripts/netlab.sh up N --rate RATE [--dilate K] [--burst BYTES] [--limit BYTES]
#   scripts/netlab.sh run [--np N] -- GRADCOMP_ARGS...  # e.g. -- micro-comm --out results/x
#   scripts/netlab.sh status
#   scripts/netlab.sh down                       # idempotent, also after a failed/interrupted up
#
# Layout (nothing is created in the host's own network namespace):
#   namespace gcnl-sw : bridge gcnl-br, ports gcnl-p0..gcnl-pN-1 (no address)
#   namespace gcnl-nK : gcnl-eth = 10.217.0.(K+1)/24, the peer of gcnl-pK; lo; no default route
#   shaping           : tbf RATE on gcnl-eth egress (node -> bridge) and on gcnl-pK egress
#                       (bridge -> node, i.e. the node's ingress)
# RATE as tc writes it: 100mbit, 1gbit, 10gbit. Each `run` writes network.txt
# (netlab-RATE, e.g. netlab-1gbit; netlab-RATE-dilateK when dilated) and netlab.txt (the
# shaping) into gradcomp's --out directory (report: acpsgd_network).
#
# Time dilation (--dilate K, issue 34; docs/performance.md, "Time dilation"): the emulated
# cluster's clocks run K times slower than the machine's, so N nodes on fewer cores get K
# times more real time per emulated second. tbf shapes to RATE/K; `run` passes
# --time-dilation K to gradcomp (which slows its emulated device and stretches its host
# work by K and divides every time it writes by K) and exports NETLAB_DILATE=K to the
# ranks; a --time-dilation that differs from K is refused. RATE stays the emulated link's.
#
# Env: NETLAB_PREFIX (gcnl, or gcnl + up to 3 [a-z0-9], e.g. gcnlt for tests),
#      NETLAB_BIN (default target/release/gradcomp), NETLAB_MPIRUN (mpirun),
#      NETLAB_MPI_ARGS (extra mpirun arguments, appended), NETLAB_STATE (/run/<prefix>-netlab),
#      NETLAB_TUNE=0 (launch with Open MPI's defaults instead of the two settings in mpi_args).
set -euo pipefail

PREFIX=${NETLAB_PREFIX:-gcnl}
NET=10.217.0           # the nodes' /24; it exists only on the netlab bridge
MAX_NODES=32
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
STATE=${NETLAB_STATE:-/run/$PREFIX-netlab}
SW=$PREFIX-sw
BR=$PREFIX-br

die() { echo "netlab: $*" >&2; exit 1; }
# What this machine lacks (root, iproute2, netns, tbf, Open MPI): exit 3, so that CI can
# tell "cannot run here" from "netlab is broken".
die_env() { echo "netlab: $*" >&2; exit 3; }
say() { echo "netlab: $*"; }

MAX_DILATE=64          # gradcomp's limit too (src/measure/dilation.rs)
[[ $PREFIX =~ ^gcnl[a-z0-9]{0,3}$ ]] || die "NETLAB_PREFIX must be gcnl plus at most 3 of [a-z0-9] (got '$PREFIX')"

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }

# ---------------------------------------------------------------- checks
# One line naming the first thing missing, exit 1. `check` runs all of them.
need_root() { [[ $(id -u) -eq 0 ]] || die_env "needs root (creates network namespaces, veth links and tc qdiscs); run it as root, or with sudo"; }
need_tools() {
  local t
  for t in ip tc; do
    command -v "$t" >/dev/null 2>&1 || die_env "'$t' not found: install iproute2 (apt-get install iproute2)"
  done
  command -v unshare >/dev/null 2>&1 || die_env "'unshare' not found: install util-linux"
  ip netns list >/dev/null 2>&1 || die_env "'ip netns' does not work here (iproute2 without netns support?)"
}
# tbf: try it on the loopback of a throw-away namespace (nothing outside it is touched).
need_tbf() {
  local probe=$PREFIX-probe err
  ip netns del "$probe" 2>/dev/null || true
  ip netns add "$probe" 2>/dev/null || die_env "cannot create a network namespace (ip netns add failed: no CAP_SYS_ADMIN or no netns in this kernel)"
  if ! err=$(ip netns exec "$probe" tc qdisc add dev lo root tbf rate 1gbit burst 64kb limit 1mb 2>&1); then
    ip netns del "$probe" 2>/dev/null || true
    die_env "tc tbf is not available (kernel without sch_tbf / CONFIG_NET_SCH_TBF: ${err//$'\n'/ })"
  fi
  ip netns del "$probe"
}
need_mpirun() {
  local m=${NETLAB_MPIRUN:-mpirun}
  command -v "$m" >/dev/null 2>&1 || die_env "'$m' not found: install Open MPI (apt-get install openmpi-bin)"
  "$m" --version 2>&1 | grep -q 'Open MPI' || die_env "'$m' is not Open MPI's mpirun (netlab launches with Open MPI's rsh launcher)"
}

# ---------------------------------------------------------------- state
# Namespaces this prefix created (exact names only: PREFIX-sw, PREFIX-probe, PREFIX-nK).
our_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$PREFIX-(sw|probe|n[0-9]+)$" || true; }
state_get() { sed -n "s/^$1=//p" "$STATE/state" 2>/dev/null; }
# The dilation of the lab that is up (1 for a lab made before --dilate existed).
state_dilate() { local d; d=$(state_get dilate); echo "${d:-1}"; }
rate_bps() {  # tc rate -> bit/s (integer)
  local r=$1 n u
  [[ $r =~ ^([0-9]+)(kbit|mbit|gbit)$ ]] || die "rate '$r' not understood: use e.g. 100mbit, 1gbit, 10gbit"
  n=${BASH_REMATCH[1]}; u=${BASH_REMATCH[2]}
  case $u in kbit) echo $((n * 1000)) ;; mbit) echo $((n * 1000000)) ;; gbit) echo $((n * 1000000000)) ;; esac
}

# bit/s -> the shortest exact tc rate (250mbit, 333333333bit).
tc_rate() {
  local b=$1
  if ((b % 1000000000 == 0)); then echo "$((b / 1000000000))gbit"
  elif ((b % 1000000 == 0)); then echo "$((b / 1000000))mbit"
  elif ((b % 1000 == 0)); then echo "$((b / 1000))kbit"
  else echo "${b}bit"; fi
}

# ---------------------------------------------------------------- down
cmd_down() {
  need_root
  command -v ip >/dev/null 2>&1 || die_env "'ip' not found: install iproute2 (apt-get install iproute2)"
  local ns n=0
  # Deleting a namespace deletes its veth ends (and so their peers), the bridge and the qdiscs.
  for ns in $(our_netns); do
    ip netns del "$ns" && n=$((n + 1))
  done
  # An `ip link add ... netns` interrupted half-way can leave a link in the host namespace:
  # only names this prefix makes (PREFIX-eth, PREFIX-pK, PREFIX-br).
  local l
  for l in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^$PREFIX-(eth|br|p[0-9]+)$" || true); do
    if ip link del "$l" 2>/dev/null; then n=$((n + 1)); fi
  done
  rm -rf "$STATE"
  say "down ($n namespaces/links removed)"
}

# ---------------------------------------------------------------- up
cmd_up() {
  local n="" rate="" burst="" limit="" dilate=1
  while (($#)); do
    case $1 in
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --rate=*) rate=${1#*=}; shift ;;
      --dilate) dilate=${2:?--dilate needs a value}; shift 2 ;;
      --dilate=*) dilate=${1#*=}; shift ;;
      --burst) burst=${2:?--burst needs a value}; shift 2 ;;
      --limit) limit=${2:?--limit needs a value}; shift 2 ;;
      -h|--help) usage; exit 0 ;;
      *) [[ -z $n && $1 =~ ^[0-9]+$ ]] || die "up: unexpected argument '$1' (up N --rate RATE)"; n=$1; shift ;;
    esac
  done
  [[ -n $n ]] || die "up: how many nodes? (up N --rate RATE)"
  [[ -n $rate ]] || die "up: --rate RATE is required (e.g. --rate 1gbit)"
  ((n >= 1 && n <= MAX_NODES)) || die "up: N must be 1..$MAX_NODES"
  [[ $dilate =~ ^[0-9]+$ ]] && ((dilate >= 1 && dilate <= MAX_DILATE)) \
    || die "up: --dilate $dilate: give an integer from 1 (no dilation) to $MAX_DILATE"
  local bps; bps=$(rate_bps "$rate")
  # Time dilation K: tbf shapes to RATE/K on the machine's clock, which is RATE on the
  # emulated clock (every time gradcomp writes is wall / K). Burst and limit are bytes and
  # stay those of the undilated link (computed below from RATE, not RATE/K): in emulated
  # time the bucket still refills its burst in 2 ms and the queue still holds 16 ms, since
  # both take K x longer in wall time at RATE/K. The same bytes leave on credit after an
  # idle spell, so gradcomp simulate's credit model (src/sim/model/credit.rs) uses RATE and the
  # burst as they are (netlab.txt records both rates).
  local tbf_bps=$((bps / dilate)) tbf_rate
  ((tbf_bps >= 8000)) || die "up: --rate $rate / --dilate $dilate is below 8 kbit/s; dilate less"
  tbf_rate=$(tc_rate "$tbf_bps")
  # Burst: 2 ms at RATE, at least 256 KiB (262144 B at 1gbit). A message smaller than the
  # burst passes at memory speed when the bucket is full, so the burst is kept small; but
  # each time the bucket runs dry the data waits for a timer and a CPU, and on a loaded
  # machine that costs milliseconds: 128 KiB made 256 KiB-1 MiB all-reduces 2-6x slower
  # than the wire, 64 KiB no longer sustained 1 Gbit. Queue limit: 16 ms at RATE, at
  # least 1 MiB (docs/performance.md, "Emulated network (netlab)").
  [[ -n $burst ]] || burst=$((bps / 8 / 500 > 262144 ? bps / 8 / 500 : 262144))
  [[ -n $limit ]] || limit=$((bps * 16 / 8000 > 1048576 ? bps * 16 / 8000 : 1048576))
  [[ $burst =~ ^[0-9]+$ && $limit =~ ^[0-9]+$ ]] || die "up: --burst and --limit are bytes (integers)"
  need_root; need_tools; need_tbf
  if [[ -e $STATE/state || -n $(our_netns) ]]; then
    die "a netlab ($PREFIX) is already up or half made: scripts/netlab.sh down first"
  fi
  # From here on any failure or interrupt removes what was made.
  # shellcheck disable=SC2154  # rc is assigned inside the trap
  trap 'rc=$?; trap - EXIT INT TERM; if ((rc)); then echo "netlab: up failed; removing what it made" >&2; cmd_down >&2 || true; fi; exit $rc' EXIT
  trap 'exit 130' INT TERM
  mkdir -p "$STATE"
  ip netns add "$SW"
  ip -n "$SW" link set lo up
  ip -n "$SW" link add "$BR" type bridge
  ip -n "$SW" link set "$BR" up
  local k ns port
  for ((k = 0; k < n; k++)); do
    ns=$PREFIX-n$k; port=$PREFIX-p$k
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    # Created directly inside the two namespaces: nothing appears in the host's namespace.
    ip link add "$PREFIX-eth" netns "$ns" type veth peer name "$port" netns "$SW"
    ip -n "$SW" link set "$port" master "$BR"
    ip -n "$SW" link set "$port" up
    ip -n "$ns" addr add "$NET.$((k + 1))/24" dev "$PREFIX-eth"
    ip -n "$ns" link set "$PREFIX-eth" up
    # Per-namespace TCP buffer limits (the host's are untouched): room for a full window
    # in both directions at RATE with the tbf queue full.
    ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_rmem="4096 131072 16777216" net.ipv4.tcp_wmem="4096 16384 16777216"
    ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 2>/dev/null || true
    # egress of the node (node -> bridge) and egress of the bridge port (bridge -> node)
    tc -n "$ns" qdisc add dev "$PREFIX-eth" root tbf rate "$tbf_rate" burst "$burst" limit "$limit"
    tc -n "$SW" qdisc add dev "$port" root tbf rate "$tbf_rate" burst "$burst" limit "$limit"
  done
  {
    echo "nodes=$n"; echo "rate=$rate"; echo "burst=$burst"; echo "limit=$limit"
    echo "dilate=$dilate"; echo "tbf_rate=$tbf_rate"
    echo "net=$NET.0/24"; echo "created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  } >"$STATE/state"
  # Every node reaches every other (one ping each from node 0 is enough for the bridge).
  if command -v ping >/dev/null 2>&1; then
    for ((k = 1; k < n; k++)); do
      ip netns exec "$PREFIX-n0" ping -c 1 -W 2 "$NET.$((k + 1))" >/dev/null || die "up: node 0 cannot reach $NET.$((k + 1))"
    done
  fi
  trap - EXIT INT TERM
  local dil=""
  ((dilate > 1)) && dil=", time dilation $dilate (tbf $tbf_rate on this machine's clock)"
  say "up: $n nodes ($PREFIX-n0..$PREFIX-n$((n - 1)), $NET.1-$NET.$n) on bridge $BR in $SW, tbf $rate burst $burst limit $limit both directions$dil"
}

# ---------------------------------------------------------------- status
cmd_status() {
  need_root; need_tools
  if [[ ! -e $STATE/state ]]; then
    local left; left=$(our_netns | tr '\n' ' ')
    if [[ -n $left ]]; then echo "netlab ($PREFIX): not up, but namespaces left over: $left(scripts/netlab.sh down)"; return 1; fi
    echo "netlab ($PREFIX): down"; return 0
  fi
  local n k; n=$(state_get nodes)
  local dilate; dilate=$(state_dilate)
  local dil=""
  ((dilate > 1)) && dil=", time dilation $dilate (tbf $(state_get tbf_rate))"
  echo "netlab ($PREFIX): up, $n nodes, rate $(state_get rate), burst $(state_get burst) B, limit $(state_get limit) B$dil, since $(state_get created)"
  for ((k = 0; k < n; k++)); do
    echo "node $k: namespace $PREFIX-n$k, $NET.$((k + 1))"
    tc -s -n "$PREFIX-n$k" qdisc show dev "$PREFIX-eth" | sed 's/^/  out: /' | head -3
    tc -s -n "$SW" qdisc show dev "$PREFIX-p$k" | sed 's/^/  in:  /' | head -3
  done
}

# ---------------------------------------------------------------- run
# The launch settings: Open MPI's TCP BTL on the bridge subnet only (docs/performance.md,
# "netlab" explains each one and what it changed).
mpi_args() {
  local sub=$NET.0/24
  # shellcheck disable=SC2054  # "tcp,self" is one argument
  MPI_ARGS=(
    --mca plm_rsh_agent "$HERE/netlab_agent.sh"
    --mca plm_rsh_no_tree_spawn 1
    --mca pml ob1 --mca btl tcp,self
    --mca btl_tcp_if_include "$sub" --mca oob_tcp_if_include "$sub"
    --bind-to none --oversubscribe
    -x PMIX_MCA_gds=hash -x NETLAB_PREFIX -x NETLAB_DILATE
  )
  # The BLAS library's threads, when the caller chose them (e.g. OPENBLAS_NUM_THREADS=1).
  [[ -n ${OPENBLAS_NUM_THREADS:-} ]] && MPI_ARGS+=(-x OPENBLAS_NUM_THREADS)
  # NETLAB_TUNE=0: Open MPI's own defaults (to see the half-duplex behaviour again).
  [[ ${NETLAB_TUNE:-1} == 0 ]] && return 0
  MPI_ARGS+=(
    # Two TCP connections per pair of ranks: with one, a rank's control message for the
    # peer's incoming message (rendezvous ACK / PUT request) waits behind its own outgoing
    # bulk "put" (one fragment for the whole message) on the same socket, and the two
    # directions take turns: the "half duplex" 0.47 of the rate at 2 nodes.
    --mca btl_tcp_links 2
    # Ranks yield the CPU while polling: the kernel's TCP and tbf work runs on the same
    # few cores here (a real node has a NIC and cores of its own).
    --mca mpi_yield_when_idle 1
  )
}

cmd_run() {
  local np="" args=()
  while (($#)); do
    case $1 in
      --np|-np) np=${2:?--np needs a value}; shift 2 ;;
      --) shift; args=("$@"); break ;;
      *) die "run: unexpected argument '$1' (run [--np N] -- GRADCOMP_ARGS)" ;;
    esac
  done
  ((${#args[@]})) || die "run: no gradcomp arguments (run [--np N] -- micro-comm ...)"
  need_root; need_tools; need_mpirun
  [[ -e $STATE/state ]] || die "not up: scripts/netlab.sh up N --rate RATE first"
  local n rate dilate; n=$(state_get nodes); rate=$(state_get rate); dilate=$(state_dilate)
  [[ -n $np ]] || np=$n
  [[ $np =~ ^[1-9][0-9]*$ ]] || die "run: --np must be a positive integer"
  local bin=${NETLAB_BIN:-$ROOT/target/release/gradcomp}
  [[ -x $bin ]] || die "no gradcomp binary at $bin (cargo build --release, or set NETLAB_BIN)"
  # --out: where network.txt goes; gradcomp's own default when absent.
  local out="" i given=""
  for ((i = 0; i < ${#args[@]}; i++)); do
    case ${args[i]} in
      --out) out=${args[i + 1]:-} ;;
      --out=*) out=${args[i]#--out=} ;;
      --time-dilation) given=${args[i + 1]:-} ;;
      --time-dilation=*) given=${args[i]#--time-dilation=} ;;
    esac
  done
  # The lab's dilation goes to gradcomp; a different one is refused here (gradcomp
  # refuses it too: NETLAB_DILATE below).
  if [[ -n $given ]]; then
    [[ $given == "$dilate" ]] || die "run: --time-dilation $given but this netlab is dilated by $dilate (up ... --dilate $dilate); drop the flag (run passes --time-dilation $dilate itself) or bring netlab up again with --dilate $given"
  elif ((dilate > 1)); then
    args+=(--time-dilation "$dilate")
  fi
  if [[ -z $out ]]; then
    out=results/netlab-$(date -u +%Y%m%d-%H%M%S)
    args+=(--out "$out")
  fi
  mkdir -p "$out"
  if ((dilate > 1)); then echo "netlab-$rate-dilate$dilate"; else echo "netlab-$rate"; fi >"$out/network.txt"
  # The shaping, recorded with the results (docs/performance.md, "Emulated network"):
  # rate is the emulated link's; dilated, tbf shaped to tbf_rate = rate / dilate.
  printf 'nodes=%s\nrate=%s\nburst=%s\nlimit=%s\ndilate=%s\ntbf_rate=%s\n' "$n" "$rate" "$(state_get burst)" \
    "$(state_get limit)" "$dilate" "$(state_get tbf_rate || true)" >"$out/netlab.txt"
  # A lab made before --dilate has no tbf_rate: it shaped to rate.
  sed -i "s/^tbf_rate=\$/tbf_rate=$rate/" "$out/netlab.txt"
  # Hosts: every node's address with enough slots; ranks go round-robin over the nodes.
  local slots=$(((np + n - 1) / n)) hosts="" k
  for ((k = 0; k < n; k++)); do hosts+="${hosts:+,}$NET.$((k + 1)):$slots"; done
  mpi_args
  local mpirun=${NETLAB_MPIRUN:-mpirun} extra=()
  # shellcheck disable=SC2206  # NETLAB_MPI_ARGS is a word list on purpose
  [[ -n ${NETLAB_MPI_ARGS:-} ]] && extra=($NETLAB_MPI_ARGS)
  export NETLAB_PREFIX=$PREFIX NETLAB_DILATE=$dilate PMIX_MCA_gds=hash OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # mpirun itself runs on node 0 (its ranks there are its children); the others are
  # started through the agent. exec: a signal to this script reaches mpirun.
  # shellcheck disable=SC2016  # $0 and $@ belong to the inner shell
  exec ip netns exec "$PREFIX-n0" unshare --uts -- /bin/sh -c 'hostname "$0" && exec "$@"' "$PREFIX-n0" \
    "$mpirun" -np "$np" --host "$hosts" --map-by node "${MPI_ARGS[@]}" "${extra[@]}" "$bin" "${args[@]}"
}

# ---------------------------------------------------------------- main
cmd=${1:-}
(($#)) && shift
case $cmd in
  up) cmd_up "$@" ;;
  down) cmd_down ;;
  status) cmd_status ;;
  run) cmd_run "$@" ;;
  check) need_root; need_tools; need_tbf; need_mpirun; say "ok: root, iproute2, unshare, tc tbf, Open MPI" ;;
  -h|--help|help) usage ;;
  "") usage >&2; exit 2 ;;
  *) die "unknown command '$cmd' (up, run, status, down, check)" ;;
esac
