//! Time dilation (issue 34; src/measure/dilation.rs): the emulated device runs K times
//! slower and host work is stretched to K x its CPU time, reductions are padded, every
//! time written is wall / K, the rows and run.json carry K, and the commands where
//! dilation cannot be honest refuse it with one line. The engine and the collectives are
//! checked in-process (loopback ranks); the command line under mpirun.

mod common;

use common::*;
use gradcomp::comm::exchange::CollectiveMode;
use gradcomp::comm::{loopback, ReduceOp};
use gradcomp::compress::MethodParams;
use gradcomp::config::ComputeMode;
use gradcomp::engine::{self, E2eSetup, TensorSpec};
use gradcomp::measure::dilation::{thread_cpu_s, Dilation};
use gradcomp::measure::stats::{median, Timing};
use gradcomp::schedule::plan::Fusion;
use std::process::Command;
use std::time::Instant;

fn tensors() -> Vec<TensorSpec> {
    [(64, 64), (64, 1), (128, 64), (10, 128)]
        .iter()
        .enumerate()
        .map(|(i, &(rows, cols))| TensorSpec {
            name: format!("t{i}"),
            rows,
            cols,
        })
        .collect()
}

/// One e2e case on 2 loopback ranks at dilation `k` (sleep compute: forward 6 ms,
/// backward 4 x 2 ms); returns rank 0's measurement and the wall time of the run.
fn e2e_at(k: u32) -> (engine::E2eMeasurement, f64) {
    let t = tensors();
    let bwd_s = vec![2e-3; t.len()];
    let params = MethodParams::default();
    let w0 = Instant::now();
    let mut runs = loopback::run(2, |world| {
        world.set_dilation(Dilation::new(k).unwrap(), 0.0);
        let setup = E2eSetup {
            tensors: &t,
            bwd_s: &bwd_s,
            fwd_s: 6e-3,
            method: "ssgd",
            params: &params,
            seed: 1,
            fusion: Fusion::None,
            pipelining: false,
            collective: CollectiveMode::Native,
            compute: ComputeMode::Sleep,
            merge: false,
            cost_comm: None,
            planner_costs: None,
            compress_on: gradcomp::devcost::CompressOn::Host,
            device_costs: None,
            planned: None,
        };
        engine::run(&world, &setup, Timing::fixed(4), 1, None).unwrap()
    });
    (runs.swap_remove(0), w0.elapsed().as_secs_f64())
}

/// At K = 3 the device's forward and backward take 3 x their modelled time on the wall
/// clock, and the rows report the modelled time (wall / K), as at K = 1.
#[test]
fn the_device_runs_k_times_slower_and_rows_report_emulated_seconds() {
    let (m1, wall1) = e2e_at(1);
    let (m3, wall3) = e2e_at(3);
    let med = |v: &[f64]| median(&mut v.to_vec()).unwrap();
    // Upper bounds only at K = 3, where they tell divided from undivided: a wake-up
    // late by d on the wall clock adds d / 3 there, so load must delay a wake-up by
    // 18 ms to reach a bound; at K = 1 it adds d itself, and a loaded machine (issue 49
    // item 4: this test failed under load) can add that to a 6 ms forward.
    for (m, k) in [(&m1, 1), (&m3, 3)] {
        let (fwd, bwd) = (med(&m.series.fwd_s), med(&m.series.bwd_s));
        let it = med(&m.series.iter_s);
        assert!(fwd >= 5.5e-3, "k {k}: fwd_s {fwd} (modelled 6 ms)");
        assert!(bwd >= 7.5e-3, "k {k}: bwd_s {bwd} (modelled 8 ms)");
        assert!(
            it >= 13e-3,
            "k {k}: iter_s {it} (modelled device time 14 ms)"
        );
        if k == 3 {
            assert!(
                fwd < 12e-3,
                "k 3: fwd_s {fwd} (modelled 6 ms; 18 ms would be undivided)"
            );
            assert!(
                bwd < 16e-3,
                "k 3: bwd_s {bwd} (modelled 8 ms; 24 ms would be undivided)"
            );
            assert!(
                it < 35e-3,
                "k 3: iter_s {it} (modelled device time 14 ms; 42 ms would be undivided)"
            );
        }
    }
    // 5 iterations of >= 14 ms of device time each, 3 x longer on the wall clock.
    assert!(
        wall3 >= 3.0 * 5.0 * 14e-3,
        "k 3: the run took {wall3} s of wall time"
    );
    // (At K = 1 the same run takes at least 5 x 14 ms; on a loaded machine setup and
    // wake-ups add tens of ms, so the two walls are not compared.)
    assert!(wall1 >= 5.0 * 14e-3, "k 1: {wall1} s");
}

