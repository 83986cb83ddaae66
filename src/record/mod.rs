//! Results on disk: CSV rows (one file per benchmark kind, a row flushed as each case
//! ends) and `run.json` metadata. Only rank 0 writes. Nothing here measures.

pub mod meta;
pub mod samples;
mod table;

pub use table::{display, require_in, write_all, CsvFile, Existing, ReadError};

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
    /// File length after the last complete, synced row: a failed write (a full disk)
    /// is cut back to it, so the file never ends in a partial row.
    committed_bytes: u64,
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
                    "{} already exists: results are never overwritten; choose a new --out directory, or add --resume to run only the cases not in it yet",
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
            committed_bytes: 0,
        })
    }

    /// Create or truncate `path` (a file derived again on every run, [`write_all`]).
    pub fn replace(path: &Path) -> Result<CsvSink> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(CsvSink {
            path: path.to_path_buf(),
            writer: csv::Writer::from_writer(file),
            header: None,
            committed_bytes: 0,
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
        // A directory, or a link to a device (/dev/null) or FIFO, holds no results: that is
        // a wrong --out (exit 2), not a failed run.
        if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            return Err(Error::Input(format!(
                "{}: is not a regular file (a directory, a device such as /dev/null, or a FIFO), so it cannot hold this run's rows; move it away or use a new --out",
                path.display()
            )));
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
                committed_bytes: keep as u64,
            },
            done,
        ))
    }

    /// Serialize one row (the header precedes the first), flush and sync.
    pub fn write<R: Serialize>(&mut self, row: &R) -> Result<()> {
        let res = self
            .writer
            .serialize(row)
            .map_err(|e| self.row_error(e))
            .and_then(|_| self.sync());
        self.rollback_on_error(res)
    }

    /// Serialize several rows, then flush and sync once (`gradcomp converge` writes a
    /// row per training step and syncs at each evaluation, not at each step). On a
    /// failure the file is cut back to its last synced row, as for [`CsvSink::write`].
    pub fn write_all<R: Serialize>(&mut self, rows: &[R]) -> Result<()> {
        let res = rows
            .iter()
            .try_for_each(|row| self.writer.serialize(row).map_err(|e| self.row_error(e)))
            .and_then(|_| self.sync());
        self.rollback_on_error(res)
    }

    /// Write `cols` as the header of a new file with no rows yet (checked against a
    /// resumed file's), flush and sync.
    pub fn write_header(&mut self, cols: &[String]) -> Result<()> {
        let cols: Vec<&str> = cols.iter().map(String::as_str).collect();
        let res = self.header_inner(&cols).and_then(|_| self.sync());
        self.rollback_on_error(res)
    }

    /// The header found when resuming, to compare against the rows written now.
    pub fn existing_header(&self) -> Option<&[String]> {
        self.header.as_deref()
    }

    /// Write one row given as (column, value) pairs; the first row's columns become the
    /// header and every later row must have the same columns.
    pub fn write_fields(&mut self, fields: &Fields) -> Result<()> {
        let res = self.write_fields_inner(fields);
        self.rollback_on_error(res)
    }

    fn write_fields_inner(&mut self, fields: &Fields) -> Result<()> {
        let cols: Vec<&'static str> = fields.iter().map(|(c, _)| *c).collect();
        self.header_inner(&cols)?;
        self.writer
            .write_record(fields.iter().map(|(_, v)| v.as_str()))
            .map_err(|e| self.row_error(e))?;
        self.sync()
    }

    /// Write `cols` as the header of a new file, or check them against the header of
    /// the file being resumed.
    fn header_inner(&mut self, cols: &[&str]) -> Result<()> {
        match &self.header {
            None => {
                self.writer.write_record(cols).map_err(|e| self.row_error(e))?;
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
        Ok(())
    }

    /// Write a batch of rows with header `cols` (written first to a new file, checked
    /// against a resumed one's): `fill` hands each row to the given closure, which
    /// serializes it into the writer's buffer (no flush per row); then one flush and
    /// sync for the whole batch. On any failure the file is cut back to its last
    /// complete batch, so a batch is in the file entirely or not at all (samples.csv:
    /// one batch per case).
    pub fn write_batch(
        &mut self,
        cols: &[&str],
        fill: impl FnOnce(&mut dyn FnMut(&[&str]) -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        let res = self.write_batch_inner(cols, fill);
        self.rollback_on_error(res)
    }

    fn write_batch_inner(
        &mut self,
        cols: &[&str],
        fill: impl FnOnce(&mut dyn FnMut(&[&str]) -> Result<()>) -> Result<()>,
    ) -> Result<()> {
        self.header_inner(cols)?;
        let n = cols.len();
        let path = &self.path;
        let writer = &mut self.writer;
        let mut row = |rec: &[&str]| -> Result<()> {
            if rec.len() != n {
                return Err(Error::Runtime(format!(
                    "{}: a row of {} fields under a header of {n} (a bug)",
                    path.display(),
                    rec.len()
                )));
            }
            writer.write_record(rec).map_err(|e| {
                Error::Runtime(format!("cannot write a row to {}: {e}", path.display()))
            })
        };
        fill(&mut row)?;
        self.sync()
    }

    /// After a failed write: drop what the writer still buffers and cut the file back to
    /// its last complete row (truncating needs no free space).
    fn rollback_on_error(&mut self, res: Result<()>) -> Result<()> {
        if res.is_err() {
            use std::io::{Seek, SeekFrom};
            if let Ok(file) = self.writer.get_ref().try_clone() {
                // The old writer is dropped first: its final flush may write part of
                // the buffered row, which the truncation then removes.
                drop(std::mem::replace(
                    &mut self.writer,
                    csv::WriterBuilder::new()
                        .has_headers(false)
                        .from_writer(file),
                ));
                let f = self.writer.get_ref();
                let _ = f.set_len(self.committed_bytes);
                let _ = (&*f).seek(SeekFrom::Start(self.committed_bytes));
                if self.committed_bytes == 0 {
                    // The header went with the cut: the next row writes it again.
                    self.header = None;
                }
            }
        }
        res
    }

    /// A failed write is an [`Error::Io`] naming the file (`cannot write PATH: ...`,
    /// exit 1); anything else a row could not become is a [`Error::Runtime`].
    fn row_error(&self, e: csv::Error) -> Error {
        if !e.is_io_error() {
            return Error::Runtime(format!(
                "cannot write a row to {}: {e}",
                self.path.display()
            ));
        }
        match e.into_kind() {
            csv::ErrorKind::Io(cause) => Error::io(&self.path, cause),
            kind => Error::Runtime(format!(
                "cannot write a row to {}: {kind:?}",
                self.path.display()
            )),
        }
    }

    fn sync(&mut self) -> Result<()> {
        self.writer.flush().map_err(|e| Error::io(&self.path, e))?;
        let f = self.writer.get_ref();
        f.sync_data().map_err(|e| Error::io(&self.path, e))?;
        self.committed_bytes = f.metadata().map_err(|e| Error::io(&self.path, e))?.len();
        Ok(())
    }
}

/// Create the output directory (and parents) and prove it is writable.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Input(format!(
            "--out {}: is not a directory (a file has that name); choose a directory path",
            dir.display()
        )));
    }
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
/// On failure (a full disk) the temporary file is removed and `path` is left as it was.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let res = File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_data()))
        .map_err(|e| Error::io(path, e))
        .and_then(|_| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if res.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    res
}

