//! Tests of this module's own parts, each by hand: the mean of a step cycle's phases
//! ([`SimResult::mean`]), the collectives of a bucket exchange ([`exchange_collectives`],
//! [`exchange_s`]), the workload's check in [`simulate`], a planner's work besides
//! communication (`PlannerCosts::compress_s`).

use super::*;

/// Two phases, every field of the second three times the first's: the mean is twice the
/// first's; wire bytes and bucket counts round to the nearest whole (15.5 to 16, 1.5 to 2).
#[test]
fn the_mean_of_the_phases_averages_every_field() {
    let one = SimResult {
        fwd_s: 1.0,
        bwd_s: 2.0,
        pack_s: 3.0,
        compress_s: 4.0,
        comm_s: 5.0,
        decompress_s: 6.0,
        exposed_s: 7.0,
        bwd_sync_s: 8.0,
        iter_s: 9.0,
        host_compress_s: 10.0,
        host_decompress_s: 11.0,
        wire_bytes: 10,
        buckets: 1,
        ..SimResult::default()
    };
    let three = SimResult {
        fwd_s: 3.0,
        bwd_s: 6.0,
        pack_s: 9.0,
        compress_s: 12.0,
        comm_s: 15.0,
        decompress_s: 18.0,
        exposed_s: 21.0,
        bwd_sync_s: 24.0,
        iter_s: 27.0,
        host_compress_s: 30.0,
        host_decompress_s: 33.0,
        wire_bytes: 21,
        buckets: 2,
        ..SimResult::default()
    };
    let m = SimResult::mean(&[one, three]);
    let want = [2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0, 18.0, 20.0, 22.0];
    let got = [
        m.fwd_s,
        m.bwd_s,
        m.pack_s,
        m.compress_s,
        m.comm_s,
        m.decompress_s,
        m.exposed_s,
        m.bwd_sync_s,
        m.iter_s,
        m.host_compress_s,
        m.host_decompress_s,
    ];
    assert_eq!(got, want);
    assert_eq!((m.wire_bytes, m.buckets), (16, 2));
    // One phase is itself; none is all zeros (no division by zero).
    let single = SimResult::mean(&[SimResult {
        iter_s: 0.5,
        wire_bytes: 7,
        ..SimResult::default()
    }]);
    assert_eq!((single.iter_s, single.wire_bytes), (0.5, 7));
    assert_eq!(SimResult::mean(&[]), SimResult::default());
}

/// A summed section exchanged by all-gather (`CollectiveMode::AllGather`): one all-gather
/// of the section's bytes, then the local sum of the `n - 1` received copies at the
/// network's reduction cost (comm/exchange.rs `SumAllGather`), which `exchange_s` adds.
#[test]
fn a_summed_all_gather_adds_the_local_sum_of_the_other_copies() {
    let net = network::Analytic::new(
        "x",
        network::Link {
            alpha_s: 1e-5,
            beta_s_per_byte: 1e-9,
            gamma_s_per_byte: 1e-9,
        },
    );
    let w = WireLen::of(Aggregation::AllReduce, 100, false);
    let c: Vec<Collective> =
        exchange_collectives(Nets::same(&net), CollectiveMode::AllGather, 4, w, false).collect();
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].op, c[0].m_bytes), (Op::AllGather, 400.0));
    assert_eq!(c[0].net_s, net.time_s(Op::AllGather, 4, 400.0));
    // 3 copies of 400 bytes at 1 ns/B.
    assert!(close(c[0].local_s, 1.2e-6), "{}", c[0].local_s);
    let t = exchange_s(Nets::same(&net), CollectiveMode::AllGather, 4, w, false);
    assert!(close(t, c[0].net_s + 1.2e-6), "{t}");
}

/// A workload without a backward time per tensor, or without tensors, is bad input that
/// says so, not a panic.
#[test]
fn a_workload_needs_one_backward_time_per_tensor() {
    let mut c = tiny_ssgd(true);
    c.workload.bwd_s.pop();
    let e = simulate(&c, &tiny_costs()).unwrap_err();
    assert!(matches!(e, SimError::Input(_)), "{e}");
    assert!(
        e.to_string().contains("3 tensors but 2 backward times"),
        "{e}"
    );
    c.workload.bwd_s.push(0.1);
    c.workload.bwd_s.push(0.1);
    let e = simulate(&c, &tiny_costs()).unwrap_err();
    assert!(
        e.to_string().contains("3 tensors but 4 backward times"),
        "{e}"
    );
    c.workload.tensors.clear();
    c.workload.bwd_s.clear();
    let e = simulate(&c, &tiny_costs()).unwrap_err();
    assert!(
        e.to_string().contains("0 tensors but 0 backward times"),
        "{e}"
    );
}

