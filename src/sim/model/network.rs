//! Network cost models of the simulator: what one collective of `n` workers costs.
//!
//! Two backends behind one trait ([`CollectiveCost`]):
//! - [`Analytic`]: a link model (latency `alpha`, time per byte `beta`, reduction time
//!   per byte `gamma`) and the textbook costs of MPICH's collective algorithms (Thakur,
//!   Rabenseifner & Gropp, "Optimization of Collective Communication Operations in
//!   MPICH", IJHPCA 2005, §2 and §4), choosing the cheapest algorithm like MPICH's
//!   size-based switch does. It works for any `n` (1024 simulated workers).
//! - [`Fitted`]: one cost model per collective fitted from micro_comm.csv
//!   ([`crate::netmodel::CommModels`]: one alpha-beta line, or two or three regimes where the
//!   network's cost per byte changes with the message size); valid only at the world size
//!   that was measured.
//!
//! All sizes are **bytes per rank**: the vector each rank all-reduces, or each rank's
//! own contribution to an all-gather (as micro_comm.csv's `bytes`).
//!
//! # Presets
//! | name       | alpha (latency per message) | bandwidth per link | basis |
//! |------------|----------------------------:|-------------------:|-------|
//! | `1gbe`     | 50 us | 0.125 GB/s (1 Gbit/s) | kernel TCP over 1 GbE: 25-60 us small-message MPI latency (OSU latency over TCP), line rate 1 Gbit/s |
//! | `10gbe`    | 20 us | 1.25 GB/s (10 Gbit/s) | kernel TCP over 10 GbE: 10-30 us MPI latency, line rate |
//! | `25gbe`    | 10 us | 3.125 GB/s (25 Gbit/s) | TCP / RoCE-less 25 GbE datacentre NICs: about 10 us, line rate |
//! | `100gb-ib` | 1.5 us | 12.5 GB/s (100 Gbit/s EDR InfiniBand) | OSU latency over EDR IB with MPI: 1-2 us; 100 Gbit/s signalling (about 12 GB/s achieved) |
//!
//! | `omgs-1gbe` | per world size (1.6-11 ms all-gather, 1.744 ms all-reduce) | measured models | OMGS-SGD's own 16-GPU cluster, its published all-gather and all-reduce models (HKBU-HPML/OMGS-SGD utils.py, commit ac10b98; `super::published::OmgsNetwork`); world sizes 2, 4, 8, 16 only |
//!
//! Every preset uses `gamma` = 0.25 ns/B for the element-wise fp32 reduction (about
//! 4 GB/s of summed input on one CPU core, memory-bound) and assumes one full-duplex link
//! per worker to a non-blocking switch (no contention: the ring and recursive-doubling
//! formulas below hold as written).

use crate::netmodel::{AlphaBeta, CommFit, CommModels};
use std::fmt;

/// A collective operation the engine's exchange issues (comm/exchange.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// MPI_Allreduce of `m` bytes per rank (sum).
    AllReduce,
    /// MPI_Allgather(v) of `m` bytes contributed by each rank (`n * m` received).
    AllGather,
    /// Our ring all-reduce over MPI_Sendrecv (comm/ring.rs; Marsit's merged bits).
    Ring,
    /// MPI_Reduce to rank 0 followed by MPI_Bcast of the `m`-byte result (PS of sums).
    PsReduceBcast,
    /// MPI_Gatherv to rank 0 followed by MPI_Bcast of the `n * m`-byte concatenation.
    PsGatherBcast,
}

impl Op {
    /// The micro_comm.csv `collective` that measures this operation, if any.
    pub fn micro_comm_name(self) -> Option<&'static str> {
        match self {
            Op::AllReduce => Some("allreduce"),
            Op::AllGather => Some("allgather"),
            Op::Ring => Some("ring-allreduce"),
            Op::PsReduceBcast | Op::PsGatherBcast => None,
        }
    }
}

