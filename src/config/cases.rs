//! Cases: a validated [`Config`] expanded into the list of [`Case`]s a run executes
//! (cartesian product of every list), with their ids and memory estimates.

use super::*;

/// One benchmark case: the unit that is timed, written as one CSV row, and skipped by
/// `--resume`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Case {
    MicroComm {
        collective: Collective,
        bytes: u64,
        iters: u64,
        warmup: u64,
        check: bool,
    },
    MicroCompress {
        method: String,
        /// The tensor; for a model, its whole gradient as one 1-D shape.
        shape: Shape,
        /// A zoo model: every layer compressed in turn per step (absent: one tensor).
        #[serde(skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        params: crate::compress::MethodParams,
        iters: u64,
        warmup: u64,
    },
    Micro {
        method: String,
        shape: Shape,
        params: crate::compress::MethodParams,
        iters: u64,
        warmup: u64,
        check: bool,
    },
    E2e(E2eCase),
}

/// One e2e case (a row of e2e.csv).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct E2eCase {
    pub model: String,
    pub method: String,
    pub fusion: crate::schedule::plan::Fusion,
    pub pipelining: bool,
    pub collective: crate::comm::exchange::CollectiveMode,
    pub device: String,
    pub batch: Option<usize>,
    pub compute: crate::config::ComputeMode,
    pub compute_profile: Option<String>,
    pub cost_comm: Option<String>,
    /// Where compression is charged (not in the case id when `host`: ids of runs
    /// before the axis existed stay valid for `--resume`).
    #[serde(skip_serializing_if = "crate::devcost::CompressOn::is_host")]
    pub compress_on: crate::devcost::CompressOn,
    /// Device cost preset for `compress_on = device`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compress_device: Option<String>,
    /// Measured device compression times for `compress_on = device`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compress_profile: Option<String>,
    pub params: crate::compress::MethodParams,
    pub iters: u64,
    pub warmup: u64,
    pub timing: crate::measure::stats::Timing,
    /// Compress each bucket as one merged tensor (omgs, sketch-fusion).
    pub merge: bool,
}

impl E2eCase {
    /// The compressor that runs (`topk` for `omgs`, ...).
    pub fn base_method(&self) -> &str {
        base_method(&self.method)
    }
}

/// FNV-1a (64-bit) of `text`, as 16 hex digits.
fn fnv1a(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{h:016x}")
}

impl Case {
    /// Stable identity of the case in a run with `seed` on `world_size` ranks: FNV-1a
    /// (64-bit) of its JSON form, so `--resume` recognises rows of the same case and
    /// configuration (any changed parameter gives a new id).
    pub fn id(&self, seed: u64, world_size: usize) -> String {
        fnv1a(&serde_json::to_string(&(self, seed, world_size)).unwrap_or_default())
    }

    /// The id of the `nth` (2, 3, ...) occurrence of this case in one configuration.
    pub fn repeat_id(&self, seed: u64, world_size: usize, nth: u64) -> String {
        fnv1a(&serde_json::to_string(&(self, seed, world_size, nth)).unwrap_or_default())
    }

    /// Upper bound of the memory one rank adds while this case runs (bytes), beyond
    /// [`BASE_RSS_BYTES`] and, for micro-comm, beyond the message buffers that persist
    /// from case to case ([`Config::estimated_peak_bytes`] adds both). Bounds measured
    /// as peak RSS (VmHWM) at 2-4 ranks under Open MPI 4.1 (docs/reliability.md):
    /// - micro-comm: the MPI library's temporaries: 2x the message for (i)allreduce
    ///   (0.5-1x measured), the whole result for allgather (Bruck's temporary: 2x
    ///   measured at 3 ranks), nothing for our ring;
    /// - micro: gradients, residuals, wires and receive buffers, 8 fp32 copies (at most
    ///   5.5 measured); micro-compress adds the 256 MiB memory-bandwidth probe;
    /// - e2e: 5 copies of the model's gradient (4.7 measured with one fused bucket,
    ///   whose all-reduce temporary is model-sized), plus every rank's dense message
    ///   when sums travel by all-gather.
    pub fn estimated_bytes(&self, world_size: usize) -> u64 {
        let n = world_size as u64;
        match self {
            Case::MicroComm {
                collective, bytes, ..
            } => match collective {
                Collective::Allgather => bytes.saturating_mul(n),
                Collective::RingAllreduce => 0,
                _ => bytes * 2,
            },
            Case::MicroCompress {
                method,
                shape,
                params,
                ..
            } => (32 * shape.numel() as u64)
                .saturating_add(MEMORY_PROBE_BYTES)
                .saturating_add(method_state_bytes(method, params, &[shape.numel()], 1)),
            Case::Micro {
                method,
                shape,
                params,
                ..
            } => (32 * shape.numel() as u64).saturating_add(method_state_bytes(
                method,
                params,
                &[shape.numel()],
                n,
            )),
            Case::E2e(c) => {
                let zoo = crate::models::build(&c.model).ok();
                let model = zoo.as_ref().map_or(0, |m| m.fp32_bytes() as u64);
                let gather = if c.collective == crate::comm::exchange::CollectiveMode::AllGather {
                    n.saturating_mul(model)
                } else {
                    0
                };
                // Per tensor (`k` rounds up per tensor); merged buckets (omgs,
                // sketch-fusion) have fewer, larger tensors: the model whole bounds them.
                let mut tensors: Vec<usize> = zoo
                    .as_ref()
                    .map(|m| m.tensors.iter().map(|t| t.params()).collect())
                    .unwrap_or_default();
                tensors.push(tensors.iter().sum());
                (5 * model)
                    .saturating_add(gather)
                    .saturating_add(method_state_bytes(&c.method, &c.params, &tensors, n))
            }
        }
    }

