//! What the simulator charges: per-method compression costs (the committed reference
//! fit or `gradcomp fit`'s), copy costs, the network and the host model ([`CostModel`]).

use super::{fit, host, network, topology, Result, SimError};
use crate::netmodel::CompressCost;
use network::CollectiveCost;
use std::collections::HashMap;

/// Cost of one method's phases, each for all rounds of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct MethodCosts {
    pub compress: CompressCost,
    pub feedback: CompressCost,
    pub decompress: CompressCost,
}

impl MethodCosts {
    /// Every phase's cost times `f` (a faster or slower host running the same kernels).
    pub fn scaled(self, f: f64) -> MethodCosts {
        let s = |c: CompressCost| CompressCost {
            per_element_s: c.per_element_s * f,
            fixed_s: c.fixed_s * f,
            per_selected_s: c.per_selected_s * f,
        };
        MethodCosts {
            compress: s(self.compress),
            feedback: s(self.feedback),
            decompress: s(self.decompress),
        }
    }

    /// The default costs of `method`: its spec's reference fit
    /// ([`crate::compress::spec::MethodSpec::reference_costs`], measured by
    /// scripts/reference_costs.sh; docs/performance.md, "Reference compression costs").
    /// `None` for a name that is not a registry method (an e2e variant or a control: the
    /// callers fall back to S-SGD's).
    pub fn reference(method: &str) -> Option<MethodCosts> {
        let r = crate::compress::registry::spec(method)
            .ok()?
            .reference_costs;
        // The reference fit is linear in the tensor (no selection term).
        let c = |l: crate::compress::spec::LinearCost| CompressCost {
            per_element_s: l.per_element_s,
            fixed_s: l.fixed_s,
            per_selected_s: 0.0,
        };
        Some(MethodCosts {
            compress: c(r.compress),
            feedback: c(r.feedback),
            decompress: c(r.decompress),
        })
    }
}

/// The provenance of the default compression costs (machine, date, revision, command):
/// the reference run ([`crate::compress::spec::REFERENCE_FIT`]); a method measured later
/// cites its own run in its spec.
pub fn reference_source() -> &'static str {
    crate::compress::spec::REFERENCE_FIT
}

/// Every cost the simulator needs.
pub struct CostModel {
    pub network: Box<dyn CollectiveCost>,
    /// Per (base) method; missing methods use [`MethodCosts::reference`].
    pub methods: HashMap<String, MethodCosts>,
    /// Copy cost of pack/split per byte (s/B); default 0.1 ns/B (10 GB/s memcpy).
    pub pack_s_per_byte: f64,
    /// Fixed cost per unit append / split (s); default 0.2 us.
    pub pack_fixed_s: f64,
    /// Where the compression costs come from (the reference fit's provenance, `fitted DIR/micro_compress.csv`).
    pub compress_source: String,
    /// CPU share and host latencies ([`host::HostModel`]; ideal unless calibrated).
    pub host: host::HostModel,
    /// Device compression costs, for cases with `--compress-on device`.
    pub device: Option<crate::devcost::DeviceCosts>,
    /// Ranks per node sharing one NIC (1: the flat network; [`CostModel::with_topology`]).
    pub ranks_per_node: usize,
    /// The links' token-bucket shaper (a netlab run's `netlab.txt`; credit.rs), if any.
    pub shaper: Option<super::credit::Shaper>,
}

impl CostModel {
    /// A network with the built-in `cpu` compression defaults.
    pub fn with_network(network: Box<dyn CollectiveCost>) -> CostModel {
        CostModel {
            network,
            methods: HashMap::new(),
            pack_s_per_byte: 0.1e-9,
            pack_fixed_s: 0.2e-6,
            compress_source: reference_source().into(),
            host: host::HostModel::default(),
            device: None,
            ranks_per_node: 1,
            shaper: None,
        }
    }

    /// The network as the link between nodes of `ranks_per_node` ranks joined by
    /// `intra` ([`topology::Topology`]); `ranks_per_node = 1` keeps the flat network.
    pub fn with_topology(mut self, ranks_per_node: usize, intra: topology::IntraLink) -> CostModel {
        if ranks_per_node > 1 {
            self.network = Box::new(topology::Topology::new(self.network, ranks_per_node, intra));
            self.ranks_per_node = ranks_per_node;
        }
        self
    }

    /// A network preset name (`10gbe`, ...) with the `cpu` defaults.
    pub fn preset(name: &str) -> Result<CostModel> {
        CostModel::preset_scaled(name, (1.0, 1.0))
    }