/// Cost of one collective among `n` workers with `m` bytes per rank (s).
pub trait CollectiveCost: Send + Sync {
    fn time_s(&self, op: Op, n: usize, m_bytes: f64) -> f64;
    /// Time to sum `bytes` of fp32 locally (the all-gather-as-all-reduce mode sums
    /// `n - 1` received copies; Marsit's ring merges chunks).
    fn reduce_s(&self, bytes: f64) -> f64;
    /// Where the numbers come from (`preset 10gbe`, `fitted micro_comm.csv n=4`).
    fn describe(&self) -> String;
    /// This network with the reduction arithmetic at `gamma` s/B: a device's, when NCCL
    /// reduces on the GPU (`--compress-on device`). A fitted collective keeps its
    /// measured time, which includes the reduction as it ran.
    fn with_gamma(&self, gamma_s_per_byte: f64) -> Box<dyn CollectiveCost>;
}

/// A link: per-message latency, per-byte transfer time, per-byte reduction time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Link {
    pub alpha_s: f64,
    pub beta_s_per_byte: f64,
    pub gamma_s_per_byte: f64,
}

/// Reduction cost per byte used by every preset (one core, fp32 add, memory-bound).
pub const GAMMA_S_PER_BYTE: f64 = 0.25e-9;

/// The named network presets: (name, alpha s, GB/s per link). See the module docs.
pub const PRESETS: &[(&str, f64, f64)] = &[
    ("1gbe", 50e-6, 0.125),
    ("10gbe", 20e-6, 1.25),
    ("25gbe", 10e-6, 3.125),
    ("100gb-ib", 1.5e-6, 12.5),
];

/// Every `--network` name: the line-rate presets ([`PRESETS`]) and the published
/// cluster of OMGS-SGD (`omgs-1gbe`, [`super::published::OmgsNetwork`]).
pub fn preset_names() -> Vec<&'static str> {
    let mut v: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
    v.push(super::published::OMGS_NETWORK);
    v
}

impl Link {
    pub fn from_gbps(alpha_s: f64, gbps: f64) -> Link {
        Link {
            alpha_s,
            beta_s_per_byte: if gbps > 0.0 { 1.0 / (gbps * 1e9) } else { 0.0 },
            gamma_s_per_byte: GAMMA_S_PER_BYTE,
        }
    }

    /// A named preset (`1gbe`, `10gbe`, `25gbe`, `100gb-ib`).
    pub fn preset(name: &str) -> Option<Link> {
        PRESETS
            .iter()
            .find(|p| p.0 == name)
            .map(|&(_, a, g)| Link::from_gbps(a, g))
    }
}

/// `ceil(log2 n)` (0 for n <= 1): rounds of recursive doubling / binomial trees.
pub fn log2_ceil(n: usize) -> f64 {
    if n <= 1 {
        0.0
    } else {
        (usize::BITS - (n - 1).leading_zeros()) as f64
    }
}

/// Ring all-reduce (reduce-scatter + all-gather): `2(n-1)α + 2(n-1)/n·mβ + (n-1)/n·mγ`
/// (Thakur et al. 2005, §4.4; Patarasuk & Yuan 2009).
pub fn ring_allreduce_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    2.0 * k * l.alpha_s
        + 2.0 * k / n as f64 * m * l.beta_s_per_byte
        + k / n as f64 * m * l.gamma_s_per_byte
}

/// Recursive-doubling all-reduce: `⌈log2 n⌉(α + mβ + mγ)` (Thakur et al. 2005, §4.4,
/// short messages).
pub fn recursive_doubling_allreduce_s(l: &Link, n: usize, m: f64) -> f64 {
    log2_ceil(n) * (l.alpha_s + m * l.beta_s_per_byte + m * l.gamma_s_per_byte)
}