/// A whole file written and synced beside its final name (`DIR/.NAME.PID.tmp`), not yet
/// under it: [`Staged::commit`] renames it into place; dropped uncommitted (a later
/// file of the same output failed), it is removed. For outputs that must change
/// together (fit's fits.csv and fits.json): stage one, write the other, commit.
pub struct Staged {
    tmp: PathBuf,
    path: PathBuf,
    committed: bool,
}

impl Staged {
    /// Write `bytes` beside `path`; a failure (a full disk) leaves nothing behind.
    pub fn write(path: &Path, bytes: &[u8]) -> Result<Staged> {
        let staged = Staged {
            tmp: table::temp_beside(path),
            path: path.to_path_buf(),
            committed: false,
        };
        File::create(&staged.tmp)
            .and_then(|mut f| f.write_all(bytes).and_then(|_| f.sync_data()))
            .map_err(|e| Error::io(path, e))?;
        Ok(staged)
    }

    /// Give the staged file its name (replacing any earlier file of that name).
    pub fn commit(mut self) -> Result<()> {
        std::fs::rename(&self.tmp, &self.path).map_err(|e| Error::io(&self.path, e))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Rewrite the small metadata file `path` with `bytes`: atomically when possible; when
/// that fails for lack of space, in place if `bytes` fit in the blocks `path` already
/// holds (a full disk still records the run's end; not atomic, so only as a fallback).
/// The error returned is the atomic write's.
pub fn write_meta_file(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let atomic = write_atomic(path, bytes);
    let Err(Error::Io { cause, .. }) = &atomic else {
        return atomic;
    };
    if cause.raw_os_error() != Some(libc::ENOSPC) {
        return atomic;
    }
    let fits = std::fs::metadata(path).is_ok_and(|m| bytes.len() as u64 <= m.blocks() * 512);
    if fits {
        let rewritten = OpenOptions::new().write(true).open(path).and_then(|mut f| {
            f.write_all(bytes)?;
            f.set_len(bytes.len() as u64)?;
            f.sync_data()
        });
        if rewritten.is_ok() {
            return Ok(());
        }
    }
    atomic
}

/// `--resume` into a file that holds rows of another world size: refused (case ids
/// include the world size, so every case would run again, and the file would mix world
/// sizes that only the column tells apart). `Ok` when the file is missing, has no
/// `world_size` column, or only `world_size` rows.
pub fn check_world_size(path: &Path, world_size: usize) -> Result<()> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(());
    };
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let mut r = csv::Reader::from_reader(&bytes[..keep]);
    let Some(col) = r
        .headers()
        .ok()
        .and_then(|h| h.iter().position(|c| c == "world_size"))
    else {
        return Ok(());
    };
    let mut others = std::collections::BTreeSet::new();
    for rec in r.records().flatten() {
        if let Some(n) = rec.get(col).and_then(|v| v.parse::<usize>().ok()) {
            if n != world_size {
                others.insert(n);
            }
        }
    }
    if others.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = others.iter().map(|n| n.to_string()).collect();
    Err(Error::Input(format!(
        "--resume: {} holds rows of world size {}, this run has {world_size} rank(s): case ids include the world size, so nothing would be skipped and the file would mix world sizes; resume with mpirun -np {} (or srun -n {}), or give this world size its own --out",
        path.display(),
        list.join(", "),
        list[0],
        list[0]
    )))
}