/// Busy work of about `s` seconds of this thread's CPU.
fn burn(s: f64) {
    let c0 = thread_cpu_s();
    let mut x = 1.0f64;
    while thread_cpu_s() - c0 < s {
        for _ in 0..1000 {
            x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
        }
    }
    std::hint::black_box(x);
}

/// A reducing collective is padded by (K - 1) x its estimated reduction (here 10 ns per
/// byte of a 4 MB message on 2 ranks: (n - 1)/n x 4e6 x 1e-8 = 20 ms, x (4 - 1) = 60 ms);
/// our ring's merge (host work) is stretched to K x its CPU time.
#[test]
fn reductions_are_padded_and_ring_merges_stretched() {
    let walls = loopback::run(2, |world| {
        world.set_dilation(Dilation::new(4).unwrap(), 1e-8);
        let send = vec![1.0f32; 1 << 20];
        let mut recv = vec![0.0f32; 1 << 20];
        world.barrier();
        let w0 = Instant::now();
        world.all_reduce(&send, &mut recv, ReduceOp::Sum);
        let reduce = w0.elapsed().as_secs_f64();
        assert!(recv.iter().all(|&x| x == 2.0));
        // One merge per rank on 2 ranks, of 10 ms CPU each: 40 ms at K = 4.
        let mut data = vec![1.0f32; 1024];
        let mut scratch = vec![0.0f32; 512];
        world.barrier();
        let w0 = Instant::now();
        world
            .ring_allreduce(&mut data, &mut scratch, |_, _, inc: &[f32], own| {
                burn(0.01);
                for (o, i) in own.iter_mut().zip(inc) {
                    *o += *i;
                }
                Ok(())
            })
            .unwrap();
        let ring = w0.elapsed().as_secs_f64();
        assert!(data.iter().all(|&x| x == 2.0));
        (reduce, ring)
    });
    for (r, &(reduce, ring)) in walls.iter().enumerate() {
        assert!(reduce >= 0.06, "rank {r}: all-reduce took {reduce} s");
        assert!(
            ring >= 0.04,
            "rank {r}: ring with a 10 ms merge took {ring} s"
        );
    }
}

/// `gradcomp ARGS` on `np` ranks with NETLAB_DILATE set as netlab.sh run sets it.
fn mpirun_dilated(np: usize, k: u32, args: &[&str]) -> std::process::Output {
    let launcher = mpirun_cmd();
    let mut cmd = Command::new(&launcher);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("NETLAB_DILATE", k.to_string())
        .env_remove("SLURM_NTASKS");
    if launcher.contains("mpirun") && !launcher.contains("mpich") {
        cmd.args([
            "--oversubscribe",
            "--bind-to",
            "none",
            "-x",
            "NETLAB_DILATE",
        ]);
    }
    cmd.arg("-np").arg(np.to_string()).arg(BIN).args(args);
    cmd.output().expect("cannot launch mpirun")
}

/// Where dilation cannot be honest, or the network is not dilated, or K is out of range:
/// exit 2 and one line naming the flag, the value and what to do.
#[test]
fn dilation_is_refused_where_it_cannot_be_honest() {
    let d = tmpdir("dilation-refused");
    let out = d.join("out");
    let o = out.to_str().unwrap();
    assert_refused(
        1,
        &[
            "micro-compress",
            "--methods",
            "topk",
            "--shape",
            "64",
            "--time-dilation",
            "4",
            "--out",
            o,
        ],
        &[
            "--time-dilation 4",
            "micro-compress",
            "without --time-dilation",
        ],
    );
    assert_refused(
        1,
        &[
            "micro-comm",
            "--collectives",
            "iallreduce-overlap",
            "--sizes",
            "4",
            "--time-dilation",
            "2",
            "--out",
            o,
        ],
        &["--time-dilation 2", "iallreduce-overlap"],
    );
    // The network is not dilated (no NETLAB_DILATE): the rows would be K x too fast.
    assert_refused(
        1,
        &[
            "micro-comm",
            "--sizes",
            "4",
            "--time-dilation",
            "4",
            "--out",
            o,
        ],
        &["--time-dilation 4", "NETLAB_DILATE", "--dilate 4"],
    );
    assert_refused(
        1,
        &[
            "micro-comm",
            "--sizes",
            "4",
            "--time-dilation",
            "0",
            "--out",
            o,
        ],
        &["--time-dilation 0", "1", "64"],
    );
    assert_refused(
        1,
        &[
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--time-dilation",
            "4",
            "--out",
            o,
        ],
        &["--time-dilation 4", "netlab.txt", "drop the flag"],
    );
    assert_refused(
        1,
        &[
            "converge",
            "--methods",
            "ssgd",
            "--time-dilation",
            "2",
            "--out",
            o,
        ],
        &["--time-dilation 2", "converge", "without time dilation"],
    );
    let toml = d.join("bad.toml");
    std::fs::write(
        &toml,
        "[run]\ntime_dilation = 100\n\n[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [\"4\"]\n",
    )
    .unwrap();
    assert_refused(
        1,
        &["run", toml.to_str().unwrap(), "--out", o],
        &["[[run]]", "time_dilation", "100", "64"],
    );
    // A lab dilated by 4 and a run that says 2.
    let out2 = mpirun_dilated(
        1,
        4,
        &[
            "micro-comm",
            "--sizes",
            "4",
            "--time-dilation",
            "2",
            "--out",
            o,
        ],
    );
    assert_eq!(out2.status.code(), Some(2), "{}", stderr(&out2));
    assert!(
        stderr(&out2).contains("NETLAB_DILATE=4"),
        "{}",
        stderr(&out2)
    );
    assert!(!out.join("micro_comm.csv").exists());
}

