//! Tests of the cost model's parts: the gathered-decompress scale and the reference fit
//! of compression costs.

use super::*;

#[test]
fn gathered_decompress_scales_with_the_elements_a_piece_touches() {
    // Sign bits: every element per worker.
    assert!(close(gather_scale(4, 3200, 100), 4.0));
    // Sparse pairs: 2 words (64 bits) of 1000 elements per further worker.
    assert!(close(gather_scale(4, 1000, 2), 1.0 + 3.0 * 0.064));
    assert!(close(gather_scale(4, 1000, 0), 1.0) && close(gather_scale(1, 1000, 5000), 1.0));
    // A unit of no elements: the output pass only (not 0 / 0).
    assert_eq!(gather_scale(4, 0, 5), 1.0);
}

/// The default compression costs come from the reference fit in every method's spec,
/// with its provenance in `cost_source`; other names have none.
#[test]
fn reference_costs_cover_every_method() {
    for m in crate::compress::registry::METHODS {
        let c = MethodCosts::reference(m).unwrap_or_else(|| panic!("{m} has no reference costs"));
        for (phase, p) in [("compress", c.compress), ("decompress", c.decompress)] {
            assert!(
                p.per_element_s > 0.0 && p.per_element_s < 1e-6 && p.fixed_s >= 0.0,
                "{m} {phase}: {p:?}"
            );
        }
    }
    for other in ["omgs", "topk-noef", "nope"] {
        assert!(MethodCosts::reference(other).is_none(), "{other}");
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

/// `--fits DIR` without micro_compress.csv keeps the reference compression costs, and
/// `cost_source` names them, not a fit of a file that was not there.
#[test]
fn compression_source_names_the_costs_used() {
    let mut rep = fit::FitReport::default();
    let without = CostModel::preset("10gbe").unwrap().with_compress_fits(&rep);
    let d = without.describe();
    assert!(
        d.contains(&format!("compression {}", costs::reference_source())),
        "{d}"
    );
    assert!(!d.contains("fitted"), "{d}");
    rep.compress_source = Some("run/micro_compress.csv".into());
    let with = CostModel::preset("10gbe").unwrap().with_compress_fits(&rep);
    assert!(
        with.describe().contains(
            "compression fitted run/micro_compress.csv (other methods: the reference fit)"
        ),
        "{}",
        with.describe()
    );
}

/// A method's selection is charged per unit at its own size: DGC on a 32x288 and a
/// 64x576 tensor (threshold samples of 9,216 and 2,168 elements, worked by hand in
/// compress/dgc/tests.rs) and a 1-D one (sent dense: nothing selected), at 1 ns per
/// element and 10 ns per selected element, is charged 101.38 + 58.54 + 0.1 us of host
/// compression, each in its own bucket.
#[test]
fn selection_is_charged_per_unit() {
    let t = |name: &str, rows: usize, cols: usize| TensorSpec {
        name: name.into(),
        rows,
        cols,
    };
    let wl = SimWorkload {
        model: "three".into(),
        tensors: vec![t("a", 32, 288), t("b", 64, 576), t("c", 1, 100)],
        bwd_s: vec![0.3, 0.2, 0.1],
        fwd_s: 1.0,
        batch: 1,
        device: "test".into(),
    };
    let mut costs = tiny_costs();
    costs.methods.insert(
        "dgc".into(),
        MethodCosts {
            compress: CompressCost {
                per_element_s: 1e-9,
                fixed_s: 0.0,
                per_selected_s: 1e-8,
            },
            feedback: CompressCost::default(),
            decompress: CompressCost::default(),
        },
    );
    let case = SimCase::new(
        wl,
        "dgc",
        Fusion::None,
        false,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    let r = simulate(&case, &costs).unwrap();
    let want = (9216.0 * 1e-9 + 9216.0 * 1e-8) + (36864.0 * 1e-9 + 2168.0 * 1e-8) + 100.0 * 1e-9;
    assert!(
        close(r.host_compress_s, want),
        "{} vs {want}",
        r.host_compress_s
    );
}

/// A method of two rounds pays its host compression and feedback once per step, half in
/// each round (clock.rs `per_round`), and its decompression likewise (`decompress`):
/// Power-SGD on `tiny` (3 unmerged units of 100, 200, 300 elements) at 1 ms + 1 us an
/// element of compression and 2 us an element of feedback: 3 x 1 ms + 600 x 3 us =
/// 4.8 ms; at 2 ms + 1 us an element of decompression (no gather section, so no gathered
/// scale): 3 x 2 ms + 600 x 1 us = 6.6 ms.
#[test]
fn a_two_round_methods_host_compression_and_decompression_are_paid_once_per_step() {
    let mut costs = tiny_costs();
    costs.methods.insert(
        "powersgd".into(),
        MethodCosts {
            compress: CompressCost {
                fixed_s: 1e-3,
                per_element_s: 1e-6,
                ..CompressCost::default()
            },
            feedback: CompressCost {
                per_element_s: 2e-6,
                ..CompressCost::default()
            },
            decompress: CompressCost {
                fixed_s: 2e-3,
                per_element_s: 1e-6,
                ..CompressCost::default()
            },
        },
    );
    let case = SimCase::new(
        tiny(),
        "powersgd",
        Fusion::None,
        true,
        CollectiveMode::Native,
        2,
        MethodParams::default(),
    );
    let r = simulate(&case, &costs).unwrap();
    assert!(close(r.host_compress_s, 4.8e-3), "{r:?}");
    assert!(close(r.compress_s, 4.8e-3), "{r:?}");
    assert!(close(r.host_decompress_s, 6.6e-3), "{r:?}");
    assert!(close(r.decompress_s, 6.6e-3), "{r:?}");
}

/// Host compression's copies per unit (clock.rs `compress`, `decompress`): appending the
/// unit's wire to the bucket's (`pack_fixed_s + pack_s_per_byte x` its bytes) and splitting
/// the received data into every worker's piece (`pack_fixed_s + pack_s_per_byte x 4 x n x`
/// its gather words), each unit's wire read from the compress operations the iteration
/// ran. signsgd on `tiny` (3 units, one bucket per tensor) at 4 workers, 1 ms + 1 us a byte.
/// With device compression on half a core the same host work is paused, its other half
/// paid in the exchanges (clock.rs `Walk::paused`): that much more communication than on a
/// whole core.
#[test]
fn host_appends_and_splits_each_units_wire() {
    let costs_on = |share: f64, device: bool| {
        let mut c = tiny_costs();
        c.methods.insert("signsgd".into(), MethodCosts::default());
        c.pack_fixed_s = 1e-3;
        c.pack_s_per_byte = 1e-6;
        c.host.cpu_share = share;
        c.device = device.then(|| launch_only_device(0.01));
        c
    };
    let costs = costs_on(1.0, false);
    let n = 4;
    let case = SimCase::new(
        tiny(),
        "signsgd",
        Fusion::None,
        true,
        CollectiveMode::Native,
        n,
        MethodParams::default(),
    );
    let r = simulate(&case, &costs).unwrap();
    let wires: Vec<_> = r
        .executed
        .iter()
        .flatten()
        .filter(|e| matches!(e.op, crate::schedule::Op::Compress { .. }))
        .map(|e| e.wire)
        .collect();
    assert_eq!(wires.len(), 3);
    let want: f64 = wires
        .iter()
        .map(|l| {
            assert!(l.gather_u32 > 0, "{l:?}");
            let append = 1e-3 + 1e-6 * l.bytes() as f64;
            let split = 1e-3 + 1e-6 * 4.0 * (n * l.gather_u32) as f64;
            append + split
        })
        .sum();
    assert!(close(r.pack_s, want), "{} vs {want}", r.pack_s);
    let device = |share: f64| {
        let mut case = case.clone();
        case.compress_on = CompressOn::Device;
        simulate(&case, &costs_on(share, true)).unwrap()
    };
    let (whole, half) = (device(1.0), device(0.5));
    assert!(
        close(half.comm_s - whole.comm_s, want),
        "{} vs {} + {want}",
        half.comm_s,
        whole.comm_s
    );
}