/// A planner's costs on `tiny_ssgd`'s case (2 workers), with each phase's fixed and
/// per-element costs apart, at a CPU share of 1/4 and 10 gather words per 1,000 elements.
fn planner_costs<'a>(
    case: &'a SimCase,
    net: &'a dyn CollectiveCost,
    device: Option<&'a crate::devcost::DeviceCosts>,
    dev_line: Option<CompressCost>,
) -> PlannerCosts<'a> {
    let cost = |fixed_s: f64, per_element_s: f64| CompressCost {
        fixed_s,
        per_element_s,
        ..CompressCost::default()
    };
    PlannerCosts {
        case,
        nets: Nets::same(net),
        device,
        agg: Aggregation::AllReduce,
        bpe: vec![4.0],
        exact: false,
        cpu: 4.0,
        pack_s_per_byte: 1e-9,
        gather_words_per_elem: 0.01,
        mc: MethodCosts {
            compress: cost(1e-3, 1e-6),
            feedback: cost(2e-3, 2e-6),
            decompress: cost(3e-3, 3e-6),
        },
        dev_line,
    }
}

/// `compress_s(e, k)` by hand: on the host, `cpu x (calls x fixed + e x per-element)` with
/// decompress's per-element term scaled by `gather_scale` (2 workers, 10 words of 1,000
/// elements: 1 + 320 / 1000 = 1.32), one call per tensor or one per merged group, and a
/// merged group's copy in and out (2 x cpu x 1 ns/B x 4 B per element; cpu 4, not 2, where
/// `2 x cpu` and `2 + cpu` agree); on the device the fitted line (one fixed cost per call)
/// plus the device's copies.
#[test]
fn planner_work_besides_communication_by_hand() {
    let net = Lin { a: 0.0, b: 0.0 };
    let mut case = tiny_ssgd(true);
    let per_elem = 1e-6 + 2e-6 + 3e-6 * 1.32;
    // Host, a tensor each: 2 calls of 6 ms fixed.
    let host = planner_costs(&case, &net, None, None);
    assert!(close(
        host.compress_s(1000, 2),
        4.0 * (2.0 * 6e-3 + 1000.0 * per_elem)
    ));
    let line = CompressCost {
        fixed_s: 1e-3,
        per_element_s: 1e-6,
        ..CompressCost::default()
    };
    // Device, a tensor each: 3 calls of 1 ms and 1,000 x 1 us; no copies.
    let dev = launch_only_device(1e-5);
    let on_dev = planner_costs(&case, &net, Some(&dev), Some(line));
    assert!(close(on_dev.compress_s(1000, 3), 3e-3 + 1e-3));
    case.merge = true;
    // Host, merged: one call, and 4,000 B copied in and out at 2 x 4 x 1 ns/B.
    let host = planner_costs(&case, &net, None, None);
    let copies = 2.0 * 4.0 * 1e-9 * 4000.0;
    assert!(close(host.copies_s(1000, 2), copies));
    assert!(close(
        host.compress_s(1000, 2),
        copies + 4.0 * (6e-3 + 1000.0 * per_elem)
    ));
    // Device, merged: one call, and two copies of 4,000 B in 3 launches each, at 10 us a
    // launch and 2 x 4,000 B / 1 GB/s (devcost: read and write).
    let mut dev = launch_only_device(1e-5);
    dev.spec.mem_bytes_per_s = 1e9;
    let on_dev = planner_costs(&case, &net, Some(&dev), Some(line));
    let copy = 3.0 * 1e-5 + 2.0 * 4000.0 / 1e9;
    assert!(close(on_dev.copies_s(1000, 3), 2.0 * copy));
    assert!(close(on_dev.compress_s(1000, 3), 1e-3 + 1e-3 + 2.0 * copy));
}
