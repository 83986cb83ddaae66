//! Whole CSV files: [`write_all`] writes one of serde rows at once (simulate's sim.csv
//! and sim_vs_measured.csv, fit's fits.csv) through [`CsvSink`], the writer of the
//! benchmark rows; [`CsvFile`] opens gradcomp's own CSVs for reading (e2e.csv,
//! micro_compress.csv, micro_comm.csv for `fit` and `simulate --compare`), with errors
//! that name the file and, for a missing column, the column and the header found.
//! (`--resume` reads its files in `CsvSink::resume` and samples.rs: they cut a partial
//! trailing row first, so they read bytes, not a file.)

use super::CsvSink;
use crate::error::{Error, Result};
use serde::Serialize;
use std::path::Path;

/// What [`write_all`] does when the file already exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Refuse ([`Error::Input`], exit 2): results are never overwritten (sim.csv).
    Refuse,
    /// Replace it: files derived again on every run (fits.csv, sim_vs_measured.csv).
    Replace,
}

/// Write `rows` as the whole CSV file `path`: the header (the row type's fields; from
/// `R::default()` when there are no rows, so the file always has one), the rows, one
/// flush and sync, into a temporary file beside `path` that then takes its name, so
/// `path` is whole or absent (a full disk leaves no partial row, and no empty file that
/// would make a rerun refuse). A failed write is an [`Error::Io`] naming `path` (exit 1).
pub fn write_all<R: Serialize + Default>(
    path: &Path,
    rows: &[R],
    existing: Existing,
) -> Result<()> {
    if existing == Existing::Refuse && path.exists() {
        return Err(already_exists(path));
    }
    let tmp = temp_beside(path);
    let res = write_rows(path, &tmp, rows).and_then(|_| publish(&tmp, path, existing));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// `DIR/.NAME.PID.tmp`: a name of the same folder (so a rename moves no data) that
/// no other process writing `path` uses.
pub(super) fn temp_beside(path: &Path) -> std::path::PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

fn write_rows<R: Serialize + Default>(path: &Path, tmp: &Path, rows: &[R]) -> Result<()> {
    let mut sink = CsvSink::replace(tmp).map_err(|e| renamed(e, path))?;
    // Errors name the file the user asked for, not the temporary one.
    sink.path = path.to_path_buf();
    if rows.is_empty() {
        sink.write_header(&header_of(path, &R::default())?)?;
    }
    sink.write_all(rows)
}

/// Give the whole temporary file `tmp` the name `path`: for [`Existing::Refuse`] only if
/// `path` is still absent (a hard link fails on an existing name; where the file system
/// has no hard links, a rename after checking).
fn publish(tmp: &Path, path: &Path, existing: Existing) -> Result<()> {
    if existing == Existing::Replace {
        return std::fs::rename(tmp, path).map_err(|e| Error::io(path, e));
    }
    match std::fs::hard_link(tmp, path) {
        Ok(()) => {
            let _ = std::fs::remove_file(tmp);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(already_exists(path)),
        Err(_) if path.exists() => Err(already_exists(path)),
        Err(_) => std::fs::rename(tmp, path).map_err(|e| Error::io(path, e)),
    }
}

fn already_exists(path: &Path) -> Error {
    Error::Input(format!(
        "{} already exists: results are never overwritten; choose a new --out directory",
        path.display()
    ))
}

/// An error about the temporary file, told about `path`.
fn renamed(e: Error, path: &Path) -> Error {
    match e {
        Error::Io { cause, .. } => Error::io(path, cause),
        other => other,
    }
}

/// The header csv writes for rows like `row`.
fn header_of<R: Serialize>(path: &Path, row: &R) -> Result<Vec<String>> {
    let bug = |e: &dyn std::fmt::Display| {
        Error::Runtime(format!(
            "{}: cannot name the columns of a row ({e}; a bug)",
            path.display()
        ))
    };
    let mut w = csv::Writer::from_writer(Vec::new());
    w.serialize(row).map_err(|e| bug(&e))?;
    let bytes = w.into_inner().map_err(|e| bug(&e))?;
    let mut r = csv::Reader::from_reader(&bytes[..]);
    let header = r.headers().map_err(|e| bug(&e))?;
    Ok(header.iter().map(String::from).collect())
}

/// Serialize a field with its `Display` form (`0.1`, `1`, `1e-7` as `0.0000001`)
/// instead of csv's float form (`1.0`, `1e-7`): `#[serde(serialize_with = ...)]`.
pub fn display<T: std::fmt::Display, S: serde::Serializer>(
    v: &T,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Reading one of gradcomp's own CSVs failed; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file cannot be opened (missing, unreadable, not a regular file, too large).
    #[error(transparent)]
    Open(#[from] crate::input::InputError),
    /// The header or a row is not CSV (or the read failed part way).
    #[error("{path}: malformed CSV: {source}")]
    Malformed { path: String, source: csv::Error },
    /// A column the reader needs is not in the header; `fix` says what file was expected.
    #[error("{path}: missing column `{column}` (the header has: {header}); {fix}")]
    MissingColumn {
        path: String,
        column: String,
        header: String,
        fix: String,
    },
}

/// One of gradcomp's CSVs opened for reading: its header (each name trimmed) read, the
/// reader at the first row. Fields are public so that a loop over `reader.records()`
/// can look at `header`.
pub struct CsvFile {
    /// The path as shown in messages.
    pub path: String,
    pub header: Vec<String>,
    pub reader: csv::Reader<crate::input::Bounded>,
}

impl CsvFile {
    pub fn open(path: &Path) -> std::result::Result<CsvFile, ReadError> {
        let shown = path.display().to_string();
        let file = crate::input::open(
            path,
            crate::input::RESULT_CSV_BYTES,
            "a CSV written by gradcomp",
        )?;
        let mut reader = csv::Reader::from_reader(file);
        let header = match reader.headers() {
            Ok(h) => h.iter().map(|h| h.trim().to_string()).collect(),
            Err(source) => {
                return Err(ReadError::Malformed {
                    path: shown,
                    source,
                })
            }
        };
        Ok(CsvFile {
            path: shown,
            header,
            reader,
        })
    }

    /// The position of column `name`, if the header has it.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// The position of column `name`, or a [`ReadError::MissingColumn`] naming the file,
    /// the column and the header, then `fix` (what file was expected).
    pub fn require(&self, name: &str, fix: &str) -> std::result::Result<usize, ReadError> {
        require_in(&self.path, &self.header, name, fix)
    }

    /// A row of the file at `path` that could not be read.
    pub fn malformed(path: &str, source: csv::Error) -> ReadError {
        ReadError::Malformed {
            path: path.to_string(),
            source,
        }
    }
}

/// [`CsvFile::require`] for a header already taken out of its [`CsvFile`].
pub fn require_in(
    path: &str,
    header: &[String],
    name: &str,
    fix: &str,
) -> std::result::Result<usize, ReadError> {
    header
        .iter()
        .position(|h| h == name)
        .ok_or_else(|| ReadError::MissingColumn {
            path: path.to_string(),
            column: name.to_string(),
            header: header.join(","),
            fix: fix.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Serialize)]
    struct Row {
        schema_version: u32,
        x: f64,
        #[serde(serialize_with = "display")]
        y: f64,
        z: Option<String>,
    }

    fn dir(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gradcomp-table-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn whole_files_keep_the_header_refuse_or_replace_and_read_back() {
        let d = dir("write");
        let p = d.join("a.csv");
        let row = |x: f64| Row {
            schema_version: 1,
            x,
            y: x,
            z: None,
        };
        write_all(&p, &[row(1.0), row(1e-7)], Existing::Refuse).unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "schema_version,x,y,z\n1,1.0,1,\n1,1e-7,0.0000001,\n");
        let e = write_all(&p, &[row(2.0)], Existing::Refuse).unwrap_err();
        assert!(
            matches!(e, Error::Input(_)) && e.to_string().contains("already exists"),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            text,
            "refused: left as it was"
        );
        // No rows: the header alone.
        write_all::<Row>(&p, &[], Existing::Replace).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "schema_version,x,y,z\n"
        );

        write_all(&p, &[row(0.5)], Existing::Replace).unwrap();
        let mut f = CsvFile::open(&p).unwrap();
        assert_eq!(f.column("y"), Some(2));
        let e = f.require("w", "expected a.csv").unwrap_err().to_string();
        assert!(
            e.contains(
                "a.csv: missing column `w` (the header has: schema_version,x,y,z); expected a.csv"
            ),
            "{e}"
        );
        let rows: Vec<_> = f.reader.records().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 1);
        assert_eq!(&rows[0][2], "0.5");
        let e = CsvFile::open(&d.join("none.csv"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("none.csv: cannot open it") && e.contains("No such file"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn an_io_error_names_the_file_and_exits_1() {
        let d = dir("io");
        // A directory where the file should be: opening it to write fails.
        let p = d.join("sub");
        std::fs::create_dir_all(&p).unwrap();
        let e = write_all(&p, &[Row::default()], Existing::Replace).unwrap_err();
        assert_eq!(e.exit_code(), crate::error::EXIT_FAILURE, "{e}");
        assert!(
            e.to_string()
                .starts_with(&format!("cannot write {}", p.display())),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}
