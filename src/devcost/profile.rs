//! Measured device compression costs (`--compress-profile FILE.csv`; docs/performance.md,
//! "Measured device compression costs"; format in docs/csv-schema.md, "Compress
//! profile"): per method, stage, round, phase and tensor shape, the time the method's
//! GPU implementation took on a real device, as `analysis/profile_compress.py` measures
//! it. Where a profile has a row, it replaces the roofline time of the method's kernels
//! ([`super::DeviceSpec::kernel_s`]) for that stage of that tensor.
//!
//! # Format
//! Plain comma-separated text, no quoting. Blank lines are ignored. A line starting with
//! `#` is a comment; a comment `# key: value` is provenance (device, torch version, date,
//! the method parameters the times were taken at: `density`, `rank`, ... under their
//! [`crate::compress::MethodParams`] names), other comments are free text. The first
//! other line is the header, [`HEADER`] (its columns in any order); then one row per
//! measurement:
//!
//! | column | meaning |
//! |---|---|
//! | `method` | a method of [`crate::compress::registry::METHODS`], or `copy` |
//! | `stage` | `compress` (compression of one round, error feedback included) or `decompress` (every worker's piece of one round into the update) as [`Stage::name`]; `copy` on `copy` rows |
//! | `round`, `phase` | the round of the step and the phase of the step cycle, from 0 (Power-SGD: rounds 0 and 1; ACP-SGD: phases 0 (P) and 1 (Q)); 0 on `copy` rows |
//! | `rows`, `cols` | the tensor's matrix view as gradcomp registers it ([`crate::models::Tensor::rows_cols`], `gradcomp models NAME`); `copy` rows: `1` and the number of fp32 elements copied |
//! | `world_size` | the number of workers whose pieces a decompress read |
//! | `time_s` | median seconds, `>= 0` |
//!
//! **World size.** Only the decompress of an all-gather method (`signsgd`, `signsgd-mv`,
//! `topk`, `dgc`, `qsgd`) reads one piece per worker, so only its time depends on the
//! world size ([`world_size_matters`]). Its lookup needs a row at exactly the run's world
//! size: a run at a world size the profile lacks fails [`CompressProfile::check`] (no
//! extrapolation; re-run the script with `--world-size N`). Every other time is taken
//! from the row at the run's world size, or else from the row at the nearest world size
//! (ties: the smaller), since it measures the same work.
//!
//! **Copies.** `copy` rows time a device-to-device copy of `cols` fp32 elements at
//! several sizes; [`CompressProfile::copy_spec`] fits a launch latency and a bandwidth to
//! them (relative least squares of `launch_s + 8·cols / bandwidth`) for the copies that
//! are no method's (packing buckets, splitting received wires).
//!
//! Every error names the file, the line (1-based, as an editor numbers it), the column,
//! the value and the fix; every [`ProfileError`] but [`ProfileError::Write`] is bad
//! input (exit code 2).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use thiserror::Error;

use super::{DeviceSpec, Stage};
use crate::compress::{registry, Aggregation, MethodParams, WorkerCtx};

/// The header `analysis/profile_compress.py` writes (columns may come in any order).
pub const HEADER: &str = "method,stage,round,phase,rows,cols,world_size,time_s";
/// The method and stage name of copy rows.
pub const COPY: &str = "copy";
/// The script that writes profiles (named in every fix).
pub const SCRIPT: &str = "analysis/profile_compress.py";

const COLUMNS: [&str; 8] = [
    "method",
    "stage",
    "round",
    "phase",
    "rows",
    "cols",
    "world_size",
    "time_s",
];

/// Method parameters a profile's times depend on, with the methods that read them:
/// [`CompressProfile::check_params`] compares them with the run's.
const PARAM_KEYS: &[(&str, &[&str])] = &[
    ("density", &["topk", "dgc", "sketch"]),
    ("rank", &["powersgd", "acpsgd"]),
    ("min_compression_rate", &["powersgd", "acpsgd"]),
    ("nesterov", &["dgc"]),
    ("clip_norm", &["dgc"]),
    ("sketch_rows", &["sketch"]),
    ("sketch_cols_per_k", &["sketch"]),
    ("qsgd_levels", &["qsgd"]),
];

/// Where in a profile: the file and a 1-based line (0: the file as a whole).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub path: String,
    pub line: usize,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "compress profile {}, line {}", self.path, self.line)
        } else {
            write!(f, "compress profile {}", self.path)
        }
    }
}

/// A profile that cannot be read, or does not cover a run.
#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("cannot read compress profile {path}: {source}; give the CSV file {SCRIPT} wrote")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// Writing failed (a failed run, exit 1).
    #[error("cannot write compress profile {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    /// The header is missing or names unknown, repeated or too few columns.
    #[error("{at}: {msg}; the header is '{HEADER}' (any order)")]
    Header { at: Loc, msg: String },
    /// A row with more or fewer fields than the header.
    #[error("{at}: {got} fields where the header has {want}; every row has the header's columns")]
    Fields { at: Loc, got: usize, want: usize },
    /// A field that is not a valid value for its column (not a number, negative, ...).
    #[error("{at}, column {column}: '{value}' {msg}")]
    Value {
        at: Loc,
        column: &'static str,
        value: String,
        msg: String,
    },
    #[error("{at}, column method: unknown method '{value}'; allowed: {allowed}, {COPY}")]
    UnknownMethod {
        at: Loc,
        value: String,
        allowed: String,
    },
    #[error("{at}, column stage: '{value}' is not a stage of method {method}; {want}")]
    UnknownStage {
        at: Loc,
        method: String,
        value: String,
        want: &'static str,
    },
    /// A round or phase the method does not have.
    #[error("{at}, column {column}: {column} {value} of method {method}, which has {limit} ({column}s 0..{limit})")]
    OutOfRange {
        at: Loc,
        column: &'static str,
        method: String,
        value: usize,
        limit: usize,
    },
    #[error("{at}: {row} appears again (first on line {first}); give each row once")]
    Duplicate { at: Loc, row: String, first: usize },
    #[error("{at}: no rows after the header; run {SCRIPT} to measure some")]
    NoRows { at: Loc },
    /// The copy rows cannot give a launch latency and a bandwidth.
    #[error("{at}: copy rows: {msg}; re-run {SCRIPT} (it times copies at several sizes)")]
    CopyFit { at: Loc, msg: String },
    /// A comment `# key: value` with a method parameter that is not a number.
    #[error("{at}: parameter {key} = '{value}' {msg}")]
    Meta {
        at: Loc,
        key: String,
        value: String,
        msg: String,
    },
    /// The run uses a method the profile has no rows for.
    #[error("{at}: no rows for method {method} (the profile has: {have}); re-run {SCRIPT} with --methods including {method}")]
    MissingMethod {
        at: Loc,
        method: String,
        have: String,
    },
    /// The run has a tensor shape the profile has no row for.
    #[error("{at}: no {method} {stage} row for shape {rows}x{cols} (round {round}, phase {phase}; {missing} of the run's {total} shapes lack {method} rows); re-run {SCRIPT} with the run's --model or --shapes {rows}x{cols}")]
    MissingShape {
        at: Loc,
        method: String,
        stage: &'static str,
        round: usize,
        phase: usize,
        rows: usize,
        cols: usize,
        missing: usize,
        total: usize,
    },
    /// An all-gather method's decompress at a world size the profile lacks.
    #[error("{at}: {method} decompress reads one piece per worker, and the profile has shape {rows}x{cols} at world size {have} only, not {world_size}; re-run {SCRIPT} with --world-size {world_size}")]
    MissingWorldSize {
        at: Loc,
        method: String,
        rows: usize,
        cols: usize,
        world_size: usize,
        have: String,
    },
    /// The profile was measured at other method parameters than the run's.
    #[error("{at}: {msg}")]
    Param { at: Loc, msg: String },
}