/// `--resume` into a file of another time dilation: refused. Case ids do not include K
/// (a dilated row is the same case in emulated seconds), so without this a resumed run
/// would skip cases measured at another K and mix the two in one file. Rows without the
/// column (files from before it) are K = 1.
pub fn check_time_dilation(path: &Path, k: u32) -> Result<()> {
    let Ok(bytes) = std::fs::read(path) else {
        return Ok(());
    };
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let mut r = csv::Reader::from_reader(&bytes[..keep]);
    let col = r
        .headers()
        .ok()
        .and_then(|h| h.iter().position(|c| c == "time_dilation"));
    let other = r.records().flatten().find_map(|rec| {
        let v = col
            .and_then(|c| rec.get(c))
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(1);
        (v != k).then_some(v)
    });
    match other {
        None => Ok(()),
        Some(v) => Err(Error::Input(format!(
            "--resume: {} holds rows of time dilation {v}, this run has --time-dilation {k}: the file would mix the two; resume on a netlab dilated by {v} (scripts/netlab.sh up ... --dilate {v}), or give this dilation its own --out",
            path.display()
        ))),
    }
}

/// Name of the lock file in an output directory.
pub const LOCK_FILE: &str = ".gradcomp.lock";

/// An exclusive lock on an output directory (`flock` on [`LOCK_FILE`]), held while the
/// value lives. The kernel releases it when the process ends in any way (kill -9
/// included), so a lock is never stale; the file itself stays and only names the last
/// holder.
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Take the lock on `dir` (which exists) for this process, recording `holder` (host,
    /// pid, start time) in the lock file. When another process holds it: an
    /// [`Error::Input`] naming that holder.
    pub fn acquire(dir: &Path, holder: &str) -> Result<DirLock> {
        use std::os::unix::io::AsRawFd;
        let path = dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| {
                Error::Input(format!(
                    "--out {}: cannot create the lock file {LOCK_FILE} ({e}); choose a writable path",
                    dir.display()
                ))
            })?;
        // SAFETY: flock on a file descriptor this function owns; it does not touch memory.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let who = std::fs::read_to_string(&path).unwrap_or_default();
                let who = who.trim();
                return Err(Error::Input(format!(
                    "--out {}: another gradcomp run is writing there ({}); wait for it to end or choose another --out",
                    dir.display(),
                    if who.is_empty() { "holder not yet recorded" } else { who }
                )));
            }
            return Err(Error::Input(format!(
                "--out {}: cannot lock the output directory ({e}); use a local or NFS-locking file system, or another --out",
                dir.display()
            )));
        }
        let written = file
            .set_len(0)
            .and_then(|_| file.write_all(format!("{holder}\n").as_bytes()))
            .and_then(|_| file.sync_data());
        written.map_err(|e| Error::io(&path, e))?;
        Ok(DirLock { _file: file })
    }
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
