#!/usr/bin/env bash
# rlxrun across the hosts of a cluster.sh cluster, over real ssh: the
# conformance suite and an example on 3 hosts (with placement, the job's
# variables and stdin checked), a failing remote rank, and a launcher killed
# with SIGKILL (its remote ranks must not outlive it).
# Usage (through cluster.sh): cluster.sh run 3 -- rlxrun_across_hosts.sh BUILD_DIR CASE
#   CASE: conformance | shm_rails | shm_leaders | example | remote_failure | launcher_killed
set -euo pipefail
build=$(cd "$1" && pwd)
case_name=$2
rlxrun=$build/bin/rlxrun
source "$(dirname "${BASH_SOURCE[0]}")/prelude.sh"
write_hostfile

# The "hosts" share this machine's cores: bound by default, each one's first
# rank would run on the same core (the example case checks binding itself).
run_rlxrun() {
  timeout -k 5 "$1" "$rlxrun" --hostfile hostfile --rsh "$RLX_CLUSTER_SSH" --bind-to none "${@:2}"
}

# The processes in each host's namespace other than its sshd: what a job left behind.
leftovers() {
  local ns pid
  for ns in "${namespaces[@]}"; do
    for pid in $(ip netns pids "$ns"); do
      local name
      name=$(cat "/proc/$pid/comm" 2>/dev/null || true)
      [[ -z $name || $name == sshd ]] || echo "$ns: pid $pid ($name)"
    done
  done
}

expect_no_leftovers_within() {
  local seconds=$1 left
  for _ in $(seq 1 $((seconds * 5))); do
    left=$(leftovers)
    [[ -z $left ]] && return
    sleep 0.2
  done
  fail "processes left on the hosts after ${seconds} s: $left"
}

