//! The e2e section: models, methods (with the merged aliases), fusion, pipelining,
//! collectives and method parameters, validated into an [`E2eSpec`].

use super::*;

/// `[[e2e]]`: training iterations of models, per method x fusion x pipelining.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct E2eSection {
    pub models: Vec<String>,
    pub methods: Vec<String>,
    /// Fusion plans: `none`, a byte threshold (`25MiB`), `single`, or a planner: `mgwfbp`,
    /// `omgs`, `layerfusion`.
    #[serde(default = "default_fusion")]
    pub fusion: Vec<String>,
    /// Pipelining (wait-free backprop) on and/or off: booleans or `"on"` / `"off"`, as
    /// the command line takes them.
    #[serde(default = "default_pipelining", deserialize_with = "on_off_list")]
    pub pipelining: Vec<bool>,
    /// Collectives: `auto` (the method's own), `allreduce`, `allgather`, `ps`.
    #[serde(default = "default_collectives")]
    pub collective: Vec<String>,
    /// Device preset for the compute model (`v100`, `rtx2080ti`, `a100`, `h100`).
    #[serde(default = "default_device")]
    pub device: String,
    /// Per-worker batch size [default: the model's].
    #[serde(default)]
    pub batch: Option<usize>,
    /// How the device waits: `sleep` (default), `spin`, `none` (no compute).
    #[serde(default = "default_compute")]
    pub compute: String,
    /// Measured per-layer backward times (CSV) instead of the device preset.
    #[serde(default)]
    pub compute_profile: Option<String>,
    /// Planner fusions: collective cost models fitted from this micro_comm.csv instead
    /// of a calibration at the start of each case.
    #[serde(default)]
    pub cost_comm: Option<String>,
    /// Where compression is charged: `host` (default) and/or `device` (the device cost
    /// model; docs/reproduce.md, "Host or device compression").
    #[serde(default = "default_compress_on")]
    pub compress_on: Vec<String>,
    /// Device cost preset for `compress_on = device` (`v100`, `rtx2080ti`, `a100`,
    /// `h100`) [default: `device`].
    #[serde(default)]
    pub compress_device: Option<String>,
    /// Measured device compression times (analysis/profile_compress.py) replacing the
    /// cost model's where they cover the operation.
    #[serde(default)]
    pub compress_profile: Option<String>,
    /// Density sweep; this key and the next three are the parameter sweep ([`Sweep`]).
    #[serde(default)]
    pub densities: Option<Vec<f64>>,
    /// Power-SGD/ACP-SGD rank sweep (overrides params.rank).
    #[serde(default)]
    pub lowrank_ranks: Option<Vec<usize>>,
    /// Deprecated name of `lowrank_ranks` (accepted with a warning).
    #[serde(default)]
    pub ranks: Option<Vec<usize>>,
    #[serde(default)]
    pub params: crate::compress::MethodParams,
    /// Timed iterations (the minimum when adaptive timing is on).
    #[serde(default)]
    pub iters: Option<u64>,
    #[serde(default)]
    pub warmup: Option<u64>,
    /// Adaptive timing: time each case for at least this long (s).
    #[serde(default)]
    pub min_time_s: Option<f64>,
    /// Adaptive timing: iterate until the 95% interval of the mean is within this share
    /// of the mean (e.g. 0.02).
    #[serde(default)]
    pub target_ci: Option<f64>,
    /// Adaptive timing: never more timed iterations than this (default 1000).
    #[serde(default)]
    pub max_iters: Option<u64>,
    /// Adaptive timing: stop once the timed iterations took this long (s), after `iters`.
    #[serde(default)]
    pub max_time_s: Option<f64>,
}

fn default_fusion() -> Vec<String> {
    vec!["none".into()]
}
/// A list of booleans, each written `true` / `false` or `"on"` / `"off"`.
fn on_off_list<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Vec<bool>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OnOff {
        Bool(bool),
        Text(String),
    }
    let items: Vec<OnOff> = Vec::deserialize(d)?;
    items
        .into_iter()
        .map(|x| match x {
            OnOff::Bool(b) => Ok(b),
            OnOff::Text(t) => match t.trim() {
                "on" | "true" => Ok(true),
                "off" | "false" => Ok(false),
                other => Err(serde::de::Error::custom(format!(
                    "'{other}' is not on or off; give [\"off\", \"on\"] or [false, true]"
                ))),
            },
        })
        .collect()
}

