//! Tests of the simulated schedule: the tiny workload by hand with pipelining on and off,
//! sums of parts, pipelining never losing, collectives and world sizes, and speed at
//! 1024 workers.

use super::super::network::Analytic;
use super::*;
use crate::schedule::plan::PlannerKind;

#[test]
fn tiny_schedule_by_hand_pipelining_on_and_off() {
    // Backward order c (ready 1.1), b (1.3), a (1.6). Per tensor of e elements:
    // compress 1e-4 e, comm 0.01 + 1e-4 * 4e, decompress 1e-4 e, pack 2 * 0.001.
    // c: 0.03 + 0.13 + 0.03 + 0.002 = 0.192; b: 0.132; a: 0.072.
    let costs = tiny_costs();
    let on = simulate(&tiny_ssgd(true), &costs).unwrap();
    // c: 1.1 -> 1.292; b: max(1.292, 1.3) -> 1.432; a: max(1.432, 1.6) -> 1.672.
    assert!(close(on.iter_s, 1.672), "{on:?}");
    assert!(close(on.exposed_s, 0.072));
    assert!(close(on.bwd_s, 0.6) && close(on.fwd_s, 1.0));
    assert!(close(on.comm_s, 0.13 + 0.09 + 0.05));
    assert!(close(on.pack_s, 0.006));
    assert_eq!(on.buckets, 3);
    assert_eq!(on.wire_bytes, 4 * 600);
    let off = simulate(&tiny_ssgd(false), &costs).unwrap();
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
            // A planner (also one a method implies) plans each schedule for itself (the
            // buckets, and so a variable wire's trailers, may differ); a fixed plan sends
            // the same bytes.
            if on.planned_s.is_none() {
                assert_eq!(on.wire_bytes, off.wire_bytes);
            }
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

/// Without pipelining every bucket waits for the end of backward, and the planner plans
/// and predicts for that schedule: on `tiny` with `t = 0.05 s + 1e-4 s/B` per exchange
/// and no other cost, one group per tensor would be best with pipelining (0.69 s) but
/// costs 0.99 s without; MG-WFBP picks the single group (0.89 s) and predicts what the
/// simulator then runs.
#[test]
fn planners_plan_for_the_schedule_that_runs_without_pipelining() {
    let mut costs = CostModel::with_network(Box::new(Lin { a: 0.05, b: 1e-4 }));
    costs.methods.insert("ssgd".into(), MethodCosts::default());
    costs.pack_s_per_byte = 0.0;
    costs.pack_fixed_s = 0.0;
    for (pipelining, buckets, want_s) in [(true, 3, 0.69), (false, 1, 0.89)] {
        let case = SimCase::new(
            tiny(),
            "ssgd",
            Fusion::Planner(PlannerKind::Mgwfbp),
            pipelining,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        );
        let r = simulate(&case, &costs).unwrap();
        assert_eq!(r.buckets, buckets, "pipelining {pipelining}");
        let planned = r.planned_s.unwrap();
        assert!(
            close(planned, want_s),
            "pipelining {pipelining}: planned {planned}"
        );
        assert!(
            close(r.bwd_sync_s, planned),
            "pipelining {pipelining}: simulated {} planned {planned}",
            r.bwd_sync_s
        );
    }
}