case $case_name in
  conformance)
    # Every rank on its own host; the output tags show which rank said what.
    run_rlxrun 300 -n 3 "$build/tests/conformance/conformance_test" --gtest_brief=1 | tee out.txt
    grep -q '^\[2\] \[  PASSED  \]' out.txt || fail "rank 2 did not report PASSED"
    ;;
  shm_rails | shm_leaders)
    # Ranks that share a host exchange through shared memory, the others over
    # TCP: the suite's Paths case checks every pair's path against the hosts'
    # names, and every collective's results. 2 ranks on each of 3 hosts: the
    # cost model makes the all-reduce hierarchical by rails (a block per rank
    # across hosts). 2, 1 and 1: with the built-in constants the model keeps
    # the network all-reduce (3 leaders take more steps than 4 ranks); with a
    # cost model whose shared memory is nearly free, one leader per host.
    settings=()
    if [[ $case_name == shm_rails ]]; then
      write_hostfile 2 2 2
      ranks=6 how="hierarchical_rails (hierarchical), over 3 hosts, 2 ranks per host each reducing a block"
    else
      write_hostfile 2 1 1
      ranks=4 how="ring (network), flat over every rank"
    fi
    run_suite() {
      run_rlxrun 300 -n $ranks --env RLX_LOG=debug "${settings[@]}" \
        "$build/tests/conformance/conformance_test" --gtest_brief=1 >out.txt 2>&1 ||
        { cat out.txt; fail "the suite failed"; }
      for ((rank = 0; rank < ranks; rank++)); do
        grep -q "^\[$rank\] \[  PASSED  \]" out.txt || fail "rank $rank did not report PASSED"
      done
      grep -q "^\[0\] rlx info: peer 1: calls go through shared memory (same host ${namespaces[0]})" out.txt ||
        fail "ranks 0 and 1 did not share memory"
      grep -q "^\[0\] rlx info: peer 2: calls go through the network (rank 2 is on host ${namespaces[1]})" out.txt ||
        fail "rank 0 did not reach rank 2 over the network"
      grep -q "^\[0\] rlx debug: all_reduce .* of 1000003 x f32 .*: $how (cost model" out.txt ||
        { grep "1000003 x f32" out.txt | head -3; fail "the large all-reduce did not choose $how"; }
    }
    run_suite
    if [[ $case_name == shm_leaders ]]; then
      printf 'shm-dedicated 1e-9 1e-13 0\nshm-shared 1e-9 1e-13 0\n' >cheap_shm
      settings=(--env "RLX_COST_MODEL=$PWD/cheap_shm")
      how="hierarchical_leaders (hierarchical), over 3 hosts, one leader per host (hosts differ in ranks)"
      run_suite
    fi
    ;;
  example)
    # 4 ranks on 3 hosts (the hidden size divides by 4): two share the first
    # host, the others cross the bridge.
    write_hostfile 2 1 1
    run_rlxrun 120 -n 4 "$build/examples/tensor_parallel_mlp" | tee out.txt
    [[ $(grep -c "of 4 (tcp).*(ok)" out.txt) -eq 4 ]] || fail "not every rank reported (ok)"
    # Where each rank ran: each host is its own UTS namespace, named after its namespace.
    run_rlxrun 60 -n 4 --env RLX_PROBE=set sh -c 'echo "$(hostname) rank $RLX_RANK local $RLX_LOCAL_RANK of $RLX_LOCAL_SIZE probe $RLX_PROBE token ${#RLX_JOB_TOKEN}"' |
      tee names.txt
    expect_rank() {
      grep -q "^\[$1\] $2 rank $1 local $3 of $4 probe set token 64$" names.txt ||
        fail "rank $1 did not run on $2 as local rank $3 of $4 with the job's variables"
    }
    expect_rank 0 "${namespaces[0]}" 0 2
    expect_rank 1 "${namespaces[0]}" 1 2
    expect_rank 2 "${namespaces[1]}" 0 1
    expect_rank 3 "${namespaces[2]}" 0 1
    # A remote rank is bound by its agent, by its own host's cores: ranks 2
    # and 3 are alone on theirs, so each gets the first core.
    cores=$(grep -c '^processor' /proc/cpuinfo)
    if ((cores > 1)); then
      run_rlxrun 60 -n 4 --bind-to core sh -c 'grep Cpus_allowed_list /proc/self/status' |
        tee bound.txt
      tab=$'\t'
      first_core=$(sed -n "s/^\[2\] Cpus_allowed_list:$tab//p" bound.txt)
      [[ -n $first_core && $first_core != *[-,]* ]] || fail "rank 2 was not bound to one core"
      grep -q "^\[3\] Cpus_allowed_list:$tab$first_core\$" bound.txt ||
        fail "rank 3 was not bound to its host's first core"
      if grep -q "^\[1\] Cpus_allowed_list:$tab$first_core\$" bound.txt; then
        fail "rank 1 got its host's first core, which rank 0 has"
      fi
    fi
    # rlxrun's stdin reaches rank 0 on its remote host (through ssh); the others read nothing.
    printf 'line one\nline two\n' | run_rlxrun 60 -n 4 cat | tee stdin.txt
    grep -q '^\[0\] line two$' stdin.txt || fail "rank 0 did not get rlxrun's stdin"
    [[ $(grep -c 'line' stdin.txt) -eq 2 ]] || fail "stdin reached ranks other than 0"
    ;;
  remote_failure)
    # Rank 1 (on the second host) exits 3; the others would run for a minute.
    set +e
    run_rlxrun 60 -n 3 sh -c 'if [ "$RLX_RANK" = 1 ]; then exit 3; fi; exec sleep 60' 2>err.txt
    status=$?
    set -e
    cat err.txt >&2
    [[ $status -eq 3 ]] || fail "rlxrun exited $status, expected rank 1's status 3"
    grep -q "rank 1 (on ${hosts[1]}) exited with status 3" err.txt || fail "rank 1 and its host not named"
    expect_no_leftovers_within 10
    ;;
  launcher_killed)
    "$rlxrun" --hostfile hostfile --rsh "$RLX_CLUSTER_SSH" -n 3 sleep 120 >launcher.log 2>&1 &
    launcher=$!
    running=0
    for _ in $(seq 1 100); do
      running=$(leftovers | grep -c sleep || true)
      ((running == 3)) && break
      sleep 0.2
    done
    # Once all three ran, rlxrun's own words say why one would have stopped.
    ((running == 3)) ||
      fail "$running of the 3 remote ranks started: $(leftovers); rlxrun said: $(cat launcher.log)"
    kill -KILL "$launcher"
    expect_no_leftovers_within 15
    ;;
  *)
    fail "unknown case '$case_name'"
    ;;
esac
echo "PASS: rlxrun across ${#hosts[@]} hosts: $case_name"