fn default_pipelining() -> Vec<bool> {
    vec![false, true]
}
fn default_collectives() -> Vec<String> {
    vec!["auto".into()]
}
fn default_device() -> String {
    "v100".into()
}
fn default_compute() -> String {
    "sleep".into()
}
fn default_compress_on() -> Vec<String> {
    vec!["host".into()]
}

/// e2e-only methods: (name, planner). They compress each bucket as one merged tensor
/// with buckets from their own planner (their `fusion` is fixed), with the compressor
/// [`crate::compress::registry::VARIANTS`] names ([`base_method`]).
pub const E2E_METHODS: &[(&str, crate::schedule::plan::PlannerKind)] = &[
    ("omgs", crate::schedule::plan::PlannerKind::Omgs),
    (
        "sketch-fusion",
        crate::schedule::plan::PlannerKind::LayerFusion,
    ),
];

/// The fusion an e2e method implies (its planner), or `None` when the case's fusion
/// applies. Sweeps over fusion produce one case for such a method, not one per value.
pub fn implied_fusion(m: &str) -> Option<crate::schedule::plan::Fusion> {
    E2E_METHODS
        .iter()
        .find(|(a, _)| *a == m)
        .map(|(_, k)| crate::schedule::plan::Fusion::Planner(*k))
}

/// The collective modes that give distinct cases for `method`: modes that run the same
/// collectives (`auto` and `allreduce` for S-SGD, `auto` and `ring` for Marsit) give one
/// case, the first listed, not one identical row per mode.
pub fn distinct_collectives(
    method: &str,
    modes: &[crate::comm::exchange::CollectiveMode],
) -> Vec<crate::comm::exchange::CollectiveMode> {
    let Ok(agg) = crate::compress::registry::aggregation(base_method(method)) else {
        return modes.to_vec();
    };
    let mut out: Vec<crate::comm::exchange::CollectiveMode> = Vec::with_capacity(modes.len());
    for &m in modes {
        if !out.iter().any(|o| o.effective(agg) == m.effective(agg)) {
            out.push(m);
        }
    }
    out
}

/// The compressor behind an e2e method name ([`crate::compress::registry::VARIANTS`]);
/// any other name as given.
pub fn base_method(m: &str) -> &str {
    crate::compress::registry::VARIANTS
        .iter()
        .find(|(a, _)| *a == m)
        .map_or(m, |(_, b)| b)
}

/// A validated e2e section.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct E2eSpec {
    pub models: Vec<String>,
    pub methods: Vec<String>,
    pub fusion: Vec<crate::schedule::plan::Fusion>,
    pub pipelining: Vec<bool>,
    pub collectives: Vec<crate::comm::exchange::CollectiveMode>,
    pub device: String,
    pub batch: Option<usize>,
    pub compress_on: Vec<crate::devcost::CompressOn>,
    /// The device cost preset, when `compress_on` has `device`.
    pub compress_device: Option<String>,
    pub compress_profile: Option<String>,
    pub compute: ComputeMode,
    pub compute_profile: Option<String>,
    pub cost_comm: Option<String>,
    pub params: Vec<crate::compress::MethodParams>,
    pub iters: u64,
    pub warmup: u64,
    pub timing: crate::measure::stats::Timing,
}

