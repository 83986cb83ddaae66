//! Nodes of several ranks sharing one NIC: a [`CollectiveCost`] that wraps the
//! inter-node network (any backend, preset or fitted: its link is the node's NIC) with
//! `g` ranks per node joined by an intra-node link ([`IntraLink`]: `pcie3`, `nvlink`, or
//! a latency and bandwidth of one's own). docs/performance.md, "Topology", has the
//! formulas with their sources; in short, for `n = N·g` ranks on `N` nodes, ranks placed
//! node by node (block placement: Slurm's default distribution, Open MPI's `--map-by
//! slot`):
//!
//! - **all-reduce**: the cheaper of (a) NCCL's ring over all `n` ranks, node-contiguous:
//!   one ring edge per direction crosses each NIC, the others are intra-node hops, and
//!   each of the `2(n-1)` steps takes as long as its slowest hop; (b) the hierarchical
//!   all-reduce of MPICH's SMP-aware collectives: intra-node reduce, all-reduce among the
//!   `N` node leaders over the wrapped network, intra-node broadcast.
//! - **all-gather**: the cheaper of (a) the same ring, `n-1` steps of one rank's piece;
//!   (b) intra-node gather, all-gather among the leaders of the node's `g·m` bytes (every
//!   rank's data crosses its node's NIC, which the node's `g` ranks share), intra-node
//!   broadcast of all `n·m` bytes.
//! - **PS patterns**: the same hierarchy (intra-node reduce or gather to the node leader,
//!   the wrapped network's pattern among the leaders with `m` or `g·m` bytes per node,
//!   intra-node broadcast).
//! - **our ring** (Op::Ring, comm/ring.rs): (a), a ring in rank order.
//!
//! One NIC hop of `c` bytes is the wrapped network's all-gather of 2 ranks
//! (`α + cβ` for a preset link; the fitted exchange of two ranks otherwise), so any
//! backend serves. With `g = 1` every cost is the wrapped network's, exactly; on one node
//! (`n ≤ g`) the wrapped network is not used and the ranks run MPICH's flat algorithms
//! over the intra-node link. The reduction arithmetic ([`CollectiveCost::reduce_s`]) is
//! the wrapped network's, also for the intra-node reductions.

use super::network::{self, Analytic, CollectiveCost, Link, Op};

/// Intra-node link presets: (name, alpha s, GB/s per direction, basis). Alpha is NCCL's
/// own per-hop ring latency for its low-latency protocol (src/graph/tuning.cc `hwLat`,
/// Ring/LL: NVLink 0.6 us, PCI 1.0 us; NET 2.7 us). See docs/performance.md, "Topology".
pub const INTRA_PRESETS: &[(&str, f64, f64, &str)] = &[
    (
        "pcie3",
        1.0e-6,
        12.0,
        "PCIe 3.0 x16: 15.75 GB/s per direction (8 GT/s x 16 lanes, 128b/130b), about 12 GB/s achieved by GPU copies; NCCL's PCI hop latency",
    ),
    (
        "nvlink",
        0.6e-6,
        24.0,
        "NVLink 2 (V100 SXM2, DGX-1 hybrid cube-mesh): 25 GB/s per link and direction, 24 GB/s achieved per link; NCCL's NVLink hop latency",
    ),
];

/// The default intra-node link (`--intra-link`): the slower preset, so a hierarchy is not
/// priced cheaper than the hardware unless NVLink is asked for.
pub const DEFAULT_INTRA: &str = "pcie3";

/// An intra-node link: a preset or `ALPHA_US:GBPS`.
#[derive(Clone, Debug, PartialEq)]
pub struct IntraLink {
    /// `pcie3`, `nvlink`, or the spec as given (`3:20`).
    pub name: String,
    pub alpha_s: f64,
    /// GB/s per direction.
    pub gbps: f64,
}

impl Default for IntraLink {
    fn default() -> IntraLink {
        IntraLink::parse(DEFAULT_INTRA).expect("the default intra-node preset exists")
    }
}

