//! The compression fit of `gradcomp fit` (part of [`super::fit`], whose module docs give
//! the model): micro_compress.csv's rows read into points per method and phase (single
//! tensors, with their selection, and rows over a model's layers), fitted per phase and
//! scaled by the model rows' factor.

use super::fit::FitRow;
use super::{Result, SimError};
use crate::netmodel::CompressCost;
use std::collections::BTreeMap;
use std::path::Path;

/// Per method and phase, a [`CompressCost`] fit over micro_compress.csv's rows.
pub fn fit_compress_phases(path: &Path) -> Result<Vec<FitRow>> {
    let p = path.display().to_string();
    let mut f = crate::record::CsvFile::open(path)?;
    let cols = MicroColumns::of(&f)?;
    let mut pts = CompressPoints::default();
    let mut selection = Selection::default();
    // Model rows, whose selection is read once every single tensor's is known.
    let mut pending = Vec::new();
    for (i, rec) in f.reader.records().enumerate() {
        let rec = rec.map_err(|e| crate::record::CsvFile::malformed(&p, e))?;
        pts.add_record(&cols, &rec, (&p, i + 2), &mut selection, &mut pending)?;
    }
    pts.select_model_rows(pending, &mut selection, &p)?;
    pts.add_model_only_methods();
    if pts.groups.is_empty() {
        return Err(read_err(
            &p,
            "no data rows; run `gradcomp micro-compress` first".into(),
        ));
    }
    pts.fit_rows(&p)
}

/// A [`SimError::Read`] of file `path`.
fn read_err(path: &str, msg: String) -> SimError {
    SimError::Read {
        path: path.to_string(),
        msg,
    }
}

/// The phases of a compression fit, in the order of micro_compress.csv's columns.
const PHASES: [&str; 3] = ["compress", "feedback", "decompress"];
/// Single tensors: (numel, selected, seconds) per phase.
type Points = [Vec<(f64, f64, f64)>; 3];
/// Model rows: (tensors, numel, selected, seconds) per phase.
type ModelPoints = [Vec<(f64, f64, f64, f64)>; 3];

/// A model row's (method, model, parameters, world size, index among its method's model
/// rows, line), whose selection [`CompressPoints::select_model_rows`] reads.
type PendingModelRow = (
    String,
    String,
    crate::compress::MethodParams,
    usize,
    usize,
    usize,
);

/// micro_compress.csv's columns (docs/csv-schema.md): the required ones, and those files
/// written before them lack.
struct MicroColumns {
    header: Vec<String>,
    ver: usize,
    method: usize,
    numel: usize,
    comp: usize,
    fb: usize,
    dec: usize,
    /// Absent in files written before model rows existed: every row is one tensor.
    tensors: Option<usize>,
    rows: Option<usize>,
    cols: Option<usize>,
    model: Option<usize>,
    world_size: Option<usize>,
}

impl MicroColumns {
    fn of(f: &crate::record::CsvFile) -> Result<MicroColumns> {
        let col = |name: &str| {
            f.require(
                name,
                "expected micro_compress.csv as written by `gradcomp micro-compress` (docs/csv-schema.md)",
            )
        };
        let (ver, method, numel, comp, fb, dec) = (
            col("schema_version")?,
            col("method")?,
            col("numel")?,
            col("compress_s")?,
            col("feedback_s")?,
            col("decompress_s")?,
        );
        let tensors = f.column("tensors");
        let header = f.header.clone();
        let pos = |name: &str| header.iter().position(|h| h == name);
        let (rows, cols, model, world_size) =
            (pos("rows"), pos("cols"), pos("model"), pos("world_size"));
        Ok(MicroColumns {
            header,
            ver,
            method,
            numel,
            comp,
            fb,
            dec,
            tensors,
            rows,
            cols,
            model,
            world_size,
        })
    }

    fn pos(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }
}

