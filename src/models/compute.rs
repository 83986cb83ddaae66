//! Compute model of the emulated accelerator: how long each layer's backward takes.
//!
//! With a device preset, the backward time of tensor `l` is
//! `2 × fwd_flops_l × batch / (effective TFLOP/s × 1e12)` — backward costs about twice
//! the forward (one matmul for the input gradient, one for the weight gradient; Kaplan
//! et al. 2020, §2.1, training ≈ 3 × forward). The forward time is
//! `fwd_flops × batch / throughput`.
//!
//! # Presets
//! One convention for every preset: **mixed-precision training** (fp16/bf16 tensor
//! cores, fp32 accumulation), effective throughput = vendor dense tensor-core peak ×
//! [`UTILISATION`] (30 %).
//!
//! | preset      | peak TFLOP/s | basis                                                        | effective |
//! |-------------|-------------:|--------------------------------------------------------------|----------:|
//! | `v100`      | 125          | Tesla V100 SXM2 fp16 tensor (Volta whitepaper)               | 37.5      |
//! | `rtx2080ti` | 53.8         | GeForce RTX 2080 Ti fp16 tensor, fp32 accumulate (Turing whitepaper; 107.6 with fp16 accumulate) | 16.14 |
//! | `a100`      | 312          | A100 SXM4 dense bf16/fp16 tensor (Ampere whitepaper)         | 93.6      |
//! | `h100`      | 989          | H100 SXM5 dense bf16/fp16 tensor (Hopper whitepaper; 1979 with sparsity) | 296.7 |
//! | `p102-100`  | 10.7712      | P102-100 (GP102, Pascal), **fp32**: no tensor cores and fp16 at 1/64 rate, so it trains in fp32; 3200 CUDA cores x 2 x 1683 MHz boost (TechPowerUp GPU database; no NVIDIA datasheet). OMGS-SGD's GPU (HKBU-HPML/OMGS-SGD utils.py at ac10b98) | 3.23 |
//!
//! Why 30 %: ResNet-50 mixed-precision training on a V100 runs at about 1,400 images/s
//! (NVIDIA DeepLearningExamples), i.e. 1,400 × 3 × 8.2 GFLOP ≈ 34 TFLOP/s = 27 % of
//! peak; large transformers reach 40–50 % model FLOPs utilisation on A100/H100, small
//! CNNs on those GPUs less (about 20 %). 30 % is a middle value: treat the presets as
//! "a device of this class", and use a measured profile when the exact ratio of compute
//! to communication matters. `p102-100` has no tensor cores: its peak is the fp32 one,
//! at the same 30 %.
//!
//! # Measured profiles (`--compute-profile FILE.csv`)
//! See [`load_profile`] for the format.

use std::path::Path;

use super::{Model, ModelError};

/// Utilisation of the dense tensor-core peak assumed by every preset.
pub const UTILISATION: f64 = 0.30;

/// A named device: its assumed effective training throughput and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct DevicePreset {
    pub name: &'static str,
    /// Effective throughput in TFLOP/s = `peak_tflops × utilisation`.
    pub effective_tflops: f64,
    /// Vendor dense mixed-precision tensor-core peak, TFLOP/s.
    pub peak_tflops: f64,
    /// Fraction of the peak assumed reached in training.
    pub utilisation: f64,
    pub description: &'static str,
}

/// Builds a preset; a macro rather than a `const fn` because float arithmetic in
/// `const fn` needs Rust 1.82 and the crate supports 1.75.
macro_rules! device {
    ($name:expr, $peak:expr, $description:expr) => {
        DevicePreset {
            name: $name,
            effective_tflops: $peak * UTILISATION,
            peak_tflops: $peak,
            utilisation: UTILISATION,
            description: $description,
        }
    };
}

static PRESETS: [DevicePreset; 5] = [
    device!("v100", 125.0, "NVIDIA Tesla V100 SXM2: 125 TFLOP/s fp16 tensor-core peak x 30% = 37.5 effective"),
    device!(
        "rtx2080ti",
        53.8,
        "NVIDIA GeForce RTX 2080 Ti: 53.8 TFLOP/s fp16 tensor (fp32 accumulate) peak x 30% = 16.1 effective"
    ),
    device!("a100", 312.0, "NVIDIA A100 SXM4: 312 TFLOP/s dense bf16 tensor-core peak x 30% = 93.6 effective"),
    device!("h100", 989.0, "NVIDIA H100 SXM5: 989 TFLOP/s dense bf16 tensor-core peak x 30% = 296.7 effective"),
    device!(
        "p102-100",
        10.7712,
        "NVIDIA P102-100 (GP102, no tensor cores, trains in fp32): 10.7712 TFLOP/s fp32 peak (3200 CUDA cores x 2 x 1683 MHz boost; TechPowerUp GPU database) x 30% = 3.23 effective"
    ),
];

