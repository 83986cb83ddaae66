//! Tests of the host model (host.rs): start, sync and CPU share on the schedule, work slowed
//! during backward, the CPU share from run.json, and calibration from every method's rows
//! (median over cases and rounds, leave one method out).

use super::*;

#[test]
fn host_model_shifts_the_schedule_as_documented() {
    let wl = tiny();
    let costs = tiny_costs();
    let case = SimCase::new(
        wl,
        "ssgd",
        Fusion::Bytes(1 << 30),
        false,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    let ideal = simulate(&case, &costs).unwrap();
    // One bucket, pipelining off: start shifts everything, the one wait adds sync_s.
    let mut c = tiny_costs();
    c.host = host::HostModel {
        start_s: 0.05,
        sync_s: 0.2,
        ..host::HostModel::default()
    };
    let r = simulate(&case, &c).unwrap();
    assert!(
        close(r.iter_s, ideal.iter_s + 0.05 + 0.2),
        "{} vs {}",
        r.iter_s,
        ideal.iter_s
    );
    assert!(close(r.fwd_s, ideal.fwd_s + 0.05) && close(r.comm_s, ideal.comm_s + 0.2));
    // Half a core: every CPU phase takes twice as long, the collective does not.
    let mut c = tiny_costs();
    c.host.cpu_share = 0.5;
    let r = simulate(&case, &c).unwrap();
    let cpu = ideal.compress_s + ideal.decompress_s + ideal.pack_s;
    assert!(
        close(r.iter_s, ideal.iter_s + cpu),
        "{} vs {} + {cpu}",
        r.iter_s,
        ideal.iter_s
    );
    assert!(close(r.comm_s, ideal.comm_s));
}

#[test]
fn advance_is_slow_until_the_end_of_backward() {
    assert!(close(crate::sim::clock::advance(0.0, 1.0, 10.0, 2.0), 2.0));
    // Half a second of slowed time does a quarter of the work; the rest at full speed.
    assert!(close(
        crate::sim::clock::advance(9.5, 1.0, 10.0, 2.0),
        10.75
    ));
    assert!(close(
        crate::sim::clock::advance(10.0, 1.0, 10.0, 2.0),
        11.0
    ));
    assert!(close(crate::sim::clock::advance(3.0, 1.0, 10.0, 1.0), 4.0));
}

#[test]
fn work_inside_backward_is_slowed_and_work_after_it_is_not() {
    let compute =
        crate::models::ComputeModel::from_preset(&crate::models::preset("rtx2080ti").unwrap());
    let wl = SimWorkload::zoo("resnet20", None, &compute, "rtx2080ti").unwrap();
    let costs = |k: f64| {
        let mut c = CostModel::with_network(Box::new(Lin { a: 2e-5, b: 1e-9 }));
        c.host.bwd_slowdown = k;
        c
    };
    for pipelining in [false, true] {
        let case = SimCase::new(
            wl.clone(),
            "ssgd",
            Fusion::Bytes(256 << 10),
            pipelining,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        );
        let (a, b) = (
            simulate(&case, &costs(1.0)).unwrap(),
            simulate(&case, &costs(3.0)).unwrap(),
        );
        if pipelining {
            // Buckets exchanged during backward take longer; backward itself does not.
            assert!(
                b.comm_s > a.comm_s * 1.2 && b.iter_s >= a.iter_s,
                "{a:?} {b:?}"
            );
            assert!(close(b.bwd_s, a.bwd_s));
        } else {
            // Everything runs after backward: no effect.
            assert!(close(b.iter_s, a.iter_s) && close(b.comm_s, a.comm_s));
        }
    }
}

#[test]
fn cpu_share_comes_from_run_json() {
    let d = std::env::temp_dir().join(format!("gradcomp-sim-host-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("run.json");
    std::fs::write(
        &p,
        r#"{"hosts": ["a", "a", "a", "a", "b"], "host_cores": [2, 2, 2, 2, 8]}"#,
    )
    .unwrap();
    let (share, what) = host::cpu_share_from_run_json(&p).unwrap().unwrap();
    assert!(
        close(share, 0.5) && what.contains("4 ranks on 2 cores of a"),
        "{share} {what}"
    );
    std::fs::write(&p, r#"{"hosts": ["a", "b"], "host_cores": [4, 4]}"#).unwrap();
    assert!(close(
        host::cpu_share_from_run_json(&p).unwrap().unwrap().0,
        1.0
    ));
    // netlab's nodes: four host names on one machine (one boot id) share its 2 cores.
    std::fs::write(
        &p,
        r#"{"hosts": ["n0", "n1", "n2", "n3"], "host_cores": [2, 2, 2, 2], "host_kernels": ["k", "k", "k", "k"]}"#,
    )
    .unwrap();
    let (share, what) = host::cpu_share_from_run_json(&p).unwrap().unwrap();
    assert!(
        close(share, 0.5)
            && what.contains("4 ranks on 2 cores of n0")
            && what.contains("one machine"),
        "{share} {what}"
    );
    // The same netlab dilated by 2 and by 4: each rank had 2 (4) x its cores' time per
    // emulated second, 4 ranks on 2 cores share 1.
    for (k, want) in [(2, 1.0), (4, 1.0), (1, 0.5)] {
        std::fs::write(
            &p,
            format!(r#"{{"hosts": ["n0", "n1", "n2", "n3"], "host_cores": [2, 2, 2, 2], "host_kernels": ["k", "k", "k", "k"], "time_dilation": {k}}}"#),
        )
        .unwrap();
        let (share, what) = host::cpu_share_from_run_json(&p).unwrap().unwrap();
        assert!(close(share, want), "k {k}: {share} {what}");
        assert_eq!(what.contains("time dilation"), k > 1, "{what}");
    }
    std::fs::write(
        &p,
        r#"{"hosts": ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"], "host_cores": [2, 2, 2, 2, 2, 2, 2, 2], "host_kernels": ["k", "k", "k", "k", "k", "k", "k", "k"], "time_dilation": 2}"#,
    )
    .unwrap();
    let (share, _) = host::cpu_share_from_run_json(&p).unwrap().unwrap();
    assert!(close(share, 0.5), "8 ranks on 2 cores at K = 2: {share}");
    // Two machines, two host names each: per machine.
    std::fs::write(
        &p,
        r#"{"hosts": ["a", "b", "c", "d"], "host_cores": [2, 2, 4, 4], "host_kernels": ["k1", "k1", "k2", ""]}"#,
    )
    .unwrap();
    let (share, _) = host::cpu_share_from_run_json(&p).unwrap().unwrap();
    assert!(close(share, 1.0), "{share}");
    std::fs::write(
        &p,
        r#"{"hosts": ["a", "b"], "host_cores": [2, 2], "host_kernels": ["k1"]}"#,
    )
    .unwrap();
    assert!(host::cpu_share_from_run_json(&p)
        .unwrap_err()
        .to_string()
        .contains("host_kernels"));
    // Older run.json without host_cores: unknown, not an error; inconsistent: an error.
    std::fs::write(&p, r#"{"hosts": ["a", "b"]}"#).unwrap();
    assert!(host::cpu_share_from_run_json(&p).unwrap().is_none());
    std::fs::write(&p, r#"{"hosts": ["a", "b"], "host_cores": [4]}"#).unwrap();
    assert!(host::cpu_share_from_run_json(&p)
        .unwrap_err()
        .to_string()
        .contains("host_cores"));
    assert!(host::cpu_share_from_run_json(&d.join("missing.json"))
        .unwrap()
        .is_none());
    let _ = std::fs::remove_dir_all(&d);
}

/// An e2e.csv of `rounds` repeats of ssgd, topk and signsgd (pipelining off and on, host
/// compression; plus device rows, which calibration ignores) simulated under `truth`,
/// with `iter_s` of `slow`'s rows times `factor` (one noisy case).
fn calibration_csv(
    d: &std::path::Path,
    truth: &host::HostModel,
    costs: &dyn Fn(usize) -> Result<CostModel>,
    rounds: usize,
    slow: (&str, f64),
) -> std::path::PathBuf {
    let compute =
        crate::models::ComputeModel::from_preset(&crate::models::preset("rtx2080ti").unwrap());
    let wl = SimWorkload::zoo("resnet20", None, &compute, "rtx2080ti").unwrap();
    let mut text = String::from("schema_version,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,compute,compress_on,fwd_s,iter_s\n");
    for _ in 0..rounds {
        for (method, coll) in [
            ("ssgd", "allreduce"),
            ("topk", "allgather"),
            ("signsgd", "allgather"),
        ] {
            for pipe in [false, true] {
                let case = SimCase::new(
                    wl.clone(),
                    method,
                    Fusion::Bytes(256 << 10),
                    pipe,
                    CollectiveMode::Native,
                    2,
                    MethodParams::default(),
                );
                let mut c = costs(2).unwrap();
                c.host = truth.clone();
                let r = simulate(&case, &c).unwrap();
                let on = if pipe { "on" } else { "off" };
                let k = if method == slow.0 { slow.1 } else { 1.0 };
                text += &format!(
                    "1,resnet20,{method},256KiB,{on},{coll},{coll},2,{},rtx2080ti,sleep,host,{},{}\n",
                    wl.batch,
                    r.fwd_s,
                    r.iter_s * k
                );
                text += &format!(
                    "1,resnet20,{method},256KiB,{on},{coll},{coll},2,{},rtx2080ti,sleep,device,1.0,1.0\n",
                    wl.batch
                );
            }
        }
    }
    let e2e = d.join("e2e.csv");
    std::fs::write(&e2e, text).unwrap();
    e2e
}

/// The calibration tests' network (alpha 20 us, 1 ns per byte) and an empty temporary
/// directory named after `tag`.
fn calibration_setup(tag: &str) -> (impl Fn(usize) -> Result<CostModel>, std::path::PathBuf) {
    let costs = |_: usize| -> Result<CostModel> {
        Ok(CostModel::with_network(Box::new(Lin { a: 2e-5, b: 1e-9 })))
    };
    let d = std::env::temp_dir().join(format!("gradcomp-sim-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    (costs, d)
}

#[test]
fn calibration_recovers_the_host_latencies_from_every_method() {
    // "Measured" rows made by the simulator with a known host; calibration must find it
    // again from the host rows of all methods (device rows are ignored), and so must each
    // leave-one-method-out calibration.
    let truth = host::HostModel {
        cpu_share: 0.5,
        start_s: 2e-4,
        sync_s: 3e-4,
        bwd_slowdown: 1.5,
        ..host::HostModel::default()
    };
    let (costs, d) = calibration_setup("calib");
    let e2e = calibration_csv(&d, &truth, &costs, 2, ("", 1.0));
    let got = host::calibrate(&e2e, Some((0.5, "test".into())), None, &costs, &|_| None).unwrap();
    let cal = &got[&2];
    assert_eq!(cal.held_out.len(), 3);
    for h in std::iter::once(&cal.all).chain(cal.held_out.values()) {
        assert!((h.start_s - 2e-4).abs() < 1e-9, "{h:?}");
        assert!((h.sync_s - 3e-4).abs() < 1e-8, "{h:?}");
        // Identical rounds: no spread.
        assert!((h.sync_range_s.1 - h.sync_range_s.0).abs() < 1e-8, "{h:?}");
    }
    // The slowdown inside backward: only ssgd's pipelined rows respond to it monotonically
    // (topk's and signsgd's little work hides under backward until, slowed enough, the
    // thread stops waiting for the device and skips the latency); without ssgd nothing
    // tells, and the factor stays 1.
    assert_eq!(cal.all.term_points, [12, 6, 2]);
    for h in [&cal.all, &cal.held_out["topk"], &cal.held_out["signsgd"]] {
        assert!((h.bwd_slowdown - 1.5).abs() < 1e-6, "{h:?}");
    }
    let h = &cal.held_out["ssgd"];
    assert_eq!((h.bwd_slowdown, h.term_points[2]), (1.0, 0), "{h:?}");
    assert_eq!((cal.all.points, cal.all.rounds), (12, 2));
    let h = &cal.held_out["topk"];
    assert_eq!(
        (h.points, h.term_points[..2].to_vec()),
        (8, vec![8, 4]),
        "{h:?}"
    );
    assert_eq!(cal.all.methods, ["signsgd", "ssgd", "topk"]);
    let (h, inside) = cal.for_method("topk");
    assert!(!inside && h.methods == ["signsgd", "ssgd"], "{h:?}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn one_noisy_case_moves_neither_the_calibration_nor_its_own_prediction() {
    // topk measured 25% slow in every round (issue 29's Zen 3 run: one case's median
    // moved 3.09 -> 2.62 ms between runs; there it was ssgd, the one calibration case).
    // Over every method's cases the median latency does not move, and topk is priced by
    // the model calibrated without it.
    let truth = host::HostModel {
        cpu_share: 1.0,
        start_s: 1e-4,
        sync_s: 2e-4,
        bwd_slowdown: 1.2,
        ..host::HostModel::default()
    };
    let (costs, d) = calibration_setup("noisy");
    let e2e = calibration_csv(&d, &truth, &costs, 3, ("topk", 1.25));
    let got = host::calibrate(&e2e, Some((1.0, "test".into())), None, &costs, &|_| None).unwrap();
    let cal = &got[&2];
    assert!((cal.all.sync_s - 2e-4).abs() < 1e-8, "{:?}", cal.all);
    assert!((cal.all.bwd_slowdown - 1.2).abs() < 1e-6, "{:?}", cal.all);
    let (h, inside) = cal.for_method("topk");
    assert!(!inside && (h.sync_s - 2e-4).abs() < 1e-8, "{h:?}");
    assert!((h.bwd_slowdown - 1.2).abs() < 1e-6, "{h:?}");
    // Calibrated on the noisy case alone (as before issue 29), the latency absorbs it.
    let alone = calibration_csv(&d, &truth, &costs, 3, ("topk", 1.25));
    let text = std::fs::read_to_string(&alone).unwrap();
    let only: String = text
        .lines()
        .filter(|l| l.starts_with("schema") || l.contains(",topk,"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&alone, only).unwrap();
    let got = host::calibrate(&alone, Some((1.0, "test".into())), None, &costs, &|_| None).unwrap();
    assert!(got[&2].all.sync_s > 2e-4 * 1.5, "{:?}", got[&2].all);
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_case_too_noisy_to_judge_does_not_calibrate() {
    // ssgd with pipelining, the only case whose iteration responds to the slowdown
    // inside backward, measured 30% slow in two of its three rounds: its median moves
    // with them and its spread (30%, the range of three rounds) is above the 15% a case
    // must meet to be judged. Calibrated on it the slowdown absorbs the 30%; left out,
    // nothing informs the slowdown (it stays 1) and the latencies come from the other
    // five cases. Issue 29's qsgd: the slowdown 1.4 in one run, 4.0 in the next.
    let truth = host::HostModel {
        cpu_share: 1.0,
        start_s: 1e-4,
        sync_s: 2e-4,
        bwd_slowdown: 1.2,
        ..host::HostModel::default()
    };
    let (costs, d) = calibration_setup("quiet");
    let e2e = calibration_csv(&d, &truth, &costs, 3, ("", 1.0));
    let text = std::fs::read_to_string(&e2e).unwrap();
    let mut nth = 0;
    let noisy: String = text
        .lines()
        .map(|l| {
            if !l.contains(",ssgd,256KiB,on,") || !l.contains(",host,") {
                return format!("{l}\n");
            }
            nth += 1;
            let (head, iter) = l.rsplit_once(',').unwrap();
            let k = if nth == 1 { 1.0 } else { 1.3 };
            format!("{head},{}\n", iter.parse::<f64>().unwrap() * k)
        })
        .collect();
    assert_eq!(nth, 3);
    std::fs::write(&e2e, noisy).unwrap();
    let got = host::calibrate(&e2e, Some((1.0, "test".into())), None, &costs, &|_| None).unwrap();
    let all = &got[&2].all;
    assert_eq!((all.bwd_slowdown, all.term_points[2]), (1.0, 0), "{all:?}");
    assert!((all.sync_s - 2e-4).abs() < 1e-8, "{all:?}");
    assert!(
        all.source.contains("the 5 of 6 case(s) within 15% noise"),
        "{}",
        all.source
    );
    // A method whose compression fit is that noisy is left out the same way (its share
    // of the simulated iteration times its fit's spread): here every case.
    let got = host::calibrate(&e2e, Some((1.0, "test".into())), None, &costs, &|_| {
        Some(1e9)
    })
    .unwrap();
    let all = &got[&2].all;
    assert!(
        all.source.contains("all 6 case(s): none within 15% noise"),
        "{}",
        all.source
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn device_threads_have_cores_counts_two_threads_per_rank() {
    let d = std::env::temp_dir().join(format!("gradcomp-sim-threads-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join("run.json");
    // (run.json, whether every rank's communication and device thread has a core)
    for (json, want) in [
        // 2 ranks + 2 device threads on 2 cores: shared (the 2-vCPU machines).
        (r#"{"hosts": ["a", "a"], "host_cores": [2, 2]}"#, false),
        // On 16 cores at 2 and at 4 ranks (the lent machines' runs): a core each.
        (r#"{"hosts": ["a", "a"], "host_cores": [16, 16]}"#, true),
        (
            r#"{"hosts": ["a", "a", "a", "a"], "host_cores": [16, 16, 16, 16]}"#,
            true,
        ),
        // Exactly enough: 4 ranks + 4 threads on 8 cores; one more rank is too many.
        (
            r#"{"hosts": ["a", "a", "a", "a"], "host_cores": [8, 8, 8, 8]}"#,
            true,
        ),
        (
            r#"{"hosts": ["a", "a", "a", "a", "a"], "host_cores": [8, 8, 8, 8, 8]}"#,
            false,
        ),
        // The most loaded machine decides: b has 2 ranks on 2 cores.
        (
            r#"{"hosts": ["a", "b", "b"], "host_cores": [16, 2, 2]}"#,
            false,
        ),
        // netlab: 4 nodes on one 2-core machine, at time dilation 4 (8 core-equivalents)
        // and 2 (4).
        (
            r#"{"hosts": ["n0", "n1", "n2", "n3"], "host_cores": [2, 2, 2, 2], "host_kernels": ["k", "k", "k", "k"], "time_dilation": 4}"#,
            true,
        ),
        (
            r#"{"hosts": ["n0", "n1", "n2", "n3"], "host_cores": [2, 2, 2, 2], "host_kernels": ["k", "k", "k", "k"], "time_dilation": 2}"#,
            false,
        ),
    ] {
        std::fs::write(&p, json).unwrap();
        let (own, what) = host::device_threads_have_cores(&p).unwrap().unwrap();
        assert_eq!(own, want, "{json}: {what}");
        assert!(what.contains("device threads on"), "{what}");
    }
    std::fs::write(&p, r#"{"hosts": ["a", "b"]}"#).unwrap();
    assert!(host::device_threads_have_cores(&p).unwrap().is_none());
    assert!(host::device_threads_have_cores(&d.join("missing.json"))
        .unwrap()
        .is_none());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn with_a_core_per_thread_the_work_inside_backward_is_not_slowed() {
    // Rows made with no slowdown inside backward and a shorter latency per wait with
    // pipelining than without (0.1 against 0.3 ms): on a machine where every rank's
    // threads had a core of their own the calibration keeps the factor at 1 (no row
    // informs it) and finds both latencies; on a shared one the pipelined rows calibrate
    // the factor instead, and one latency serves both schedules.
    let truth = host::HostModel {
        cpu_share: 1.0,
        start_s: 2e-4,
        sync_s: 3e-4,
        sync_on: Some(host::SyncOn {
            s: 1e-4,
            range_s: (1e-4, 1e-4),
            points: 0,
        }),
        ..host::HostModel::default()
    };
    let (costs, d) = calibration_setup("owncores");
    let e2e = calibration_csv(&d, &truth, &costs, 2, ("", 1.0));
    let share = || Some((1.0, "test".to_string()));
    let own = Some((
        true,
        "2 communication + 2 device threads on 16 cores".to_string(),
    ));
    let got = host::calibrate(&e2e, share(), own, &costs, &|_| None).unwrap();
    let cal = &got[&2];
    for h in std::iter::once(&cal.all).chain(cal.held_out.values()) {
        assert_eq!(
            (h.bwd_slowdown, h.bwd_slowdown_range, h.term_points[2]),
            (1.0, (1.0, 1.0), 0),
            "{h:?}"
        );
        assert!((h.start_s - 2e-4).abs() < 1e-9, "{h:?}");
        assert!((h.sync_s - 3e-4).abs() < 1e-8, "{h:?}");
        let on = h.sync_on.as_ref().expect("a latency with pipelining");
        assert!((on.s - 1e-4).abs() < 1e-8 && on.points > 0, "{h:?}");
        assert!((h.sync_for(true) - 1e-4).abs() < 1e-8 && (h.sync_for(false) - 3e-4).abs() < 1e-8);
        assert!(
            h.source.contains("x1, not calibrated: 2 communication"),
            "{}",
            h.source
        );
    }
    // The same rows on a shared machine: one latency, and whatever the pipelined rows
    // need beyond it goes to the factor (here below 1, so it stays 1).
    let shared = Some((
        false,
        "2 communication + 2 device threads on 2 cores".to_string(),
    ));
    let got = host::calibrate(&e2e, share(), shared, &costs, &|_| None).unwrap();
    let all = &got[&2].all;
    assert!(all.sync_on.is_none(), "{all:?}");
    assert!((all.sync_s - 3e-4).abs() < 1e-8, "{all:?}");
    assert!(!all.source.contains("not calibrated"));
    // Rows slowed x1.5 inside backward on a shared machine: the factor is found.
    let slowed = host::HostModel {
        sync_on: None,
        bwd_slowdown: 1.5,
        ..truth
    };
    let e2e = calibration_csv(&d, &slowed, &costs, 2, ("", 1.0));
    let shared = Some((
        false,
        "2 communication + 2 device threads on 2 cores".to_string(),
    ));
    let got = host::calibrate(&e2e, share(), shared, &costs, &|_| None).unwrap();
    assert!(
        (got[&2].all.bwd_slowdown - 1.5).abs() < 1e-6,
        "{:?}",
        got[&2].all
    );
    let _ = std::fs::remove_dir_all(&d);
}

/// Under pipelining a bucket's first exchange pays `sync_s` only where the communication
/// thread waited for its gradients (clock.rs `wait`: ready after the clock), not where
/// they are ready exactly when it is free. `tiny` with backward 0.5, 0.5, 0.25 s after a
/// 1 s forward (ready at 1.5, 2.0, 2.25 s), every exchange 0.25 s, nothing else charged,
/// a sync of 0.25 s: bucket 0 waits, syncs and exchanges 1.5 to 2.0, when bucket 1 is
/// ready; bucket 1 exchanges 2.0 to 2.25, when bucket 2 is ready; it ends at 2.5 s. Three
/// exchanges and one sync: 1 s of communication.
#[test]
fn gradients_ready_exactly_when_the_thread_is_free_pay_no_sync() {
    let mut wl = tiny();
    wl.bwd_s = vec![0.25, 0.5, 0.5];
    let mut costs = CostModel::with_network(Box::new(Lin { a: 0.25, b: 0.0 }));
    costs.methods.insert("ssgd".into(), MethodCosts::default());
    costs.pack_s_per_byte = 0.0;
    costs.pack_fixed_s = 0.0;
    costs.host = host::HostModel {
        sync_s: 0.25,
        ..host::HostModel::default()
    };
    let case = SimCase::new(
        wl,
        "ssgd",
        Fusion::None,
        true,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    let r = simulate(&case, &costs).unwrap();
    assert_eq!((r.iter_s, r.comm_s), (2.5, 1.0), "{r:?}");
}