    /// Timed iterations the case may run at most (adaptive e2e timing: its `max_iters`).
    pub fn max_timed_iters(&self) -> u64 {
        match self {
            Case::MicroComm { iters, .. }
            | Case::MicroCompress { iters, .. }
            | Case::Micro { iters, .. } => *iters,
            Case::E2e(c) => c.iters.max(c.timing.max_iters),
        }
    }

    /// Short description for progress lines.
    pub fn label(&self) -> String {
        match self {
            Case::MicroComm {
                collective, bytes, ..
            } => {
                format!(
                    "micro-comm {} {}",
                    collective.name(),
                    crate::units::HumanBytes(*bytes)
                )
            }
            Case::MicroCompress {
                method,
                model: Some(model),
                ..
            } => format!("micro-compress {method} {model}"),
            Case::MicroCompress { method, shape, .. } => format!("micro-compress {method} {shape}"),
            Case::Micro { method, shape, .. } => format!("micro {method} {shape}"),
            Case::E2e(c) => format!(
                "e2e {} {} collective={} fusion={} pipelining={}",
                c.model,
                c.method,
                c.collective.name(),
                c.fusion,
                if c.pipelining { "on" } else { "off" }
            ),
        }
    }
}

/// Bytes of the state a method's parameters size, beyond the tensor copies counted per
/// case, as an upper bound (tensors of `numel` elements, `world_size` ranks): the
/// method's own estimate ([`crate::compress::spec::MethodSpec::state_bytes`]; Count
/// Sketch's tables, the pairs, signs or codes every rank receives from the all-gather
/// methods), 0 for a method without one or a name that runs no method.
///
/// Saturating: an absurd parameter gives `u64::MAX` (refused), never an overflow.
pub fn method_state_bytes(
    method: &str,
    params: &crate::compress::MethodParams,
    numels: &[usize],
    world_size: u64,
) -> u64 {
    crate::compress::registry::spec_of(method)
        .and_then(|s| s.state_bytes)
        .map_or(0, |f| f(params, numels, world_size))
}

/// Refuse `need` bytes per rank for the case `label` when `ranks_here` ranks of it do not
/// fit in [`MEMORY_USABLE_FRACTION`] of `available_bytes`.
pub fn check_memory_need(
    label: &str,
    need: u64,
    ranks_here: usize,
    available_bytes: u64,
) -> Result<(), String> {
    let total = need.saturating_mul(ranks_here as u64);
    let usable = (available_bytes as f64 * MEMORY_USABLE_FRACTION) as u64;
    if total > usable {
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        return Err(format!(
            "case '{label}' needs up to {:.1} GiB per rank, {:.1} GiB for the {ranks_here} rank(s) on this node, but only {:.1} GiB is available ({:.0}% of it usable, the rest is a safety margin); use smaller sizes or parameters, fewer ranks per node, or --skip-memory-check",
            gib(need),
            gib(total),
            gib(available_bytes),
            MEMORY_USABLE_FRACTION * 100.0
        ));
    }
    Ok(())
}

impl Config {
    /// Whether the run has threads besides the MPI one (the e2e device thread, the
    /// case-timeout watchdog; `cli_timeout` is `--case-timeout`): they need FUNNELED.
    pub fn uses_threads(&self, cli_timeout: Option<f64>) -> bool {
        !self.e2e.is_empty() || self.case_timeout_s.is_some() || cli_timeout.is_some()
    }