/// Rabenseifner's all-reduce (recursive-halving reduce-scatter + recursive-doubling
/// all-gather): `2⌈log2 n⌉α + 2(n-1)/n·mβ + (n-1)/n·mγ` (Thakur et al. 2005, §4.4,
/// long messages).
pub fn rabenseifner_allreduce_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let f = (n - 1) as f64 / n as f64;
    2.0 * log2_ceil(n) * l.alpha_s + 2.0 * f * m * l.beta_s_per_byte + f * m * l.gamma_s_per_byte
}

/// MPICH's all-reduce: the cheapest of recursive doubling, Rabenseifner and ring.
pub fn allreduce_s(l: &Link, n: usize, m: f64) -> f64 {
    ring_allreduce_s(l, n, m)
        .min(recursive_doubling_allreduce_s(l, n, m))
        .min(rabenseifner_allreduce_s(l, n, m))
}

/// Ring all-gather of `m` bytes per rank: `(n-1)α + (n-1)/n·(n·m)β` (Thakur et al. 2005, §4.1).
pub fn ring_allgather_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let k = (n - 1) as f64;
    k * l.alpha_s + k * m * l.beta_s_per_byte
}

/// Recursive-doubling all-gather: `⌈log2 n⌉α + (n-1)/n·(n·m)β` (Thakur et al. 2005, §4.1).
pub fn recursive_doubling_allgather_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    log2_ceil(n) * l.alpha_s + (n - 1) as f64 * m * l.beta_s_per_byte
}

/// MPICH's all-gather: the cheaper of ring and recursive doubling.
pub fn allgather_s(l: &Link, n: usize, m: f64) -> f64 {
    ring_allgather_s(l, n, m).min(recursive_doubling_allgather_s(l, n, m))
}

/// Our ring all-reduce over point-to-point (comm/ring.rs): `2(n-1)` Sendrecv steps of
/// one `⌈m/n⌉` chunk each, plus `n-1` merges of a chunk: `2(n-1)(α + m/n·β) + (n-1)/n·mγ`.
pub fn our_ring_s(l: &Link, n: usize, m: f64) -> f64 {
    ring_allreduce_s(l, n, m)
}

/// Binomial-tree broadcast `⌈log2 n⌉(α + mβ)`, or scatter + all-gather
/// `(⌈log2 n⌉ + n - 1)α + 2(n-1)/n·mβ` for long messages, whichever is cheaper
/// (Thakur et al. 2005, §4.2).
pub fn bcast_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let lg = log2_ceil(n);
    let f = (n - 1) as f64 / n as f64;
    let binomial = lg * (l.alpha_s + m * l.beta_s_per_byte);
    let scatter_ag = (lg + (n - 1) as f64) * l.alpha_s + 2.0 * f * m * l.beta_s_per_byte;
    binomial.min(scatter_ag)
}

/// Binomial-tree reduce `⌈log2 n⌉(α + mβ + mγ)`, or Rabenseifner's reduce-scatter +
/// gather `2⌈log2 n⌉α + 2(n-1)/n·mβ + (n-1)/n·mγ`, whichever is cheaper (Thakur et al.
/// 2005, §4.5).
pub fn reduce_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    let lg = log2_ceil(n);
    let f = (n - 1) as f64 / n as f64;
    let binomial = lg * (l.alpha_s + m * (l.beta_s_per_byte + l.gamma_s_per_byte));
    let rs_gather =
        2.0 * lg * l.alpha_s + 2.0 * f * m * l.beta_s_per_byte + f * m * l.gamma_s_per_byte;
    binomial.min(rs_gather)
}

/// Binomial gather of `m` bytes per rank to the root: `⌈log2 n⌉α + (n-1)·mβ`
/// (Thakur et al. 2005, §4.3).
pub fn gather_s(l: &Link, n: usize, m: f64) -> f64 {
    if n <= 1 {
        return 0.0;
    }
    log2_ceil(n) * l.alpha_s + (n - 1) as f64 * m * l.beta_s_per_byte
}