impl ProfileError {
    /// Process exit code, as for [`crate::Error::exit_code`]: 1 for a failed write, 2
    /// (bad input) for everything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ProfileError::Write { .. } => crate::error::EXIT_FAILURE,
            _ => crate::error::EXIT_USAGE,
        }
    }
}

/// One measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// A registry method name, or [`COPY`].
    pub method: String,
    /// `None` on copy rows.
    pub stage: Option<Stage>,
    pub round: usize,
    pub phase: usize,
    pub rows: usize,
    pub cols: usize,
    pub world_size: usize,
    pub time_s: f64,
}

/// `(stage, round, phase, rows, cols)`; stage 0 = compress, 1 = decompress.
type OpKey = (u8, usize, usize, usize, usize);

fn stage_code(s: Stage) -> u8 {
    match s {
        Stage::Compress => 0,
        Stage::Decompress => 1,
    }
}

fn stage_of(code: u8) -> Stage {
    if code == 0 {
        Stage::Compress
    } else {
        Stage::Decompress
    }
}

fn parse_stage(s: &str) -> Option<Stage> {
    match s {
        "compress" => Some(Stage::Compress),
        "decompress" => Some(Stage::Decompress),
        _ => None,
    }
}

/// Rounds, phases and aggregation of a registry method (built with default parameters:
/// none of the three depends on them).
fn method_info(name: &str) -> Option<(usize, usize, Aggregation)> {
    let c = registry::build(
        name,
        &MethodParams::default(),
        WorkerCtx {
            rank: 0,
            world_size: 1,
            seed: 0,
        },
    )
    .ok()?;
    Some((c.rounds(), c.phases(), c.aggregation()))
}

/// Whether the time of `stage` of `method` depends on the world size: only the
/// decompress of an all-gather method (it reads one piece per worker).
pub fn world_size_matters(method: &str, stage: Stage) -> bool {
    stage == Stage::Decompress
        && matches!(method_info(method), Some((_, _, Aggregation::AllGather)))
}

/// A measured compression profile (see the module doc for the format).
#[derive(Clone, Debug, Default)]
pub struct CompressProfile {
    path: String,
    /// `# key: value` comments in file order, with their lines (0 when set in code).
    meta: Vec<(String, String, usize)>,
    /// method -> operation -> world size -> seconds.
    times: BTreeMap<String, BTreeMap<OpKey, BTreeMap<usize, f64>>>,
    /// (elements, world size) -> seconds.
    copies: BTreeMap<(usize, usize), f64>,
    /// Line of each row read from a file (for duplicate errors).
    lines: HashMap<String, usize>,
}

impl CompressProfile {
    /// An empty profile; `path` names it in errors.
    pub fn new(path: impl Into<String>) -> CompressProfile {
        CompressProfile {
            path: path.into(),
            ..CompressProfile::default()
        }
    }