impl IntraLink {
    /// A preset name (`pcie3`, `nvlink`) or `ALPHA_US:GBPS` (latency in microseconds,
    /// bandwidth per direction in GB/s, e.g. `3:20`). The error says what is allowed.
    pub fn parse(s: &str) -> Result<IntraLink, String> {
        let s = s.trim();
        if let Some(&(name, a, g, _)) = INTRA_PRESETS.iter().find(|p| p.0 == s) {
            return Ok(IntraLink {
                name: name.into(),
                alpha_s: a,
                gbps: g,
            });
        }
        let allowed = format!(
            "allowed: {}, or ALPHA_US:GBPS (latency in us, GB/s per direction, e.g. 3:20)",
            INTRA_PRESETS
                .iter()
                .map(|p| p.0)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let Some((a, g)) = s.split_once(':') else {
            return Err(format!(
                "unknown link '{}'; {allowed}",
                crate::units::clip(s)
            ));
        };
        let (a, g): (f64, f64) = match (a.trim().parse(), g.trim().parse()) {
            (Ok(a), Ok(g)) => (a, g),
            _ => {
                return Err(format!(
                    "'{}' is not ALPHA_US:GBPS; {allowed}",
                    crate::units::clip(s)
                ))
            }
        };
        if !(a.is_finite() && a >= 0.0 && g.is_finite() && g > 0.0) {
            return Err(format!(
                "'{}': the latency must be >= 0 us and the bandwidth > 0 GB/s; {allowed}",
                crate::units::clip(s)
            ));
        }
        Ok(IntraLink {
            name: s.into(),
            alpha_s: a * 1e-6,
            gbps: g,
        })
    }
}

/// The inter-node network with `ranks_per_node` ranks on every node (module docs).
pub struct Topology {
    inner: Box<dyn CollectiveCost>,
    ranks_per_node: usize,
    intra: IntraLink,
    /// The intra-node link with the wrapped network's reduction cost per byte.
    link: Link,
}

impl Topology {
    /// `inner` among the nodes (its link is one node's NIC), `ranks_per_node` (>= 1)
    /// ranks on each node, joined by `intra`.
    pub fn new(
        inner: Box<dyn CollectiveCost>,
        ranks_per_node: usize,
        intra: IntraLink,
    ) -> Topology {
        let mut link = Link::from_gbps(intra.alpha_s, intra.gbps);
        // reduce_s is linear in the bytes in every backend: its cost per byte.
        link.gamma_s_per_byte = inner.reduce_s(1.0);
        Topology {
            inner,
            ranks_per_node: ranks_per_node.max(1),
            intra,
            link,
        }
    }

    pub fn ranks_per_node(&self) -> usize {
        self.ranks_per_node
    }

    /// Nodes holding `n` ranks (the last one partly filled when `g` does not divide `n`).
    pub fn nodes(&self, n: usize) -> usize {
        n.div_ceil(self.ranks_per_node)
    }

    /// One step of a node-contiguous ring with `c` bytes per hop: the slowest hop, a NIC
    /// hop (when the ring spans several nodes) or an intra-node one.
    fn ring_step_s(&self, n: usize, c: f64) -> f64 {
        let intra = self.link.alpha_s + c * self.link.beta_s_per_byte;
        if self.nodes(n) > 1 {
            intra.max(self.inner.time_s(Op::AllGather, 2, c))
        } else {
            intra
        }
    }

    /// (a) Ring all-reduce over all `n` ranks: `2(n-1)` steps of `m/n` bytes, plus the
    /// `n-1` chunk reductions of `(n-1)/n·m` bytes.
    pub fn ring_allreduce_s(&self, n: usize, m: f64) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        let k = (n - 1) as f64;
        2.0 * k * self.ring_step_s(n, m / n as f64) + self.inner.reduce_s(k / n as f64 * m)
    }

    /// (b) Hierarchical all-reduce: intra-node reduce, all-reduce among the nodes,
    /// intra-node broadcast.
    pub fn hierarchical_allreduce_s(&self, n: usize, m: f64) -> f64 {
        let g = self.ranks_per_node.min(n);
        network::reduce_s(&self.link, g, m)
            + self.inner.time_s(Op::AllReduce, self.nodes(n), m)
            + network::bcast_s(&self.link, g, m)
    }

