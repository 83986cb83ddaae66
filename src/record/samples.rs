//! `samples.csv`: the raw data behind the summary CSVs. One row per (case, rank, timed
//! iteration), with that rank's own times of that iteration (not the max over ranks);
//! docs/csv-schema.md, "samples.csv". One file per output directory, shared by every
//! benchmark kind run there. Rank 0 writes a case's rows as one batch (one flush and
//! sync per case), before the case's summary row, so every case with a summary row has
//! all its samples; opening the file drops the rows of cases that have no summary row in
//! the directory (interrupted between the two writes; `--resume` runs them again).
//! Nothing here measures or communicates (the gather is `bench::samples`).

use super::{CsvSink, SCHEMA_VERSION};
use crate::error::{Error, Result};
use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::Path;

/// The file's name in a run's output directory.
pub const FILE: &str = "samples.csv";

/// The summary files whose rows the samples belong to (joined by `case_id`).
pub const SUMMARY_FILES: [&str; 4] = [
    "micro_comm.csv",
    "micro_compress.csv",
    "micro.csv",
    "e2e.csv",
];

/// Columns that identify a row: `(case_id, rank, iter)` is unique in a file.
pub const KEY_COLUMNS: [&str; 6] = [
    "schema_version",
    "run_id",
    "case_id",
    "kind",
    "rank",
    "iter",
];

/// The time columns (seconds), the union over the kinds; a kind leaves the columns it
/// does not measure empty. Each is named after the summary column it feeds (the same
/// name in e2e.csv, micro.csv, micro_compress.csv; micro-comm's `time_s` feeds
/// micro_comm.csv's `median_s` .. `ci95_s`).
pub const TIME_COLUMNS: [&str; 17] = [
    "iter_s",
    "fwd_s",
    "bwd_s",
    "pack_s",
    "compress_s",
    "feedback_s",
    "comm_s",
    "decompress_s",
    "exposed_s",
    "bwd_sync_s",
    "last_bucket_s",
    "host_compress_s",
    "host_decompress_s",
    "total_s",
    "time_s",
    "t_pure_s",
    "t_cpu_s",
];

const NCOLS: usize = KEY_COLUMNS.len() + TIME_COLUMNS.len();

/// The header of samples.csv.
pub fn header() -> [&'static str; NCOLS] {
    std::array::from_fn(|i| {
        if i < KEY_COLUMNS.len() {
            KEY_COLUMNS[i]
        } else {
            TIME_COLUMNS[i - KEY_COLUMNS.len()]
        }
    })
}

/// The `kind` of a row: which benchmark timed it (and which summary file its case is in).
pub mod kind {
    pub const E2E: &str = "e2e";
    pub const MICRO_COMM: &str = "micro-comm";
    pub const MICRO_COMPRESS: &str = "micro-compress";
    pub const MICRO: &str = "micro";
}

/// One rank's raw per-iteration values of one case: (column of [`TIME_COLUMNS`], one
/// value per timed iteration), every column the same length.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RankSeries {
    pub columns: Vec<(&'static str, Vec<f64>)>,
}

impl RankSeries {
    /// Add a column (a copy of `values`).
    pub fn push(&mut self, name: &'static str, values: &[f64]) {
        self.columns.push((name, values.to_vec()));
    }

    /// Timed iterations (the length of the first column; 0 without columns).
    pub fn iters(&self) -> usize {
        self.columns.first().map_or(0, |c| c.1.len())
    }

    /// Column names, in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.columns.iter().map(|c| c.0).collect()
    }

    /// Every column after the other, as one vector (for a gather).
    pub fn flat(&self) -> Vec<f64> {
        self.columns
            .iter()
            .flat_map(|c| c.1.iter().copied())
            .collect()
    }

    /// The inverse of [`RankSeries::flat`]: `flat` split into `names.len()` equal columns.
    pub fn from_flat(names: &[&'static str], flat: &[f64]) -> Result<RankSeries> {
        if names.is_empty() {
            return Ok(RankSeries::default());
        }
        if flat.len() % names.len() != 0 {
            return Err(Error::Runtime(format!(
                "samples: {} values do not split into {} columns (a bug)",
                flat.len(),
                names.len()
            )));
        }
        let n = flat.len() / names.len();
        Ok(RankSeries {
            columns: names
                .iter()
                .zip(flat.chunks(n.max(1)))
                .map(|(name, v)| (*name, v.to_vec()))
                .collect(),
        })
    }
}

