//! Files a user names as input (configs, profiles, CSVs read back, run records): opened
//! without blocking, refused unless they are regular files, and read to a size limit.
//!
//! Why: `open(2)` on a FIFO blocks until a writer appears (under mpirun the ranks then
//! outlive the launcher), and `/dev/zero` or `/dev/urandom` never end, so reading one
//! to its end runs the node out of memory. Every file input goes through [`open`] or
//! [`read_to_string`]: the error names the file, what it is instead and what to give.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;
use thiserror::Error;

/// Limit of a hand-written or tool-written profile (compute or compression): one row
/// per tensor or kernel size, so kilobytes; 64 MiB leaves three orders of magnitude.
pub const PROFILE_BYTES: u64 = 64 << 20;
/// Limit of one of gradcomp's result CSVs read back (`e2e.csv`, `micro_comm.csv`,
/// `fits.csv`, `converge.csv`): a default converge run of 13 methods at three seeds is
/// about 5 MB, a long sweep's e2e.csv a few MB; 1 GiB leaves two orders of magnitude.
pub const RESULT_CSV_BYTES: u64 = 1 << 30;
/// Limit of a TOML config or a run record (`run.json`): kilobytes in practice.
pub const TEXT_BYTES: u64 = 16 << 20;

#[derive(Debug, Error)]
pub enum InputError {
    #[error("{path}: cannot open it ({source}); give the path of {what}")]
    Open {
        path: String,
        what: String,
        source: std::io::Error,
    },
    #[error("{path}: is {kind}, not a regular file; give the path of {what}")]
    NotRegular {
        path: String,
        kind: &'static str,
        what: String,
    },
    #[error("{path}: is larger than {limit_mib} MiB, the limit for {what}; give {what} itself")]
    TooLarge {
        path: String,
        limit_mib: u64,
        what: String,
    },
    #[error("{path}: is not UTF-8 text (invalid byte at offset {offset}); give {what}")]
    NotUtf8 {
        path: String,
        offset: usize,
        what: String,
    },
    #[error("{path}: read failed ({source})")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// What a file is when it is not a regular file, for messages.
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device (such as /dev/zero)"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// A regular file opened for reading that refuses to yield more than its limit: a read
/// past it fails with [`std::io::ErrorKind::InvalidData`] (the file grew after it was
/// opened), so a streaming reader (csv) stops with an error instead of going on.
pub struct Bounded {
    file: File,
    left_bytes: u64,
    path: String,
    limit_bytes: u64,
}

impl Bounded {
    /// The path as shown in messages.
    pub fn path(&self) -> &str {
        &self.path
    }
}

impl Read for Bounded {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        // One byte beyond the limit is read to tell "exactly at the limit" from "over".
        let want = buf.len().min(self.left_bytes.saturating_add(1) as usize);
        let n = self.file.read(&mut buf[..want])?;
        if n as u64 > self.left_bytes {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "{}: grew past the {} MiB limit while being read",
                    self.path,
                    self.limit_bytes >> 20
                ),
            ));
        }
        self.left_bytes -= n as u64;
        Ok(n)
    }
}

/// Open `path` for reading: without blocking (O_NONBLOCK, so a FIFO cannot hang the
/// open), then refused unless it is a regular file of at most `limit_bytes`. `what`
/// names the expected file in messages ("a compute profile (CSV: tensor,backward_s)").
pub fn open(path: &Path, limit_bytes: u64, what: &str) -> Result<Bounded, InputError> {
    let shown = crate::units::clip(&path.display().to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|source| InputError::Open {
            path: shown.clone(),
            what: what.to_string(),
            source,
        })?;
    // fstat of the opened file: what was opened is what is checked.
    let meta = file.metadata().map_err(|source| InputError::Read {
        path: shown.clone(),
        source,
    })?;
    if !meta.is_file() {
        return Err(InputError::NotRegular {
            path: shown,
            kind: kind_of(meta.file_type()),
            what: what.to_string(),
        });
    }
    if meta.len() > limit_bytes {
        return Err(InputError::TooLarge {
            path: shown,
            limit_mib: limit_bytes >> 20,
            what: what.to_string(),
        });
    }
    Ok(Bounded {
        file,
        left_bytes: limit_bytes,
        path: shown,
        limit_bytes,
    })
}

/// The whole of `path` as bytes, through [`open`].
pub fn read(path: &Path, limit_bytes: u64, what: &str) -> Result<Vec<u8>, InputError> {
    let mut f = open(path, limit_bytes, what)?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes).map_err(|source| {
        if source.kind() == std::io::ErrorKind::InvalidData {
            InputError::TooLarge {
                path: f.path.clone(),
                limit_mib: limit_bytes >> 20,
                what: what.to_string(),
            }
        } else {
            InputError::Read {
                path: f.path.clone(),
                source,
            }
        }
    })?;
    Ok(bytes)
}