    /// Upper bound of one rank's peak resident memory over the whole run (bytes), and
    /// the case that needs the most: [`BASE_RSS_BYTES`], plus micro-comm's message
    /// buffers (the largest send, receive and ring scratch, kept from case to case),
    /// plus the largest [`Case::estimated_bytes`].
    pub fn estimated_peak_bytes(&self, world_size: usize) -> (u64, Option<Case>) {
        let n = world_size.max(1) as u64;
        let (mut send, mut recv) = (0u64, 0u64);
        let mut largest: Option<(Case, u64)> = None;
        for c in self.cases() {
            if let Case::MicroComm {
                collective, bytes, ..
            } = &c
            {
                send = send.max(*bytes);
                recv = recv.max(if *collective == Collective::Allgather {
                    bytes.saturating_mul(n)
                } else {
                    *bytes
                });
            }
            // samples.csv: rank 0 gathers every rank's time of every timed iteration
            // (8 bytes each) and each rank keeps its own; the statistics sort a copy.
            let samples = if self.samples {
                c.max_timed_iters().saturating_mul(8).saturating_mul(n + 2)
            } else {
                c.max_timed_iters().saturating_mul(16)
            };
            let b = c.estimated_bytes(world_size).saturating_add(samples);
            if largest.as_ref().map_or(true, |(_, m)| b > *m) {
                largest = Some((c, b));
            }
        }
        let buffers = send + recv + send.div_ceil(n);
        let (case, extra) = largest.map_or((None, 0), |(c, b)| (Some(c), b));
        (
            BASE_RSS_BYTES.saturating_add(buffers).saturating_add(extra),
            case,
        )
    }

    /// Refuse up front a run that cannot fit in this node's memory with a margin:
    /// `ranks_here` ranks of [`Config::estimated_peak_bytes`] each must fit in
    /// [`MEMORY_USABLE_FRACTION`] of `available_bytes`.
    pub fn check_memory(
        &self,
        world_size: usize,
        ranks_here: usize,
        available_bytes: u64,
    ) -> Result<(), String> {
        let (need, Some(case)) = self.estimated_peak_bytes(world_size) else {
            return Ok(());
        };
        check_memory_need(&case.label(), need, ranks_here, available_bytes)
    }

    /// The number of cases [`Config::cases`] would expand to, without expanding them.
    pub fn case_count(&self) -> u128 {
        let n = |x: usize| x as u128;
        let mut total = 0u128;
        let rounds = n(self.rounds.max(1));
        for s in &self.micro_comm {
            total += n(s.collectives.len()) * n(s.sizes.len()) * rounds;
        }
        for s in self.micro_compress.iter().chain(&self.micro) {
            total += n(s.methods.len())
                * (n(s.shapes.len()) + n(s.models.len()))
                * n(s.params.len())
                * rounds;
        }
        for s in &self.e2e {
            for method in &s.methods {
                let fusions = if implied_fusion(method).is_some() {
                    1
                } else {
                    s.fusion.len()
                };
                total += n(s.models.len())
                    * n(s.params.len())
                    * n(distinct_collectives(method, &s.collectives).len())
                    * n(fusions)
                    * n(s.pipelining.len())
                    * n(s.compress_on.len())
                    * rounds;
            }
        }
        total
    }

    /// Refuse a configuration that expands to more than [`MAX_CASES`] cases; `what`
    /// names the config in messages.
    pub fn check_cases(&self, what: &str) -> Result<(), String> {
        let count = self.case_count();
        if count > MAX_CASES {
            return Err(format!(
                "{what}: expands to {count} cases; at most {MAX_CASES} per run: shorten its lists or split the sweep into several runs"
            ));
        }
        Ok(())
    }

    /// Refuse a time-dilated run (`time_dilation` > 1) of what dilation cannot emulate
    /// honestly: iallreduce-overlap (the compute runs while MPI reduces in the
    /// background, so the library's reduction cannot be padded where it happens). A
    /// config's micro-compress sections run undilated, with a note: their kernels run on
    /// one rank between barriers with no network or emulated device, so their times are
    /// this CPU's whatever K (the `micro-compress` command itself refuses the flag,
    /// src/cli/into_config.rs).
    pub fn check_dilation(&self, what: &str) -> Result<(), String> {
        let k = self.time_dilation;
        if k <= 1 {
            return Ok(());
        }
        if self
            .micro_comm
            .iter()
            .any(|s| s.collectives.contains(&Collective::IallreduceOverlap))
        {
            return Err(format!(
                "{what}: --time-dilation {k} (time_dilation) with iallreduce-overlap: MPI reduces in the background while the test computes, so its reduction cannot be stretched where it runs; leave iallreduce-overlap out of a dilated run"
            ));
        }
        if !self.micro_compress.is_empty() {
            super::warn(format!(
                "{what}: time dilation {k}: the [[micro-compress]] sections run undilated (kernels on one rank, no network or emulated device: their times are this CPU's at any K; micro_compress.csv has no time_dilation column)"
            ));
        }
        Ok(())
    }