/// Every device preset.
pub fn presets() -> &'static [DevicePreset] {
    &PRESETS
}

/// The device preset called `name`.
pub fn preset(name: &str) -> Result<DevicePreset, ModelError> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .cloned()
        .ok_or_else(|| ModelError::UnknownPreset {
            name: crate::units::clip(name),
            allowed: PRESETS
                .iter()
                .map(|p| p.name)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Per-layer times measured on real hardware for one model (see [`load_profile`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    /// The model the profile was checked against.
    pub model: String,
    /// Where it came from (for run metadata).
    pub path: String,
    /// Backward seconds per tensor, in the model's registration order.
    pub backward_s: Vec<f64>,
    /// Whole forward pass in seconds, when the file gives a `__forward__` row.
    pub forward_s: Option<f64>,
}

#[derive(Clone, Debug)]
enum Source {
    Throughput { tflops: f64, label: String },
    Measured(Profile),
}

/// Turns a model and a batch into emulated forward/backward times.
#[derive(Clone, Debug)]
pub struct ComputeModel {
    source: Source,
}

impl ComputeModel {
    /// FLOPs-based times at a preset's effective throughput.
    pub fn from_preset(p: &DevicePreset) -> ComputeModel {
        ComputeModel {
            source: Source::Throughput {
                tflops: p.effective_tflops,
                label: format!("preset {}", p.name),
            },
        }
    }

    /// Measured per-layer times.
    pub fn from_profile(p: Profile) -> ComputeModel {
        ComputeModel {
            source: Source::Measured(p),
        }
    }

    /// A case's compute model: the profile at `profile` (read and matched to `model`)
    /// when given, else the device preset `device`.
    pub fn of_case(
        profile: Option<&str>,
        device: &str,
        model: &Model,
    ) -> Result<ComputeModel, ModelError> {
        Ok(match profile {
            Some(p) => ComputeModel::from_profile(read_profile(p, model)?),
            None => ComputeModel::from_preset(&preset(device)?),
        })
    }

    /// What the times are based on, for run metadata: `preset v100 (37.5 TFLOP/s
    /// effective)` or `profile FILE`.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Throughput { tflops, label } if label.starts_with("preset") => {
                format!("{label} ({tflops} TFLOP/s effective)")
            }
            Source::Throughput { label, .. } => format!("{label} effective"),
            Source::Measured(p) => format!("profile {} ({})", p.path, p.model),
        }
    }

    /// The effective throughput, when the times are FLOPs-based.
    pub fn effective_tflops(&self) -> Option<f64> {
        match &self.source {
            Source::Throughput { tflops, .. } => Some(*tflops),
            Source::Measured(_) => None,
        }
    }

    /// Backward seconds of each tensor in registration order:
    /// `2 × fwd_flops × batch / (TFLOP/s × 1e12)`, or the profile's measured times (used
    /// as measured: `batch` must be the batch the profile was taken at).
    ///
    /// Panics if a profile is used with another model than it was loaded for.
    pub fn backward_times_s(&self, model: &Model, batch: usize) -> Vec<f64> {
        match &self.source {
            Source::Throughput { tflops, .. } => {
                let scale = 2.0 * batch as f64 / (tflops * 1e12);
                model.tensors.iter().map(|t| t.fwd_flops * scale).collect()
            }
            Source::Measured(p) => {
                assert!(
                    p.model == model.name && p.backward_s.len() == model.tensors.len(),
                    "compute profile {} was loaded for model {}, not {}",
                    p.path,
                    p.model,
                    model.name
                );
                p.backward_s.clone()
            }
        }
    }

    /// Forward seconds of the whole model: `fwd_flops × batch / throughput`, or the
    /// profile's `__forward__` time (half its total backward time when it has none,
    /// by the same backward = 2 × forward convention).
    pub fn forward_time_s(&self, model: &Model, batch: usize) -> f64 {
        match &self.source {
            Source::Throughput { tflops, .. } => {
                model.fwd_flops_per_sample() * batch as f64 / (tflops * 1e12)
            }
            Source::Measured(p) => p
                .forward_s
                .unwrap_or_else(|| self.backward_times_s(model, batch).iter().sum::<f64>() / 2.0),
        }
    }
}

