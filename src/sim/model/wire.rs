//! Wire capacities of the simulated compressors, registered shape by shape and cached
//! across a sweep ([`WireCache`]).

use super::{merr, Result, SimCase};
use crate::compress::{registry, Aggregation, WireLen, WorkerCtx};
use crate::roofline::{Kernel, Stage};
use std::collections::HashMap;

/// 1-row tensors longer than this (merged buckets) get their wire capacity by affine
/// extrapolation from exact probes at `LARGE_1D / 2` and `LARGE_1D` elements instead of
/// registering them (registration allocates and touches the method's per-element state,
/// about a second for BERT-Large's 340 M elements). Every method's capacity is affine
/// in the length up to rounding (`ceil(density d)` values, `ceil(d / 32)` sign words,
/// fixed headers), so the error is a few words (a unit test checks 1e-4 relative).
pub const LARGE_1D: usize = 1 << 22;

/// Wire words per round of one compression unit.
pub(in crate::sim) type UnitWire = Vec<WireLen>;
/// [`UnitWire`] per phase of the method's step cycle (`Compressor::phases`).
pub(in crate::sim) type PhaseWire = Vec<UnitWire>;
/// Device kernels of one compression unit per phase, round and stage (compress,
/// decompress): `Compressor::device_kernels`.
pub(in crate::sim) type PhaseKernels = Vec<Vec<[Vec<Kernel>; 2]>>;

/// What the simulator needs of a registered shape.
#[derive(Clone, Debug)]
pub(in crate::sim) struct ShapeInfo {
    pub(in crate::sim) wire: PhaseWire,
    pub(in crate::sim) kernels: PhaseKernels,
    /// Elements compression selects over ([`crate::compress::Compressor::selection_elems`]).
    pub(in crate::sim) selected: usize,
}

/// What a registered shape's wire depends on: the method, its parameters (their `Debug`
/// text: every field, floats exactly), the world size and seed of its [`WorkerCtx`], the
/// shape, and whether it was extrapolated ([`LARGE_1D`]) rather than registered.
type WireKey = (String, String, usize, u64, usize, usize, bool);

/// Wire capacities of the shapes registered so far, shared by the cases of a sweep
/// ([`simulate_with`]): a case's wire for a shape is a function of its [`WireKey`], and
/// registering a shape allocates and touches the method's per-element state, which made
/// most of a large sweep's time (system time in page faults) when every case registered
/// every shape again.
#[derive(Debug, Default)]
pub struct WireCache {
    map: HashMap<WireKey, ShapeInfo>,
}

/// Wire capacity per round of a `rows x cols` tensor for this method and world size,
/// registering the shape in a fresh compressor (so memory holds one tensor's state)
/// unless the [`WireCache`] already holds it.
pub(in crate::sim) struct WireOracle<'a, 'c> {
    case: &'a SimCase,
    cache: &'c mut WireCache,
    /// `WireKey` without the shape.
    key: (String, String, usize, u64),
    pub(in crate::sim) rounds: usize,
    pub(in crate::sim) phases: usize,
    pub(in crate::sim) aggregation: Aggregation,
}

impl<'a, 'c> WireOracle<'a, 'c> {
    pub(in crate::sim) fn new(
        case: &'a SimCase,
        cache: &'c mut WireCache,
    ) -> Result<WireOracle<'a, 'c>> {
        let ctx = ctx(case);
        let c = registry::build(&case.base_method, &case.params, ctx).map_err(|e| merr(case, e))?;
        Ok(WireOracle {
            case,
            cache,
            key: (
                case.base_method.clone(),
                format!("{:?}", case.params),
                ctx.world_size,
                ctx.seed,
            ),
            rounds: c.rounds(),
            phases: c.phases(),
            aggregation: c.aggregation(),
        })
    }

    /// Wire per phase and round of a `rows x cols` unit.
    pub(in crate::sim) fn get(&mut self, rows: usize, cols: usize) -> Result<PhaseWire> {
        Ok(self.info(rows, cols)?.wire.clone())
    }

    /// Elements the compression of a `rows x cols` unit selects over.
    pub(in crate::sim) fn selected(&mut self, rows: usize, cols: usize) -> Result<usize> {
        Ok(self.info(rows, cols)?.selected)
    }

    /// Device kernels per phase, round and stage of a `rows x cols` unit.
    pub(in crate::sim) fn kernels(&mut self, rows: usize, cols: usize) -> Result<PhaseKernels> {
        Ok(self.info(rows, cols)?.kernels.clone())
    }

