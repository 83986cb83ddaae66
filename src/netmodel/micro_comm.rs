//! [`CommModels`]: a [`CommFit`] per (collective, world size), fitted from
//! micro_comm.csv, read through [`CsvFile`] with each row's schema version checked.

use std::collections::HashMap;
use std::path::Path;

use super::{AlphaBeta, CommFit, FitQuality, NetModelError, SCHEMA_VERSION};
use crate::record::{require_in, CsvFile};

/// Collective cost models ([`CommFit`]: one to three alpha-beta regimes) per (collective,
/// world size), e.g. `("allreduce", 8)`. Sizes are **bytes per rank** (micro_comm.csv's
/// `bytes`: the vector all-reduced, or each rank's all-gather contribution).
#[derive(Clone, Debug, Default)]
pub struct CommModels {
    models: HashMap<(String, usize), (CommFit, Option<FitQuality>)>,
}

impl CommModels {
    /// No models.
    pub fn new() -> CommModels {
        CommModels::default()
    }

    /// Set (or replace) the model of one collective at one world size: one line.
    pub fn insert(&mut self, collective: &str, world_size: usize, model: AlphaBeta) {
        self.models.insert(
            (collective.to_string(), world_size),
            (CommFit::line(model), None),
        );
    }

    /// The model of `collective` at `world_size`, if there is one.
    pub fn get(&self, collective: &str, world_size: usize) -> Option<&CommFit> {
        self.models
            .get(&(collective.to_string(), world_size))
            .map(|m| &m.0)
    }

    /// Fit quality of a model read from CSV over all its points (`None` for given models).
    pub fn quality(&self, collective: &str, world_size: usize) -> Option<FitQuality> {
        self.models
            .get(&(collective.to_string(), world_size))
            .and_then(|m| m.1)
    }

    /// Every (collective, world size) with its own model, sorted.
    pub fn keys(&self) -> Vec<(String, usize)> {
        let mut k: Vec<_> = self.models.keys().cloned().collect();
        k.sort();
        k
    }

    /// Read micro_comm.csv (docs/csv-schema.md) and fit one model per (collective,
    /// world_size) group ([`CommFit::fit`]: one line, or two or three regimes) over the median of
    /// each size's rows (a run with `rounds` measures every size once per round). Columns used:
    /// `schema_version` (must be 1), `collective`, `world_size`, `bytes` (or, in its
    /// absence, `total_bytes`, divided by `world_size` for all-gather rows), `median_s`. Overlap rows (`iallreduce-overlap`) are fitted
    /// on `t_pure_s` (the collective alone) when that column holds a value, since their
    /// `median_s` includes the overlapped compute.
    pub fn from_micro_comm_csv(path: impl AsRef<Path>) -> Result<CommModels, NetModelError> {
        let t = Table::open(path.as_ref())?;
        let fix =
            "expected micro_comm.csv as written by `gradcomp micro-comm` (docs/csv-schema.md)";
        let c_coll = t.col("collective", fix)?;
        let c_n = t.col("world_size", fix)?;
        let c_bytes = t.opt_col("bytes");
        let c_total = if c_bytes.is_none() {
            Some(t.col("total_bytes", "needs `bytes` or `total_bytes`; expected micro_comm.csv as written by `gradcomp micro-comm` (docs/csv-schema.md)")?)
        } else {
            None
        };
        let c_med = t.col("median_s", fix)?;
        let c_pure = t.opt_col("t_pure_s");
        let mut groups: HashMap<(String, usize), Vec<(f64, f64)>> = HashMap::new();
        for r in &t.rows {
            let coll = r.get(c_coll).trim().to_string();
            let n = r.usize(&t, c_n, "world_size")?;
            let bytes = match c_bytes {
                Some(c) => r.f64(&t, c, "bytes")?,
                None => {
                    let total = r.f64(&t, c_total.unwrap(), "total_bytes")?;
                    if coll.contains("allgather") && n > 0 {
                        total / n as f64
                    } else {
                        total
                    }
                }
            };
            let secs = match c_pure {
                Some(c) if coll.contains("overlap") && !r.get(c).trim().is_empty() => {
                    r.f64(&t, c, "t_pure_s")?
                }
                _ => r.f64(&t, c_med, "median_s")?,
            };
            groups.entry((coll, n)).or_default().push((bytes, secs));
        }
        let mut models = CommModels::new();
        for (key, pts) in groups {
            // Repeats of a size (`[run] rounds`) count once, at their median.
            let pts = crate::measure::stats::median_per_x(&pts);
            let (fit, q) = CommFit::fit(
                &pts,
                &format!("{} at world_size {} from {}", key.0, key.1, t.path),
            )?;
            models.models.insert(key, (fit, Some(q)));
        }
        Ok(models)
    }
}

/// A CSV file read whole ([`CsvFile`]), with `schema_version` checked on every row.
struct Table {
    path: String,
    header: Vec<String>,
    rows: Vec<Row>,
}

struct Row {
    line: u64,
    rec: csv::StringRecord,
}

impl Table {
    fn open(path: &Path) -> Result<Table, NetModelError> {
        let f = CsvFile::open(path)?;
        let c_ver = f.require(
            "schema_version",
            "the file is not a gradcomp CSV, or predates schema versions; regenerate it",
        )?;
        let CsvFile {
            path,
            header,
            mut reader,
        } = f;
        let mut rows = Vec::new();
        for rec in reader.records() {
            let rec = rec.map_err(|e| CsvFile::malformed(&path, e))?;
            let line = rec.position().map(|q| q.line()).unwrap_or(0);
            let v = rec.get(c_ver).unwrap_or("").trim();
            if v.parse::<u32>().ok() != Some(SCHEMA_VERSION) {
                return Err(NetModelError::SchemaVersion {
                    path,
                    line,
                    found: v.to_string(),
                    expected: SCHEMA_VERSION,
                });
            }
            rows.push(Row { line, rec });
        }
        if rows.is_empty() {
            return Err(NetModelError::Empty { path });
        }
        Ok(Table { path, header, rows })
    }

    fn opt_col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    fn col(&self, name: &str, fix: &str) -> Result<usize, NetModelError> {
        Ok(require_in(&self.path, &self.header, name, fix)?)
    }
}

impl Row {
    fn get(&self, c: usize) -> &str {
        self.rec.get(c).unwrap_or("")
    }

    fn bad(&self, t: &Table, c: usize, column: &str, expected: &str) -> NetModelError {
        NetModelError::BadValue {
            path: t.path.clone(),
            line: self.line,
            column: column.to_string(),
            value: self.get(c).to_string(),
            expected: expected.to_string(),
        }
    }

    fn f64(&self, t: &Table, c: usize, column: &str) -> Result<f64, NetModelError> {
        match self.get(c).trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(self.bad(t, c, column, "a finite non-negative number")),
        }
    }

    fn usize(&self, t: &Table, c: usize, column: &str) -> Result<usize, NetModelError> {
        self.get(c)
            .trim()
            .parse::<usize>()
            .map_err(|_| self.bad(t, c, column, "a non-negative integer"))
    }
}