/// micro_compress.csv's points per method: single tensors' and model rows'.
#[derive(Default)]
struct CompressPoints {
    groups: BTreeMap<String, Points>,
    model_rows: BTreeMap<String, ModelPoints>,
}

impl CompressPoints {
    /// Add record `rec` (at `at`: the file and its line): a single tensor's points, with
    /// their selection, or a model row's (its selection left `pending`).
    fn add_record(
        &mut self,
        c: &MicroColumns,
        rec: &csv::StringRecord,
        at: (&str, usize),
        selection: &mut Selection,
        pending: &mut Vec<PendingModelRow>,
    ) -> Result<()> {
        let (p, line) = at;
        let rerr = |msg: String| read_err(p, msg);
        let get = |c: usize| rec.get(c).unwrap_or("").trim();
        if get(c.ver) != crate::netmodel::SCHEMA_VERSION.to_string() {
            return Err(rerr(format!(
                "line {line}: schema_version `{}`, this build reads {}",
                get(c.ver),
                crate::netmodel::SCHEMA_VERSION
            )));
        }
        let num = |c: usize, name: &str, empty_zero: bool| -> Result<f64> {
            let v = get(c);
            if v.is_empty() && empty_zero {
                return Ok(0.0);
            }
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| {
                    rerr(format!(
                        "line {line}, column `{name}`: `{v}` is not a non-negative number"
                    ))
                })
        };
        let numel = num(c.numel, "numel", false)?;
        let tensors = match c.tensors {
            Some(c) => get(c)
                .parse::<usize>()
                .ok()
                .filter(|&t| t >= 1)
                .ok_or_else(|| {
                    rerr(format!(
                        "line {line}, column `tensors`: `{}` is not a positive integer",
                        get(c)
                    ))
                })?,
            None => 1,
        };
        let times = [
            num(c.comp, "compress_s", false)?,
            num(c.fb, "feedback_s", true)?,
            num(c.dec, "decompress_s", false)?,
        ];
        let method = get(c.method).to_string();
        let params = super::measured::row_params(|name| c.pos(name).map(|c| get(c).to_string()))
            .map_err(|(c, v)| rerr(format!("line {line}, column `{c}`: bad value `{v}`")))?;
        let n = c.world_size.and_then(|c| get(c).parse().ok()).unwrap_or(1);
        if tensors == 1 {
            let dim = |c: Option<usize>, name: &str| -> Result<usize> {
                let v = c.map(get).unwrap_or("");
                v.parse().map_err(|_| {
                    rerr(format!(
                        "line {line}, column `{name}`: `{v}` is not a tensor dimension"
                    ))
                })
            };
            let given = |c: Option<usize>| c.map(get).is_some_and(|v| !v.is_empty());
            let shape = if given(c.rows) || given(c.cols) {
                (dim(c.rows, "rows")?, dim(c.cols, "cols")?)
            } else {
                // No shape (files before the columns, a one-tensor model): one row of
                // `numel`, which selects nothing.
                (1, numel as usize)
            };
            let sel = selection
                .of(&method, &params, n, &[shape])
                .map_err(|e| rerr(format!("line {line}: {e}")))? as f64;
            let g = self.groups.entry(method).or_default();
            for (ph, (pts, t)) in g.iter_mut().zip(times).enumerate() {
                // Only compression selects (feedback and decompress are linear).
                pts.push((numel, if ph == 0 { sel } else { 0.0 }, t));
            }
        } else {
            let g = self.model_rows.entry(method.clone()).or_default();
            pending.push((
                method,
                c.model.map_or("", get).to_string(),
                params,
                n,
                g[0].len(),
                line,
            ));
            for (pts, t) in g.iter_mut().zip(times) {
                pts.push((tensors as f64, numel, 0.0, t));
            }
        }
        Ok(())
    }

    /// A model row's selection is its layers' (the model's tensors), for the methods
    /// that select in a single tensor (one measured over models only is fitted linear,
    /// on its mean layers).
    fn select_model_rows(
        &mut self,
        pending: Vec<PendingModelRow>,
        selection: &mut Selection,
        p: &str,
    ) -> Result<()> {
        for (method, model, params, n, i, line) in pending {
            let selects = self
                .groups
                .get(&method)
                .is_some_and(|g| g[0].iter().any(|p| p.1 > 0.0));
            if !selects {
                continue;
            }
            let shapes: Vec<(usize, usize)> = crate::models::build(&model)
                .map_err(|e| read_err(p, format!("line {line}, column `model`: {e}")))?
                .tensors
                .iter()
                .map(|t| t.rows_cols())
                .collect();
            let sel = selection
                .of(&method, &params, n, &shapes)
                .map_err(|e| read_err(p, format!("line {line}: {e}")))?;
            if let Some(rows) = self.model_rows.get_mut(&method) {
                rows[0][i].2 = sel as f64;
            }
        }
        Ok(())
    }

    /// A method measured only over models: its mean layers are the points (exact for a
    /// linear model), and there is no separate level to calibrate.
    fn add_model_only_methods(&mut self) {
        for (m, rows) in &self.model_rows {
            if !self.groups.contains_key(m) {
                let g = self.groups.entry(m.clone()).or_default();
                for (pts, rs) in g.iter_mut().zip(rows) {
                    pts.extend(rs.iter().map(|&(t, n, sel, s)| (n / t, sel / t, s / t)));
                }
            }
        }
    }

    /// The fits.csv rows: per method and phase, the fit of its single tensors' points
    /// scaled by its model rows' factor ([`model_factor`]), with its rounds' range.
    fn fit_rows(self, p: &str) -> Result<Vec<FitRow>> {
        let model_rows = self.model_rows;
        let mut out = Vec::new();
        for (m, phases) in self.groups {
            for (i, (ph, pts)) in PHASES.iter().zip(phases.iter()).enumerate() {
                // Rounds of one shape count once, at their median (one slow round cannot
                // move the fit); `round_range` below reads every round.
                let (c, q) = CompressCost::fit_selection(&median_per_point(pts))
                    .map_err(|e| read_err(p, format!("method {m}, phase {ph}: {e}")))?;
                let factor = model_rows
                    .get(&m)
                    .and_then(|rows| model_factor(&c, &rows[i]));
                let f = factor.unwrap_or(1.0);
                let (round_min, round_max) = match model_rows.get(&m) {
                    Some(rows) => round_range(rows[i].iter().map(|&(t, n, _, s)| ((t, n), s))),
                    None => round_range(pts.iter().map(|&(n, _, s)| ((1.0, n), s))),
                }
                .unzip();
                out.push(FitRow {
                    kind: "compress",
                    name: m.clone(),
                    phase: ph.to_string(),
                    world_size: None,
                    fixed_s: c.fixed_s * f,
                    per_unit_s: c.per_element_s * f,
                    unit: "element",
                    r2: q.r2,
                    max_rel_err: q.max_rel_err,
                    points: q.n,
                    model_factor: factor,
                    from_bytes: None,
                    to_bytes: None,
                    round_min,
                    round_max,
                    per_selected_s: (c.per_selected_s > 0.0).then_some(c.per_selected_s * f),
                });
            }
        }
        Ok(out)
    }
}