    fn key(&self, rows: usize, cols: usize, extrapolated: bool) -> WireKey {
        let (method, params, n, seed) = &self.key;
        (
            method.clone(),
            params.clone(),
            *n,
            *seed,
            rows,
            cols,
            extrapolated,
        )
    }

    /// What the simulator needs of a `rows x cols` unit: registered, or (1-row units
    /// beyond [`LARGE_1D`]) extrapolated; cached either way.
    pub(in crate::sim) fn info(&mut self, rows: usize, cols: usize) -> Result<&ShapeInfo> {
        if rows == 1 && cols > LARGE_1D {
            let key = self.key(rows, cols, true);
            if !self.cache.map.contains_key(&key) {
                let info = self.extrapolate(cols)?;
                self.cache.map.insert(key.clone(), info);
            }
            return Ok(&self.cache.map[&key]);
        }
        self.exact(rows, cols)
    }

    /// A `1 x cols` unit (`cols > LARGE_1D`) from two registered probes.
    fn extrapolate(&mut self, cols: usize) -> Result<ShapeInfo> {
        // Affine in the length between two exact probes (see [`LARGE_1D`]).
        let (d1, d2) = (LARGE_1D / 2, LARGE_1D);
        let a = self.exact(1, d1)?.clone();
        let b = self.exact(1, d2)?.clone();
        let x = (cols - d1) as f64 / (d2 - d1) as f64;
        let extf = |u: f64, v: f64| (u + (v - u) * x).max(0.0);
        let ext = |u: usize, v: usize| extf(u as f64, v as f64).round() as usize;
        let wire = a
            .wire
            .iter()
            .zip(&b.wire)
            .map(|(a, b)| {
                a.iter()
                    .zip(b)
                    .map(|(a, b)| WireLen {
                        sum_f32: ext(a.sum_f32, b.sum_f32),
                        gather_u32: ext(a.gather_u32, b.gather_u32),
                        ring_u32: ext(a.ring_u32, b.ring_u32),
                        gather_exact: a.gather_exact && b.gather_exact,
                    })
                    .collect()
            })
            .collect();
        // Each kernel's bytes and flops extrapolated between the probes; where the
        // two probes launch different kernels (a method switching algorithm with
        // size), the larger probe's scaled in proportion to the length.
        let mut kernels = b.kernels.clone();
        for (ph, rounds) in kernels.iter_mut().enumerate() {
            for (r, stages) in rounds.iter_mut().enumerate() {
                for (s, list) in stages.iter_mut().enumerate() {
                    let small = &a.kernels[ph][r][s];
                    let same = small.len() == list.len()
                        && small.iter().zip(list.iter()).all(|(o, k)| o.name == k.name);
                    let scale = cols as f64 / d2 as f64;
                    for (i, k) in list.iter_mut().enumerate() {
                        if same {
                            k.bytes = extf(small[i].bytes, k.bytes);
                            k.flops = extf(small[i].flops, k.flops);
                        } else {
                            k.bytes *= scale;
                            k.flops *= scale;
                        }
                    }
                }
            }
        }
        let selected = ext(a.selected, b.selected);
        Ok(ShapeInfo {
            wire,
            kernels,
            selected,
        })
    }

    /// A registered `rows x cols` unit (cached).
    pub(in crate::sim) fn exact(&mut self, rows: usize, cols: usize) -> Result<&ShapeInfo> {
        let key = self.key(rows, cols, false);
        if self.cache.map.contains_key(&key) {
            return Ok(&self.cache.map[&key]);
        }
        // Only the wire and the kernel list are read: the state need not be touched.
        let _untouched = crate::compress::setup::untouched_registration();
        let mut c = registry::build(&self.case.base_method, &self.case.params, ctx(self.case))
            .map_err(|e| merr(self.case, e))?;
        c.register(0, rows, cols).map_err(|e| merr(self.case, e))?;
        let wire: PhaseWire = (0..self.phases)
            .map(|ph| (0..self.rounds).map(|r| c.phase_wire(0, r, ph)).collect())
            .collect();
        let list = |ph: usize, r: usize, stage: Stage| {
            let mut v = Vec::new();
            c.device_kernels(0, r, ph, stage, &mut |k| v.push(k));
            v
        };
        let kernels: PhaseKernels = (0..self.phases)
            .map(|ph| {
                (0..self.rounds)
                    .map(|r| [list(ph, r, Stage::Compress), list(ph, r, Stage::Decompress)])
                    .collect()
            })
            .collect();
        let info = ShapeInfo {
            wire,
            kernels,
            selected: c.selection_elems(0),
        };
        Ok(self.cache.map.entry(key).or_insert(info))
    }
}

