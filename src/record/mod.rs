//! Results on disk: CSV rows (one file per benchmark kind, a row flushed as each case
//! ends) and `run.json` metadata. Only rank 0 writes. Nothing here measures.

pub mod meta;

use crate::error::{Error, Result};
use serde::Serialize;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the CSV layouts documented in docs/csv-schema.md; bumped on any change.
pub const SCHEMA_VERSION: u32 = 1;

/// One CSV file written row by row; each row is flushed and synced before the next
/// case starts, so a killed job keeps every finished case and never a half row.
pub struct CsvSink {
    path: PathBuf,
    writer: csv::Writer<File>,
    header: Option<Vec<String>>,
}

/// A row as (column, value) pairs, for layouts assembled from parts.
pub type Fields = Vec<(&'static str, String)>;

impl CsvSink {
    /// Create `path`; refuses to overwrite an existing file so earlier results are
    /// never lost.
    pub fn create(path: &Path) -> Result<CsvSink> {
        let file = OpenOptions::new().write(true).create_new(true).open(path).map_err(|e| {
            if e.kind() == std::io::ErrorKind::AlreadyExists {
                Error::Input(format!(
                    "{} already exists: results are never overwritten; choose a new --out directory",
                    path.display()
                ))
            } else {
                Error::io(path, e)
            }
        })?;
        Ok(CsvSink {
            path: path.to_path_buf(),
            writer: csv::Writer::from_writer(file),
            header: None,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reopen `path` to append (`--resume`), creating it if missing. Returns the sink
    /// and the `case_id`s of the rows already there. A trailing partial row (a job
    /// killed mid-write) is cut off; a file without a `case_id` column is refused.
    pub fn resume(path: &Path) -> Result<(CsvSink, std::collections::HashSet<String>)> {
        let mut done = std::collections::HashSet::new();
        if !path.exists() {
            return Ok((CsvSink::create(path)?, done));
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let keep = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(p) => p + 1,
            None => 0,
        };
        if keep < bytes.len() {
            eprintln!("gradcomp: warning: {}: dropping a partial last row ({} bytes) left by an interrupted run", path.display(), bytes.len() - keep);
            let f = OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            f.set_len(keep as u64).map_err(|e| Error::io(path, e))?;
        }
        let mut header = None;
        if keep > 0 {
            let mut r = csv::Reader::from_reader(&bytes[..keep]);
            let h: Vec<String> = r
                .headers()
                .map_err(|e| {
                    Error::Input(format!(
                        "{}: not a CSV file ({e}); use a new --out",
                        path.display()
                    ))
                })?
                .iter()
                .map(String::from)
                .collect();
            let col = h.iter().position(|c| c == "case_id").ok_or_else(|| {
                Error::Input(format!("{}: has no case_id column, so finished cases cannot be recognised; use a new --out directory", path.display()))
            })?;
            for rec in r.records() {
                let rec = rec.map_err(|e| {
                    Error::Input(format!(
                        "{}: unreadable row ({e}); use a new --out",
                        path.display()
                    ))
                })?;
                if let Some(id) = rec.get(col) {
                    done.insert(id.to_string());
                }
            }
            header = Some(h);
        }
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let writer = csv::WriterBuilder::new()
            .has_headers(header.is_none())
            .from_writer(file);
        Ok((
            CsvSink {
                path: path.to_path_buf(),
                writer,
                header,
            },
            done,
        ))
    }

    /// Serialize one row (the header precedes the first), flush and sync.
    pub fn write<R: Serialize>(&mut self, row: &R) -> Result<()> {
        self.writer.serialize(row).map_err(|e| self.row_error(e))?;
        self.sync()
    }

    /// Serialize several rows, then flush and sync once (`gradcomp converge` writes a
    /// row per training step and syncs at each evaluation, not at each step).
    pub fn write_all<R: Serialize>(&mut self, rows: &[R]) -> Result<()> {
        for row in rows {
            self.writer.serialize(row).map_err(|e| self.row_error(e))?;
        }
        self.sync()
    }

    /// The header found when resuming, to compare against the rows written now.
    pub fn existing_header(&self) -> Option<&[String]> {
        self.header.as_deref()
    }

    /// Write one row given as (column, value) pairs; the first row's columns become the
    /// header and every later row must have the same columns.
    pub fn write_fields(&mut self, fields: &Fields) -> Result<()> {
        let cols: Vec<&'static str> = fields.iter().map(|(c, _)| *c).collect();
        match &self.header {
            None => {
                self.writer.write_record(&cols).map_err(|e| self.row_error(e))?;
                self.header = Some(cols.iter().map(|c| c.to_string()).collect());
            }
            Some(h) if !h.iter().map(String::as_str).eq(cols.iter().copied()) => {
                return Err(Error::Input(format!(
                    "{}: its columns differ from the rows this gradcomp writes (written by another version?); use a new --out directory",
                    self.path.display()
                )))
            }
            Some(_) => {}
        }
        self.writer
            .write_record(fields.iter().map(|(_, v)| v.as_str()))
            .map_err(|e| self.row_error(e))?;
        self.sync()
    }

    fn row_error(&self, e: csv::Error) -> Error {
        Error::Runtime(format!(
            "cannot write a row to {}: {e}",
            self.path.display()
        ))
    }

    fn sync(&mut self) -> Result<()> {
        self.writer.flush().map_err(|e| Error::io(&self.path, e))?;
        self.writer
            .get_ref()
            .sync_data()
            .map_err(|e| Error::io(&self.path, e))
    }
}

/// Create the output directory (and parents) and prove it is writable.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::Input(format!(
            "--out {}: cannot create the output directory ({e}); choose a writable path",
            dir.display()
        ))
    })?;
    let probe = dir.join(".gradcomp-write-test");
    let res = File::create(&probe).and_then(|mut f| f.write_all(b"ok"));
    let _ = std::fs::remove_file(&probe);
    res.map_err(|e| {
        Error::Input(format!(
            "--out {}: the output directory is not writable ({e}); choose a writable path",
            dir.display()
        ))
    })
}

/// Write `bytes` to `path` atomically (temporary file + rename), so a reader never sees
/// a half-written file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|_| f.sync_data())
        .map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize)]
    struct Row {
        schema_version: u32,
        a: u64,
        b: Option<f64>,
    }

    #[test]
    fn rows_are_flushed_and_files_never_overwritten() {
        let dir = std::env::temp_dir().join(format!("gradcomp-test-{}", std::process::id()));
        prepare_dir(&dir).unwrap();
        let p = dir.join("x.csv");
        let _ = std::fs::remove_file(&p);
        let mut s = CsvSink::create(&p).unwrap();
        s.write(&Row {
            schema_version: 1,
            a: 3,
            b: None,
        })
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "schema_version,a,b\n1,3,\n"
        );
        s.write(&Row {
            schema_version: 1,
            a: 4,
            b: Some(0.5),
        })
        .unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "schema_version,a,b\n1,3,\n1,4,0.5\n"
        );
        assert!(CsvSink::create(&p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
            .contains("already exists"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
