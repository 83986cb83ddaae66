//! OMGS-SGD's published cost model of its own cluster (16 x Nvidia P102-100, 1 GbE) as
//! validation points of ours (issue 27): the paper's all-gather alpha-beta table and its
//! top-k cost `t(d) = s d log2 d` (HKBU-HPML/OMGS-SGD, utils.py at commit ac10b98:
//! `allgather_perf_model` with table `GbE_multi_p_ab`, `topk_perf_model`), each beside
//! our network preset's and device model's prediction of exactly that quantity
//! (`simulate --validate-published omgs`, file `published_validation.csv`). Nothing here
//! is fitted: the constants are the paper's, ours are the presets'.

use super::network::{CollectiveCost, Op};
use crate::compress::device::{ew, torch_topk};
use crate::devcost::DeviceCosts;
use crate::roofline::Kernel;

/// `(P, a_s, b_s_per_byte)` of OMGS's all-gather model on its 1 GbE cluster (utils.py,
/// `GbE_multi_p_ab`, commit ac10b98).
pub const OMGS_ALLGATHER_AB: [(usize, f64, f64); 4] = [
    (2, 1.6e-3, 1.0e-8),
    (4, 2.7e-3, 1.3e-8),
    (8, 4.0e-3, 1.5e-8),
    (16, 1.1e-2, 1.7e-8),
];

/// `s` of OMGS's top-k time `t(d) = s d log2 d` on one P102-100 (utils.py,
/// `topk_perf_model`, commit ac10b98), for `torch.topk(torch.abs(x), k, sorted=False)`
/// at `k = 0.001 d` (test/bench_topk_op.py).
pub const OMGS_TOPK_S: f64 = 2.18896957e-10;

/// Selected elements per worker at which the all-gather model is compared.
pub const ALLGATHER_ELEMS: [usize; 3] = [1_000, 25_000, 138_000];
/// Tensor sizes (elements) at which the top-k model is compared: 1 Mi to 128 Mi, the
/// range test/bench_topk_op.py measured (up to 2^29).
pub const TOPK_ELEMS: [usize; 4] = [1 << 20, 1 << 23, 1 << 25, 1 << 27];

/// OMGS's all-gather time of `x` selected elements per worker among `p` workers:
/// `(a + b x p 4) 2` (values and int32 indices, two all-gathers); `None` for a `p` the
/// table lacks.
pub fn omgs_allgather_s(x: usize, p: usize) -> Option<f64> {
    OMGS_ALLGATHER_AB
        .iter()
        .find(|r| r.0 == p)
        .map(|&(_, a, b)| (a + b * x as f64 * p as f64 * 4.0) * 2.0)
}

/// Latency `alpha` (s) and time per byte `beta` (s/B) of OMGS's dense all-reduce model
/// on its 1 GbE cluster, `2 (P-1) alpha + 2 (P-1)/P m beta` (utils.py,
/// `predict_density_with_size_and_computation`, commit ac10b98: `alpha = 4 * 0.436e-3`,
/// `beta = 4 * 9e-6 * 1e-3` s per fp32 element, here per byte).
pub const OMGS_ALLREDUCE_ALPHA_S: f64 = 4.0 * 0.436e-3;
pub const OMGS_ALLREDUCE_BETA_S_PER_BYTE: f64 = 9e-6 * 1e-3;

/// Name of the network preset of OMGS-SGD's own cluster (`--network omgs-1gbe`).
pub const OMGS_NETWORK: &str = "omgs-1gbe";