/// The whole of `path` as UTF-8 text, through [`open`].
pub fn read_to_string(path: &Path, limit_bytes: u64, what: &str) -> Result<String, InputError> {
    let bytes = read(path, limit_bytes, what)?;
    String::from_utf8(bytes).map_err(|e| InputError::NotUtf8 {
        path: crate::units::clip(&path.display().to_string()),
        offset: e.utf8_error().valid_up_to(),
        what: what.to_string(),
    })
}

/// [`read_to_string`], or `None` when `path` does not exist (an optional input such as
/// a run's netlab.txt); every other failure is an error as there.
pub fn read_to_string_if_exists(
    path: &Path,
    limit_bytes: u64,
    what: &str,
) -> Result<Option<String>, InputError> {
    match read_to_string(path, limit_bytes, what) {
        Err(InputError::Open { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Ok(None)
        }
        r => r.map(Some),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gradcomp-input-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn mkfifo(p: &Path) {
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call; mkfifo only reads it.
        let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o600) };
        assert_eq!(rc, 0, "mkfifo {}", p.display());
    }

    /// A FIFO with no writer: a plain `File::open` would block forever. The check runs
    /// on a thread so that a regression fails the test (after 10 s) instead of hanging it.
    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = dir("fifo");
        let p = d.join("profile.csv");
        mkfifo(&p);
        let (tx, rx) = std::sync::mpsc::channel();
        let q = p.clone();
        std::thread::spawn(move || {
            let _ = tx.send(read_to_string(&q, PROFILE_BYTES, "a profile").map(|_| ()));
        });
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("reading a FIFO blocked (open without O_NONBLOCK?)");
        let msg = got.unwrap_err().to_string();
        assert!(
            msg.contains("is a FIFO (named pipe), not a regular file"),
            "{msg}"
        );
        assert!(
            msg.contains("profile.csv") && msg.contains("a profile"),
            "{msg}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn devices_and_directories_are_refused() {
        let e = read(Path::new("/dev/zero"), TEXT_BYTES, "a config").unwrap_err();
        assert!(
            matches!(e, InputError::NotRegular { kind, .. } if kind.contains("character device"))
        );
        let e = read(&std::env::temp_dir(), TEXT_BYTES, "a config").unwrap_err();
        assert!(matches!(
            e,
            InputError::NotRegular {
                kind: "a directory",
                ..
            }
        ));
        let e = read(Path::new("/nonexistent/x.csv"), TEXT_BYTES, "a config").unwrap_err();
        assert!(matches!(e, InputError::Open { .. }), "{e}");
        // Missing is `None` only where the input is optional; a FIFO stays an error.
        let none = read_to_string_if_exists(Path::new("/nonexistent/x"), TEXT_BYTES, "x");
        assert!(none.unwrap().is_none());
        let dev = read_to_string_if_exists(Path::new("/dev/zero"), TEXT_BYTES, "x");
        assert!(matches!(dev, Err(InputError::NotRegular { .. })));
    }

    /// Both sides of the limit: a file of exactly the limit is read whole; one byte more
    /// is refused at open (its size), and a file that grows after the open is refused
    /// by the reader.
    #[test]
    fn the_limit_is_inclusive_and_holds_while_reading() {
        let d = dir("limit");
        let p = d.join("t.txt");
        std::fs::write(&p, vec![b'a'; 4096]).unwrap();
        assert_eq!(read(&p, 4096, "t").unwrap().len(), 4096);
        let e = read(&p, 4095, "t").unwrap_err();
        assert!(matches!(e, InputError::TooLarge { .. }), "{e}");
        // Opened at 4096 bytes with a 4096 limit, then grown: the reader stops.
        let mut f = open(&p, 4096, "t").unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .unwrap()
            .write_all(b"more")
            .unwrap();
        let mut buf = Vec::new();
        let e = f.read_to_end(&mut buf).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
        assert!(buf.len() <= 4096);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn text_must_be_utf8() {
        let d = dir("utf8");
        let p = d.join("t.toml");
        std::fs::write(&p, b"ok\xff").unwrap();
        let e = read_to_string(&p, TEXT_BYTES, "a TOML config").unwrap_err();
        assert!(matches!(e, InputError::NotUtf8 { offset: 2, .. }), "{e}");
        std::fs::write(&p, "ok").unwrap();
        assert_eq!(read_to_string(&p, TEXT_BYTES, "x").unwrap(), "ok");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