impl E2eSection {
    /// The compute model of every model: the device preset or the profile (read and
    /// matched to the model), and unless `compute` is none, the modelled forward plus
    /// backward time at the section's batch at most [`super::MAX_ITERATION_COMPUTE_S`]
    /// (a case past it would sleep for hours per iteration).
    fn check_compute_model(
        &self,
        origin: &Origin,
        compute: ComputeMode,
    ) -> Result<(), ConfigError> {
        // The key a bad compute model is blamed on, and the key of a too-long iteration.
        let (bad_key, long_key) = match self.compute_profile {
            Some(_) => ("compute_profile", "compute_profile"),
            None => ("device", "batch"),
        };
        for m in &self.models {
            let model = crate::models::build(m).map_err(|e| origin.invalid("models", e))?;
            let batch = self.batch.unwrap_or(model.default_batch);
            let cm = crate::models::compute::ComputeModel::of_case(
                self.compute_profile.as_deref(),
                &self.device,
                &model,
            )
            .map_err(|e| origin.invalid(bad_key, e))?;
            if compute == ComputeMode::None {
                continue;
            }
            let t_s = cm.forward_time_s(&model, batch)
                + cm.backward_times_s(&model, batch).iter().sum::<f64>();
            if t_s.is_nan() || t_s > super::MAX_ITERATION_COMPUTE_S {
                return Err(origin.invalid(
                    long_key,
                    format!(
                        "{m} at batch {batch} ({}): one iteration's modelled compute is {t_s:.3e} s, more than the {} s allowed; give a smaller batch or check the profile's times (seconds, not microseconds)",
                        cm.describe(),
                        super::MAX_ITERATION_COMPUTE_S
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `compress_on` and the device preset it needs (`compress_device`, else `device`).
    /// A compression profile is checked against every parameter set of the sweep
    /// (`params`, the expanded densities and ranks), not only the base parameters.
    fn compress_on(
        &self,
        origin: &Origin,
        params: &[crate::compress::MethodParams],
    ) -> Result<(Vec<crate::devcost::CompressOn>, Option<String>), ConfigError> {
        use crate::devcost::CompressOn;
        use crate::roofline::DeviceSpec;
        let mut out = Vec::with_capacity(self.compress_on.len());
        for c in &self.compress_on {
            let on = CompressOn::parse(c.trim()).ok_or_else(|| {
                origin.invalid(
                    "compress_on",
                    format!("unknown value '{c}'; allowed: host, device"),
                )
            })?;
            if out.contains(&on) {
                return Err(origin.invalid(
                    "compress_on",
                    format!("'{c}' appears twice; each entry is one case, remove the repeat"),
                ));
            }
            out.push(on);
        }
        if out.is_empty() {
            return Err(origin.invalid("compress_on", "empty: give host, device or both"));
        }
        if let Some(p) = &self.compress_profile {
            let prof = crate::devcost::profile::CompressProfile::read(p)
                .map_err(|e| origin.invalid("compress_profile", e))?;
            let base: Vec<&str> = self.methods.iter().map(|m| base_method(m)).collect();
            for p in params {
                prof.check_params(&base, p)
                    .map_err(|e| origin.invalid("compress_profile", e))?;
            }
            if !out.contains(&CompressOn::Device) {
                return Err(origin.invalid(
                    "compress_profile",
                    "a compression profile prices device compression: add compress_on = device",
                ));
            }
        }
        if !out.contains(&CompressOn::Device) {
            return Ok((out, None));
        }
        let (key, name) = match &self.compress_device {
            Some(d) => ("compress_device", d.clone()),
            None => ("device", self.device.clone()),
        };
        if let Err(e) = DeviceSpec::parse(&name) {
            return Err(origin.invalid(
                key,
                format!(
                    "{e}; compress_on = device needs a device cost preset: set compress_device"
                ),
            ));
        }
        Ok((out, Some(name)))
    }

    pub fn validate(&self, origin: &Origin) -> Result<E2eSpec, ConfigError> {
        if self.models.is_empty() {
            return Err(origin.invalid(
                "models",
                format!(
                    "is empty; give one or more of {}",
                    crate::models::names().join(", ")
                ),
            ));
        }
        for m in &self.models {
            crate::models::build(m).map_err(|e| origin.invalid("models", e))?;
        }
        no_repeats(origin, "models", &self.models, |m| m.clone())?;
        let trimmed: Vec<&str> = self.methods.iter().map(|m| m.trim()).collect();
        no_repeats(origin, "methods", &trimmed, |m| m.to_string())?;
        // Methods and hyper-parameters: the same rules as the micro benchmarks, with the
        // e2e-only names (omgs, sketch-fusion) checked as their base compressors.
        let mut methods: Vec<String> = Vec::new();
        for m in &self.methods {
            let m = m.trim().to_string();
            if !methods.contains(&m) {
                methods.push(m);
            }
        }
        let params = Sweep::new(
            &self.densities,
            &self.lowrank_ranks,
            &self.ranks,
            &self.params,
        )
        .expand_for(methods.iter().map(|m| base_method(m)), self.iters, origin)?;
        check_counts(origin, self.iters, self.warmup)?;
        if self.fusion.is_empty() {
            return Err(origin.invalid(
                "fusion",
                "is empty; give none, single or a byte threshold such as 25MiB",
            ));
        }
        let fusion = self
            .fusion
            .iter()
            .map(|f| parse_fusion(origin, "fusion", f))
            .collect::<Result<Vec<_>, _>>()?;
        no_repeats(origin, "fusion", &fusion, |f| f.to_string())?;
        if self.pipelining.is_empty() {
            return Err(origin.invalid("pipelining", "is empty; give on, off or both"));
        }
        no_repeats(origin, "pipelining", &self.pipelining, |p| {
            if *p { "on" } else { "off" }.to_string()
        })?;
        let mut pipelining = self.pipelining.clone();
        pipelining.sort(); // off before on: the overlap efficiency of "on" needs "off"
        pipelining.dedup();
        use crate::comm::exchange::CollectiveMode;
        if self.collective.is_empty() {
            return Err(origin.invalid(
                "collective",
                format!("is empty; give one or more of {}", CollectiveMode::NAMES),
            ));
        }
        let mut collectives = Vec::new();
        for c in &self.collective {
            let mode = CollectiveMode::parse(c.trim()).ok_or_else(|| {
                origin.invalid(
                    "collective",
                    format!(
                        "unknown collective '{c}'; allowed: {}",
                        CollectiveMode::NAMES
                    ),
                )
            })?;
            // Incompatible method/collective pairs are rejected here, before anything runs.
            for m in &methods {
                let agg = crate::compress::registry::aggregation(base_method(m))
                    .map_err(|e| origin.invalid("methods", e))?;
                mode.supports(agg).map_err(|why| {
                    origin.invalid("collective", format!("method {m} cannot use {c}: {why}"))
                })?;
            }
            if collectives.contains(&mode) {
                return Err(origin.invalid(
                    "collective",
                    format!("'{c}' appears twice; each entry is one case, remove the repeat"),
                ));
            }
            collectives.push(mode);
        }
        let compute = ComputeMode::parse(&self.compute).ok_or_else(|| {
            origin.invalid(
                "compute",
                format!(
                    "unknown compute mode '{}'; allowed: sleep, spin, none",
                    self.compute
                ),
            )
        })?;
        if let Some(path) = &self.cost_comm {
            crate::netmodel::CommModels::from_micro_comm_csv(path)
                .map_err(|e| origin.invalid("cost_comm", e))?;
        }
        let (compress_on, compress_device) = self.compress_on(origin, &params)?;
        if self.batch == Some(0) {
            return Err(origin.invalid(
                "batch",
                "0 samples: give a batch size >= 1 (or leave it out for the model's default)",
            ));
        }
        if let Some(b) = self.batch.filter(|&b| b > super::MAX_BATCH) {
            return Err(origin.invalid(
                "batch",
                format!(
                    "{b} samples per worker: more than the {} allowed; give a per-worker batch (not a global one)",
                    super::MAX_BATCH
                ),
            ));
        }
        self.check_compute_model(origin, compute)?;
        Ok(E2eSpec {
            models: self.models.clone(),
            methods,
            fusion,
            pipelining,
            collectives,
            device: self.device.clone(),
            batch: self.batch,
            compress_on,
            compress_device,
            compress_profile: self.compress_profile.clone(),
            compute,
            compute_profile: self.compute_profile.clone(),
            cost_comm: self.cost_comm.clone(),
            params,
            iters: self.iters.unwrap_or(10),
            warmup: self.warmup.unwrap_or(2),
            timing: self.timing(origin)?,
        })
    }
}

impl E2eSection {
    /// The stopping rule of each case ([`crate::measure::stats::Timing`]): `iters` timed
    /// iterations, or adaptive when `min_time_s` or `target_ci` is given.
    fn timing(&self, origin: &Origin) -> Result<crate::measure::stats::Timing, ConfigError> {
        let iters = self.iters.unwrap_or(10);
        if self.min_time_s.is_none() && self.target_ci.is_none() {
            for (key, given) in [
                ("max_iters", self.max_iters.is_some()),
                ("max_time_s", self.max_time_s.is_some()),
            ] {
                if given {
                    return Err(origin.invalid(
                        key,
                        "applies to adaptive timing only: give min_time_s or target_ci too",
                    ));
                }
            }
            return Ok(crate::measure::stats::Timing::fixed(iters));
        }
        let min_time_s = self.min_time_s.unwrap_or(0.0);
        if !(min_time_s.is_finite() && (0.0..=3600.0).contains(&min_time_s)) {
            return Err(origin.invalid(
                "min_time_s",
                format!("{min_time_s} is not a time in seconds between 0 and 3600"),
            ));
        }
        let target = self.target_ci.unwrap_or(f64::INFINITY);
        if self.target_ci.is_some() && !(target > 0.0 && target <= 1.0) {
            return Err(origin.invalid(
                "target_ci",
                format!("{target} is not a share of the mean in (0, 1], e.g. 0.02"),
            ));
        }
        let max_iters = self.max_iters.unwrap_or(1000.max(iters));
        if max_iters < iters || max_iters > MAX_ITERS {
            return Err(origin.invalid(
                "max_iters",
                format!("{max_iters} must be at least iters ({iters}) and at most {MAX_ITERS}"),
            ));
        }
        let max_time_s = self.max_time_s.unwrap_or(f64::INFINITY);
        if !(max_time_s > 0.0 && max_time_s >= min_time_s) {
            return Err(origin.invalid(
                "max_time_s",
                format!("{max_time_s} must be positive and at least min_time_s ({min_time_s})"),
            ));
        }
        Ok(crate::measure::stats::Timing {
            min_iters: iters,
            min_time_s,
            target_rel_ci: target,
            max_iters,
            max_time_s,
        })
    }
}

/// How the device waits out a layer's compute time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ComputeMode {
    /// No compute: every gradient is ready at once.
    None,
    /// Sleep until each layer's deadline (leaves the core to MPI ranks; default).
    Sleep,
    /// Busy-wait until each deadline (occupies a core like a real host thread driving a GPU).
    Spin,
}

impl ComputeMode {
    pub fn parse(s: &str) -> Option<ComputeMode> {
        match s {
            "none" => Some(ComputeMode::None),
            "sleep" => Some(ComputeMode::Sleep),
            "spin" => Some(ComputeMode::Spin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ComputeMode::None => "none",
            ComputeMode::Sleep => "sleep",
            ComputeMode::Spin => "spin",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every e2e method names the compressor it runs in the registry, and only those.
    #[test]
    fn e2e_methods_are_the_registry_variants() {
        let ours: Vec<&str> = E2E_METHODS.iter().map(|(m, _)| *m).collect();
        let variants: Vec<&str> = crate::compress::registry::VARIANTS
            .iter()
            .map(|(m, _)| *m)
            .collect();
        assert_eq!(ours, variants);
        assert_eq!(base_method("omgs"), "topk");
        assert_eq!(base_method("sketch-fusion"), "sketch");
        assert_eq!(base_method("topk"), "topk");
    }

    fn section(extra: &str) -> E2eSection {
        toml::from_str(&format!(
            "models = [\"resnet20\"]\nmethods = [\"ssgd\"]\n{extra}"
        ))
        .unwrap()
    }

    /// Adaptive timing without `max_iters` stops at 1000 timed iterations, or at `iters`
    /// when that is more (the key's doc: "default 1000"; `max_iters` is never under
    /// `iters`): `iters = 20` may run to 1000, `iters = 5000` to 5000. Fixed timing runs
    /// `iters` exactly.
    #[test]
    fn adaptive_timing_defaults_to_at_least_1000_iterations() {
        let timing = |extra: &str| section(extra).validate(&Origin::Cli).unwrap().timing;
        for (iters, max_iters) in [(20u64, 1000u64), (5000, 5000), (1000, 1000)] {
            let t = timing(&format!("iters = {iters}\nmin_time_s = 0.5"));
            assert_eq!(
                (t.min_iters, t.max_iters),
                (iters, max_iters),
                "iters {iters}"
            );
            let t = timing(&format!("iters = {iters}\ntarget_ci = 0.02"));
            assert_eq!((t.min_iters, t.max_iters), (iters, max_iters));
        }
        // Default iters (10): adaptive up to 1000; fixed: 10 and 10.
        let t = timing("min_time_s = 0.5");
        assert_eq!((t.min_iters, t.max_iters), (10, 1000));
        let t = timing("iters = 20");
        assert_eq!((t.min_iters, t.max_iters), (20, 20));
        // A given max_iters is kept.
        let t = timing("iters = 20\nmin_time_s = 0.5\nmax_iters = 50");
        assert_eq!(t.max_iters, 50);
    }
}