    /// (a) Ring all-gather over all `n` ranks: `n-1` steps of one rank's `m` bytes.
    pub fn ring_allgather_s(&self, n: usize, m: f64) -> f64 {
        if n <= 1 {
            return 0.0;
        }
        (n - 1) as f64 * self.ring_step_s(n, m)
    }

    /// (b) Hierarchical all-gather: intra-node gather, all-gather of the node's `g·m`
    /// bytes among the nodes, intra-node broadcast of the `n·m` bytes.
    pub fn hierarchical_allgather_s(&self, n: usize, m: f64) -> f64 {
        let g = self.ranks_per_node.min(n);
        network::gather_s(&self.link, g, m)
            + self
                .inner
                .time_s(Op::AllGather, self.nodes(n), g as f64 * m)
            + network::bcast_s(&self.link, g, n as f64 * m)
    }
}

impl CollectiveCost for Topology {
    fn time_s(&self, op: Op, n: usize, m: f64) -> f64 {
        let g = self.ranks_per_node;
        if g == 1 {
            return self.inner.time_s(op, n, m);
        }
        if n <= 1 {
            return 0.0;
        }
        if self.nodes(n) == 1 {
            // One node: no NIC; MPICH's flat algorithms over the intra-node link.
            return Analytic::new("intra", self.link).time_s(op, n, m);
        }
        let gl = g.min(n) as f64;
        let nodes = self.nodes(n);
        let l = &self.link;
        match op {
            Op::AllReduce => self
                .ring_allreduce_s(n, m)
                .min(self.hierarchical_allreduce_s(n, m)),
            Op::AllGather => self
                .ring_allgather_s(n, m)
                .min(self.hierarchical_allgather_s(n, m)),
            Op::Ring => self.ring_allreduce_s(n, m),
            Op::PsReduceBcast => {
                network::reduce_s(l, g, m)
                    + self.inner.time_s(Op::PsReduceBcast, nodes, m)
                    + network::bcast_s(l, g, m)
            }
            Op::PsGatherBcast => {
                network::gather_s(l, g, m)
                    + self.inner.time_s(Op::PsGatherBcast, nodes, gl * m)
                    + network::bcast_s(l, g, n as f64 * m)
            }
        }
    }

    fn reduce_s(&self, bytes: f64) -> f64 {
        self.inner.reduce_s(bytes)
    }