/// Name of the optional row holding the whole forward time.
pub const FORWARD_ROW: &str = "__forward__";

/// Read a measured per-layer compute profile for `model` and return the backward
/// seconds per tensor in registration order (see [`read_profile`] for the forward time).
///
/// Format: CSV with a header row; `#` starts a comment line. Columns (any order):
/// - `tensor`: a parameter name exactly as `gradcomp models MODEL` lists it;
/// - `backward_s`: seconds of that tensor's share of the backward pass at the batch the
///   benchmark runs with (a non-negative number);
/// - `forward_s` (optional column): empty on tensor rows; on one row whose `tensor` is
///   `__forward__` (with `backward_s` empty) it gives the whole forward pass in seconds.
///
/// Every tensor of the model must appear exactly once.
/// ```text
/// tensor,backward_s,forward_s
/// conv1.weight,0.00021,
/// bn1.weight,0.000004,
/// ...
/// __forward__,,0.0123
/// ```
pub fn load_profile(path: impl AsRef<Path>, model: &Model) -> Result<Vec<f64>, ModelError> {
    read_profile(path, model).map(|p| p.backward_s)
}

/// [`load_profile`], also returning the optional forward time.
pub fn read_profile(path: impl AsRef<Path>, model: &Model) -> Result<Profile, ModelError> {
    let path = path.as_ref();
    let shown = path.display().to_string();
    let err = |line: u64, msg: String| ModelError::Profile {
        path: shown.clone(),
        line,
        msg,
    };
    let file = crate::input::open(
        path,
        crate::input::PROFILE_BYTES,
        "a compute profile (CSV: tensor,backward_s[,forward_s])",
    )?;
    // Its own reader, not record::CsvFile: a profile is written by hand or by another
    // tool, so it allows `#` comments and padded cells, refuses unknown columns, and
    // names the line of every error; gradcomp's own CSVs need none of that.
    let mut rdr = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_reader(file);
    let csv_err = |e: csv::Error| {
        let line = e.position().map(|p| p.line()).unwrap_or(0);
        match e.into_kind() {
            csv::ErrorKind::Io(source) => ModelError::ProfileIo { path: shown.clone(), source },
            csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
                err(line, format!("{len} fields where the header has {expected_len}; every row needs the header's columns (leave unused ones empty)"))
            }
            kind => err(line, format!("not valid CSV: {kind:?}")),
        }
    };

    let headers = rdr.headers().map_err(csv_err)?.clone();
    let cols = profile_columns(&headers, &err)?;
    let (backward, forward) = read_times(&mut rdr, cols, model, &err, &csv_err)?;
    Ok(Profile {
        model: model.name.clone(),
        path: shown.clone(),
        backward_s: backward
            .into_iter()
            .map(|b| b.map(|x| x.0).unwrap_or(0.0))
            .collect(),
        forward_s: forward.map(|f| f.0),
    })
}

/// The columns of a profile's header: `tensor`, `backward_s` and the optional
/// `forward_s`; an unknown or repeated column is refused.
fn profile_columns(
    headers: &csv::StringRecord,
    err: &impl Fn(u64, String) -> ModelError,
) -> Result<(usize, usize, Option<usize>), ModelError> {
    if headers.is_empty() || headers.iter().all(str::is_empty) {
        return Err(err(0, "the file is empty; expected a header row 'tensor,backward_s' (optional column forward_s)".into()));
    }
    let mut col_tensor = None;
    let mut col_bwd = None;
    let mut col_fwd = None;
    for (i, h) in headers.iter().enumerate() {
        let slot = match h {
            "tensor" => &mut col_tensor,
            "backward_s" => &mut col_bwd,
            "forward_s" => &mut col_fwd,
            other => {
                return Err(err(1, format!("unknown column '{other}'; the columns are tensor, backward_s and optionally forward_s")));
            }
        };
        if slot.replace(i).is_some() {
            return Err(err(1, format!("column '{h}' appears twice in the header")));
        }
    }
    let (Some(col_tensor), Some(col_bwd)) = (col_tensor, col_bwd) else {
        return Err(err(
            1,
            "the header must name the columns 'tensor' and 'backward_s' (optional: forward_s)"
                .into(),
        ));
    };
    Ok((col_tensor, col_bwd, col_fwd))
}