    /// The case_id of every case of [`Config::cases`], in order. A case repeated by a
    /// later section (a deliberate second measurement) gets its own id, so `--resume`
    /// runs every repeat once.
    pub fn case_ids(&self, cases: &[Case], world_size: usize) -> Vec<String> {
        let mut seen: std::collections::HashMap<String, u64> = Default::default();
        cases
            .iter()
            .map(|c| {
                let first = c.id(self.seed, world_size);
                let nth = seen.entry(first.clone()).or_insert(0);
                *nth += 1;
                if *nth == 1 {
                    first
                } else {
                    c.repeat_id(self.seed, world_size, *nth)
                }
            })
            .collect()
    }

    /// Every case of every section, in order: per section, collective-major then size.
    pub fn cases(&self) -> Vec<Case> {
        let mut out = Vec::new();
        for s in &self.micro_comm {
            for &collective in &s.collectives {
                for &bytes in &s.sizes {
                    let (di, dw) = default_iters(bytes);
                    out.push(Case::MicroComm {
                        collective,
                        bytes,
                        iters: s.iters.unwrap_or(di),
                        warmup: s.warmup.unwrap_or(dw),
                        check: s.check,
                    });
                }
            }
        }
        for (s, kind) in self
            .micro_compress
            .iter()
            .map(|s| (s, false))
            .chain(self.micro.iter().map(|s| (s, true)))
        {
            for method in &s.methods {
                for &shape in &s.shapes {
                    for params in &s.params {
                        let (di, dw) = default_compress_iters(shape.numel());
                        let (iters, warmup) = (s.iters.unwrap_or(di), s.warmup.unwrap_or(dw));
                        let params = params.for_method(method);
                        let method = method.clone();
                        out.push(if kind {
                            Case::Micro {
                                method,
                                shape,
                                params,
                                iters,
                                warmup,
                                check: s.check,
                            }
                        } else {
                            Case::MicroCompress {
                                method,
                                shape,
                                model: None,
                                params,
                                iters,
                                warmup,
                            }
                        });
                    }
                }
                for model in &s.models {
                    // Validated: the zoo has it.
                    let Ok(m) = crate::models::build(model) else {
                        continue;
                    };
                    let shape = Shape {
                        rows: 1,
                        cols: m.params(),
                    };
                    for params in &s.params {
                        let (di, dw) = default_compress_iters(shape.numel());
                        out.push(Case::MicroCompress {
                            method: method.clone(),
                            shape,
                            model: Some(model.clone()),
                            params: params.for_method(method),
                            iters: s.iters.unwrap_or(di),
                            warmup: s.warmup.unwrap_or(dw),
                        });
                    }
                }
            }
        }
        for s in &self.e2e {
            for model in &s.models {
                for method in &s.methods {
                    for params in &s.params {
                        let alias = E2E_METHODS.iter().find(|(a, _)| a == method);
                        let fusions = match implied_fusion(method) {
                            Some(f) => vec![f],
                            None => s.fusion.clone(),
                        };
                        for collective in distinct_collectives(method, &s.collectives) {
                            for &fusion in &fusions {
                                for (&pipelining, &compress_on) in
                                    cartesian(&s.pipelining, &s.compress_on)
                                {
                                    out.push(Case::E2e(E2eCase {
                                        model: model.clone(),
                                        method: method.clone(),
                                        fusion,
                                        pipelining,
                                        collective,
                                        device: s.device.clone(),
                                        batch: s.batch,
                                        compute: s.compute,
                                        compute_profile: s.compute_profile.clone(),
                                        cost_comm: s.cost_comm.clone(),
                                        compress_on,
                                        compress_device: match compress_on {
                                            crate::devcost::CompressOn::Host => None,
                                            crate::devcost::CompressOn::Device => {
                                                s.compress_device.clone()
                                            }
                                        },
                                        compress_profile: match compress_on {
                                            crate::devcost::CompressOn::Host => None,
                                            crate::devcost::CompressOn::Device => {
                                                s.compress_profile.clone()
                                            }
                                        },
                                        params: params.for_method(method),
                                        iters: s.iters,
                                        warmup: s.warmup,
                                        timing: s.timing,
                                        merge: alias.is_some(),
                                    }));
                                }
                            }
                        }
                    }
                }
            }
        }
        // Every case round after round (`rounds`): a slow spell of a shared machine then
        // hits one repeat of a case, not all of them, and the micro-benchmarks that a
        // simulator fits are measured beside the e2e cases it is compared with, round
        // by round (issue 29: measured apart, a machine 30-45% faster for the first
        // minute moved every fit and none of the e2e times).
        let round: Vec<Case> = out.clone();
        for _ in 1..self.rounds.max(1) {
            out.extend(round.iter().cloned());
        }
        out
    }
}

/// Every pair of `a` and `b`, `a` outer.
fn cartesian<'x, A, B>(a: &'x [A], b: &'x [B]) -> impl Iterator<Item = (&'x A, &'x B)> {
    a.iter().flat_map(move |x| b.iter().map(move |y| (x, y)))
}