/// The analytic backend: a [`Link`] and MPICH's algorithms.
#[derive(Clone, Debug, PartialEq)]
pub struct Analytic {
    pub link: Link,
    pub name: String,
}

impl Analytic {
    pub fn new(name: impl Into<String>, link: Link) -> Analytic {
        Analytic {
            link,
            name: name.into(),
        }
    }

    /// A named preset, or `None` (see [`PRESETS`]).
    pub fn preset(name: &str) -> Option<Analytic> {
        Link::preset(name).map(|l| Analytic::new(format!("preset {name}"), l))
    }
}

impl CollectiveCost for Analytic {
    fn time_s(&self, op: Op, n: usize, m: f64) -> f64 {
        let l = &self.link;
        match op {
            Op::AllReduce => allreduce_s(l, n, m),
            Op::AllGather => allgather_s(l, n, m),
            Op::Ring => our_ring_s(l, n, m),
            Op::PsReduceBcast => reduce_s(l, n, m) + bcast_s(l, n, m),
            Op::PsGatherBcast => gather_s(l, n, m) + bcast_s(l, n, n as f64 * m),
        }
    }
    fn reduce_s(&self, bytes: f64) -> f64 {
        bytes * self.link.gamma_s_per_byte
    }
    fn with_gamma(&self, gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        let mut a = self.clone();
        a.link.gamma_s_per_byte = gamma_s_per_byte;
        Box::new(a)
    }
    fn describe(&self) -> String {
        let l = &self.link;
        format!(
            "{} (alpha {:.3e} s, {:.4} GB/s per link)",
            self.name,
            l.alpha_s,
            if l.beta_s_per_byte > 0.0 {
                1e-9 / l.beta_s_per_byte
            } else {
                f64::INFINITY
            }
        )
    }
}

/// Fitted backend: the cost model micro_comm.csv gives for each collective at the
/// measured world size ([`CommFit`]: one to three alpha-beta regimes). Operations without a
/// measurement there (the PS patterns), and other world sizes, use an analytic link
/// derived from the fitted all-reduce's line at the message's size
/// ([`CommFit::local_line`]) by inverting the ring formula: `alpha_link = alpha /
/// (2(n-1))` (at least 0: an upper regime's intercept can be negative),
/// `beta_link = beta / (2(n-1)/n)`.
#[derive(Clone, Debug)]
pub struct Fitted {
    pub models: CommModels,
    pub world_size: usize,
    pub source: String,
    pub gamma_s_per_byte: f64,
}

/// A world size or operation without a fitted model.
#[derive(Clone, Debug, PartialEq)]
pub struct NoModel(pub String);

impl fmt::Display for NoModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Fitted {
    /// Fitted models for `world_size`; an error when micro_comm.csv has no all-reduce or
    /// all-gather fit at that size (fits do not extrapolate to other world sizes: use a
    /// preset or `--alpha/--bandwidth` there).
    pub fn new(
        models: CommModels,
        world_size: usize,
        source: impl Into<String>,
    ) -> Result<Fitted, NoModel> {
        let has = models.keys().iter().any(|(_, n)| *n == world_size);
        if !has && models.get("allreduce", world_size).is_none() {
            let sizes: Vec<String> = models
                .keys()
                .iter()
                .map(|(c, n)| format!("{c}@{n}"))
                .collect();
            return Err(NoModel(format!(
                "no fitted collective model at world size {world_size} (fitted: {}); fitted models hold only for the measured world size, use a network preset for others",
                if sizes.is_empty() { "none".to_string() } else { sizes.join(", ") }
            )));
        }
        Ok(Fitted {
            models,
            world_size,
            source: source.into(),
            gamma_s_per_byte: GAMMA_S_PER_BYTE,
        })
    }

    fn model(&self, name: &str) -> Option<CommFit> {
        self.models.get(name, self.world_size).copied()
    }