/// OMGS-SGD's 1 GbE cluster as a network (`--network omgs-1gbe`), from the paper's own
/// measured models rather than a line rate: one all-gather of `m` bytes per rank costs
/// `a(P) + b(P) P m` at the P = 2, 4, 8, 16 of `GbE_multi_p_ab` (its `(a + b x P 4) 2`
/// for `x` selected elements is two such calls, values and indices), all-reduce by its
/// dense model
/// ([`OMGS_ALLREDUCE_ALPHA_S`]). Operations the repository does not model (our ring, the
/// parameter server's reduce/gather and broadcast) use the all-reduce model's alpha and
/// beta as a link ([`super::network::Analytic`]). Valid only at those P: other world
/// sizes are refused up front ([`omgs_network_check`]).
#[derive(Clone, Debug)]
pub struct OmgsNetwork {
    /// The all-reduce model's link (with the reduction cost of the other presets) and
    /// MPICH's algorithms over it, for the operations the paper does not model.
    link: super::network::Analytic,
    /// Multipliers of the latencies and of the times per byte (a sensitivity sweep).
    alpha_x: f64,
    beta_x: f64,
}

impl OmgsNetwork {
    pub fn new(alpha_x: f64, beta_x: f64) -> OmgsNetwork {
        OmgsNetwork {
            link: super::network::Analytic::new(
                OMGS_NETWORK,
                super::network::Link {
                    alpha_s: OMGS_ALLREDUCE_ALPHA_S * alpha_x,
                    beta_s_per_byte: OMGS_ALLREDUCE_BETA_S_PER_BYTE * beta_x,
                    gamma_s_per_byte: super::network::GAMMA_S_PER_BYTE,
                },
            ),
            alpha_x,
            beta_x,
        }
    }
}

