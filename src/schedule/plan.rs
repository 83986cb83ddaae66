//! Tensor fusion plans: which gradients travel together in one bucket.
//! Buckets are formed in backward order (the order gradients become ready), as in
//! PyTorch DDP's bucketing and Horovod's tensor fusion.

use std::fmt;

use crate::compress::{CloseRule, FusionSizing};

/// How gradients are grouped into buckets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Fusion {
    /// One bucket per tensor (threshold 0).
    None,
    /// Close a bucket once it holds at least this many bytes (DDP 25 MiB, Horovod 64 MiB).
    Bytes(u64),
    /// Every gradient in one bucket.
    Single,
    /// A cost-model planner (MG-WFBP, OMGS, LayerFusion; see `planner`).
    Planner(PlannerKind),
}

/// The merge planners of `planner.rs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum PlannerKind {
    /// Merged-gradient wait-free backprop for dense all-reduce (Shi et al., INFOCOM 2019).
    Mgwfbp,
    /// Optimal merged gradient sparsification (Shi et al., INFOCOM 2020).
    Omgs,
    /// Sketch-Fusion's LayerFusion (Dai et al., JPDC 2024).
    LayerFusion,
}

impl Fusion {
    /// `none`, `single`, or a byte threshold (`25MiB`, `0` = none).
    pub fn parse(s: &str) -> Result<Fusion, String> {
        match s.trim() {
            "none" => Ok(Fusion::None),
            "single" => Ok(Fusion::Single),
            "mgwfbp" => Ok(Fusion::Planner(PlannerKind::Mgwfbp)),
            "omgs" => Ok(Fusion::Planner(PlannerKind::Omgs)),
            "layerfusion" => Ok(Fusion::Planner(PlannerKind::LayerFusion)),
            t => match crate::units::parse_bytes(t) {
                Ok(0) => Ok(Fusion::None),
                Ok(b) => Ok(Fusion::Bytes(b)),
                Err(e) => Err(format!(
                    "{e}; or use none, single, mgwfbp, omgs, layerfusion"
                )),
            },
        }
    }
}

impl fmt::Display for Fusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fusion::None => write!(f, "none"),
            Fusion::Single => write!(f, "single"),
            // Exact (parses back): the largest binary unit that divides the threshold.
            Fusion::Bytes(b) => match *b {
                b if b % (1 << 30) == 0 => write!(f, "{}GiB", b >> 30),
                b if b % (1 << 20) == 0 => write!(f, "{}MiB", b >> 20),
                b if b % (1 << 10) == 0 => write!(f, "{}KiB", b >> 10),
                b => write!(f, "{b}"),
            },
            Fusion::Planner(PlannerKind::Mgwfbp) => write!(f, "mgwfbp"),
            Fusion::Planner(PlannerKind::Omgs) => write!(f, "omgs"),
            Fusion::Planner(PlannerKind::LayerFusion) => write!(f, "layerfusion"),
        }
    }
}

/// The buckets of every phase of a method's step cycle (one list per phase, positions in
/// the order `sizing` was built in, backward order in e2e): the one bucketing function
/// of the engine and the simulator. Planner fusions are resolved by the callers (they
/// need cost models); here they give one bucket per tensor.
pub fn phase_buckets(sizing: &FusionSizing, fusion: Fusion) -> Vec<Vec<Vec<usize>>> {
    sizing
        .phase_bytes
        .iter()
        .zip(&sizing.threshold_scale)
        .map(|(b, &scale)| buckets(b, fusion, scale, sizing.rule))
        .collect()
}