/// Per distinct `(numel, selected)` of `(numel, selected, seconds)` points, the median
/// seconds, in ascending `numel` (as [`crate::measure::stats::median_per_x`]; the bits of
/// non-negative floats order as their values). Two shapes of one size can select
/// differently (DGC sends a 1-D tensor dense).
fn median_per_point(pts: &[(f64, f64, f64)]) -> Vec<(f64, f64, f64)> {
    let mut by: BTreeMap<(u64, u64), Vec<f64>> = BTreeMap::new();
    for &(n, sel, s) in pts {
        by.entry((n.to_bits(), sel.to_bits())).or_default().push(s);
    }
    by.into_iter()
        .filter_map(|((n, sel), mut v)| {
            crate::measure::stats::median(&mut v)
                .map(|m| (f64::from_bits(n), f64::from_bits(sel), m))
        })
        .collect()
}

/// Elements a method selects over in a list of tensors
/// ([`crate::compress::Compressor::selection_elems`], summed), from a compressor built
/// and registered shape by shape without touching its state; cached per method,
/// parameters and shape.
#[derive(Default)]
struct Selection {
    cache: BTreeMap<(String, String, usize, usize), usize>,
}

impl Selection {
    fn of(
        &mut self,
        method: &str,
        params: &crate::compress::MethodParams,
        world_size: usize,
        shapes: &[(usize, usize)],
    ) -> std::result::Result<usize, String> {
        let key_params = format!("{params:?}");
        let mut total = 0;
        for &(rows, cols) in shapes {
            let key = (method.to_string(), key_params.clone(), rows, cols);
            if let Some(&s) = self.cache.get(&key) {
                total += s;
                continue;
            }
            let _untouched = crate::compress::setup::untouched_registration();
            let ctx = crate::compress::WorkerCtx {
                rank: 0,
                world_size: world_size.max(1),
                seed: 0,
            };
            let mut c = crate::compress::registry::build(method, params, ctx)
                .map_err(|e| format!("method `{method}`: {e}"))?;
            c.register(0, rows, cols)
                .map_err(|e| format!("method `{method}`, shape {rows}x{cols}: {e}"))?;
            let s = c.selection_elems(0);
            self.cache.insert(key, s);
            total += s;
        }
        Ok(total)
    }
}