/// samples.csv, open for appending (rank 0).
pub struct SamplesSink {
    sink: CsvSink,
}

impl SamplesSink {
    /// Open `dir`/samples.csv to append, creating it when missing. The file is shared by
    /// every run into `dir` (micro-comm, then e2e, ...; `--resume` or not): nothing in it
    /// is overwritten. Rows of cases that have no row in any summary file of `dir` (a
    /// case interrupted after its samples and before its summary row, which `--resume`
    /// runs again) are dropped first, and a trailing partial row is cut; a file with
    /// other columns is refused. Call it after the summary files were opened (a resumed
    /// summary file loses its partial last row first).
    pub fn open(dir: &Path) -> Result<SamplesSink> {
        let path = dir.join(FILE);
        if !path.exists() {
            return Ok(SamplesSink {
                sink: CsvSink::create(&path)?,
            });
        }
        drop_unfinished(&path, &summary_case_ids(dir)?)?;
        let (sink, _) = CsvSink::resume(&path)?;
        if let Some(h) = sink.existing_header() {
            if !h.iter().map(String::as_str).eq(header()) {
                return Err(columns_differ(&path));
            }
        }
        Ok(SamplesSink { sink })
    }

    pub fn path(&self) -> &Path {
        self.sink.path()
    }

    /// Write one case: for each timed iteration, one row per rank (`ranks[r]` is rank
    /// r's series), then one flush and sync. All of the case's rows or none reach the
    /// file (a failed write cuts the file back to the previous case).
    pub fn write_case(
        &mut self,
        run_id: &str,
        case_id: &str,
        kind: &str,
        ranks: &[RankSeries],
    ) -> Result<()> {
        // Where each time column comes from, per rank.
        let mut index: Vec<[Option<usize>; TIME_COLUMNS.len()]> = Vec::with_capacity(ranks.len());
        for s in ranks {
            let mut idx = [None; TIME_COLUMNS.len()];
            for (k, (name, v)) in s.columns.iter().enumerate() {
                let j = TIME_COLUMNS.iter().position(|c| c == name).ok_or_else(|| {
                    Error::Runtime(format!("samples: unknown column {name} (a bug)"))
                })?;
                if v.len() != s.iters() {
                    return Err(Error::Runtime(format!(
                        "samples: column {name} has {} values, not {} (a bug)",
                        v.len(),
                        s.iters()
                    )));
                }
                idx[j] = Some(k);
            }
            index.push(idx);
        }
        let iters = ranks.iter().map(RankSeries::iters).max().unwrap_or(0);
        let mut cells: [String; NCOLS] = Default::default();
        cells[0] = SCHEMA_VERSION.to_string();
        cells[1] = run_id.to_string();
        cells[2] = case_id.to_string();
        cells[3] = kind.to_string();
        let nk = KEY_COLUMNS.len();
        self.sink.write_batch(&header(), |row| {
            for i in 0..iters {
                for (r, (s, idx)) in ranks.iter().zip(&index).enumerate() {
                    if i >= s.iters() {
                        continue;
                    }
                    cells[4].clear();
                    let _ = write!(cells[4], "{r}");
                    cells[5].clear();
                    let _ = write!(cells[5], "{i}");
                    for (j, k) in idx.iter().enumerate() {
                        let c = &mut cells[nk + j];
                        c.clear();
                        if let Some(k) = k {
                            let _ = write!(c, "{}", s.columns[*k].1[i]);
                        }
                    }
                    let refs: [&str; NCOLS] = std::array::from_fn(|k| cells[k].as_str());
                    row(&refs)?;
                }
            }
            Ok(())
        })
    }
}

