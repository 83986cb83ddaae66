//! Tests of wires and bucket plans: extrapolated large 1-D capacities and kernels against
//! registration, the shared wire cache, ACP-SGD's buckets against its reference rule.

use super::*;

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
        let flat = |k: &wire::PhaseKernels| -> Vec<crate::roofline::Kernel> {
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

/// ACP-SGD's buckets follow its reference (lzhangbv/acpsgd, `acpsgd.py`,
/// `_generate_groups_with_threshold`), written here independently of
/// `acpsgd::fusion_sizing` and `plan::buckets`: tensors in backward order; a compressed
/// matrix (`rows >= 2`, saving at `min_compression_rate`) counts `rows * r'` floats in P
/// steps and `cols * r'` in Q steps, a raw tensor its full size; a group takes a tensor
/// when it is empty or stays within the threshold, else closes. The threshold is 25 MiB
/// scaled per phase (`threshold_p = T * sum(p_size) / sum(model_size)`, likewise Q; the
/// reference at 4f560a2). Checked for the engine's and the simulator's planning (both call
/// `plan::phase_buckets`), P and Q, on the four models of the paper's main table, and the
/// bucket counts against those the reference's rule gives (ResNet-50 P/Q 4/4, BERT-Base
/// 16/20; issue 28).
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
        let groups = |sizes: &[f64]| -> Vec<Vec<usize>> {
            let t = threshold * sizes.iter().sum::<f64>() / dense;
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
        let counts = (want[0].len(), want[1].len());
        match model {
            "resnet50" => assert_eq!(counts, (4, 4), "{model}: the reference's P/Q counts"),
            "bert-base" => assert_eq!(counts, (16, 20), "{model}: the reference's P/Q counts"),
            _ => {}
        }
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
                density: Some(density),
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

/// OMGS-SGD as its paper ran it (issue 27): with the fallback off the plan that runs is
/// OMGS's merge (`plan_source` `omgs`) where, with it on, the planner's model rates a
/// simple bucketing faster and runs that (VGG-16, 16 workers, 1 GbE, rho 0.001).
#[test]
fn planner_fallback_off_runs_the_papers_merge() {
    let compute = crate::models::ComputeModel::from_preset(&crate::models::preset("v100").unwrap());
    let wl = SimWorkload::zoo("vgg16", None, &compute, "v100").unwrap();
    let costs = CostModel::preset("1gbe").unwrap();
    let case = |fallback: bool| {
        let mut c = SimCase::new(
            wl.clone(),
            "omgs",
            Fusion::None,
            true,
            CollectiveMode::Native,
            16,
            MethodParams::default(),
        );
        c.planner_fallback = fallback;
        c
    };
    let on = simulate(&case(true), &costs).unwrap();
    let off = simulate(&case(false), &costs).unwrap();
    let on_src = on.plan_source.unwrap();
    assert!(
        !on_src.starts_with("omgs"),
        "expected a fallback with the default, got {on_src}"
    );
    assert_eq!(off.plan_source.as_deref(), Some("omgs"));
}