    /// Preset `name` with its latency alpha and inverse bandwidth beta multiplied by
    /// `(alpha_x, beta_x)` (a sensitivity sweep over what a preset does not know).
    pub fn preset_scaled(name: &str, (alpha_x, beta_x): (f64, f64)) -> Result<CostModel> {
        if name == super::published::OMGS_NETWORK {
            return Ok(CostModel::with_network(Box::new(
                super::published::OmgsNetwork::new(alpha_x, beta_x),
            )));
        }
        let a = network::Analytic::preset(name).ok_or_else(|| {
            SimError::Input(format!(
                "unknown network preset '{name}'; allowed: {}",
                network::preset_names().join(", ")
            ))
        })?;
        let a = if (alpha_x, beta_x) == (1.0, 1.0) {
            a
        } else {
            let mut link = a.link;
            link.alpha_s *= alpha_x;
            link.beta_s_per_byte *= beta_x;
            network::Analytic::new(
                format!("preset {name} (alpha x{alpha_x}, beta x{beta_x})"),
                link,
            )
        };
        Ok(CostModel::with_network(Box::new(a)))
    }

    /// Compression costs fitted by [`fit::fit_results`] (replace the defaults). Without
    /// a micro_compress.csv in the fitted directory the reference fit stays, and
    /// `compress_source` names it.
    pub fn with_compress_fits(mut self, report: &fit::FitReport) -> CostModel {
        for (m, c) in report.method_costs() {
            self.methods.insert(m, c);
        }
        if let Some(src) = &report.compress_source {
            self.compress_source = format!("fitted {src} (other methods: the reference fit)");
        }
        self
    }

    /// Costs of method `m`: fitted, else the reference fit, else S-SGD's reference
    /// costs (never reached for a registry method; tested).
    pub fn method(&self, m: &str) -> MethodCosts {
        self.methods
            .get(m)
            .copied()
            .or_else(|| MethodCosts::reference(m))
            .or_else(|| MethodCosts::reference("ssgd"))
            .unwrap_or_default()
    }