/// A dilated run on 2 ranks (shared memory, NETLAB_DILATE set as netlab.sh run sets it):
/// micro-comm, micro and e2e rows carry time_dilation, --check passes, run.json records
/// K and the measured reduction kernel.
#[test]
fn dilated_rows_and_run_json_carry_the_factor() {
    if skip_np(2) {
        return;
    }
    let d = tmpdir("dilation-rows");
    let o = d.join("run");
    let os = o.to_str().unwrap();
    let out = mpirun_dilated(
        2,
        2,
        &[
            "micro-comm",
            "--collectives",
            "allreduce,ring-allreduce,allgather",
            "--sizes",
            "64KiB",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--check",
            "--time-dilation",
            "2",
            "--quiet",
            "--out",
            os,
        ],
    );
    assert_ok(&out);
    let (h, rows) = read_csv(&o.join("micro_comm.csv"));
    assert_eq!(h, documented_columns("micro_comm.csv"));
    let col = |name: &str| h.iter().position(|c| c == name).unwrap();
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert_eq!(r[col("time_dilation")], "2", "{r:?}");
        assert_eq!(r[col("check")], "pass", "{r:?}");
    }
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(o.join("run.json")).unwrap()).unwrap();
    assert_eq!(meta["time_dilation"], 2);
    assert!(meta["reduce_s_per_byte"].as_f64().unwrap() > 0.0, "{meta}");
    assert_eq!(meta["config"]["time_dilation"], 2);
    // Resuming those rows undilated would mix the two dilations in one file.
    assert_refused(
        2,
        &[
            "micro-comm",
            "--collectives",
            "allreduce,ring-allreduce,allgather",
            "--sizes",
            "64KiB",
            "--iters",
            "3",
            "--resume",
            "--out",
            os,
        ],
        &["--resume", "time dilation 2", "--time-dilation 1"],
    );

    // A config's micro-compress sections run undilated, with a note (netlab.sh run
    // passes --time-dilation to a whole config such as sim-accuracy.toml).
    let toml = d.join("mixed.toml");
    std::fs::write(
        &toml,
        "[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [\"4KiB\"]\niters = 3\n\n[[micro-compress]]\nmethods = [\"topk\"]\nshapes = [\"64\"]\niters = 2\nwarmup = 1\n",
    )
    .unwrap();
    let o = d.join("mixed");
    let out = mpirun_dilated(
        2,
        2,
        &[
            "run",
            toml.to_str().unwrap(),
            "--time-dilation",
            "2",
            "--quiet",
            "--out",
            o.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    assert!(stderr(&out).contains("run undilated"), "{}", stderr(&out));
    assert_eq!(read_csv(&o.join("micro_compress.csv")).1.len(), 1);

    let o = d.join("micro");
    let out = mpirun_dilated(
        2,
        2,
        &[
            "micro",
            "--methods",
            "topk,ssgd",
            "--shape",
            "64x64",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--check",
            "--time-dilation",
            "2",
            "--quiet",
            "--out",
            o.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let (h, rows) = read_csv(&o.join("micro.csv"));
    assert_eq!(h, documented_columns("micro.csv"));
    let k = h.iter().position(|c| c == "time_dilation").unwrap();
    assert!(rows.iter().all(|r| r[k] == "2"), "{rows:?}");

    let o = d.join("e2e");
    let out = mpirun_dilated(
        2,
        2,
        &[
            "e2e",
            "--model",
            "resnet20",
            "--methods",
            "ssgd,topk",
            "--pipelining",
            "off",
            "--iters",
            "3",
            "--warmup",
            "1",
            "--time-dilation",
            "2",
            "--quiet",
            "--out",
            o.to_str().unwrap(),
        ],
    );
    assert_ok(&out);
    let (h, rows) = read_csv(&o.join("e2e.csv"));
    assert_eq!(h, documented_columns("e2e.csv"));
    let k = h.iter().position(|c| c == "time_dilation").unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r[k] == "2"), "{rows:?}");
}