/// `Err` with the reason when OMGS's network has no model at `n` workers.
pub fn omgs_network_check(n: usize) -> Result<(), String> {
    if n <= 1 || OMGS_ALLGATHER_AB.iter().any(|r| r.0 == n) {
        return Ok(());
    }
    Err(format!(
        "--network {OMGS_NETWORK} holds the paper's measured all-gather at {} workers only (HKBU-HPML/OMGS-SGD utils.py GbE_multi_p_ab), not {n}; give one of those world sizes or another network",
        OMGS_ALLGATHER_AB
            .iter()
            .map(|r| r.0.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

impl CollectiveCost for OmgsNetwork {
    fn time_s(&self, op: Op, n: usize, m: f64) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        let l = &self.link.link;
        match op {
            Op::AllGather => match OMGS_ALLGATHER_AB.iter().find(|r| r.0 == n) {
                Some(&(_, a, b)) => a * self.alpha_x + b * self.beta_x * n as f64 * m,
                // Refused up front (omgs_network_check); the link is the fallback.
                None => super::network::allgather_s(l, n, m),
            },
            Op::AllReduce => {
                let k = (n - 1) as f64;
                2.0 * k * l.alpha_s + 2.0 * k / n as f64 * m * l.beta_s_per_byte
            }
            op => self.link.time_s(op, n, m),
        }
    }
    fn reduce_s(&self, bytes: f64) -> f64 {
        self.link.reduce_s(bytes)
    }
    fn with_gamma(&self, gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        let mut o = self.clone();
        o.link.link.gamma_s_per_byte = gamma_s_per_byte;
        Box::new(o)
    }
    fn describe(&self) -> String {
        let scaled = if (self.alpha_x, self.beta_x) == (1.0, 1.0) {
            String::new()
        } else {
            format!(" (alpha x{}, beta x{})", self.alpha_x, self.beta_x)
        };
        format!("preset {OMGS_NETWORK}: OMGS-SGD's measured 1 GbE models (all-gather a, b per P; all-reduce alpha 1.744 ms, 9 ns/B){scaled}")
    }
}

/// OMGS's top-k time of a `d`-element tensor: `s d log2 d`.
pub fn omgs_topk_s(d: usize) -> f64 {
    let df = d as f64;
    OMGS_TOPK_S * df * df.log2()
}

/// The kernels OMGS's measured operation launches, as our device model lists them:
/// `torch.abs` then `torch.topk(k = 0.001 d, sorted=False)`.
pub fn topk_kernels(d: usize) -> Vec<Kernel> {
    let mut v = vec![ew("|x|", d, 1, 1)];
    let k = ((d as f64) * 0.001).ceil() as usize;
    torch_topk(&mut |kn| v.push(kn), d, k.max(1), false);
    v
}

/// One validation point: the published quantity beside ours.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct ValidationRow {
    pub quantity: String,
    pub workers: usize,
    pub elements: usize,
    pub published_s: f64,
    pub ours_s: f64,
    pub ours_over_published: f64,
    pub published_source: String,
    pub ours_source: String,
}

/// The validation points of OMGS's model: all-gather at P = 2..16 over `network` (two
/// all-gathers of `4 x` bytes per worker, as OMGS sends them) and top-k on `device`.
pub fn omgs_validation(network: &dyn CollectiveCost, device: &DeviceCosts) -> Vec<ValidationRow> {
    let mut rows = Vec::new();
    let src = "HKBU-HPML/OMGS-SGD utils.py @ac10b98";
    for &(p, _, _) in &OMGS_ALLGATHER_AB {
        for &x in &ALLGATHER_ELEMS {
            let published_s = omgs_allgather_s(x, p).unwrap_or(f64::NAN);
            let ours_s = 2.0 * network.time_s(Op::AllGather, p, 4.0 * x as f64);
            rows.push(ValidationRow {
                quantity: "all-gather of x values + x int32 indices per worker (s)".into(),
                workers: p,
                elements: x,
                published_s,
                ours_s,
                ours_over_published: ours_s / published_s,
                published_source: format!("{src}, allgather_perf_model (GbE_multi_p_ab)"),
                ours_source: network.describe(),
            });
        }
    }
    for &d in &TOPK_ELEMS {
        let published_s = omgs_topk_s(d);
        let ours_s = device.kernels_s(&topk_kernels(d));
        rows.push(ValidationRow {
            quantity: "torch.topk(torch.abs(x), 0.001 d, sorted=False) on one GPU (s)".into(),
            workers: 1,
            elements: d,
            published_s,
            ours_s,
            ours_over_published: ours_s / published_s,
            published_source: format!("{src}, topk_perf_model (Nvidia P102-100)"),
            ours_source: device.describe(),
        });
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The constants are the paper's (utils.py at ac10b98, as docs/performance.md quotes
    /// them), and the formulas give the paper's numbers worked by hand.
    #[test]
    fn constants_match_the_cited_source() {
        let want = [
            (2, 0.0016, 1e-8),
            (4, 0.0027, 1.3e-8),
            (8, 0.004, 1.5e-8),
            (16, 0.011, 1.7e-8),
        ];
        assert_eq!(OMGS_ALLGATHER_AB, want);
        assert_eq!(OMGS_TOPK_S, 2.18896957e-10);
        // 16 workers, 1000 elements: (0.011 + 1.7e-8 * 64000) * 2 = 0.024176 s.
        assert!((omgs_allgather_s(1000, 16).unwrap() - 0.024176).abs() < 1e-12);
        assert!(omgs_allgather_s(1000, 3).is_none());
        // 2^20 elements: s * 2^20 * 20.
        assert!((omgs_topk_s(1 << 20) - 2.18896957e-10 * 1048576.0 * 20.0).abs() < 1e-15);
    }

    /// The preset against the paper's formulas worked by hand: the values and the
    /// indices of 1,000 selected elements at P = 16, two all-gathers of 4,000 B, are
    /// `(0.011 + 1.7e-8 * 1000 * 16 * 4) * 2` = 0.024176 s (one call: 0.012088 s); a
    /// 100 MB all-reduce at P = 4 is `2*3*1.744e-3 + 2*3/4*1e8*9e-9` = 1.360464 s.
    /// Scaling multiplies each term; world sizes off the table are refused.
    #[test]
    fn omgs_network_is_the_papers_models() {
        let net = OmgsNetwork::new(1.0, 1.0);
        assert!((2.0 * net.time_s(Op::AllGather, 16, 4000.0) - 0.024176).abs() < 1e-12);
        assert!((net.time_s(Op::AllGather, 2, 8000.0) - (1.6e-3 + 1.6e-4)).abs() < 1e-12);
        assert!((net.time_s(Op::AllReduce, 4, 1e8) - 1.360464).abs() < 1e-9);
        assert_eq!(net.time_s(Op::AllReduce, 1, 1e8), 0.0);
        let slow = OmgsNetwork::new(2.0, 0.5);
        let want = 0.011 * 2.0 + 1.7e-8 * 0.5 * 16.0 * 8000.0;
        assert!((slow.time_s(Op::AllGather, 16, 8000.0) - want).abs() < 1e-12);
        let want = 2.0 * 3.0 * 1.744e-3 * 2.0 + 1.5 * 1e8 * 9e-9 * 0.5;
        assert!((slow.time_s(Op::AllReduce, 4, 1e8) - want).abs() < 1e-9);
        for n in [1, 2, 4, 8, 16] {
            assert!(omgs_network_check(n).is_ok(), "{n}");
        }
        for n in [3, 12, 32, 64] {
            let e = omgs_network_check(n).unwrap_err();
            assert!(
                e.contains(&format!("not {n}")) && e.contains("2, 4, 8, 16"),
                "{e}"
            );
        }
        assert!(net.describe().contains("omgs-1gbe"));
        // On its own network the validation's all-gather points are the paper's.
        let dev = DeviceCosts::preset("p102-100").unwrap();
        for r in omgs_validation(&net, &dev).iter().filter(|r| r.workers > 1) {
            assert!((r.ours_over_published - 1.0).abs() < 1e-12, "{r:?}");
        }
    }

    #[test]
    fn validation_rows_put_ours_beside_the_papers() {
        let net = super::super::network::Analytic::preset("1gbe").unwrap();
        let dev = DeviceCosts::preset("p102-100").unwrap();
        let rows = omgs_validation(&net, &dev);
        assert_eq!(rows.len(), 4 * ALLGATHER_ELEMS.len() + TOPK_ELEMS.len());
        for r in &rows {
            assert!(r.ours_s > 0.0 && r.published_s > 0.0, "{r:?}");
            assert!((r.ours_over_published - r.ours_s / r.published_s).abs() < 1e-12);
        }
    }

    /// The all-reduce model's link as an analytic network, written again here.
    fn omgs_link(alpha_x: f64, beta_x: f64, gamma: f64) -> super::super::network::Analytic {
        super::super::network::Analytic::new(
            "link",
            super::super::network::Link {
                alpha_s: 4.0 * 0.436e-3 * alpha_x,
                beta_s_per_byte: 9e-9 * beta_x,
                gamma_s_per_byte: gamma,
            },
        )
    }

    /// What the paper does not model goes to the all-reduce model's link (scaled alike):
    /// an all-gather at a world size off the table, our ring, the parameter server's
    /// patterns, the reduction; `with_gamma` changes the reduction and nothing else.
    #[test]
    fn operations_the_paper_does_not_model_use_its_all_reduce_link() {
        use super::super::network::GAMMA_S_PER_BYTE;
        let net = OmgsNetwork::new(2.0, 0.5);
        let link = omgs_link(2.0, 0.5, GAMMA_S_PER_BYTE);
        for (op, n) in [
            (Op::AllGather, 3),
            (Op::Ring, 4),
            (Op::PsReduceBcast, 4),
            (Op::PsGatherBcast, 8),
        ] {
            let (got, want) = (net.time_s(op, n, 1e6), link.time_s(op, n, 1e6));
            assert!(
                want > 0.0 && (got - want).abs() < 1e-15,
                "{op:?} at {n}: {got} {want}"
            );
        }
        assert!((net.reduce_s(1e6) - 1e6 * GAMMA_S_PER_BYTE).abs() < 1e-18);
        let g = net.with_gamma(1e-9);
        assert!((g.reduce_s(1e6) - 1e-3).abs() < 1e-15);
        // the table and the all-reduce model stay
        assert_eq!(
            g.time_s(Op::AllGather, 16, 8000.0),
            net.time_s(Op::AllGather, 16, 8000.0)
        );
        assert_eq!(
            g.time_s(Op::AllReduce, 4, 1e8),
            net.time_s(Op::AllReduce, 4, 1e8)
        );
        let ring = omgs_link(2.0, 0.5, 1e-9).time_s(Op::Ring, 4, 1e6);
        assert!((g.time_s(Op::Ring, 4, 1e6) - ring).abs() < 1e-15);
        assert_eq!(g.describe(), net.describe());
    }

    /// The description names the multipliers only when they are not 1.
    #[test]
    fn the_description_names_the_multipliers_only_when_scaled() {
        let one = OmgsNetwork::new(1.0, 1.0).describe();
        assert!(
            one.starts_with("preset omgs-1gbe: ") && !one.contains("alpha x"),
            "{one}"
        );
        let scaled = OmgsNetwork::new(2.0, 1.0).describe();
        assert!(scaled.ends_with(" (alpha x2, beta x1)"), "{scaled}");
        let scaled = OmgsNetwork::new(1.0, 0.5).describe();
        assert!(scaled.ends_with(" (alpha x1, beta x0.5)"), "{scaled}");
    }

    /// `|x|` (one read, one write) then top-k of `ceil(0.001 d)` unsorted.
    #[test]
    fn topk_kernels_are_abs_then_an_unsorted_topk_of_a_thousandth() {
        for (d, k) in [(1500, 2), (100, 1), (1_000_000, 1000)] {
            let mut want = vec![ew("|x|", d, 1, 1)];
            torch_topk(&mut |kn| want.push(kn), d, k, false);
            assert_eq!(topk_kernels(d), want, "d {d}");
        }
    }

    /// Every point by hand over a network whose all-gather costs 1 s per byte: ours is
    /// two all-gathers of 4x bytes (8x s), the paper's `(a + 4 b x P) 2`; the top-k
    /// points at one worker, ours the device's time of [`topk_kernels`].
    #[test]
    fn validation_points_by_hand() {
        struct PerByte;
        impl CollectiveCost for PerByte {
            fn time_s(&self, _op: Op, _n: usize, m: f64) -> f64 {
                m
            }
            fn reduce_s(&self, _bytes: f64) -> f64 {
                0.0
            }
            fn with_gamma(&self, _g: f64) -> Box<dyn CollectiveCost> {
                Box::new(PerByte)
            }
            fn describe(&self) -> String {
                "per byte".into()
            }
        }
        let dev = DeviceCosts::preset("p102-100").unwrap();
        let rows = omgs_validation(&PerByte, &dev);
        let mut i = 0;
        for (p, a, b) in [
            (2, 1.6e-3, 1.0e-8),
            (4, 2.7e-3, 1.3e-8),
            (8, 4.0e-3, 1.5e-8),
            (16, 1.1e-2, 1.7e-8),
        ] {
            for x in [1_000, 25_000, 138_000] {
                let r = &rows[i];
                i += 1;
                let xf = x as f64;
                let published = (a + b * xf * p as f64 * 4.0) * 2.0;
                assert_eq!((r.workers, r.elements), (p, x));
                assert!((r.published_s - published).abs() < 1e-15, "{r:?}");
                assert_eq!(r.ours_s, 8.0 * xf, "{r:?}");
                assert!(
                    (r.ours_over_published - 8.0 * xf / published).abs() < 1e-9,
                    "{r:?}"
                );
                assert_eq!(r.ours_source, "per byte");
                assert!(r
                    .published_source
                    .ends_with("allgather_perf_model (GbE_multi_p_ab)"));
            }
        }
        for d in [1usize << 20, 1 << 23, 1 << 25, 1 << 27] {
            let r = &rows[i];
            i += 1;
            let df = d as f64;
            assert_eq!((r.workers, r.elements), (1, d));
            assert!(
                (r.published_s - 2.18896957e-10 * df * df.log2()).abs() < 1e-12,
                "{r:?}"
            );
            assert_eq!(r.ours_s, dev.kernels_s(&topk_kernels(d)));
            assert_eq!(r.ours_source, dev.describe());
        }
        assert_eq!(i, rows.len());
    }
}