/// Each tensor's backward time and the forward time (with the line each was given on),
/// every tensor of `model` exactly once.
type Times = (Vec<Option<(f64, u64)>>, Option<(f64, u64)>);

/// A profile's rows: every tensor of `model` once, the forward row at most once.
fn read_times(
    rdr: &mut csv::Reader<impl std::io::Read>,
    (col_tensor, col_bwd, col_fwd): (usize, usize, Option<usize>),
    model: &Model,
    err: &impl Fn(u64, String) -> ModelError,
    csv_err: &impl Fn(csv::Error) -> ModelError,
) -> Result<Times, ModelError> {
    let seconds = |line: u64, col: &str, tensor: &str, v: &str| -> Result<f64, ModelError> {
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
            _ => Err(err(line, format!("{col} = '{v}' for tensor '{tensor}' is not a time; write a non-negative number of seconds, e.g. 0.00012"))),
        }
    };

    let n = model.tensors.len();
    let mut backward: Vec<Option<(f64, u64)>> = vec![None; n];
    let mut forward: Option<(f64, u64)> = None;
    let mut rows = 0usize;
    for rec in rdr.records() {
        let rec = rec.map_err(csv_err)?;
        let line = rec.position().map(|p| p.line()).unwrap_or(0);
        let name = rec.get(col_tensor).unwrap_or("");
        let bwd = rec.get(col_bwd).unwrap_or("");
        let fwd = col_fwd.and_then(|c| rec.get(c)).unwrap_or("");
        rows += 1;
        if name == FORWARD_ROW {
            if col_fwd.is_none() {
                return Err(err(
                    line,
                    format!("row '{FORWARD_ROW}' needs a 'forward_s' column in the header"),
                ));
            }
            if !bwd.is_empty() {
                return Err(err(line, format!("row '{FORWARD_ROW}' takes its time in forward_s; leave backward_s empty (it is '{bwd}')")));
            }
            if let Some((_, first)) = forward {
                return Err(err(
                    line,
                    format!(
                        "row '{FORWARD_ROW}' appears again (first on line {first}); give it once"
                    ),
                ));
            }
            forward = Some((seconds(line, "forward_s", name, fwd)?, line));
            continue;
        }
        if name.is_empty() {
            return Err(err(
                line,
                "empty tensor name; every row names one tensor of the model".into(),
            ));
        }
        let Some(idx) = model.tensor_index(name) else {
            return Err(err(
                line,
                format!(
                    "'{name}' is not a tensor of model {}; run `gradcomp models {}` for the names",
                    model.name, model.name
                ),
            ));
        };
        if !fwd.is_empty() {
            return Err(err(line, format!("forward_s = '{fwd}' on tensor row '{name}'; forward_s goes only on the '{FORWARD_ROW}' row, leave it empty here")));
        }
        if let Some((_, first)) = backward[idx] {
            return Err(err(line, format!("tensor '{name}' appears again (first on line {first}); give each tensor exactly once")));
        }
        backward[idx] = Some((seconds(line, "backward_s", name, bwd)?, line));
    }
    if rows == 0 {
        return Err(err(
            0,
            format!(
                "no rows after the header; give one row per tensor of model {} ({n} tensors)",
                model.name
            ),
        ));
    }
    check_complete(&backward, model, err)?;
    Ok((backward, forward))
}

/// Refuse a profile that misses a tensor of `model` (the first five named).
fn check_complete(
    backward: &[Option<(f64, u64)>],
    model: &Model,
    err: &impl Fn(u64, String) -> ModelError,
) -> Result<(), ModelError> {
    let n = model.tensors.len();
    let missing: Vec<&str> = backward
        .iter()
        .zip(&model.tensors)
        .filter(|(b, _)| b.is_none())
        .map(|(_, t)| t.name.as_str())
        .collect();
    if !missing.is_empty() {
        let shown_names = missing
            .iter()
            .take(5)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let more = if missing.len() > 5 {
            format!(" and {} more", missing.len() - 5)
        } else {
            String::new()
        };
        return Err(err(
            0,
            format!(
                "{} of the {n} tensors of model {} are missing: {shown_names}{more}; give every tensor exactly once",
                missing.len(),
                model.name
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