fn ctx(case: &SimCase) -> WorkerCtx {
    WorkerCtx {
        rank: 0,
        world_size: case.world_size.max(1),
        seed: case.seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::comm::exchange::CollectiveMode;
    use crate::schedule::plan::Fusion;

    fn case(method: &str) -> SimCase {
        let wl = crate::sim::SimWorkload {
            model: "none".into(),
            tensors: Vec::new(),
            bwd_s: Vec::new(),
            fwd_s: 0.0,
            batch: 1,
            device: "test".into(),
        };
        SimCase::new(
            wl,
            method,
            Fusion::None,
            false,
            CollectiveMode::Native,
            2,
            Default::default(),
        )
    }

    /// Only a 1-row unit longer than [`LARGE_1D`] is extrapolated, from exact probes at
    /// `LARGE_1D / 2` and `LARGE_1D`; a unit of exactly `LARGE_1D`, or of two rows, is
    /// registered.
    #[test]
    fn only_one_row_units_past_large_1d_are_extrapolated() {
        let c = case("topk");
        let mut cache = WireCache::default();
        let mut o = WireOracle::new(&c, &mut cache).unwrap();
        o.info(1, LARGE_1D + 1000).unwrap();
        o.info(1, LARGE_1D).unwrap();
        o.info(2, LARGE_1D / 2 + 1).unwrap();
        let mut got: Vec<(usize, usize, bool)> =
            cache.map.keys().map(|k| (k.4, k.5, k.6)).collect();
        got.sort();
        let want = [
            (1, LARGE_1D / 2, false),
            (1, LARGE_1D, false),
            (1, LARGE_1D + 1000, true),
            (2, LARGE_1D / 2 + 1, false),
        ];
        assert_eq!(got, want);
    }

    /// A 1-row unit past [`LARGE_1D`] from probes that differ: at `3 LARGE_1D / 2` elements
    /// (`x = 2` probe spans past the smaller one) every wire word is affine between the
    /// probes, the gather stays exact only where both probes are, a kernel both probes
    /// launch by the same name is affine in bytes and flops, and a list of kernels that
    /// differs between the probes is the larger probe's scaled by `cols / LARGE_1D` (1.5).
    #[test]
    fn extrapolation_between_probes_that_differ() {
        let c = case("ssgd");
        let mut cache = WireCache::default();
        let mut o = WireOracle::new(&c, &mut cache).unwrap();
        let (d1, d2) = (LARGE_1D / 2, LARGE_1D);
        let kernel = |name: &'static str, bytes: f64, flops: f64| Kernel {
            name,
            bytes,
            flops,
            reading: None,
        };
        let probe = |gather: usize, exact: bool, same: Kernel, other: Kernel| ShapeInfo {
            wire: vec![vec![WireLen {
                sum_f32: 0,
                gather_u32: gather,
                ring_u32: 7,
                gather_exact: exact,
            }]],
            kernels: vec![vec![[vec![same], vec![other]]]],
            selected: gather,
        };
        let small = probe(100, true, kernel("a", 10.0, 1.0), kernel("b", 5.0, 5.0));
        let large = probe(200, false, kernel("a", 20.0, 2.0), kernel("c", 40.0, 4.0));
        let (k1, k2) = (o.key(1, d1, false), o.key(1, d2, false));
        o.cache.map.insert(k1, small);
        o.cache.map.insert(k2, large);
        let got = o.info(1, 3 * d1).unwrap().clone();
        let w = &got.wire[0][0];
        // 100 + (200 - 100) x 2; 7 at both probes stays 7
        assert_eq!((w.sum_f32, w.gather_u32, w.ring_u32), (0, 300, 7));
        assert!(!w.gather_exact, "exact at one probe only");
        assert_eq!(got.selected, 300);
        let [same, other] = &got.kernels[0][0];
        // "a" at both probes: 10 + (20 - 10) x 2 bytes, 1 + (2 - 1) x 2 flops
        assert_eq!(
            (same[0].name, same[0].bytes, same[0].flops),
            ("a", 30.0, 3.0)
        );
        // "b" then "c": the larger probe's "c" x 1.5
        assert_eq!(
            (other.len(), other[0].name, other[0].bytes, other[0].flops),
            (1, "c", 60.0, 6.0)
        );
    }
}
