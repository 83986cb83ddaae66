#!/usr/bin/env bash
# Tests of scripts/netlab.sh (issue 17). Uses its own prefix (gcnlt), so a lab made with the
# default prefix (gcnl) may stay up meanwhile.
#   1. without root: one line naming root, non-zero exit;
#   2. without iproute2 (ip/tc not on PATH): one line naming iproute2;
#   3. without tbf (a tc that does not know tbf, as a kernel without sch_tbf answers): one
#      line naming tbf, and the probe namespace is gone;
#   4. `up` failing half-way (tc fails on the 3rd qdisc): nothing left behind; `down` after it
#      and a second `down` exit 0;
#   5. `up` killed half-way (SIGKILL, no trap runs): `status` reports the leftovers, `down`
#      removes every namespace, link and qdisc;
#   6. a 2-node 1 Gbit all-reduce (gradcomp's ring and MPI_Allreduce, 16 MiB, --check): rows
#      pass the check, network.txt says netlab-1gbit, and the bus bandwidth is at most 1.10 of
#      the rate (the shaping works: unshaped veth is several GB/s) and at least
#      NETLAB_TEST_MIN_FRACTION of it (default 0.6: the half-duplex fault gave 0.47), in the
#      first run or, when it misses, in one more (band_twice);
#   7. time dilation (issue 34): `up --dilate 0` refused in one line; a 2-node 1 Gbit lab
#      dilated by 4: tbf at 250Mbit, status names the dilation, run refuses a different
#      --time-dilation in one line, passes --time-dilation 4 itself: micro-comm rows carry
#      time_dilation 4, pass --check and reach [NETLAB_TEST_MIN_FRACTION, 1.10] of 1 Gbit
#      in emulated seconds (one more run on a miss, as in 6); netlab.txt and network.txt record the dilation; a short e2e run
#      writes time_dilation 4 and run.json's time_dilation.
# Checks 2-6 need root (1 is then run as nobody via setpriv); without root only 1 runs.
# "Nothing left behind" = no namespace gcnlt-*, no link named gcnlt-* and no qdisc on one
# (ip netns list, ip -o link, tc qdisc show) in the host namespace.
# Env: NETLAB_TEST_SKIP_RUN=1 skips 6 and 7's runs; NETLAB_TEST_PREFIX (gcnlt); NETLAB_BIN as for netlab.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
export NETLAB_PREFIX=${NETLAB_TEST_PREFIX:-gcnlt}  # another prefix lets two checkouts test at once
P=$NETLAB_PREFIX
NL=$PWD/scripts/netlab.sh
MIN_FRAC=${NETLAB_TEST_MIN_FRACTION:-0.6}
TMP=$(mktemp -d /tmp/gcnlt-test.XXXXXX)
chmod 755 "$TMP"
fails=0
ok() { echo "[netlab_test] ok: $*"; }
bad() { echo "[netlab_test] FAIL: $*" >&2; fails=$((fails + 1)); }
# band DIR COL WANT LABEL: print each row of DIR/micro_comm.csv, OK when it passed --check,
# its column COL is WANT and its bus bandwidth is in [MIN_FRAC, 1.10] of 1 Gbit (0.125
# GB/s; busbw_gbps is GB/s, in emulated seconds when dilated), LABEL before COL's value;
# true when both rows (the two collectives) are OK.
band() {
  local rows n
  rows=$(awk -F, -v lo="$MIN_FRAC" -v col="$2" -v want="$3" -v label="$4" 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next}
    {f = $c["busbw_gbps"] / 0.125
     printf "%s %s%s %s busbw %.3f GB/s = %.2f of the rate %s\n", $c["collective"], label, $c[col], $c["check"], $c["busbw_gbps"], f,
       ($c["check"] == "pass" && $c[col] == want && f <= 1.10 && f >= lo) ? "OK" : "BAD"}' "$1/micro_comm.csv")
  while IFS= read -r r; do echo "[netlab_test]   $r"; done <<<"$rows"
  n=$(grep -c ' OK$' <<<"$rows" || true)
  ((n == 2)) && ! grep -q ' BAD$' <<<"$rows"
}
# band_twice RUN OUT COL WANT LABEL WHAT: band on OUT (already run by RUN); when it misses,
# RUN OUT-2 once more and band that. Why a second run: these medians of 3-5 transfers sat
# in one slow spell of a shared 2-vCPU machine twice in CI (ring 0.49 and 0.50 of the rate;
# 0.65-0.96 in six runs right after). A real fault (a half-duplex link gave 0.47 run after
# run; the dilation's arithmetic or a wrong tbf rate is off by integer factors) misses both.
band_twice() {
  local run=$1 out=$2 col=$3 want=$4 label=$5 what=$6
  if band "$out" "$col" "$want" "$label"; then ok "$what, check pass, busbw in [$MIN_FRAC, 1.10] of 1 Gbit"
  elif echo "[netlab_test]   outside [$MIN_FRAC, 1.10]: once more" && "$run" "$out-2" &&
    band "$out-2" "$col" "$want" "$label"; then
    ok "$what, check pass, busbw in [$MIN_FRAC, 1.10] of 1 Gbit (second run)"
  else bad "$what: expected 2 rows with check pass and busbw in [$MIN_FRAC, 1.10] x 0.125 GB/s, in one of two runs"; fi
}
cleanup() {
  local rc=$?
  if [[ $(id -u) -eq 0 ]]; then bash "$NL" down >/dev/null 2>&1 || true; fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT

leftovers() {
  { ip netns list 2>/dev/null | awk '{print "netns " $1}' | grep -E "^netns $P-" || true
    ip -o link show 2>/dev/null | awk -F': ' '{print "link " $2}' | grep -E "^link $P-" || true
    tc qdisc show 2>/dev/null | grep -E "dev $P-" | sed 's/^/qdisc /' || true; } | tr '\n' ' '
}
expect_clean() {
  local l; l=$(leftovers)
  if [[ -z $l ]]; then ok "$1: nothing left behind"; else bad "$1: left behind: $l"; fi
}
# expect_one_line NAME REGEX RC CMD...: CMD exits with RC (3: the machine lacks something,
# 1: other errors) and prints exactly one line matching REGEX.
expect_one_line() {
  local name=$1 re=$2 want=$3 out rc=0; shift 3
  out=$("$@" 2>&1) || rc=$?
  local lines; lines=$(printf '%s' "$out" | grep -c '' || true)
  if ((rc != want)); then bad "$name: exit $rc, not $want (output: $out)"
  elif ((lines != 1)); then bad "$name: $lines lines, not 1: $out"
  elif ! grep -Eq "$re" <<<"$out"; then bad "$name: '$out' does not match /$re/"
  else ok "$name: exit $rc, '$out'"; fi
}

# ------------------------------------------------------------ 1. no root
if [[ $(id -u) -eq 0 ]]; then
  cp "$NL" "$TMP/netlab.sh"; chmod 755 "$TMP/netlab.sh"
  expect_one_line "no root" "root" 3 setpriv --reuid=65534 --regid=65534 --clear-groups bash "$TMP/netlab.sh" up 2 --rate 1gbit
else
  expect_one_line "no root" "root" 3 bash "$NL" up 2 --rate 1gbit
  echo "[netlab_test] not root: checks 2-6 skipped (they create namespaces)"
  ((fails == 0)) || exit 1
  exit 0
fi
bash "$NL" down >/dev/null

# ------------------------------------------------------------ 2. no iproute2
# A PATH with everything netlab.sh calls but ip and tc.
mkdir -p "$TMP/noip"
for t in bash env id dirname sed awk grep tr date mkdir rm cat sysctl unshare mpirun sleep; do
  p=$(command -v "$t") && ln -sf "$p" "$TMP/noip/$t"
done
expect_one_line "no iproute2" "iproute2" 3 env PATH="$TMP/noip" bash "$NL" up 2 --rate 1gbit
expect_clean "no iproute2"

# ------------------------------------------------------------ 3. no tbf
# tc as on a kernel without sch_tbf: iproute2 asks the kernel, which refuses the kind.
REAL_TC=$(command -v tc)
mkdir -p "$TMP/notbf"
cat >"$TMP/notbf/tc" <<EOF
#!/usr/bin/env bash
for a in "\$@"; do [[ \$a == tbf ]] && { echo "Error: Specified qdisc kind is unknown." >&2; exit 2; }; done
exec $REAL_TC "\$@"
EOF
chmod +x "$TMP/notbf/tc"
expect_one_line "no tbf" "tbf" 3 env PATH="$TMP/notbf:$PATH" bash "$NL" up 2 --rate 1gbit
expect_clean "no tbf"

# ------------------------------------------------------------ 4. up fails half-way
# tc works for the probe and the first qdisc, then fails (as a kernel out of memory would).
mkdir -p "$TMP/failtc"
cat >"$TMP/failtc/tc" <<EOF
#!/usr/bin/env bash
n=\$(cat "$TMP/failtc/count" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >"$TMP/failtc/count"
if ((n >= 3)); then echo "RTNETLINK answers: Cannot allocate memory" >&2; exit 2; fi
exec $REAL_TC "\$@"
EOF
chmod +x "$TMP/failtc/tc"
rc=0; env PATH="$TMP/failtc:$PATH" bash "$NL" up 3 --rate 1gbit >"$TMP/fail.log" 2>&1 || rc=$?
if ((rc == 0)); then bad "up with a failing tc: exit 0"; else ok "up with a failing tc: exit $rc"; fi
expect_clean "failed up"
if bash "$NL" down >/dev/null && bash "$NL" down >/dev/null; then ok "down twice after a failed up: exit 0"; else bad "down after a failed up: non-zero"; fi

# ------------------------------------------------------------ 5. up killed half-way
mkdir -p "$TMP/slowtc"
cat >"$TMP/slowtc/tc" <<EOF
#!/usr/bin/env bash
n=\$(cat "$TMP/slowtc/count" 2>/dev/null || echo 0); n=\$((n + 1)); echo \$n >"$TMP/slowtc/count"
if ((n == 4)); then touch "$TMP/slowtc/stuck"; sleep 60; fi
exec $REAL_TC "\$@"
EOF
chmod +x "$TMP/slowtc/tc"
# Its own process group (setsid): the kill takes the script, the stuck tc and its sleep.
setsid env PATH="$TMP/slowtc:$PATH" bash "$NL" up 3 --rate 1gbit >"$TMP/kill.log" 2>&1 &
upid=$!
for _ in $(seq 1 100); do [[ -e $TMP/slowtc/stuck ]] && break; sleep 0.1; done
kill -KILL -- "-$upid" 2>/dev/null || true
wait "$upid" 2>/dev/null || true
if [[ -z $(leftovers) ]]; then bad "killed up: nothing was made before the kill (test did not exercise down)"; fi
if bash "$NL" status >/dev/null 2>&1; then bad "status after a killed up: exit 0 (leftovers not reported)"; else ok "status reports the leftovers of a killed up"; fi
if bash "$NL" down >/dev/null; then ok "down after a killed up: exit 0"; else bad "down after a killed up: non-zero"; fi
expect_clean "killed up + down"

# ------------------------------------------------------------ 6. 2-node 1 Gbit all-reduce
if [[ ${NETLAB_TEST_SKIP_RUN:-0} == 1 ]]; then
  echo "[netlab_test] NETLAB_TEST_SKIP_RUN=1: 2-node all-reduce skipped"
else
  expect_one_line "run before up" "not up" 1 bash "$NL" run -- micro-comm
  bash "$NL" up 2 --rate 1gbit
  out=$TMP/run
  und_run() {
    timeout 150 bash "$NL" run -- micro-comm --collectives ring-allreduce,allreduce --sizes 16MiB \
      --iters 5 --warmup 1 --check --quiet --out "$1" >>"$TMP/run.log" 2>&1
  }
  if ! und_run "$out"; then
    tail -20 "$TMP/run.log" >&2; bad "2-node all-reduce: run failed"
  else
    if [[ $(cat "$out/network.txt") == netlab-1gbit ]]; then ok "network.txt: netlab-1gbit"; else bad "network.txt: '$(cat "$out/network.txt")'"; fi
    if grep -qx 'rate=1gbit' "$out/netlab.txt" && grep -qx 'burst=[0-9]*' "$out/netlab.txt"; then
      ok "netlab.txt: rate and burst recorded"
    else
      bad "netlab.txt: '$(tr '\n' ' ' <"$out/netlab.txt" 2>/dev/null)'"
    fi
    band_twice und_run "$out" world_size 2 "" "2-node 1 Gbit all-reduce: world_size 2"
  fi
  bash "$NL" down >/dev/null
  expect_clean "down after the run"
fi

# ------------------------------------------------------------ 7. time dilation
expect_one_line "up --dilate 0" "dilate" 1 bash "$NL" up 2 --rate 1gbit --dilate 0
expect_clean "up --dilate 0"
if [[ ${NETLAB_TEST_SKIP_RUN:-0} == 1 ]]; then
  echo "[netlab_test] NETLAB_TEST_SKIP_RUN=1: 2-node dilated run skipped"
else
  bash "$NL" up 2 --rate 1gbit --dilate 4 >/dev/null
  st=$(bash "$NL" status)
  if grep -q 'time dilation 4' <<<"$st" && grep -q 'rate 250Mbit' <<<"$st"; then ok "dilated status: time dilation 4, tbf rate 250Mbit"
  else bad "dilated status: $(head -3 <<<"$st" | tr '\n' ' ')"; fi
  expect_one_line "run with another --time-dilation" "dilated by 4" 1 \
    bash "$NL" run -- micro-comm --sizes 4 --time-dilation 2 --out "$TMP/mismatch"
  out=$TMP/dil
  dil_run() {
    timeout 150 bash "$NL" run -- micro-comm --collectives ring-allreduce,allreduce --sizes 8MiB \
      --iters 3 --warmup 1 --check --quiet --out "$1" >>"$TMP/dil.log" 2>&1
  }
  if ! dil_run "$out"; then
    tail -20 "$TMP/dil.log" >&2; bad "2-node dilated all-reduce: run failed"
  else
    if [[ $(cat "$out/network.txt") == netlab-1gbit-dilate4 ]]; then ok "network.txt: netlab-1gbit-dilate4"; else bad "network.txt: '$(cat "$out/network.txt")'"; fi
    if grep -qx 'rate=1gbit' "$out/netlab.txt" && grep -qx 'dilate=4' "$out/netlab.txt" && grep -qx 'tbf_rate=250mbit' "$out/netlab.txt"; then
      ok "netlab.txt: rate=1gbit dilate=4 tbf_rate=250mbit"
    else
      bad "netlab.txt: '$(tr '\n' ' ' <"$out/netlab.txt" 2>/dev/null)'"
    fi
    # Emulated seconds: the bus bandwidth is against the undilated 1 Gbit (0.125 GB/s).
    band_twice dil_run "$out" time_dilation 4 "dilation " "2-node dilated all-reduce: time_dilation 4"
  fi
  out=$TMP/dil-e2e
  if ! timeout 150 bash "$NL" run -- e2e --model resnet20 --methods ssgd,topk --pipelining off --iters 3 --warmup 1 \
      --quiet --out "$out" >"$TMP/dil-e2e.log" 2>&1; then
    tail -20 "$TMP/dil-e2e.log" >&2; bad "2-node dilated e2e: run failed"
  else
    k=$(awk -F, 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next} {print $c["time_dilation"]}' "$out/e2e.csv" | sort -u | tr '\n' ' ')
    if [[ $k == "4 " ]] && grep -q '"time_dilation": 4' "$out/run.json"; then ok "2-node dilated e2e: rows and run.json say time_dilation 4"
    else bad "2-node dilated e2e: time_dilation '$k' in e2e.csv, run.json: $(grep time_dilation "$out/run.json")"; fi
  fi
  bash "$NL" down >/dev/null
  expect_clean "down after the dilated runs"
fi

if ((fails)); then echo "[netlab_test] $fails check(s) failed" >&2; exit 1; fi
echo "[netlab_test] all checks passed"
