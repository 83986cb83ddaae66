use super::network::{Analytic, CollectiveCost, Op};
use super::*;
use crate::schedule::plan::PlannerKind;

/// `t = a + b * bytes` for every collective; no reduction cost.
struct Lin {
    a: f64,
    b: f64,
}

impl CollectiveCost for Lin {
    fn time_s(&self, _op: Op, n: usize, m: f64) -> f64 {
        if n <= 1 {
            0.0
        } else {
            self.a + self.b * m
        }
    }
    fn reduce_s(&self, _bytes: f64) -> f64 {
        0.0
    }
    fn describe(&self) -> String {
        "lin".into()
    }
    fn with_gamma(&self, _gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        Box::new(Lin {
            a: self.a,
            b: self.b,
        })
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * (1.0 + b.abs())
}

fn tiny() -> SimWorkload {
    let t = |name: &str, cols: usize| TensorSpec {
        name: name.into(),
        rows: 1,
        cols,
    };
    SimWorkload {
        model: "tiny".into(),
        tensors: vec![t("a", 100), t("b", 200), t("c", 300)],
        bwd_s: vec![0.3, 0.2, 0.1],
        fwd_s: 1.0,
        batch: 1,
        device: "test".into(),
    }
}

fn tiny_costs() -> CostModel {
    let mut c = CostModel::with_network(Box::new(Lin { a: 0.01, b: 1e-4 }));
    c.methods.insert(
        "ssgd".into(),
        MethodCosts {
            compress: CompressCost {
                per_element_s: 1e-4,
                fixed_s: 0.0,
            },
            feedback: CompressCost::default(),
            decompress: CompressCost {
                per_element_s: 1e-4,
                fixed_s: 0.0,
            },
        },
    );
    c.pack_s_per_byte = 0.0;
    c.pack_fixed_s = 0.001;
    c
}

#[test]
fn tiny_schedule_by_hand_pipelining_on_and_off() {
    // Backward order c (ready 1.1), b (1.3), a (1.6). Per tensor of e elements:
    // compress 1e-4 e, comm 0.01 + 1e-4 * 4e, decompress 1e-4 e, pack 2 * 0.001.
    // c: 0.03 + 0.13 + 0.03 + 0.002 = 0.192; b: 0.132; a: 0.072.
    let costs = tiny_costs();
    let on = simulate(
        &SimCase::new(
            tiny(),
            "ssgd",
            Fusion::None,
            true,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        ),
        &costs,
    )
    .unwrap();
    // c: 1.1 -> 1.292; b: max(1.292, 1.3) -> 1.432; a: max(1.432, 1.6) -> 1.672.
    assert!(close(on.iter_s, 1.672), "{on:?}");
    assert!(close(on.exposed_s, 0.072));
    assert!(close(on.bwd_s, 0.6) && close(on.fwd_s, 1.0));
    assert!(close(on.comm_s, 0.13 + 0.09 + 0.05));
    assert!(close(on.pack_s, 0.006));
    assert_eq!(on.buckets, 3);
    assert_eq!(on.wire_bytes, 4 * 600);
    let off = simulate(
        &SimCase::new(
            tiny(),
            "ssgd",
            Fusion::None,
            false,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        ),
        &costs,
    )
    .unwrap();
    // Everything after the backward: 1.6 + 0.192 + 0.132 + 0.072.
    assert!(close(off.iter_s, 1.996), "{off:?}");
    assert!(close(off.exposed_s, 0.396));
    // One bucket: 0.06 + (0.01 + 0.24) + 0.06 + 0.006 after backward.
    let single = simulate(
        &SimCase::new(
            tiny(),
            "ssgd",
            Fusion::Single,
            true,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        ),
        &costs,
    )
    .unwrap();
    assert!(close(single.iter_s, 1.6 + 0.376), "{single:?}");
    assert_eq!(single.plan, vec![vec![0, 1, 2]]);
}

#[test]
fn ssgd_single_bucket_without_pipelining_is_the_sum_of_its_parts() {
    let compute = crate::models::ComputeModel::from_preset(&crate::models::preset("v100").unwrap());
    let wl = SimWorkload::zoo("resnet50", None, &compute, "v100").unwrap();
    let costs = CostModel::preset("10gbe").unwrap();
    for n in [2, 4, 64] {
        let r = simulate(
            &SimCase::new(
                wl.clone(),
                "ssgd",
                Fusion::Single,
                false,
                CollectiveMode::Native,
                n,
                MethodParams::default(),
            ),
            &costs,
        )
        .unwrap();
        let sum = r.fwd_s + r.bwd_s + r.pack_s + r.compress_s + r.comm_s + r.decompress_s;
        assert!(close(r.iter_s, sum), "n={n}: {} vs {sum}", r.iter_s);
        assert_eq!(r.buckets, 1);
        // Dense fp32 all-reduce of the whole model.
        let dense: u64 = wl.tensors.iter().map(|t| 4 * t.numel() as u64).sum();
        assert_eq!(r.wire_bytes, dense);
        let net = Analytic::preset("10gbe").unwrap();
        assert!(close(r.comm_s, net.time_s(Op::AllReduce, n, dense as f64)));
    }
}

#[test]
fn pipelining_hides_communication_and_never_loses() {
    let compute = crate::models::ComputeModel::from_preset(&crate::models::preset("v100").unwrap());
    let wl = SimWorkload::zoo("resnet50", None, &compute, "v100").unwrap();
    let costs = CostModel::preset("25gbe").unwrap();
    for m in [
        "ssgd",
        "topk",
        "powersgd",
        "signsgd",
        "marsit",
        "qsgd",
        "dgc",
        "acpsgd",
        "sketch",
        "omgs",
        "sketch-fusion",
    ] {
        for fusion in [
            Fusion::None,
            Fusion::Bytes(25 << 20),
            Fusion::Planner(PlannerKind::Mgwfbp),
        ] {
            let on = simulate(
                &SimCase::new(
                    wl.clone(),
                    m,
                    fusion,
                    true,
                    CollectiveMode::Native,
                    8,
                    MethodParams::default(),
                ),
                &costs,
            )
            .unwrap();
            let off = simulate(
                &SimCase::new(
                    wl.clone(),
                    m,
                    fusion,
                    false,
                    CollectiveMode::Native,
                    8,
                    MethodParams::default(),
                ),
                &costs,
            )
            .unwrap();
            assert!(
                on.iter_s <= off.iter_s + 1e-12,
                "{m} {fusion}: on {} off {}",
                on.iter_s,
                off.iter_s
            );
            assert!(on.iter_s >= on.fwd_s + on.bwd_s);
            assert_eq!(on.wire_bytes, off.wire_bytes);
            assert!(on.wire_bytes > 0);
        }
    }
}

#[test]
fn allgather_methods_pay_more_with_more_workers() {
    let compute = crate::models::ComputeModel::from_preset(&crate::models::preset("v100").unwrap());
    let wl = SimWorkload::zoo("resnet50", None, &compute, "v100").unwrap();
    let costs = CostModel::preset("10gbe").unwrap();
    let at = |n| {
        simulate(
            &SimCase::new(
                wl.clone(),
                "topk",
                Fusion::None,
                false,
                CollectiveMode::Native,
                n,
                MethodParams::default(),
            ),
            &costs,
        )
        .unwrap()
    };
    let (a, b) = (at(4), at(64));
    assert!(b.comm_s > a.comm_s && b.decompress_s > a.decompress_s);
    assert_eq!(a.wire_bytes, b.wire_bytes);
    // The PS pattern and all-gather of sums work for summable methods.
    for mode in [
        CollectiveMode::Ps,
        CollectiveMode::AllGather,
        CollectiveMode::AllReduce,
    ] {
        let r = simulate(
            &SimCase::new(
                wl.clone(),
                "ssgd",
                Fusion::Bytes(25 << 20),
                true,
                mode,
                16,
                MethodParams::default(),
            ),
            &costs,
        )
        .unwrap();
        assert_eq!(r.collective, mode.name());
    }
    // And reject what the engine rejects.
    assert!(simulate(
        &SimCase::new(
            wl.clone(),
            "topk",
            Fusion::None,
            true,
            CollectiveMode::AllReduce,
            4,
            MethodParams::default()
        ),
        &costs
    )
    .is_err());
}

#[test]
fn bert_large_at_1024_workers_is_fast() {
    let compute = crate::models::ComputeModel::from_preset(&crate::models::preset("a100").unwrap());
    let wl = SimWorkload::zoo("bert-large", None, &compute, "a100").unwrap();
    assert!(wl.tensors.len() > 300);
    let costs = CostModel::preset("100gb-ib").unwrap();
    for (m, f) in [
        ("ssgd", Fusion::Bytes(25 << 20)),
        ("topk", Fusion::None),
        ("powersgd", Fusion::Bytes(25 << 20)),
        ("signsgd", Fusion::None),
        ("marsit", Fusion::None),
        ("omgs", Fusion::None),
        ("ssgd", Fusion::Planner(PlannerKind::Mgwfbp)),
    ] {
        let t0 = std::time::Instant::now();
        let r = simulate(
            &SimCase::new(
                wl.clone(),
                m,
                f,
                true,
                CollectiveMode::Native,
                1024,
                MethodParams::default(),
            ),
            &costs,
        )
        .unwrap();
        let dt = t0.elapsed().as_secs_f64();
        assert!(dt < 2.0, "{m} {f}: {dt} s");
        assert!(r.iter_s.is_finite() && r.iter_s > 0.0);
    }
}

#[test]
fn rows_and_comparison() {
    let costs = tiny_costs();
    let case = SimCase::new(
        tiny(),
        "ssgd",
        Fusion::None,
        true,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    let r = simulate(&case, &costs).unwrap();
    let row = SimRow::new(&case, &r, &costs);
    assert_eq!(row.source, "simulated");
    let d = std::env::temp_dir().join(format!("gradcomp-sim-cmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let m = |iter_s| MeasuredRow {
        fwd_s: 0.0,
        iter_s,
        compute_none: false,
        ranks_per_node: None,
    };
    let measured = MeasuredCase {
        case: case.clone(),
        label: "tiny/ssgd".into(),
        rows: vec![m(1.6), m(1.8)],
        compress_device: None,
    };
    let c = compare(std::slice::from_ref(&measured), std::slice::from_ref(&row)).unwrap();
    assert_eq!(c.len(), 1);
    assert!(close(c[0].measured_s, 1.7) && close(c[0].simulated_s, 1.672));
    assert!(close(c[0].rel_err, (1.672 - 1.7) / 1.7));
    assert_eq!(c[0].key, "tiny/ssgd");
    assert!(
        compare(&[measured.clone(), measured], std::slice::from_ref(&row)).is_err(),
        "one row per case"
    );
    let sim = d.join("sim.csv");
    write_rows(&sim, std::slice::from_ref(&row)).unwrap();
    write_rows(&sim, &[row]).unwrap();
    let text = std::fs::read_to_string(&sim).unwrap();
    assert_eq!(text.lines().count(), 3);
    assert!(text.starts_with("schema_version,source,"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn large_1d_capacity_extrapolation_matches_registration() {
    let d = 3 * LARGE_1D + 17;
    for &m in crate::compress::registry::METHODS {
        let wl = SimWorkload {
            model: "x".into(),
            tensors: vec![TensorSpec {
                name: "x".into(),
                rows: 1,
                cols: d,
            }],
            bwd_s: vec![0.0],
            fwd_s: 0.0,
            batch: 1,
            device: "t".into(),
        };
        let case = SimCase::new(
            wl,
            m,
            Fusion::None,
            true,
            CollectiveMode::Native,
            8,
            MethodParams::default(),
        );
        let mut wires = WireCache::default();
        let mut o = WireOracle::new(&case, &mut wires).unwrap();
        let ext = o.info(1, d).unwrap().clone();
        let exact = o.exact(1, d).unwrap().clone();
        for (a, b) in ext.wire.iter().flatten().zip(exact.wire.iter().flatten()) {
            let (a, b) = (a.bytes() as f64, b.bytes() as f64);
            assert!(
                (a - b).abs() <= 1e-4 * b.max(1.0),
                "{m}: extrapolated {a} B, registered {b} B"
            );
        }
        // Device kernels extrapolate the same way (bytes and flops of each kernel).
        let flat = |k: &wire::PhaseKernels| -> Vec<crate::devcost::Kernel> {
            k.iter().flatten().flatten().flatten().copied().collect()
        };
        let (ka, kb) = (flat(&ext.kernels), flat(&exact.kernels));
        assert_eq!(ka.len(), kb.len(), "{m}: kernel count");
        for (a, b) in ka.iter().zip(&kb) {
            assert_eq!(a.name, b.name);
            assert!(
                // A pricing estimate: 1e-3 (top-k's radix passes round per block).
                (a.bytes - b.bytes).abs() <= 1e-3 * b.bytes.max(1.0)
                    && (a.flops - b.flops).abs() <= 1e-3 * b.flops.max(1.0),
                "{m}: kernel {}: extrapolated {a:?}, registered {b:?}",
                a.name
            );
        }
    }
}

#[test]
fn cases_from_measured_e2e_rows() {
    let d = std::env::temp_dir().join(format!("gradcomp-sim-cases-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let e2e = d.join("e2e.csv");
    let h = "schema_version,run_id,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,compute,density,rank,fwd_s,iter_s\n";
    let rows = [
        "1,a,resnet50,topk,25MiB,on,allgather,allgather,2,32,v100,sleep,0.01,4,0.1,0.5",
        "1,b,resnet50,topk,25MiB,on,allgather,allgather,2,32,v100,sleep,0.01,4,0.1,0.6",
        "1,a,resnet50,ssgd,none,off,ps,allreduce,4,32,v100,none,0.001,4,0.1,0.5",
        "1,a,resnet50,omgs,omgs,on,allgather,allgather,4,32,v100,sleep,0.01,4,0.1,0.5",
        "1,a,resnet50,ssgd,none,off,allreduce,allreduce,4,32,profile,sleep,0.001,4,0.1,0.5",
        // same prefix as the first two, another compute mode and rank: separate cases
        "1,a,resnet50,topk,25MiB,on,allgather,allgather,2,32,v100,none,0.01,8,0.1,0.9",
    ];
    std::fs::write(&e2e, format!("{h}{}\n", rows.join("\n"))).unwrap();
    let measured = measured_cases(&e2e).unwrap();
    assert_eq!(measured.len(), 4);
    assert_eq!(
        measured[0].rows.len(),
        2,
        "repeat runs (run_id a, b) are one case"
    );
    assert_eq!(
        measured[0].label,
        "resnet50/topk/25MiB/pipelining=on/allgather/n=2/batch=32/compute=sleep/rank=4"
    );
    assert_eq!(
        measured[3].label,
        "resnet50/topk/25MiB/pipelining=on/allgather/n=2/batch=32/compute=none/rank=8"
    );
    assert_eq!(
        measured[1].label,
        "resnet50/ssgd/none/pipelining=off/ps/n=4/batch=32"
    );
    let cases: Vec<SimCase> = measured.iter().map(|m| m.case.clone()).collect();
    assert_eq!(cases.len(), 4);
    assert_eq!(cases[0].collective, CollectiveMode::Native);
    assert_eq!(cases[0].params.density, 0.01);
    assert_eq!(cases[0].fusion, Fusion::Bytes(25 << 20));
    assert_eq!(cases[1].collective, CollectiveMode::Ps);
    assert_eq!(cases[1].workload.fwd_s, 0.0);
    assert!(!cases[1].pipelining);
    assert!(cases[2].merge && cases[2].base_method == "topk");
    let costs = CostModel::preset("10gbe").unwrap();
    let rows: Vec<SimRow> = cases
        .iter()
        .map(|c| SimRow::new(c, &simulate(c, &costs).unwrap(), &costs))
        .collect();
    let cmp = compare(&measured, &rows).unwrap();
    assert_eq!(cmp.len(), 4);
    assert!(cmp.iter().any(|c| close(c.measured_s, 0.55)));
    assert!(cmp.iter().any(|c| close(c.measured_s, 0.9)));
    let _ = std::fs::remove_dir_all(&d);
}

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
    assert!(close(super::clock::advance(0.0, 1.0, 10.0, 2.0), 2.0));
    // Half a second of slowed time does a quarter of the work; the rest at full speed.
    assert!(close(super::clock::advance(9.5, 1.0, 10.0, 2.0), 10.75));
    assert!(close(super::clock::advance(10.0, 1.0, 10.0, 2.0), 11.0));
    assert!(close(super::clock::advance(3.0, 1.0, 10.0, 1.0), 4.0));
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
fn gathered_decompress_scales_with_the_elements_a_piece_touches() {
    // Sign bits: every element per worker.
    assert!(close(gather_scale(4, 3200, 100), 4.0));
    // Sparse pairs: 2 words (64 bits) of 1000 elements per further worker.
    assert!(close(gather_scale(4, 1000, 2), 1.0 + 3.0 * 0.064));
    assert!(close(gather_scale(4, 1000, 0), 1.0) && close(gather_scale(1, 1000, 5000), 1.0));
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

#[test]
fn calibration_recovers_the_host_latencies_of_ssgd_rows() {
    // "Measured" rows made by the simulator with a known host; calibration must find it
    // again from the ssgd rows alone (topk rows are ignored).
    let truth = host::HostModel {
        cpu_share: 0.5,
        start_s: 2e-4,
        sync_s: 3e-4,
        bwd_slowdown: 1.5,
        ..host::HostModel::default()
    };
    let costs = |_: usize| -> Result<CostModel> {
        Ok(CostModel::with_network(Box::new(Lin { a: 2e-5, b: 1e-9 })))
    };
    let compute =
        crate::models::ComputeModel::from_preset(&crate::models::preset("rtx2080ti").unwrap());
    let wl = SimWorkload::zoo("resnet20", None, &compute, "rtx2080ti").unwrap();
    let d = std::env::temp_dir().join(format!("gradcomp-sim-calib-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let mut text = String::from("schema_version,model,method,fusion,pipelining,collective,aggregation,world_size,batch,device,compute,fwd_s,iter_s\n");
    for pipe in [false, true] {
        let case = SimCase::new(
            wl.clone(),
            "ssgd",
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
        text += &format!(
            "1,resnet20,ssgd,256KiB,{on},allreduce,allreduce,2,{},rtx2080ti,sleep,{},{}\n",
            wl.batch, r.fwd_s, r.iter_s
        );
        text += &format!(
            "1,resnet20,topk,256KiB,{on},allgather,allgather,2,{},rtx2080ti,sleep,1.0,1.0\n",
            wl.batch
        );
    }
    let e2e = d.join("e2e.csv");
    std::fs::write(&e2e, text).unwrap();
    let got = host::calibrate(&e2e, Some((0.5, "test".into())), &costs).unwrap();
    let h = &got[&2];
    assert_eq!(h.points, 2);
    assert!((h.start_s - 2e-4).abs() < 1e-9, "{h:?}");
    assert!((h.sync_s - 3e-4).abs() < 1e-8, "{h:?}");
    assert!((h.bwd_slowdown - 1.5).abs() < 1e-6, "{h:?}");
    let _ = std::fs::remove_dir_all(&d);
}

/// ACP-SGD's buckets follow its reference (lzhangbv/acpsgd, `acpsgd.py`,
/// `_generate_groups_with_threshold`), written here independently of
/// `acpsgd::fusion_sizing` and `plan::buckets`: tensors in backward order; a compressed
/// matrix (`rows >= 2`, saving at `min_compression_rate`) counts `rows * r'` floats in P
/// steps and `cols * r'` in Q steps, a raw tensor its full size; a group takes a tensor
/// when it is empty or stays within the threshold, else closes. The threshold is 25 MiB
/// scaled by the mean step's compression ratio. Checked for the engine's and the
/// simulator's planning (both call `plan::phase_buckets`), P and Q, on the four models of
/// the paper's main table.
#[test]
fn acpsgd_buckets_follow_the_reference_rule() {
    let params = MethodParams::default();
    let threshold = 25.0 * 1024.0 * 1024.0;
    for model in ["resnet50", "resnet152", "bert-base", "bert-large"] {
        let m = crate::models::build(model).unwrap();
        let specs = TensorSpec::of_model(&m);
        let shapes: Vec<(usize, usize)> = specs.iter().rev().map(|t| (t.rows, t.cols)).collect();
        // reference sizes in bytes per phase
        let (mut p_sz, mut q_sz) = (Vec::new(), Vec::new());
        for &(rows, cols) in &shapes {
            let r = params.rank.min(rows).min(cols);
            let compressed = rows >= 2
                && (((rows + cols) * r) as f64) * params.min_compression_rate
                    < (rows * cols) as f64;
            if compressed {
                p_sz.push(4.0 * (rows * r) as f64);
                q_sz.push(4.0 * (cols * r) as f64);
            } else {
                p_sz.push(4.0 * (rows * cols) as f64);
                q_sz.push(4.0 * (rows * cols) as f64);
            }
        }
        let dense: f64 = shapes.iter().map(|&(r, c)| 4.0 * (r * c) as f64).sum();
        let ratio = (p_sz.iter().sum::<f64>() + q_sz.iter().sum::<f64>()) / 2.0 / dense;
        let groups = |sizes: &[f64]| -> Vec<Vec<usize>> {
            let t = threshold * ratio;
            let (mut out, mut cur, mut tot) = (Vec::new(), Vec::new(), 0.0);
            for (i, &s) in sizes.iter().enumerate() {
                if tot == 0.0 || tot + s <= t {
                    cur.push(i);
                    tot += s;
                } else {
                    out.push(std::mem::replace(&mut cur, vec![i]));
                    tot = s;
                }
            }
            if !cur.is_empty() {
                out.push(cur);
            }
            out
        };
        let want = [groups(&p_sz), groups(&q_sz)];
        let sizing = registry::fusion_sizing("acpsgd", &params, &shapes);
        let got = plan::phase_buckets(&sizing, Fusion::Bytes(25 << 20));
        assert_eq!(got[0], want[0], "{model}: P buckets");
        assert_eq!(got[1], want[1], "{model}: Q buckets");
        // The simulator plans the same (its plan is the P steps').
        let wl = SimWorkload {
            model: model.into(),
            tensors: specs.clone(),
            bwd_s: vec![1e-4; specs.len()],
            fwd_s: 1e-3,
            batch: 1,
            device: "test".into(),
        };
        let case = SimCase::new(
            wl,
            "acpsgd",
            Fusion::Bytes(25 << 20),
            true,
            CollectiveMode::Native,
            4,
            params.clone(),
        );
        let r = simulate(&case, &tiny_costs()).unwrap();
        assert_eq!(r.plan, want[0], "{model}: simulator's P plan");
        // An ACP-SGD bucket spans about the layers of an S-SGD bucket at 25 MiB (the old
        // scaling compared the scaled threshold with gradient bytes: ResNet-50 got 47
        // buckets where S-SGD gets 4).
        let ssgd = plan::phase_buckets(
            &registry::fusion_sizing("ssgd", &params, &shapes),
            Fusion::Bytes(25 << 20),
        );
        for (phase, g) in want.iter().enumerate() {
            assert!(
                g.len() <= 3 * ssgd[0].len() + 2,
                "{model} phase {phase}: {} buckets vs S-SGD's {}",
                g.len(),
                ssgd[0].len()
            );
        }
        eprintln!(
            "{model}: ACP-SGD P {} / Q {} buckets, S-SGD {}",
            want[0].len(),
            want[1].len(),
            ssgd[0].len()
        );
    }
}

/// The default compression costs come from the committed reference fit, for every
/// method of the registry, with its provenance in `cost_source`.
#[test]
fn reference_costs_cover_every_method() {
    for m in crate::compress::registry::METHODS {
        let c = MethodCosts::reference(m)
            .unwrap_or_else(|| panic!("{m} missing from reference_costs.csv"));
        for (phase, p) in [("compress", c.compress), ("decompress", c.decompress)] {
            assert!(
                p.per_element_s > 0.0 && p.per_element_s < 1e-6 && p.fixed_s >= 0.0,
                "{m} {phase}: {p:?}"
            );
        }
    }
    let src = reference_source();
    assert!(
        src.starts_with("reference fit, ") && src.contains("gradcomp "),
        "{src}"
    );
    let costs = CostModel::preset("10gbe").unwrap();
    assert!(costs.describe().contains(src));
    assert_eq!(
        costs.method("topk"),
        MethodCosts::reference("topk").unwrap()
    );
}

/// A sweep's shared [`WireCache`] gives every case the result a fresh one gives, across
/// methods, parameters, world sizes, fusion and pipelining (the cache keys on all that
/// shapes a wire).
#[test]
fn a_shared_wire_cache_changes_no_result() {
    let costs = CostModel::preset("10gbe").unwrap();
    let mut shared = WireCache::default();
    for method in ["ssgd", "topk", "powersgd", "signsgd"] {
        for density in [0.01, 0.1] {
            let params = MethodParams {
                density,
                ..MethodParams::default()
            };
            for n in [2, 8] {
                for fusion in [Fusion::None, Fusion::Bytes(1 << 10)] {
                    for pipelining in [false, true] {
                        let case = SimCase::new(
                            tiny(),
                            method,
                            fusion,
                            pipelining,
                            CollectiveMode::Native,
                            n,
                            params.clone(),
                        );
                        assert_eq!(
                            simulate_with(&case, &costs, &mut shared).unwrap(),
                            simulate(&case, &costs).unwrap(),
                            "{method} density {density} n {n} {fusion:?} pipelining {pipelining}"
                        );
                    }
                }
            }
        }
    }
}

/// The device stream runs a requested kernel at the next kernel boundary and delays the
/// remaining backward by its length; after backward it runs at once.
#[test]
fn device_kernels_run_at_the_next_boundary_and_delay_the_rest_of_backward() {
    let bwd = [0.3, 0.2, 0.1];
    let mut d = super::clock::DevStream::new(1.0, &bwd);
    assert!(close(d.ready_s(0), 1.0));
    assert!(close(d.ready_s(1), 1.3));
    // Requested during position 1's kernel (1.3 .. 1.5): runs 1.5 .. 1.55.
    assert!(close(d.kernel(1.4, 0.05), 1.55));
    assert!(close(d.projected_bwd_end(), 1.65));
    assert!(close(d.ready_s(3), 1.65));
    // Requested exactly at a boundary: before the next backward kernel.
    let mut e = super::clock::DevStream::new(0.0, &bwd);
    assert!(close(e.kernel(0.3, 0.1), 0.4));
    assert!(close(e.ready_s(3), 0.7));
    // After backward: at the request time.
    assert!(close(e.kernel(2.0, 0.1), 2.1));
    assert!(close(e.ready_s(3), 0.7));
}

/// Device compression by hand: ssgd on `tiny` (backward order 0.1, 0.2, 0.3 s after a
/// 1 s forward), pipelining on, one bucket per tensor; every kernel costs one 0.01 s
/// launch (S-SGD: one compress, one decompress kernel per tensor) and every exchange
/// 0.01 s. Compression runs at the bucket's boundary and pushes the next layer back;
/// decompression after the exchange waits for the running layer.
#[test]
fn device_compression_schedule_by_hand() {
    let mut costs = CostModel::with_network(Box::new(Lin { a: 0.01, b: 0.0 }));
    costs.device = Some(crate::devcost::DeviceCosts {
        spec: crate::devcost::DeviceSpec {
            name: "t".into(),
            launch_s: 0.01,
            mem_bytes_per_s: 1e30,
            flops_per_s: 1e30,
        },
        profile: None,
    });
    let mut case = SimCase::new(
        tiny(),
        "ssgd",
        Fusion::None,
        true,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    case.compress_on = CompressOn::Device;
    let r = simulate(&case, &costs).unwrap();
    // Bucket 0: ready 1.1, compress 1.1-1.11, exchange 1.11-1.12, layer 1 runs
    // 1.11-1.31, decompress 1.31-1.32. Bucket 1: compress 1.32-1.33, exchange 1.33-1.34,
    // layer 2 1.33-1.63, decompress 1.63-1.64. Bucket 2: compress 1.64-1.65, exchange
    // 1.65-1.66, decompress 1.66-1.67.
    assert!(close(r.bwd_s, 0.63), "bwd {}", r.bwd_s);
    assert!(close(r.iter_s, 1.67), "iter {}", r.iter_s);
    assert!(close(r.exposed_s, 0.04), "exposed {}", r.exposed_s);
    assert!(close(r.compress_s, 0.03) && close(r.decompress_s, 0.03));
    assert!(close(r.comm_s, 0.03) && close(r.pack_s, 0.0));
    // The host model's cost is reported beside it (tiny's sizes at the reference fit).
    assert!(r.host_compress_s > 0.0);
    // Without a device model the case is refused, naming the flag.
    let e = simulate(&case, &tiny_costs()).unwrap_err().to_string();
    assert!(e.contains("--compress-device"), "{e}");
}

#[test]
fn paused_host_work_on_a_shared_core_is_paid_in_the_next_exchange() {
    // Device compression on an oversubscribed host (cpu_share 0.5): the engine pauses the
    // device clock for the host's own compression, but the share of the core the rank
    // waits for other ranks is spent inside the next collective (measured at 4 ranks on
    // 2 cores: extra exchange time about 1x the host work). With share 1 nothing changes.
    let device = crate::devcost::DeviceCosts {
        spec: crate::devcost::DeviceSpec {
            name: "t".into(),
            launch_s: 0.01,
            mem_bytes_per_s: 1e30,
            flops_per_s: 1e30,
        },
        profile: None,
    };
    let run = |share: f64, pipelining: bool| {
        let mut costs = tiny_costs();
        costs.pack_s_per_byte = 0.0;
        costs.pack_fixed_s = 0.0;
        costs.device = Some(device.clone());
        costs.host.cpu_share = share;
        let mut case = SimCase::new(
            tiny(),
            "ssgd",
            Fusion::None,
            pipelining,
            CollectiveMode::Native,
            4,
            MethodParams::default(),
        );
        case.compress_on = CompressOn::Device;
        simulate(&case, &costs).unwrap()
    };
    for pipelining in [false, true] {
        let full = run(1.0, pipelining);
        let half = run(0.5, pipelining);
        // Host work at full speed: ssgd's compress + decompress, 1e-4 s per element each
        // over 600 elements (tiny_costs), the gathered pieces at factor 1 for a sum.
        let work = full.host_compress_s + full.host_decompress_s;
        assert!(close(work, 0.12), "host work {work}");
        assert!(
            close(half.comm_s - full.comm_s, work),
            "pipelining {pipelining}: comm {} vs {}",
            half.comm_s,
            full.comm_s
        );
        // The device-charged phases are the same; the host columns report the share.
        assert!(close(half.compress_s, full.compress_s));
        assert!(close(half.host_compress_s, 2.0 * full.host_compress_s));
        assert!(half.iter_s > full.iter_s);
    }
}