/// The case_ids of every row of the summary files in `dir` (complete lines only; files
/// that are missing count as empty).
pub fn summary_case_ids(dir: &Path) -> Result<HashSet<String>> {
    let mut ids = HashSet::new();
    for f in SUMMARY_FILES {
        let path = dir.join(f);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
        if end == 0 {
            continue;
        }
        let bad = |e: csv::Error| {
            Error::Input(format!(
                "{}: not a readable CSV file ({e}); use a new --out",
                path.display()
            ))
        };
        let mut r = csv::ReaderBuilder::new()
            .flexible(true)
            .from_reader(&bytes[..end]);
        let col = r
            .headers()
            .map_err(bad)?
            .iter()
            .position(|c| c == "case_id")
            .ok_or_else(|| {
                Error::Input(format!(
                    "{}: has no case_id column; use a new --out directory",
                    path.display()
                ))
            })?;
        for rec in r.records() {
            if let Some(id) = rec.map_err(bad)?.get(col) {
                ids.insert(id.to_string());
            }
        }
    }
    Ok(ids)
}

fn columns_differ(path: &Path) -> Error {
    Error::Input(format!(
        "{}: its columns differ from what this gradcomp writes (written by another version?); use a new --out directory",
        path.display()
    ))
}

/// Remove from samples.csv (if it exists) every row whose case_id is not in `done`, and
/// a trailing partial row. Such rows are the tail of the file (a case is written whole,
/// before its summary row, and every resume cleans up before appending), so the file is
/// cut short; should they be anywhere else, the file is rewritten atomically without
/// them. Returns the number of rows dropped.
pub fn drop_unfinished(path: &Path, done: &HashSet<String>) -> Result<usize> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(path, e)),
    };
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    if end == 0 {
        // Empty, or a partial header: CsvSink::resume cuts it and the header is rewritten.
        return Ok(0);
    }
    let unreadable = |e: csv::Error| {
        Error::Input(format!(
            "{}: unreadable row ({e}); use a new --out",
            path.display()
        ))
    };
    let mut r = csv::ReaderBuilder::new().from_reader(&bytes[..end]);
    let h = r.byte_headers().map_err(unreadable)?.clone();
    if !h.iter().eq(header().iter().map(|c| c.as_bytes())) {
        return Err(columns_differ(path));
    }
    let col = KEY_COLUMNS
        .iter()
        .position(|c| *c == "case_id")
        .unwrap_or(2);
    let mut rec = csv::ByteRecord::new();
    // Byte ranges of the rows kept, and where the rows to drop start.
    let mut kept: Vec<(usize, usize)> = Vec::new();
    let mut first_drop: Option<usize> = None;
    let mut kept_after_drop = false;
    let mut dropped = 0usize;
    let mut cases: HashSet<Vec<u8>> = HashSet::new();
    let data_start = r.position().byte() as usize;
    loop {
        let start = r.position().byte() as usize;
        if !r.read_byte_record(&mut rec).map_err(unreadable)? {
            break;
        }
        let stop = r.position().byte() as usize;
        let id = rec.get(col).unwrap_or_default();
        let finished = std::str::from_utf8(id).is_ok_and(|id| done.contains(id));
        if finished {
            kept.push((start, stop));
            kept_after_drop |= first_drop.is_some();
        } else {
            first_drop.get_or_insert(start);
            dropped += 1;
            cases.insert(id.to_vec());
        }
    }
    if dropped == 0 {
        return Ok(0);
    }
    eprintln!(
        "gradcomp: warning: {}: dropping {dropped} row(s) of {} case(s) without a summary row (interrupted cases; --resume runs them again)",
        path.display(),
        cases.len()
    );
    if !kept_after_drop {
        let cut = first_drop.unwrap_or(end) as u64;
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        f.set_len(cut).map_err(|e| Error::io(path, e))?;
        f.sync_data().map_err(|e| Error::io(path, e))?;
    } else {
        let mut out = bytes[..data_start].to_vec();
        for (a, b) in kept {
            out.extend_from_slice(&bytes[a..b]);
        }
        super::write_atomic(path, &out)?;
    }
    Ok(dropped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("gradcomp-samples-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn series(cols: &[(&'static str, &[f64])]) -> RankSeries {
        let mut s = RankSeries::default();
        for (n, v) in cols {
            s.push(n, v);
        }
        s
    }

    #[test]
    fn a_case_is_one_row_per_iteration_and_rank_with_empty_cells_elsewhere() {
        let dir = tmp("rows");
        let p = dir.join(FILE);
        let mut s = SamplesSink::open(&dir).unwrap();
        let r0 = series(&[("time_s", &[1.0, 2.5])]);
        let r1 = series(&[("time_s", &[0.5, 3.0])]);
        s.write_case("run", "abc", kind::MICRO_COMM, &[r0, r1])
            .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], header().join(","));
        assert_eq!(lines.len(), 5);
        let time_col = header().iter().position(|c| *c == "time_s").unwrap();
        let cells: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split(',').collect()).collect();
        // Ordered by iteration, then rank.
        let keys: Vec<(&str, &str, &str)> =
            cells.iter().map(|c| (c[4], c[5], c[time_col])).collect();
        assert_eq!(
            keys,
            [
                ("0", "0", "1"),
                ("1", "0", "0.5"),
                ("0", "1", "2.5"),
                ("1", "1", "3")
            ]
        );
        for c in &cells {
            assert_eq!(c.len(), header().len());
            assert_eq!(&c[..4], ["1", "run", "abc", "micro-comm"]);
            for (k, v) in c.iter().enumerate().skip(KEY_COLUMNS.len()) {
                assert_eq!(v.is_empty(), k != time_col, "column {}", header()[k]);
            }
        }
        let bad = series(&[("median_s", &[1.0])]);
        assert!(s.write_case("run", "x", kind::MICRO_COMM, &[bad]).is_err());
        // The failed case left nothing behind.
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
    }

    #[test]
    fn flat_round_trips() {
        let s = series(&[("compress_s", &[1.0, 2.0]), ("total_s", &[3.0, 4.0])]);
        assert_eq!(RankSeries::from_flat(&s.names(), &s.flat()).unwrap(), s);
        assert!(RankSeries::from_flat(&["a", "b"], &[1.0, 2.0, 3.0]).is_err());
    }

    #[test]
    fn reopening_drops_the_rows_of_cases_without_a_summary_row() {
        let dir = tmp("resume");
        let p = dir.join(FILE);
        let mut s = SamplesSink::open(&dir).unwrap();
        let r = series(&[("time_s", &[1.0, 2.0])]);
        for id in ["a", "b", "c"] {
            s.write_case("run", id, kind::MICRO_COMM, &[r.clone(), r.clone()])
                .unwrap();
        }
        drop(s);
        // A partial row at the end, too.
        let mut text = std::fs::read_to_string(&p).unwrap();
        text.push_str("1,run,c,micro-comm,0,");
        std::fs::write(&p, &text).unwrap();
        // Cases a and b have summary rows (in two files, one with a partial last row).
        std::fs::write(
            dir.join("micro_comm.csv"),
            "schema_version,run_id,case_id\n1,run,a\n1,run,c",
        )
        .unwrap();
        std::fs::write(
            dir.join("e2e.csv"),
            "schema_version,run_id,case_id,x\n1,run,b,2\n",
        )
        .unwrap();
        let done = summary_case_ids(&dir).unwrap();
        assert_eq!(done.len(), 2);
        let mut s = SamplesSink::open(&dir).unwrap();
        s.write_case("run2", "c", kind::MICRO_COMM, &[r.clone(), r.clone()])
            .unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let ids: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split(',').nth(2).unwrap())
            .collect();
        assert_eq!(ids.len(), 12);
        assert_eq!(ids.iter().filter(|i| **i == "c").count(), 4);
        assert_eq!(text.lines().filter(|l| l.contains(",run2,")).count(), 4);
        // A dropped case in the middle: the file is rewritten without it.
        let done: HashSet<String> = ["a", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(drop_unfinished(&p, &done).unwrap(), 4);
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text.lines().count(), 9);
        assert!(!text.lines().any(|l| l.split(',').nth(2) == Some("b")));
        // Another file's columns are refused.
        std::fs::write(&p, "schema_version,run_id,case_id\n1,r,a\n").unwrap();
        let e = SamplesSink::open(&dir).err().unwrap().to_string();
        assert!(e.contains("columns differ"), "{e}");
    }
}