/// Buckets as lists of positions in `sizes_bytes`, with a byte threshold scaled by
/// `threshold_scale` and closed by `rule`.
pub fn buckets(
    sizes_bytes: &[u64],
    fusion: Fusion,
    threshold_scale: f64,
    rule: CloseRule,
) -> Vec<Vec<usize>> {
    let n = sizes_bytes.len();
    match fusion {
        Fusion::Planner(_) => (0..n).map(|i| vec![i]).collect(),
        Fusion::None => (0..n).map(|i| vec![i]).collect(),
        Fusion::Single => {
            if n == 0 {
                vec![]
            } else {
                vec![(0..n).collect()]
            }
        }
        Fusion::Bytes(t) => {
            let t = (t as f64 * threshold_scale).max(1.0);
            let mut out = Vec::new();
            let mut cur = Vec::new();
            let mut bytes = 0f64;
            for (i, &s) in sizes_bytes.iter().enumerate() {
                let s = s as f64;
                match rule {
                    CloseRule::AtThreshold => {
                        cur.push(i);
                        bytes += s;
                        if bytes >= t {
                            out.push(std::mem::take(&mut cur));
                            bytes = 0.0;
                        }
                    }
                    CloseRule::BeforeExceeding => {
                        if !cur.is_empty() && bytes + s > t {
                            out.push(std::mem::take(&mut cur));
                            bytes = 0.0;
                        }
                        cur.push(i);
                        bytes += s;
                    }
                }
            }
            if !cur.is_empty() {
                out.push(cur);
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const AT: CloseRule = CloseRule::AtThreshold;

    #[test]
    fn parses() {
        assert_eq!(Fusion::parse("none"), Ok(Fusion::None));
        assert_eq!(Fusion::parse("0"), Ok(Fusion::None));
        assert_eq!(Fusion::parse("25MiB"), Ok(Fusion::Bytes(25 << 20)));
        assert_eq!(Fusion::parse("single"), Ok(Fusion::Single));
        assert!(Fusion::parse("big").is_err());
        assert_eq!(
            Fusion::parse("omgs"),
            Ok(Fusion::Planner(PlannerKind::Omgs))
        );
        assert_eq!(
            Fusion::parse("layerfusion").map(|f| f.to_string()),
            Ok("layerfusion".to_string())
        );
    }

    /// The rule of `Display`, written again: the largest of GiB, MiB and KiB that divides
    /// the threshold, else plain bytes; the text parses back (issue 49: every guard of it
    /// could be `true` or `false` with no test failing).
    #[test]
    fn a_byte_threshold_prints_in_the_largest_binary_unit_that_divides_it() {
        let cases: [(u64, &str); 7] = [
            (3 << 30, "3GiB"),
            (1536 << 20, "1536MiB"), // 1.5 GiB: not whole GiB
            (25 << 20, "25MiB"),
            (1025 << 10, "1025KiB"), // not whole MiB
            (64 << 10, "64KiB"),
            (1000, "1000"), // not whole KiB
            (1, "1"),
        ];
        for (b, text) in cases {
            assert_eq!(Fusion::Bytes(b).to_string(), text, "{b} bytes");
            assert_eq!(Fusion::parse(text), Ok(Fusion::Bytes(b)), "{text}");
        }
    }

    #[test]
    fn bucketing_closes_at_threshold_in_backward_order() {
        let sizes = [10, 10, 30, 5, 5, 100, 1];
        assert_eq!(buckets(&sizes, Fusion::None, 1.0, AT).len(), 7);
        assert_eq!(
            buckets(&sizes, Fusion::Single, 1.0, AT),
            vec![vec![0, 1, 2, 3, 4, 5, 6]]
        );
        assert_eq!(
            buckets(&sizes, Fusion::Bytes(20), 1.0, AT),
            vec![vec![0, 1], vec![2], vec![3, 4, 5], vec![6]]
        );
        // A scaled threshold (ACP-SGD) of 0.5 x 40 = 20 gives the same buckets.
        assert_eq!(
            buckets(&sizes, Fusion::Bytes(40), 0.5, AT),
            buckets(&sizes, Fusion::Bytes(20), 1.0, AT)
        );
        assert!(buckets(&[], Fusion::Single, 1.0, AT).is_empty());
        // ACP-SGD's reference rule: close before exceeding; an oversized tensor alone.
        assert_eq!(
            buckets(&sizes, Fusion::Bytes(20), 1.0, CloseRule::BeforeExceeding),
            vec![vec![0, 1], vec![2], vec![3, 4], vec![5], vec![6]]
        );
    }
}