    /// The link implied by the fitted all-reduce at messages of `m_bytes` per rank (for
    /// operations never measured and other world sizes).
    pub fn derived_link(&self, m_bytes: f64) -> Link {
        let n = self.world_size.max(2) as f64;
        let ab = self
            .model("allreduce")
            .or_else(|| self.model("ring-allreduce"))
            .map_or(AlphaBeta::new(0.0, 0.0), |f| f.local_line(m_bytes));
        Link {
            alpha_s: (ab.alpha_s / (2.0 * (n - 1.0))).max(0.0),
            beta_s_per_byte: ab.beta_s_per_byte / (2.0 * (n - 1.0) / n),
            gamma_s_per_byte: self.gamma_s_per_byte,
        }
    }
}

impl CollectiveCost for Fitted {
    fn time_s(&self, op: Op, n: usize, m: f64) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        // Fits hold at the measured size only; other sizes go through the derived link.
        if n == self.world_size {
            if let Some(fit) = op.micro_comm_name().and_then(|c| self.model(c)) {
                return fit.time_s(m);
            }
        }
        Analytic::new("derived", self.derived_link(m)).time_s(op, n, m)
    }
    fn reduce_s(&self, bytes: f64) -> f64 {
        bytes * self.gamma_s_per_byte
    }
    fn with_gamma(&self, gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        let mut f = self.clone();
        f.gamma_s_per_byte = gamma_s_per_byte;
        Box::new(f)
    }
    fn describe(&self) -> String {
        format!("fitted {} (world size {})", self.source, self.world_size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 + 1e-9 * b.abs()
    }

    #[test]
    fn presets_exist_and_have_line_rates() {
        let l = Link::preset("1gbe").unwrap();
        assert!(close(l.alpha_s, 50e-6));
        assert!(close(l.beta_s_per_byte, 8e-9));
        assert!(
            Link::preset("100gb-ib").unwrap().beta_s_per_byte
                < Link::preset("25gbe").unwrap().beta_s_per_byte
        );
        assert!(Link::preset("10gbe").is_some() && Link::preset("nope").is_none());
    }

    #[test]
    fn ring_and_tree_formulas_by_hand() {
        let l = Link {
            alpha_s: 1e-5,
            beta_s_per_byte: 1e-9,
            gamma_s_per_byte: 0.0,
        };
        // n = 4, m = 1 MB: ring = 2*3*1e-5 + 2*3/4*1e6*1e-9 = 6e-5 + 1.5e-3.
        assert!(close(ring_allreduce_s(&l, 4, 1e6), 6e-5 + 1.5e-3));
        // Recursive doubling = log2(4) * (1e-5 + 1e-3) = 2.02e-3.
        assert!(close(
            recursive_doubling_allreduce_s(&l, 4, 1e6),
            2.0 * (1e-5 + 1e-3)
        ));
        // Rabenseifner = 2*2*1e-5 + 1.5e-3: cheapest for long messages.
        assert!(close(rabenseifner_allreduce_s(&l, 4, 1e6), 4e-5 + 1.5e-3));
        assert!(close(allreduce_s(&l, 4, 1e6), 4e-5 + 1.5e-3));
        // Short message (8 B): recursive doubling = 2 * (1e-5 + 8e-9) wins.
        assert!(close(allreduce_s(&l, 4, 8.0), 2.0 * (1e-5 + 8e-9)));
        // Non power of two: ceil(log2 5) = 3.
        assert_eq!(log2_ceil(5), 3.0);
        assert_eq!(log2_ceil(1024), 10.0);
        assert_eq!(log2_ceil(1), 0.0);
        // All-gather, m = 1000 B per rank, n = 8: ring 7e-5 + 7e-6; RD 3e-5 + 7e-6.
        assert!(close(ring_allgather_s(&l, 8, 1000.0), 7e-5 + 7e-6));
        assert!(close(allgather_s(&l, 8, 1000.0), 3e-5 + 7e-6));
        // One worker: nothing to do.
        assert_eq!(allreduce_s(&l, 1, 1e6), 0.0);
        assert_eq!(allgather_s(&l, 1, 1e6), 0.0);
        // PS of sums, n = 2, m = 1e6: reduce min(1*(1e-5+1e-3), 2e-5 + 1e-3) + bcast min(1e-5+1e-3, 2e-5+1e-3).
        let a = Analytic::new("t", l);
        assert!(close(
            a.time_s(Op::PsReduceBcast, 2, 1e6),
            2.0 * (1e-5 + 1e-3)
        ));
        // PS of gathers, n = 2, m = 1e6: gather 1e-5 + 1e-3, bcast of 2e6 B: min(1e-5 + 2e-3, 2e-5 + 2e-3).
        assert!(close(
            a.time_s(Op::PsGatherBcast, 2, 1e6),
            1e-5 + 1e-3 + 1e-5 + 2e-3
        ));
    }

    #[test]
    fn every_allreduce_pays_its_reduction_by_hand() {
        // gamma 0.5 ns/B, n = 4, m = 1 MB (Thakur et al. 2005, §4.4, written again):
        // recursive doubling log2(4)(a + mb + mg) = 2(1e-5 + 1e-3 + 5e-4);
        // Rabenseifner 2 log2(4) a + 2(3/4) mb + (3/4) mg = 4e-5 + 1.5e-3 + 3.75e-4.
        let l = Link {
            alpha_s: 1e-5,
            beta_s_per_byte: 1e-9,
            gamma_s_per_byte: 0.5e-9,
        };
        let rd = 2.0 * (1e-5 + 1e-3 + 5e-4);
        let rab = 4e-5 + 1.5e-3 + 3.75e-4;
        assert!(close(recursive_doubling_allreduce_s(&l, 4, 1e6), rd));
        assert!(close(rabenseifner_allreduce_s(&l, 4, 1e6), rab));
        // Ring 2*3*1e-5 + 1.5e-3 + 3.75e-4: Rabenseifner is the cheapest.
        assert!(close(ring_allreduce_s(&l, 4, 1e6), 6e-5 + 1.5e-3 + 3.75e-4));
        assert!(close(allreduce_s(&l, 4, 1e6), rab));
    }

    #[test]
    fn a_link_of_zero_bandwidth_costs_nothing_per_byte() {
        // `from_gbps`: 1 / (GB/s x 1e9) s per byte, 0 where no rate is given.
        let l = Link::from_gbps(2e-6, 0.0);
        assert_eq!(l.beta_s_per_byte, 0.0);
        assert_eq!((l.alpha_s, l.gamma_s_per_byte), (2e-6, 0.25e-9));
        assert!(close(Link::from_gbps(0.0, 2.0).beta_s_per_byte, 0.5e-9));
        assert_eq!(
            preset_names(),
            ["1gbe", "10gbe", "25gbe", "100gb-ib", "omgs-1gbe"]
        );
    }

    #[test]
    fn reduction_cost_enters_ring() {
        let l = Link {
            alpha_s: 0.0,
            beta_s_per_byte: 0.0,
            gamma_s_per_byte: 1e-9,
        };
        assert!(close(our_ring_s(&l, 4, 4e6), 3e6 * 1e-9));
    }

    #[test]
    fn fitted_network_prices_both_regimes_of_a_shaped_link() {
        // A micro-comm sweep over a tbf-shaped 1 Gbit link (docs/performance.md, "Emulated
        // network"): up to 16 KiB 15 us + 0.2 ns/B, from 32 KiB 8 ns/B.
        let t = |b: f64| {
            if b <= 16384.0 {
                15e-6 + 0.2e-9 * b
            } else {
                8e-9 * b
            }
        };
        let dir = std::env::temp_dir().join(format!("gradcomp-net-two-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("micro_comm.csv");
        let mut body = "schema_version,collective,world_size,bytes,median_s\n".to_string();
        for i in 0..21 {
            let b = (4u64 << i) as f64;
            for coll in ["allreduce", "ring-allreduce"] {
                body += &format!("1,{coll},2,{b},{}\n", t(b));
            }
        }
        std::fs::write(&p, body).unwrap();
        let f = Fitted::new(CommModels::from_micro_comm_csv(&p).unwrap(), 2, "x").unwrap();
        // A compressed method's few KB and a dense 256 KiB bucket, as e2e sends them.
        for op in [Op::AllReduce, Op::Ring] {
            for b in [2048.0, 262144.0] {
                let got = f.time_s(op, 2, b);
                assert!(
                    (got - t(b)).abs() / t(b) < 0.02,
                    "{op:?} {b} B: {got:.3e} s"
                );
            }
        }
        // The PS link comes from the regime at the message's size: the lower one's startup
        // for small messages, the link rate (alpha clamped at 0) for large ones.
        let small = f.derived_link(2048.0);
        assert!(
            (small.alpha_s - 15e-6 / 2.0).abs() < 0.02 * 15e-6,
            "{small:?}"
        );
        let large = f.derived_link(1e6);
        assert!(large.alpha_s >= 0.0, "{large:?}");
        assert!(
            (large.beta_s_per_byte - 8e-9).abs() < 0.02 * 8e-9,
            "{large:?}"
        );
        assert!(f.time_s(Op::PsReduceBcast, 2, 1e6) > f.time_s(Op::PsReduceBcast, 2, 2048.0));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// All-reduce (60 us + 1.5 ns/B) and all-gather (30 us + 3 ns/B) fitted at 4 ranks.
    fn fits_at_4() -> CommModels {
        let mut m = CommModels::new();
        m.insert("allreduce", 4, AlphaBeta::new(6e-5, 1.5e-9));
        m.insert("allgather", 4, AlphaBeta::new(3e-5, 3e-9));
        m
    }

    #[test]
    fn fitted_uses_models_at_measured_size_only() {
        let m = fits_at_4();
        let f = Fitted::new(m.clone(), 4, "x").unwrap();
        assert!(close(f.time_s(Op::AllReduce, 4, 1e6), 6e-5 + 1.5e-3));
        assert!(close(f.time_s(Op::AllGather, 4, 1e3), 3e-5 + 3e-6));
        // Derived link: alpha 1e-5, beta 1e-9: ring at 4 workers reproduces the fit.
        let l = f.derived_link(1e6);
        assert!(close(l.alpha_s, 1e-5) && close(l.beta_s_per_byte, 1e-9));
        assert!(f.time_s(Op::PsReduceBcast, 4, 1e6) > 0.0);
        assert!(Fitted::new(m, 8, "x").is_err());
    }

    /// A fitted network's reduction is `bytes x gamma` (the gamma of `with_gamma`), its
    /// description names the source and the world size, and a world size without a fit
    /// is refused with a message naming the fits there are.
    #[test]
    fn fitted_reduction_description_and_refusal_by_hand() {
        let m = fits_at_4();
        let f = Fitted::new(m.clone(), 4, "run1/micro_comm.csv").unwrap();
        // 4e6 bytes x 2.5e-10 s/B = 1e-3 s.
        assert!(close(f.with_gamma(2.5e-10).reduce_s(4e6), 1e-3));
        assert!(close(f.with_gamma(1e-9).reduce_s(3.0), 3e-9));
        assert_eq!(f.describe(), "fitted run1/micro_comm.csv (world size 4)");
        let e = Fitted::new(m, 8, "x").unwrap_err().to_string();
        assert!(
            e.starts_with("no fitted collective model at world size 8 (fitted: ")
                && e.contains("allreduce@4")
                && e.contains("allgather@4"),
            "{e}"
        );
    }
}