    /// `network; compress` for the CSV's `cost_source`.
    pub fn describe(&self) -> String {
        let shaper = self.shaper.map_or_else(String::new, |s| {
            format!(", {} (credit modelled)", s.describe())
        });
        format!(
            "network {}{shaper}; compression {}; {}",
            self.network.describe(),
            self.compress_source,
            self.host.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::network::{CollectiveCost, Op};

    /// A scaled preset prices every collective as the preset's link with alpha and beta
    /// scaled, written again here from the 10gbe preset's constants (20 us, 1.25 GB/s): at
    /// (2, 3), 40 us and 1.25/3 GB/s.
    #[test]
    fn a_scaled_preset_scales_alpha_and_beta_only() {
        let scaled = CostModel::preset_scaled("10gbe", (2.0, 3.0))
            .unwrap()
            .network;
        let by_hand = network::Analytic::new("hand", network::Link::from_gbps(40e-6, 1.25 / 3.0));
        let plain = CostModel::preset("10gbe").unwrap().network;
        let nominal = network::Analytic::new("hand", network::Link::from_gbps(20e-6, 1.25));
        for op in [Op::AllReduce, Op::AllGather, Op::Ring] {
            for (n, m) in [(2usize, 4.0), (8, 4.0e6), (64, 1.0e8)] {
                let close = |a: f64, b: f64| (a - b).abs() <= 1e-12 + 1e-9 * b;
                assert!(
                    close(scaled.time_s(op, n, m), by_hand.time_s(op, n, m)),
                    "{op:?} {n} {m}"
                );
                assert!(
                    close(plain.time_s(op, n, m), nominal.time_s(op, n, m)),
                    "{op:?} {n} {m}"
                );
            }
        }
    }

    fn cost(fixed_s: f64, per_element_s: f64, per_selected_s: f64) -> CompressCost {
        CompressCost {
            per_element_s,
            fixed_s,
            per_selected_s,
        }
    }

    /// Every term of every phase times `f`.
    #[test]
    fn scaled_multiplies_every_term_of_every_phase() {
        let m = MethodCosts {
            compress: cost(1.0, 2.0, 3.0),
            feedback: cost(4.0, 5.0, 6.0),
            decompress: cost(7.0, 8.0, 9.0),
        };
        let want = MethodCosts {
            compress: cost(2.5, 5.0, 7.5),
            feedback: cost(10.0, 12.5, 15.0),
            decompress: cost(17.5, 20.0, 22.5),
        };
        assert_eq!(m.scaled(2.5), want);
    }

    /// A registry method's reference costs are its spec's linear fit with no selection
    /// term; a name outside the registry has none and is priced as S-SGD; a fitted
    /// method's own costs come first.
    #[test]
    fn method_costs_are_fitted_then_the_reference_then_ssgds() {
        let spec = |m: &str| crate::compress::registry::spec(m).unwrap().reference_costs;
        let r = spec("topk");
        let lin = |l: crate::compress::spec::LinearCost| cost(l.fixed_s, l.per_element_s, 0.0);
        let want = MethodCosts {
            compress: lin(r.compress),
            feedback: lin(r.feedback),
            decompress: lin(r.decompress),
        };
        assert!(want.compress.per_element_s > 0.0);
        assert_eq!(MethodCosts::reference("topk"), Some(want));
        assert_eq!(MethodCosts::reference("no-such-method"), None);
        let mut c = CostModel::preset("10gbe").unwrap();
        assert_eq!(c.method("topk"), want);
        assert_eq!(
            c.method("no-such-method"),
            MethodCosts::reference("ssgd").unwrap()
        );
        let fitted = MethodCosts {
            compress: cost(1.0, 2.0, 3.0),
            ..MethodCosts::default()
        };
        c.methods.insert("topk".into(), fitted);
        assert_eq!(c.method("topk"), fitted);
    }

    /// Fitted compression rows replace a method's costs phase by phase, and the source
    /// names the fitted file; without one the reference fit's provenance stays.
    #[test]
    fn compress_fits_replace_the_methods_costs_and_name_their_source() {
        let row = |phase: &str, fixed_s: f64, per_unit_s: f64| fit::FitRow {
            kind: "compress",
            name: "topk".into(),
            phase: phase.into(),
            fixed_s,
            per_unit_s,
            per_selected_s: Some(0.5),
            ..fit::FitRow::default()
        };
        let mut report = fit::FitReport {
            rows: vec![row("compress", 1.0, 2.0), row("decompress", 3.0, 4.0)],
            ..fit::FitReport::default()
        };
        let c = CostModel::preset("10gbe")
            .unwrap()
            .with_compress_fits(&report);
        assert_eq!(
            c.methods["topk"],
            MethodCosts {
                compress: cost(1.0, 2.0, 0.5),
                feedback: CompressCost::default(),
                decompress: cost(3.0, 4.0, 0.5),
            }
        );
        assert_eq!(c.compress_source, reference_source());
        report.compress_source = Some("run/micro_compress.csv".into());
        let c = CostModel::preset("10gbe")
            .unwrap()
            .with_compress_fits(&report);
        assert_eq!(
            c.compress_source,
            "fitted run/micro_compress.csv (other methods: the reference fit)"
        );
    }

    /// One rank per node keeps the flat network; more wrap it in the topology.
    #[test]
    fn a_topology_only_above_one_rank_per_node() {
        let intra = topology::IntraLink::default();
        let flat = CostModel::preset("10gbe").unwrap();
        let one = CostModel::preset("10gbe")
            .unwrap()
            .with_topology(1, intra.clone());
        assert_eq!(one.ranks_per_node, 1);
        assert_eq!(one.network.describe(), flat.network.describe());
        let four = CostModel::preset("10gbe")
            .unwrap()
            .with_topology(4, intra.clone());
        assert_eq!(four.ranks_per_node, 4);
        let by_hand =
            topology::Topology::new(CostModel::preset("10gbe").unwrap().network, 4, intra);
        for n in [8, 16] {
            let t = |c: &dyn CollectiveCost| c.time_s(Op::AllReduce, n, 1e6);
            assert_eq!(t(one.network.as_ref()), t(flat.network.as_ref()));
            assert_eq!(t(four.network.as_ref()), t(&by_hand));
            assert_ne!(t(four.network.as_ref()), t(flat.network.as_ref()));
        }
    }

    /// OMGS-SGD's network by name, scaled; an unknown name lists the presets.
    #[test]
    fn presets_by_name() {
        let omgs = CostModel::preset_scaled("omgs-1gbe", (2.0, 0.5)).unwrap();
        let d = omgs.network.describe();
        assert!(
            d.starts_with("preset omgs-1gbe: ") && d.ends_with("(alpha x2, beta x0.5)"),
            "{d}"
        );
        let s = CostModel::preset_scaled("10gbe", (2.0, 3.0))
            .unwrap()
            .network
            .describe();
        assert!(s.starts_with("preset 10gbe (alpha x2, beta x3)"), "{s}");
        let e = CostModel::preset("40gbe-typo").err().unwrap().to_string();
        assert!(
            e.contains("unknown network preset '40gbe-typo'") && e.contains("10gbe"),
            "{e}"
        );
    }

    /// `network N[, shaper (credit modelled)]; compression C; host H`.
    #[test]
    fn the_description_names_network_shaper_compression_and_host() {
        let mut c = CostModel::preset("10gbe").unwrap();
        let want = format!(
            "network {}; compression {}; {}",
            c.network.describe(),
            reference_source(),
            c.host.describe()
        );
        assert_eq!(c.describe(), want);
        let s = super::super::credit::Shaper {
            rate_bytes_per_s: 1.25e8,
            burst_bytes: 262144.0,
            dilation: 1,
        };
        c.shaper = Some(s);
        let want = format!(
            "network {}, {} (credit modelled); compression {}; {}",
            c.network.describe(),
            s.describe(),
            reference_source(),
            c.host.describe()
        );
        assert_eq!(c.describe(), want);
    }
}