/// The spread over rounds of one phase's repeated measurements: the rows of one
/// `(tensors, numel)` are the rounds of one measurement (a config's `rounds`, or repeated
/// `[[micro-compress]]` sections); of the measurements with two or more rounds, the
/// bounds of the median's order-statistic interval
/// ([`crate::measure::stats::median_interval`]: the range of 2-4 rounds, the second to
/// fourth of 5) of the one whose relative width `(hi - lo) / hi` is largest (the fit takes
/// each point's median; as for the e2e cases, src/sim/accuracy/measured.rs). `None` when nothing
/// was measured twice.
pub(in crate::sim) fn round_range(
    points: impl Iterator<Item = ((f64, f64), f64)>,
) -> Option<(f64, f64)> {
    let mut by: Vec<((f64, f64), Vec<f64>)> = Vec::new();
    for (k, s) in points {
        match by.iter_mut().find(|b| b.0 == k) {
            Some(b) => b.1.push(s),
            None => by.push((k, vec![s])),
        }
    }
    by.into_iter()
        .filter(|b| b.1.len() > 1)
        .map(|mut b| crate::measure::stats::median_interval(&mut b.1))
        .filter(|q| q.1 > 0.0)
        .max_by(|a, b| ((a.1 - a.0) / a.1).total_cmp(&((b.1 - b.0) / b.1)))
}