    /// Read and validate the profile at `path` (the copy rows must fit, see
    /// [`CompressProfile::copy_spec`]).
    pub fn read(path: impl AsRef<Path>) -> Result<CompressProfile, ProfileError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ProfileError::Io {
            path: shown.clone(),
            source,
        })?;
        CompressProfile::parse(&text, shown)
    }

    /// Parse the text of a profile; `path` names it in errors.
    pub fn parse(text: &str, path: impl Into<String>) -> Result<CompressProfile, ProfileError> {
        let mut p = CompressProfile::new(path);
        let mut cols: Option<[usize; 8]> = None;
        let mut width = 0;
        let mut rows = 0usize;
        let mut header_line = 0;
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(c) = l.strip_prefix('#') {
                if let Some((k, v)) = c.split_once(':') {
                    let k = k.trim();
                    if !k.is_empty() && !k.contains(char::is_whitespace) {
                        p.meta.push((k.to_string(), v.trim().to_string(), line));
                    }
                }
                continue;
            }
            let fields: Vec<&str> = l.split(',').map(str::trim).collect();
            let Some(cols) = cols else {
                cols = Some(p.header(&fields, line)?);
                width = fields.len();
                header_line = line;
                continue;
            };
            if fields.len() != width {
                return Err(ProfileError::Fields {
                    at: p.at(line),
                    got: fields.len(),
                    want: width,
                });
            }
            let get = |c: usize| fields[cols[c]];
            let row = p.row(line, get)?;
            p.insert_at(row, line)?;
            rows += 1;
        }
        if cols.is_none() {
            return Err(ProfileError::Header {
                at: p.at(0),
                msg: "the file has no header row".into(),
            });
        }
        if rows == 0 {
            return Err(ProfileError::NoRows {
                at: p.at(header_line),
            });
        }
        p.check_meta()?;
        p.fit_copies()?;
        Ok(p)
    }

    fn at(&self, line: usize) -> Loc {
        Loc {
            path: self.path.clone(),
            line,
        }
    }

    /// Column index of each of [`COLUMNS`] in the header.
    fn header(&self, fields: &[&str], line: usize) -> Result<[usize; 8], ProfileError> {
        let mut idx = [usize::MAX; 8];
        for (i, h) in fields.iter().enumerate() {
            let Some(c) = COLUMNS.iter().position(|c| c == h) else {
                return Err(ProfileError::Header {
                    at: self.at(line),
                    msg: format!("unknown column '{h}'"),
                });
            };
            if idx[c] != usize::MAX {
                return Err(ProfileError::Header {
                    at: self.at(line),
                    msg: format!("column '{h}' appears twice"),
                });
            }
            idx[c] = i;
        }
        if let Some(c) = idx.iter().position(|&i| i == usize::MAX) {
            return Err(ProfileError::Header {
                at: self.at(line),
                msg: format!("missing column '{}'", COLUMNS[c]),
            });
        }
        Ok(idx)
    }

    /// One data row from its fields (by [`COLUMNS`] index).
    fn row<'a>(&self, line: usize, get: impl Fn(usize) -> &'a str) -> Result<Row, ProfileError> {
        let value = |column: &'static str, v: &str, msg: String| ProfileError::Value {
            at: self.at(line),
            column,
            value: v.to_string(),
            msg,
        };
        let int = |c: usize, min: usize| -> Result<usize, ProfileError> {
            let v = get(c);
            match v.parse::<usize>() {
                Ok(x) if x >= min => Ok(x),
                _ => Err(value(
                    COLUMNS[c],
                    v,
                    format!("is not an integer >= {min}; re-run {SCRIPT}"),
                )),
            }
        };
        let method = get(0);
        let is_copy = method == COPY;
        if !is_copy && !registry::METHODS.contains(&method) {
            return Err(ProfileError::UnknownMethod {
                at: self.at(line),
                value: method.to_string(),
                allowed: registry::METHODS.join(", "),
            });
        }
        let stage_s = get(1);
        let stage = match (is_copy, parse_stage(stage_s)) {
            (false, Some(s)) => Some(s),
            (true, None) if stage_s == COPY => None,
            (false, _) => {
                return Err(ProfileError::UnknownStage {
                    at: self.at(line),
                    method: method.to_string(),
                    value: stage_s.to_string(),
                    want: "write compress or decompress (copy only on copy rows)",
                })
            }
            (true, _) => {
                return Err(ProfileError::UnknownStage {
                    at: self.at(line),
                    method: method.to_string(),
                    value: stage_s.to_string(),
                    want: "copy rows have stage copy",
                })
            }
        };
        let round = int(2, 0)?;
        let phase = int(3, 0)?;
        let rows = int(4, 1)?;
        let cols = int(5, 1)?;
        let world_size = int(6, 1)?;
        let t = get(7);
        let time_s = match t.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => x,
            Ok(x) if x < 0.0 => {
                return Err(value(
                    "time_s",
                    t,
                    format!("is negative: times are seconds >= 0; re-run {SCRIPT}"),
                ))
            }
            _ => {
                return Err(value(
                    "time_s",
                    t,
                    format!("is not a time: write a finite number of seconds >= 0, e.g. 0.00012; re-run {SCRIPT}"),
                ))
            }
        };
        if is_copy {
            for (c, v) in [(2, round), (3, phase)] {
                if v != 0 {
                    return Err(value(COLUMNS[c], get(c), "must be 0 on copy rows".into()));
                }
            }
            if rows != 1 {
                return Err(value(
                    "rows",
                    get(4),
                    "must be 1 on copy rows (cols is the number of elements copied)".into(),
                ));
            }
        }
        Ok(Row {
            method: method.to_string(),
            stage,
            round,
            phase,
            rows,
            cols,
            world_size,
            time_s,
        })
    }

    /// Add a row (as read from line `line`; 0 when built in code).
    fn insert_at(&mut self, row: Row, line: usize) -> Result<(), ProfileError> {
        let bad = |column: &'static str, v: String, msg: String| ProfileError::Value {
            at: self.at(line),
            column,
            value: v,
            msg,
        };
        if !row.time_s.is_finite() || row.time_s < 0.0 {
            return Err(bad(
                "time_s",
                row.time_s.to_string(),
                format!("is not a time: seconds >= 0; re-run {SCRIPT}"),
            ));
        }
        if row.rows == 0 || row.cols == 0 || row.world_size == 0 {
            return Err(bad(
                "rows",
                format!("{}x{} at world size {}", row.rows, row.cols, row.world_size),
                "rows, cols and world_size are >= 1".into(),
            ));
        }
        let key = match row.stage {
            None => {
                if row.method != COPY || row.rows != 1 || row.round != 0 || row.phase != 0 {
                    return Err(bad(
                        "method",
                        row.method.clone(),
                        "a row without a stage is a copy row: method copy, round 0, phase 0, rows 1".into(),
                    ));
                }
                format!(
                    "copy row of {} elements at world size {}",
                    row.cols, row.world_size
                )
            }
            Some(stage) => {
                let Some((rounds, phases, _)) = method_info(&row.method) else {
                    return Err(ProfileError::UnknownMethod {
                        at: self.at(line),
                        value: row.method.clone(),
                        allowed: registry::METHODS.join(", "),
                    });
                };
                for (column, v, limit) in
                    [("round", row.round, rounds), ("phase", row.phase, phases)]
                {
                    if v >= limit {
                        return Err(ProfileError::OutOfRange {
                            at: self.at(line),
                            column,
                            method: row.method.clone(),
                            value: v,
                            limit,
                        });
                    }
                }
                format!(
                    "{} {} row of shape {}x{} (round {}, phase {}) at world size {}",
                    row.method,
                    stage.name(),
                    row.rows,
                    row.cols,
                    row.round,
                    row.phase,
                    row.world_size
                )
            }
        };
        if let Some(&first) = self.lines.get(&key) {
            return Err(ProfileError::Duplicate {
                at: self.at(line),
                row: key,
                first,
            });
        }
        self.lines.insert(key, line);
        match row.stage {
            None => {
                self.copies.insert((row.cols, row.world_size), row.time_s);
            }
            Some(stage) => {
                self.times
                    .entry(row.method)
                    .or_default()
                    .entry((stage_code(stage), row.round, row.phase, row.rows, row.cols))
                    .or_default()
                    .insert(row.world_size, row.time_s);
            }
        }
        Ok(())
    }

    /// Add a row built in code (validated as a row read from a file would be).
    pub fn insert(&mut self, row: Row) -> Result<(), ProfileError> {
        if row.method != COPY && !registry::METHODS.contains(&row.method.as_str()) {
            return Err(ProfileError::UnknownMethod {
                at: self.at(0),
                value: row.method,
                allowed: registry::METHODS.join(", "),
            });
        }
        self.insert_at(row, 0)
    }

    /// Set a `# key: value` comment (replaces an earlier value of `key`).
    pub fn set_meta(&mut self, key: &str, value: &str) {
        self.meta.retain(|m| m.0 != key);
        self.meta.push((key.to_string(), value.to_string(), 0));
    }

    /// The value of comment `# key: value` (the first, when repeated).
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.meta.iter().find(|m| m.0 == key).map(|m| m.1.as_str())
    }

    /// The file the profile was read from (or the name given to [`CompressProfile::new`]).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// For run metadata: `compress profile FILE (device NAME)`.
    pub fn describe(&self) -> String {
        match self.meta("device") {
            Some(d) => format!("compress profile {} (device {d})", self.path),
            None => format!("compress profile {}", self.path),
        }
    }

    /// The methods with rows (registry order).
    pub fn methods(&self) -> Vec<&str> {
        registry::METHODS
            .iter()
            .copied()
            .filter(|m| self.times.contains_key(*m))
            .collect()
    }

    /// The world sizes of `method`'s rows, ascending.
    pub fn world_sizes(&self, method: &str) -> Vec<usize> {
        let mut v: Vec<usize> = self
            .times
            .get(method)
            .into_iter()
            .flat_map(|ops| ops.values().flat_map(|w| w.keys().copied()))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Every row: method rows in registry order, then copy rows.
    pub fn rows(&self) -> Vec<Row> {
        let mut out = Vec::new();
        for m in registry::METHODS {
            let Some(ops) = self.times.get(*m) else {
                continue;
            };
            for (&(stage, round, phase, rows, cols), ws) in ops {
                for (&world_size, &time_s) in ws {
                    out.push(Row {
                        method: m.to_string(),
                        stage: Some(stage_of(stage)),
                        round,
                        phase,
                        rows,
                        cols,
                        world_size,
                        time_s,
                    });
                }
            }
        }
        for (&(cols, world_size), &time_s) in &self.copies {
            out.push(Row {
                method: COPY.to_string(),
                stage: None,
                round: 0,
                phase: 0,
                rows: 1,
                cols,
                world_size,
                time_s,
            });
        }
        out
    }

    /// The measured seconds of `stage` of `method`'s `round` in steps of `phase` for a
    /// `rows x cols` tensor at `world_size` workers; `None` when the profile has no such
    /// row. At a world size the profile lacks, the row at the nearest world size (ties:
    /// the smaller) unless [`world_size_matters`] (an all-gather method's decompress).
    #[allow(clippy::too_many_arguments)]
    pub fn time_s(
        &self,
        method: &str,
        stage: Stage,
        round: usize,
        phase: usize,
        rows: usize,
        cols: usize,
        world_size: usize,
    ) -> Option<f64> {
        let ws = self
            .times
            .get(method)?
            .get(&(stage_code(stage), round, phase, rows, cols))?;
        if let Some(&t) = ws.get(&world_size) {
            return Some(t);
        }
        if world_size_matters(method, stage) {
            return None;
        }
        ws.iter()
            .min_by_key(|(&w, _)| (w.abs_diff(world_size), w))
            .map(|(_, &t)| t)
    }

    /// Check that the profile covers a run: every method of `methods` (registry names),
    /// both stages of each of its rounds and phases for every shape of `shapes`, and, for
    /// an all-gather method's decompress, `world_size` exactly. The first gap is the
    /// error, naming the method, the shape and the fix.
    pub fn check(
        &self,
        methods: &[&str],
        shapes: &[(usize, usize)],
        world_size: usize,
    ) -> Result<(), ProfileError> {
        let mut distinct: Vec<(usize, usize)> = shapes.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        let have = || {
            let m = self.methods();
            if m.is_empty() {
                "no method rows".to_string()
            } else {
                m.join(", ")
            }
        };
        for &method in methods {
            let (Some(ops), Some((rounds, phases, _))) =
                (self.times.get(method), method_info(method))
            else {
                return Err(ProfileError::MissingMethod {
                    at: self.at(0),
                    method: method.to_string(),
                    have: have(),
                });
            };
            let mut first = None;
            let mut missing = 0;
            for &(rows, cols) in &distinct {
                let mut gap = None;
                'ops: for round in 0..rounds {
                    for phase in 0..phases {
                        for stage in [Stage::Compress, Stage::Decompress] {
                            if self
                                .time_s(method, stage, round, phase, rows, cols, world_size)
                                .is_none()
                            {
                                gap = Some((stage, round, phase));
                                break 'ops;
                            }
                        }
                    }
                }
                let Some((stage, round, phase)) = gap else {
                    continue;
                };
                if let Some(ws) = ops.get(&(stage_code(stage), round, phase, rows, cols)) {
                    // The shape is there at other world sizes only.
                    return Err(ProfileError::MissingWorldSize {
                        at: self.at(0),
                        method: method.to_string(),
                        rows,
                        cols,
                        world_size,
                        have: ws
                            .keys()
                            .map(|w| w.to_string())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
                missing += 1;
                first.get_or_insert((stage, round, phase, rows, cols));
            }
            if let Some((stage, round, phase, rows, cols)) = first {
                return Err(ProfileError::MissingShape {
                    at: self.at(0),
                    method: method.to_string(),
                    stage: stage.name(),
                    round,
                    phase,
                    rows,
                    cols,
                    missing,
                    total: distinct.len(),
                });
            }
        }
        Ok(())
    }

    /// Check that the profile was measured at the run's method parameters where the
    /// times of `methods` depend on them (`density` for topk, dgc, sketch; `rank` and
    /// `min_compression_rate` for powersgd, acpsgd; `nesterov` and `clip_norm` for dgc;
    /// `sketch_rows`, `sketch_cols_per_k` for sketch; `qsgd_levels` for qsgd): each must
    /// be recorded as a comment `# key: value` equal to the run's.
    pub fn check_params(
        &self,
        methods: &[&str],
        params: &MethodParams,
    ) -> Result<(), ProfileError> {
        let run = serde_json::to_value(params).unwrap_or_default();
        for &(key, users) in PARAM_KEYS {
            let Some(user) = methods.iter().find(|m| users.contains(m)) else {
                continue;
            };
            let want = &run[key];
            let shown_want = match want {
                serde_json::Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            let flag = format!("--{}", key.replace('_', "-"));
            let flag = if key == "rank" {
                "--lowrank-rank".to_string()
            } else {
                flag
            };
            let Some((_, got, line)) = self.meta.iter().find(|m| m.0 == key) else {
                return Err(ProfileError::Param {
                    at: self.at(0),
                    msg: format!("{user}'s time depends on {key}, which the profile does not record; re-run {SCRIPT} {flag} {shown_want} (it writes '# {key}: {shown_want}'), or add that comment if the profile was taken at it"),
                });
            };
            let same = match want {
                serde_json::Value::Bool(b) => got.parse::<bool>().ok() == Some(*b),
                serde_json::Value::Number(n) => {
                    let w = n.as_f64().unwrap_or(f64::NAN);
                    got.parse::<f64>()
                        .map(|g| (g - w).abs() <= 1e-9 * w.abs().max(g.abs()))
                        .unwrap_or(false)
                }
                _ => false,
            };
            if !same {
                return Err(ProfileError::Param {
                    at: self.at(*line),
                    msg: format!("measured at {key} = {got}, but the run uses {key} = {shown_want}, and {user}'s time depends on it; re-run {SCRIPT} {flag} {shown_want}"),
                });
            }
        }
        Ok(())
    }

    /// Method parameters recorded in comments must be numbers (or `true`/`false`).
    fn check_meta(&self) -> Result<(), ProfileError> {
        for (k, v, line) in &self.meta {
            if !PARAM_KEYS.iter().any(|p| p.0 == k) {
                continue;
            }
            let ok = v.parse::<f64>().map(f64::is_finite).unwrap_or(false)
                || v == "true"
                || v == "false";
            if !ok {
                return Err(ProfileError::Meta {
                    at: self.at(*line),
                    key: k.clone(),
                    value: v.clone(),
                    msg: "is not a number (or true/false); write the value the profile was measured at".into(),
                });
            }
            if let Some((_, v2, l2)) = self.meta.iter().find(|m| m.0 == *k && m.1 != *v) {
                return Err(ProfileError::Meta {
                    at: self.at(*l2),
                    key: k.clone(),
                    value: v2.clone(),
                    msg: format!(
                        "differs from '{v}' on line {line}: one profile is measured at one value"
                    ),
                });
            }
        }
        Ok(())
    }

    /// `(launch_s, bytes_per_s)` fitted to the copy rows, `None` without copy rows.
    fn fit_copies(&self) -> Result<Option<(f64, f64)>, ProfileError> {
        if self.copies.is_empty() {
            return Ok(None);
        }
        let err = |msg: String| ProfileError::CopyFit {
            at: self.at(0),
            msg,
        };
        let pts: Vec<(f64, f64)> = self
            .copies
            .iter()
            .map(|(&(n, _), &t)| (n as f64, t))
            .collect();
        let mut sizes: Vec<usize> = self.copies.keys().map(|k| k.0).collect();
        sizes.dedup();
        if sizes.len() < 2 {
            return Err(err(format!(
                "one size only ({} elements); a launch latency and a bandwidth need two or more",
                sizes[0]
            )));
        }
        // Relative least squares of t = a + b n: weights 1/t^2.
        let (mut s, mut sx, mut sxx, mut st, mut sxt) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(x, t) in &pts {
            let w = 1.0 / t.max(1e-12).powi(2);
            s += w;
            sx += w * x;
            sxx += w * x * x;
            st += w * t;
            sxt += w * x * t;
        }
        let det = s * sxx - sx * sx;
        let (mut a, mut b) = ((sxx * st - sx * sxt) / det, (s * sxt - sx * st) / det);
        if a.is_nan() || a < 0.0 {
            a = 0.0;
            b = sxt / sxx;
        }
        if b <= 0.0 || !b.is_finite() {
            return Err(err(format!(
                "their times do not grow with the size (fitted {b:e} s per element)"
            )));
        }
        // A copy of n fp32 elements reads and writes 4n bytes: 8n / bandwidth.
        Ok(Some((a, 8.0 / b)))
    }

    /// Launch latency and bandwidth fitted to the copy rows, as a [`DeviceSpec`] for
    /// [`DeviceSpec::copy_s`] and [`DeviceSpec::reduce_s_per_byte`]; `None` without copy
    /// rows. A profile measures no FLOP rate: `flops_per_s` is infinite, so only
    /// memory-bound kernels are priced by it.
    pub fn copy_spec(&self) -> Option<DeviceSpec> {
        let (launch_s, mem_bytes_per_s) = self.fit_copies().ok().flatten()?;
        Some(DeviceSpec {
            name: self.describe(),
            launch_s,
            mem_bytes_per_s,
            flops_per_s: f64::INFINITY,
        })
    }

    /// The profile as text: comments, [`HEADER`], the rows of [`CompressProfile::rows`]
    /// (times in Rust's shortest round-trip notation).
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        for (k, v, _) in &self.meta {
            s.push_str(&format!("# {k}: {v}\n"));
        }
        s.push_str(HEADER);
        s.push('\n');
        for r in self.rows() {
            s.push_str(&format!(
                "{},{},{},{},{},{},{},{:e}\n",
                r.method,
                r.stage.map(Stage::name).unwrap_or(COPY),
                r.round,
                r.phase,
                r.rows,
                r.cols,
                r.world_size,
                r.time_s
            ));
        }
        s
    }

    /// Write [`CompressProfile::to_csv`] to `path`.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), ProfileError> {
        let path = path.as_ref();
        std::fs::write(path, self.to_csv()).map_err(|source| ProfileError::Write {
            path: path.display().to_string(),
            source,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("gradcomp-devprofile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn row(
        method: &str,
        stage: Option<Stage>,
        round: usize,
        phase: usize,
        shape: (usize, usize),
        ws: usize,
        t: f64,
    ) -> Row {
        Row {
            method: method.into(),
            stage,
            round,
            phase,
            rows: shape.0,
            cols: shape.1,
            world_size: ws,
            time_s: t,
        }
    }

    /// Every stage, round and phase of `methods` for `shapes` at `ws`, plus copies.
    fn full(methods: &[&str], shapes: &[(usize, usize)], ws: usize) -> CompressProfile {
        let mut p = CompressProfile::new("mem.csv");
        p.set_meta("device", "Test GPU");
        p.set_meta("density", "0.001");
        p.set_meta("rank", "4");
        p.set_meta("min_compression_rate", "2");
        let mut t = 1e-6;
        for m in methods {
            let (rounds, phases, _) = method_info(m).unwrap();
            for &s in shapes {
                for round in 0..rounds {
                    for phase in 0..phases {
                        for stage in [Stage::Compress, Stage::Decompress] {
                            t *= 1.1;
                            p.insert(row(m, Some(stage), round, phase, s, ws, t))
                                .unwrap();
                        }
                    }
                }
            }
        }
        for n in [1024usize, 65536, 1 << 20, 1 << 24] {
            p.insert(row(
                COPY,
                None,
                0,
                0,
                (1, n),
                ws,
                5e-6 + 8.0 * n as f64 / 1e12,
            ))
            .unwrap();
        }
        p
    }

    #[test]
    fn write_then_read_gives_identical_lookups() {
        let shapes = [(64, 147), (1, 64), (10, 64)];
        let mut p = full(&["topk", "powersgd", "acpsgd", "signsgd"], &shapes, 4);
        // A second world size for the all-gather decompress, and an awkward time.
        p.insert(row(
            "topk",
            Some(Stage::Decompress),
            0,
            0,
            (64, 147),
            8,
            1.0 / 3.0,
        ))
        .unwrap();
        p.insert(row("topk", Some(Stage::Decompress), 0, 0, (1, 64), 8, 0.0))
            .unwrap();
        let path = tmp("roundtrip.csv");
        p.write(&path).unwrap();
        let q = CompressProfile::read(&path).unwrap();
        assert_eq!(q.rows(), p.rows());
        assert_eq!(q.meta("device"), Some("Test GPU"));
        assert_eq!(q.meta("rank"), Some("4"));
        for r in p.rows() {
            let Some(stage) = r.stage else { continue };
            let want = p.time_s(
                &r.method,
                stage,
                r.round,
                r.phase,
                r.rows,
                r.cols,
                r.world_size,
            );
            assert_eq!(want, Some(r.time_s));
            assert_eq!(
                q.time_s(
                    &r.method,
                    stage,
                    r.round,
                    r.phase,
                    r.rows,
                    r.cols,
                    r.world_size
                ),
                want
            );
        }
        assert_eq!(
            q.copy_spec(),
            Some(DeviceSpec {
                name: q.describe(),
                ..p.copy_spec().unwrap()
            })
        );
        // Writing what was read gives the same text.
        assert_eq!(q.to_csv(), p.to_csv());
        assert!(q.describe().contains("roundtrip.csv") && q.describe().contains("Test GPU"));
        assert_eq!(q.methods(), vec!["signsgd", "topk", "powersgd", "acpsgd"]);
        assert_eq!(q.world_sizes("topk"), vec![4, 8]);
        assert_eq!(q.world_sizes("powersgd"), vec![4]);
    }

    #[test]
    fn lookups_follow_the_world_size_rule() {
        let p = full(&["topk", "powersgd"], &[(64, 147)], 4);
        let mut p8 = p.clone();
        p8.insert(row("topk", Some(Stage::Compress), 0, 0, (64, 147), 8, 0.5))
            .unwrap();
        // Exact hit.
        let c4 = p.time_s("topk", Stage::Compress, 0, 0, 64, 147, 4).unwrap();
        assert_eq!(
            p8.time_s("topk", Stage::Compress, 0, 0, 64, 147, 8),
            Some(0.5)
        );
        // Compress at another world size: the nearest (ties to the smaller).
        assert_eq!(
            p.time_s("topk", Stage::Compress, 0, 0, 64, 147, 16),
            Some(c4)
        );
        assert_eq!(
            p8.time_s("topk", Stage::Compress, 0, 0, 64, 147, 6),
            Some(c4)
        );
        assert_eq!(
            p8.time_s("topk", Stage::Compress, 0, 0, 64, 147, 7),
            Some(0.5)
        );
        // An all-gather decompress needs the exact world size; an all-reduce one does not.
        assert!(world_size_matters("topk", Stage::Decompress));
        assert!(!world_size_matters("topk", Stage::Compress));
        assert!(!world_size_matters("powersgd", Stage::Decompress));
        assert!(!world_size_matters("marsit", Stage::Decompress));
        assert!(p
            .time_s("topk", Stage::Decompress, 0, 0, 64, 147, 4)
            .is_some());
        assert_eq!(p.time_s("topk", Stage::Decompress, 0, 0, 64, 147, 8), None);
        assert!(p
            .time_s("powersgd", Stage::Decompress, 1, 0, 64, 147, 32)
            .is_some());
        // Unknown method, shape, round.
        assert_eq!(p.time_s("dgc", Stage::Compress, 0, 0, 64, 147, 4), None);
        assert_eq!(p.time_s("topk", Stage::Compress, 0, 0, 147, 64, 4), None);
        assert_eq!(
            p.time_s("powersgd", Stage::Compress, 2, 0, 64, 147, 4),
            None
        );
    }

    #[test]
    fn copy_rows_fit_launch_and_bandwidth() {
        let p = full(&["ssgd"], &[(1, 10)], 2);
        let s = p.copy_spec().unwrap();
        assert!((s.launch_s - 5e-6).abs() < 1e-12, "{}", s.launch_s);
        assert!(
            (s.mem_bytes_per_s / 1e12 - 1.0).abs() < 1e-9,
            "{}",
            s.mem_bytes_per_s
        );
        // copy_s(bytes) = launch + 2 bytes / bandwidth = the measured copy of bytes/4 elements.
        assert!((s.copy_s(4.0 * 65536.0, 1) - (5e-6 + 8.0 * 65536.0 / 1e12)).abs() < 1e-15);
        assert!(s.flops_per_s.is_infinite());
        // No copy rows: no spec; one size only, or times that shrink with size: an error.
        let mut q = CompressProfile::new("q.csv");
        q.insert(row("ssgd", Some(Stage::Compress), 0, 0, (1, 10), 2, 1e-6))
            .unwrap();
        assert!(q.copy_spec().is_none());
        let text = format!("{HEADER}\ncopy,copy,0,0,1,1000,2,1e-5\ncopy,copy,0,0,1,1000,4,1e-5\n");
        let e = CompressProfile::parse(&text, "one.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("one.csv") && e.contains("one size only"), "{e}");
        let text =
            format!("{HEADER}\ncopy,copy,0,0,1,1000,2,1e-3\ncopy,copy,0,0,1,100000,2,1e-5\n");
        let e = CompressProfile::parse(&text, "shrink.csv")
            .unwrap_err()
            .to_string();
        assert!(e.contains("do not grow"), "{e}");
        // A negative fitted latency is clamped to 0.
        let text =
            format!("{HEADER}\ncopy,copy,0,0,1,1000,2,1e-6\ncopy,copy,0,0,1,1000000,2,2e-3\n");
        let s = CompressProfile::parse(&text, "c.csv")
            .unwrap()
            .copy_spec()
            .unwrap();
        assert!(s.launch_s >= 0.0 && s.mem_bytes_per_s > 0.0);
    }

    fn bad(name: &str, text: &str, expect: &[&str]) -> ProfileError {
        let e = CompressProfile::parse(text, name).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(name), "{s}");
        for x in expect {
            assert!(s.contains(x), "expected '{x}' in: {s}");
        }
        assert_eq!(e.exit_code(), 2);
        e
    }

    #[test]
    fn bad_profiles_name_the_line_column_value_and_fix() {
        let good = "# device: Test GPU\n# density: 0.001\nmethod,stage,round,phase,rows,cols,world_size,time_s\n\
                    topk,compress,0,0,64,147,4,1e-5\n\
                    topk,decompress,0,0,64,147,4,2e-5\n";
        assert!(CompressProfile::parse(good, "good.csv").is_ok());
        bad("empty.csv", "", &["no header"]);
        bad("comments.csv", "# device: x\n\n", &["no header"]);
        bad("header_only.csv", HEADER, &["line 1", "no rows"]);
        bad(
            "missing_col.csv",
            "method,stage,round,phase,rows,cols,time_s\ntopk,compress,0,0,64,147,1e-5\n",
            &["line 1", "missing column 'world_size'", HEADER],
        );
        bad(
            "unknown_col.csv",
            &good.replace("time_s", "seconds"),
            &["line 3", "unknown column 'seconds'"],
        );
        bad(
            "twice_col.csv",
            &good.replace("phase,rows", "rows,rows"),
            &["line 3", "'rows' appears twice"],
        );
        bad(
            "fields.csv",
            &good.replace("64,147,4,2e-5", "64,147,4,2e-5,9"),
            &["line 5", "9 fields where the header has 8"],
        );
        let e = bad(
            "nonnum.csv",
            &good.replace("4,2e-5", "4,fast"),
            &["line 5", "column time_s", "'fast'", "not a time", SCRIPT],
        );
        assert!(matches!(
            e,
            ProfileError::Value {
                column: "time_s",
                ..
            }
        ));
        bad(
            "neg.csv",
            &good.replace("4,2e-5", "4,-0.1"),
            &[
                "line 5",
                "column time_s",
                "'-0.1'",
                "negative",
                "seconds >= 0",
                SCRIPT,
            ],
        );
        bad(
            "nan.csv",
            &good.replace("4,2e-5", "4,NaN"),
            &["line 5", "'NaN'", "not a time"],
        );
        bad(
            "rows.csv",
            &good.replace("0,0,64,147,4,2e-5", "0,0,6x4,147,4,2e-5"),
            &["line 5", "column rows", "'6x4'", "integer >= 1"],
        );
        bad(
            "zero.csv",
            &good.replace("0,0,64,147,4,2e-5", "0,0,64,0,4,2e-5"),
            &["line 5", "column cols", "'0'"],
        );
        let e = bad(
            "method.csv",
            &good.replace("topk,decompress", "top-k,decompress"),
            &["line 5", "unknown method 'top-k'", "ssgd", "qsgd", "copy"],
        );
        assert!(matches!(e, ProfileError::UnknownMethod { .. }));
        bad(
            "stage.csv",
            &good.replace("topk,decompress", "topk,feedback"),
            &[
                "line 5",
                "'feedback' is not a stage of method topk",
                "compress or decompress",
            ],
        );
        bad(
            "copystage.csv",
            &format!("{good}copy,compress,0,0,1,100,4,1e-6\n"),
            &["line 6", "copy rows have stage copy"],
        );
        bad(
            "copyrows.csv",
            &format!("{good}copy,copy,0,0,2,100,4,1e-6\n"),
            &["line 6", "column rows", "must be 1 on copy rows"],
        );
        bad(
            "stagecopy.csv",
            &good.replace("topk,decompress", "topk,copy"),
            &["line 5", "not a stage of method topk"],
        );
        let e = bad(
            "dup.csv",
            &format!("{good}topk,compress,0,0,64,147,4,3e-5\n"),
            &[
                "line 6",
                "topk compress row of shape 64x147",
                "appears again (first on line 4)",
            ],
        );
        assert!(matches!(e, ProfileError::Duplicate { first: 4, .. }));
        // The same operation at another world size is no duplicate.
        assert!(CompressProfile::parse(
            &format!("{good}topk,compress,0,0,64,147,8,3e-5\n"),
            "ws.csv"
        )
        .is_ok());
        bad(
            "round.csv",
            &good.replace("topk,decompress,0", "topk,decompress,1"),
            &["line 5", "round 1 of method topk, which has 1"],
        );
        bad(
            "phase.csv",
            &format!("{good}acpsgd,compress,0,2,64,147,4,3e-5\n"),
            &["line 6", "phase 2 of method acpsgd, which has 2"],
        );
        bad(
            "param.csv",
            &good.replace("density: 0.001", "density: high"),
            &["line 2", "density = 'high'", "not a number"],
        );
        bad(
            "param2.csv",
            &format!("# density: 0.01\n{good}"),
            &["line 3", "differs from '0.01' on line 1"],
        );
        let e = CompressProfile::read("/nonexistent/dir/p.csv").unwrap_err();
        assert!(e.to_string().contains("/nonexistent/dir/p.csv"), "{e}");
        assert_eq!(e.exit_code(), 2);
        let e = full(&["ssgd"], &[(1, 4)], 1)
            .write("/nonexistent/dir/p.csv")
            .unwrap_err();
        assert_eq!(e.exit_code(), 1);
        // Windows line ends and free-text comments are fine.
        let crlf = format!("# measured on a test rig\r\n{}", good.replace('\n', "\r\n"));
        assert_eq!(
            CompressProfile::parse(&crlf, "crlf.csv").unwrap().rows(),
            CompressProfile::parse(good, "good.csv").unwrap().rows()
        );
        // Code-built rows are validated too.
        let mut p = CompressProfile::new("code");
        assert!(p
            .insert(row("nope", Some(Stage::Compress), 0, 0, (1, 1), 1, 0.0))
            .is_err());
        assert!(p
            .insert(row("topk", Some(Stage::Compress), 0, 0, (1, 1), 1, -1.0))
            .is_err());
        assert!(p.insert(row("topk", None, 0, 0, (1, 1), 1, 0.0)).is_err());
        assert!(p
            .insert(row("topk", Some(Stage::Compress), 0, 0, (0, 1), 1, 0.0))
            .is_err());
    }

    #[test]
    fn check_names_the_missing_method_shape_and_world_size() {
        let m = crate::models::build("resnet20").unwrap();
        let shapes: Vec<(usize, usize)> = m.tensors.iter().map(|t| t.rows_cols()).collect();
        let mut distinct = shapes.clone();
        distinct.sort_unstable();
        distinct.dedup();
        let methods = ["topk", "powersgd", "acpsgd"];
        let p = full(&methods, &distinct, 4);
        p.check(&methods, &shapes, 4).unwrap();
        // Compress and all-reduce decompress are taken from the nearest world size...
        p.check(&["powersgd", "acpsgd"], &shapes, 64).unwrap();
        // ...an all-gather decompress is not.
        let e = p.check(&methods, &shapes, 8).unwrap_err();
        let s = e.to_string();
        assert!(
            matches!(e, ProfileError::MissingWorldSize { world_size: 8, .. }),
            "{s}"
        );
        assert!(
            s.contains("topk decompress")
                && s.contains("world size 4 only, not 8")
                && s.contains("--world-size 8"),
            "{s}"
        );
        // A method the profile lacks.
        let e = p
            .check(&["topk", "dgc"], &shapes, 4)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mem.csv")
                && e.contains("no rows for method dgc")
                && e.contains("topk, powersgd, acpsgd")
                && e.contains("--methods"),
            "{e}"
        );
        // A shape the profile lacks: resnet50's shapes against a resnet20 profile.
        let r50: Vec<(usize, usize)> = crate::models::build("resnet50")
            .unwrap()
            .tensors
            .iter()
            .map(|t| t.rows_cols())
            .collect();
        let e = p.check(&["powersgd"], &r50, 4).unwrap_err();
        let s = e.to_string();
        assert!(matches!(e, ProfileError::MissingShape { .. }), "{s}");
        assert!(
            s.contains("no powersgd compress row for shape")
                && s.contains("--shapes")
                && s.contains(SCRIPT),
            "{s}"
        );
        // One tensor's shape dropped from the profile: that shape is named.
        let gone = (64usize, 576usize);
        assert!(distinct.contains(&gone));
        let keep: Vec<(usize, usize)> = distinct.iter().copied().filter(|&s| s != gone).collect();
        let q = full(&methods, &keep, 4);
        let e = q.check(&methods, &shapes, 4).unwrap_err().to_string();
        assert!(
            e.contains("no topk compress row for shape 64x576")
                && e.contains(&format!("1 of the run's {} shapes", distinct.len())),
            "{e}"
        );
        // Only one round of Power-SGD measured: round 1 is missing.
        let mut r = CompressProfile::new("r.csv");
        for stage in [Stage::Compress, Stage::Decompress] {
            r.insert(row("powersgd", Some(stage), 0, 0, (64, 576), 4, 1e-5))
                .unwrap();
        }
        let e = r
            .check(&["powersgd"], &[(64, 576)], 4)
            .unwrap_err()
            .to_string();
        assert!(e.contains("round 1, phase 0"), "{e}");
        // An unknown method name is missing too.
        assert!(p.check(&["omgs"], &shapes, 4).is_err());
        p.check(&[], &shapes, 4).unwrap();
    }

    #[test]
    fn check_params_compares_what_the_times_depend_on() {
        let p = full(&["topk", "powersgd"], &[(64, 147)], 4);
        let mut params = MethodParams::default();
        p.check_params(&["topk", "powersgd", "ssgd"], &params)
            .unwrap();
        params.density = 0.01;
        let e = p.check_params(&["topk"], &params).unwrap_err().to_string();
        assert!(
            e.contains("density = 0.001")
                && e.contains("density = 0.01")
                && e.contains("--density 0.01"),
            "{e}"
        );
        // Density does not matter to powersgd.
        p.check_params(&["powersgd"], &params).unwrap();
        params.rank = 32;
        let e = p
            .check_params(&["powersgd"], &params)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rank = 4") && e.contains("--lowrank-rank 32"),
            "{e}"
        );
        // A parameter the profile does not record.
        let params = MethodParams::default();
        let e = p.check_params(&["qsgd"], &params).unwrap_err().to_string();
        assert!(
            e.contains("qsgd's time depends on qsgd_levels") && e.contains("# qsgd_levels: 127"),
            "{e}"
        );
        let text = format!("# rank: 4\n# min_compression_rate: 2\n# nesterov: false\n# clip_norm: 0\n# density: 1e-3\n{HEADER}\nacpsgd,compress,0,0,4,4,2,1e-6\n");
        let q = CompressProfile::parse(&text, "q.csv").unwrap();
        q.check_params(&["acpsgd", "dgc"], &params).unwrap();
        let mut nest = params.clone();
        nest.nesterov = true;
        let e = q.check_params(&["dgc"], &nest).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("nesterov"), "{e}");
    }
}