    fn with_gamma(&self, gamma_s_per_byte: f64) -> Box<dyn CollectiveCost> {
        Box::new(Topology::new(
            self.inner.with_gamma(gamma_s_per_byte),
            self.ranks_per_node,
            self.intra.clone(),
        ))
    }
    fn describe(&self) -> String {
        if self.ranks_per_node == 1 {
            return self.inner.describe();
        }
        format!(
            "{} between nodes of {} ranks, intra-node {} (alpha {:.3e} s, {} GB/s)",
            self.inner.describe(),
            self.ranks_per_node,
            self.intra.name,
            self.intra.alpha_s,
            self.intra.gbps
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netmodel::{AlphaBeta, CommModels};
    use network::Fitted;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-15 + 1e-9 * b.abs()
    }

    const OPS: [Op; 5] = [
        Op::AllReduce,
        Op::AllGather,
        Op::Ring,
        Op::PsReduceBcast,
        Op::PsGatherBcast,
    ];

    fn preset(name: &str) -> Box<dyn CollectiveCost> {
        Box::new(Analytic::preset(name).unwrap())
    }

    fn topo(net: &str, g: usize, intra: &str) -> Topology {
        Topology::new(preset(net), g, IntraLink::parse(intra).unwrap())
    }

    #[test]
    fn one_rank_per_node_is_the_wrapped_network_exactly() {
        let mut fm = CommModels::new();
        fm.insert("allreduce", 8, AlphaBeta::new(6e-5, 1.5e-9));
        fm.insert("allgather", 8, AlphaBeta::new(3e-5, 3e-9));
        let fitted =
            || -> Box<dyn CollectiveCost> { Box::new(Fitted::new(fm.clone(), 8, "x").unwrap()) };
        let cases: Vec<(Box<dyn CollectiveCost>, Box<dyn CollectiveCost>)> = vec![
            (preset("10gbe"), preset("10gbe")),
            (preset("100gb-ib"), preset("100gb-ib")),
            (fitted(), fitted()),
        ];
        for (flat, inner) in cases {
            let t = Topology::new(inner, 1, IntraLink::parse("nvlink").unwrap());
            for op in OPS {
                for n in [1, 2, 3, 8, 32, 1024] {
                    for m in [0.0, 4.0, 1e3, 1e6, 1e8] {
                        assert_eq!(t.time_s(op, n, m), flat.time_s(op, n, m), "{op:?} {n} {m}");
                    }
                }
            }
            assert_eq!(t.reduce_s(1e6), flat.reduce_s(1e6));
            assert_eq!(t.describe(), flat.describe());
        }
    }

    #[test]
    fn costs_grow_with_bytes_and_nodes_and_a_slower_intra_link() {
        for net in ["1gbe", "10gbe", "100gb-ib"] {
            let nv = topo(net, 4, "nvlink");
            let pc = topo(net, 4, "pcie3");
            for op in OPS {
                let mut last = 0.0;
                for i in 0..28 {
                    let m = (4u64 << i) as f64;
                    let t = nv.time_s(op, 32, m);
                    assert!(t >= last, "{net} {op:?} {m}: {t} < {last}");
                    last = t;
                    assert!(pc.time_s(op, 32, m) >= t, "{net} {op:?} {m}");
                }
                for m in [8.0, 1e5, 1e7] {
                    let mut last = 0.0;
                    for nodes in [1, 2, 3, 4, 8, 16, 64] {
                        let t = nv.time_s(op, 4 * nodes, m);
                        assert!(t >= last, "{net} {op:?} {m} B, {nodes} nodes");
                        last = t;
                    }
                }
            }
        }
    }

    /// 2 nodes x 4 ranks; NIC alpha 10 us, 1 GB/s; intra 1 us, 10 GB/s; no reduction
    /// cost; m = 8 MB per rank. Every value below is worked out in the comments.
    #[test]
    fn two_nodes_of_four_by_hand() {
        let nic = Link {
            alpha_s: 10e-6,
            beta_s_per_byte: 1e-9,
            gamma_s_per_byte: 0.0,
        };
        let t = Topology::new(
            Box::new(Analytic::new("nic", nic)),
            4,
            IntraLink::parse("1:10").unwrap(),
        );
        let m = 8e6;
        // (a) ring: 14 steps of 1 MB; NIC hop 10e-6 + 1e-3 > intra 1e-6 + 1e-4.
        assert!(close(t.ring_allreduce_s(8, m), 14.0 * 1.01e-3));
        // (b) reduce over 4: min(binomial 2(1e-6 + 8e-4), RS+gather 4e-6 + 1.5·8e-4) =
        // 1.204e-3; all-reduce of 2 nodes: min(ring 2e-5 + 8e-3, RD 1e-5 + 8e-3, Rab
        // 2e-5 + 8e-3) = 8.01e-3; broadcast over 4: min(binomial 1.602e-3, scatter +
        // all-gather 5e-6 + 1.2e-3) = 1.205e-3.
        let hier = 1.204e-3 + 8.01e-3 + 1.205e-3;
        assert!(close(t.hierarchical_allreduce_s(8, m), hier));
        assert!(close(t.time_s(Op::AllReduce, 8, m), hier));
        assert!(close(t.time_s(Op::Ring, 8, m), 14.0 * 1.01e-3));
        // All-gather of 1 MB per rank: (a) 7 NIC-bound steps 7(1e-5 + 1e-3) = 7.07e-3;
        // (b) gather 2e-6 + 3e-4, all-gather of 4 MB between 2 nodes 1e-5 + 4e-3,
        // broadcast of 8 MB 1.205e-3: 5.517e-3.
        let mg = 1e6;
        assert!(close(t.ring_allgather_s(8, mg), 7.07e-3));
        let hag = 2e-6 + 3e-4 + 1e-5 + 4e-3 + 1.205e-3;
        assert!(close(t.hierarchical_allgather_s(8, mg), hag));
        assert!(close(t.time_s(Op::AllGather, 8, mg), hag));
        // Small messages (8 B): the ring's 14 NIC latencies lose to (b)'s 2 intra + 1 NIC
        // + 2 intra: 2(1e-6 + 8e-10) + (1e-5 + 8e-9) + 2(1e-6 + 8e-10).
        assert!(close(
            t.time_s(Op::AllReduce, 8, 8.0),
            4.0 * (1e-6 + 8e-10) + 1e-5 + 8e-9
        ));
        // PS of sums: reduce 1.204e-3 + (reduce 2 nodes 1e-5 + 8e-3, broadcast 1e-5 +
        // 8e-3) + broadcast 1.205e-3.
        assert!(close(
            t.time_s(Op::PsReduceBcast, 8, m),
            1.204e-3 + 2.0 * (1e-5 + 8e-3) + 1.205e-3
        ));
        // PS of gathers, 1 MB per rank: gather 2e-6 + 3e-4, gather of 4 MB from the other
        // node 1e-5 + 4e-3, broadcast of 8 MB between the nodes 1e-5 + 8e-3, broadcast of
        // 8 MB in the node 1.205e-3.
        assert!(close(
            t.time_s(Op::PsGatherBcast, 8, mg),
            2e-6 + 3e-4 + 1e-5 + 4e-3 + 1e-5 + 8e-3 + 1.205e-3
        ));
        // One node of 4: flat MPICH over the intra link (Rabenseifner 4e-6 + 1.2e-3).
        assert!(close(t.time_s(Op::AllReduce, 4, m), 4e-6 + 1.5 * 8e-4));
    }

    /// Dense S-SGD's messages (bandwidth-bound, 100 KB and up per rank) on 100 Gb/s
    /// InfiniBand: 8 nodes of 4 cost more than 32 ranks with a link each.
    #[test]
    fn eight_nodes_of_four_cost_more_than_32_flat_ranks_on_infiniband() {
        let flat = Analytic::preset("100gb-ib").unwrap();
        for intra in ["nvlink", "pcie3"] {
            let t = topo("100gb-ib", 4, intra);
            for op in OPS {
                for m in [1e5, 1e6, 25e6, 1e8] {
                    let (h, f) = (t.time_s(op, 32, m), flat.time_s(op, 32, m));
                    match op {
                        // Our ring over NVLink: the NIC hop is its slowest, as in the
                        // flat ring (equal for large messages).
                        Op::Ring => assert!(h >= f, "{intra} {op:?} {m} B: {h:.4e} < {f:.4e}"),
                        // A gather's broadcast of n·m bytes: binomial steps over NVLink
                        // are cheaper than over the NIC, so the hierarchy can win.
                        Op::PsGatherBcast => {}
                        _ => assert!(h > f, "{intra} {op:?} {m} B: {h:.4e} <= flat {f:.4e}"),
                    }
                }
            }
        }
    }

    /// Where the hierarchy is cheaper than the flat network: latency-bound messages when
    /// an intra-node hop is quicker than a NIC hop, and slow NICs, where reducing in the
    /// node first sends `2(N-1)/N·m` over each NIC instead of the ring's `2(n-1)/n·m`.
    #[test]
    fn the_hierarchy_can_beat_the_flat_network() {
        let t = topo("100gb-ib", 4, "nvlink");
        let flat = Analytic::preset("100gb-ib").unwrap();
        // 4 B: 2 NVLink + 3 IB + 2 NVLink hops (6.9 us) against 5 IB hops (7.5 us).
        assert!(t.time_s(Op::AllReduce, 32, 4.0) < flat.time_s(Op::AllReduce, 32, 4.0));
        let t = topo("1gbe", 4, "pcie3");
        let flat = Analytic::preset("1gbe").unwrap();
        let (h, f) = (
            t.time_s(Op::AllReduce, 32, 25e6),
            flat.time_s(Op::AllReduce, 32, 25e6),
        );
        assert!(h < 0.95 * f, "{h:.4e} vs {f:.4e}");
    }

    #[test]
    fn intra_links_parse_and_refuse() {
        let p = IntraLink::parse("pcie3").unwrap();
        assert_eq!((p.alpha_s, p.gbps), (1e-6, 12.0));
        assert_eq!(IntraLink::default(), p);
        let n = IntraLink::parse("nvlink").unwrap();
        assert_eq!((n.alpha_s, n.gbps), (0.6e-6, 24.0));
        let c = IntraLink::parse("3:20").unwrap();
        assert!(close(c.alpha_s, 3e-6) && c.gbps == 20.0);
        for bad in ["pcie4", "3", "a:b", "-1:10", "1:0", "1:inf"] {
            let e = IntraLink::parse(bad).unwrap_err();
            assert!(e.contains("pcie3, nvlink"), "{bad}: {e}");
        }
    }

    /// The NIC of `two_nodes_of_four_by_hand` (10 us, 1 GB/s, no reduction cost) under
    /// `g` ranks per node joined by `intra`.
    fn nic_topology(g: usize, intra: &str) -> Topology {
        nic_topology_gamma(g, intra, 0.0)
    }

    /// [`nic_topology`] with a reduction cost of `gamma` s/B.
    fn nic_topology_gamma(g: usize, intra: &str, gamma: f64) -> Topology {
        let nic = Link {
            alpha_s: 10e-6,
            beta_s_per_byte: 1e-9,
            gamma_s_per_byte: gamma,
        };
        Topology::new(
            Box::new(Analytic::new("nic", nic)),
            g,
            IntraLink::parse(intra).unwrap(),
        )
    }

    /// A ring step is its slowest hop: on one node only intra-node hops (no NIC hop), and
    /// across nodes the intra-node hop where it is the slower one.
    #[test]
    fn a_ring_step_is_its_slowest_hop_intra_node_on_one_node() {
        // One node of 4, intra 1 us + 0.1 ns/B: 6 steps of 2 MB, 3 steps of 1 MB.
        let t = nic_topology(4, "1:10");
        assert!(close(
            t.ring_allreduce_s(4, 8e6),
            6.0 * (1e-6 + 2e6 * 1e-10)
        ));
        assert!(close(
            t.ring_allgather_s(4, 1e6),
            3.0 * (1e-6 + 1e6 * 1e-10)
        ));
        // Two nodes of 4 over a slow intra link (100 us, 0.1 GB/s): the intra hop of 1 MB,
        // 1e-4 + 1e-2, is slower than the NIC's 1e-5 + 1e-3 and sets each of the 7 steps.
        let slow = nic_topology(4, "100:0.1");
        assert!(close(
            slow.ring_allgather_s(8, 1e6),
            7.0 * (1e-4 + 1e6 * 1e-8)
        ));
        assert!(close(
            slow.ring_allreduce_s(8, 8e6),
            14.0 * (1e-4 + 1e6 * 1e-8)
        ));
    }

    /// The ring all-reduce's chunk reductions: `(n-1)/n m` bytes at the wrapped network's
    /// cost per byte, on top of `two_nodes_of_four_by_hand`'s 14 NIC-bound steps.
    #[test]
    fn the_ring_reduces_n_minus_1_over_n_of_the_bytes_at_the_wrapped_networks_cost() {
        let t = nic_topology_gamma(4, "1:10", 1e-9);
        // 7/8 of 8 MB = 7 MB at 1 ns/B: 7e-3 s.
        assert!(close(t.ring_allreduce_s(8, 8e6), 14.0 * 1.01e-3 + 7e-3));
        assert!(close(t.time_s(Op::Ring, 8, 8e6), 14.0 * 1.01e-3 + 7e-3));
        assert!(close(t.reduce_s(2e6), 2e-3));
    }

    /// The ranks per node asked, at least one (`new`'s contract: a count of 0 is one).
    #[test]
    fn ranks_per_node_are_as_asked_and_at_least_one() {
        assert_eq!(nic_topology(4, "pcie3").ranks_per_node(), 4);
        assert_eq!(nic_topology(0, "pcie3").ranks_per_node(), 1);
        assert_eq!(nic_topology(0, "pcie3").nodes(3), 3);
    }
}