/// The level of a phase inside a model's sweep against one tensor timed alone: the
/// median over model rows of `measured / (tensors * fixed + numel * per_element +
/// selected * per_selected)`.
/// A kernel timed alone keeps a small tensor in L2 from call to call; in a sweep over a
/// model's layers (as in e2e) each layer comes from further away. `None` without model
/// rows or where the single-tensor fit predicts nothing (a phase that does no work).
pub(in crate::sim) fn model_factor(c: &CompressCost, rows: &[(f64, f64, f64, f64)]) -> Option<f64> {
    let mut r: Vec<f64> = rows
        .iter()
        .filter_map(|&(t, n, sel, s)| {
            let pred = t * c.fixed_s + n * c.per_element_s + sel * c.per_selected_s;
            (pred > 0.0 && s > 0.0).then(|| s / pred)
        })
        .collect();
    crate::measure::stats::median(&mut r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh micro_compress.csv holding `text`, in a directory of its own.
    fn csv(tag: &str, text: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "gradcomp-fit-compress-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let p = d.join("micro_compress.csv");
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A time must be a finite number of at least 0 s (docs/csv-schema.md): a negative
    /// one and an infinite one are each refused, naming the line and the column.
    #[test]
    fn negative_and_infinite_times_are_refused() {
        let head = "schema_version,method,numel,compress_s,feedback_s,decompress_s\n";
        let ok = "1,topk,1000,1e-6,0,1e-6\n1,topk,100000,1e-4,0,1e-4\n";
        for (row, col, v) in [
            ("1,topk,10,-1e-6,0,1e-6\n", "compress_s", "-1e-6"),
            ("1,topk,10,1e-6,0,inf\n", "decompress_s", "inf"),
        ] {
            let p = csv("bad-time", &format!("{head}{ok}{row}"));
            let e = fit_compress_phases(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "line 4, column `{col}`: `{v}` is not a non-negative"
                )),
                "{e}"
            );
        }
    }

    /// A shape is given whole or not at all: `rows` without `cols` (or `cols` without
    /// `rows`) is refused, naming the empty column, not read as one row of `numel`.
    #[test]
    fn half_a_shape_is_refused() {
        let head = "schema_version,method,rows,cols,numel,compress_s,feedback_s,decompress_s\n";
        for (row, col) in [
            ("1,topk,16,,2304,1e-5,0,1e-6\n", "cols"),
            ("1,topk,,144,2304,1e-5,0,1e-6\n", "rows"),
        ] {
            let p = csv("half-shape", &format!("{head}{row}"));
            let e = fit_compress_phases(&p).unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "line 2, column `{col}`: `` is not a tensor dimension"
                )),
                "{e}"
            );
        }
    }

    /// Of several measurements the one whose median interval is relatively widest,
    /// `(hi - lo) / hi`: (1, 2) ms (0.5) over (10, 14) ms (0.4, wider in ms), (10, 40) ms
    /// (0.75) over (1, 2) ms (the smaller `lo`), each in both orders.
    #[test]
    fn the_spread_is_the_relatively_widest_measurement() {
        let ms = |k: f64, rounds: &[f64]| -> Vec<((f64, f64), f64)> {
            rounds.iter().map(|&r| ((1.0, k), r * 1e-3)).collect()
        };
        let (p, q, r) = (
            ms(1.0, &[1.0, 2.0]),
            ms(2.0, &[10.0, 14.0]),
            ms(3.0, &[10.0, 40.0]),
        );
        for (first, second, want) in [
            (&p, &q, (1e-3, 2e-3)),
            (&q, &p, (1e-3, 2e-3)),
            (&r, &p, (10e-3, 40e-3)),
            (&p, &r, (10e-3, 40e-3)),
        ] {
            let pts = first.iter().chain(second.iter()).copied();
            assert_eq!(round_range(pts), Some(want));
        }
    }

    /// The level is the median of `measured / predicted` over the rows where both are
    /// positive: 4, 6 and 8 us against 2 us predicted give 3; a row timed at 0 s or one the
    /// fit prices at 0 s (no tensors, no elements) is left out, not counted as 0 or inf.
    #[test]
    fn the_level_leaves_out_rows_of_zero_time_or_zero_prediction() {
        let c = CompressCost {
            fixed_s: 1e-6,
            per_element_s: 1e-9,
            per_selected_s: 0.0,
        };
        let rows = [
            (1.0, 1000.0, 0.0, 4e-6),
            (1.0, 1000.0, 0.0, 6e-6),
            (1.0, 1000.0, 0.0, 8e-6),
        ];
        let zero_time = (1.0, 1000.0, 0.0, 0.0);
        let zero_pred = (0.0, 0.0, 0.0, 5e-6);
        for extra in [zero_time, zero_pred] {
            let mut r = rows.to_vec();
            r.push(extra);
            let f = model_factor(&c, &r).unwrap();
            assert!((f - 3.0).abs() < 1e-9, "{extra:?}: {f}");
        }
        assert_eq!(model_factor(&c, &[zero_time, zero_pred]), None);
    }
}
