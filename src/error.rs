//! The library's error type and its exit codes.

use thiserror::Error;

/// Exit code for bad input (flags, config, output directory, world size).
pub const EXIT_USAGE: u8 = 2;
/// Exit code for a failed run (a `--check` mismatch, an MPI or I/O failure mid-run).
pub const EXIT_FAILURE: u8 = 1;

#[derive(Debug, Error)]
pub enum Error {
    /// Bad input: the message names the flag/key, the value and what is allowed.
    #[error("{0}")]
    Input(String),
    /// Bad input rejected by a layer's own error type (a configuration key, a method's
    /// parameters, a model or compute-model name): exit code 2. Each of those layers
    /// converts its error into this variant (`From` impls beside the types), so this
    /// module names none of the layers above it.
    #[error(transparent)]
    Usage(Box<dyn std::error::Error + Send + Sync>),
    /// A `--check` validation found wrong results.
    #[error("check failed: {0}")]
    Check(String),
    /// Reading or writing a file failed mid-run (a full disk, a vanished directory):
    /// exit code 1. Unusable input files and output directories are [`Error::Input`].
    #[error("cannot write {path}: {cause}")]
    Io {
        path: String,
        /// Not a `source`: the message already holds it (printed once, not twice).
        cause: std::io::Error,
    },
    /// Anything else that went wrong while running.
    #[error("{0}")]
    Runtime(String),
    /// A stop signal (SIGTERM, SIGINT) on some rank; every rank agreed to stop.
    #[error("interrupted by {}", crate::measure::stop::name(*signal))]
    Interrupted { signal: i32 },
    /// Every rank agreed (collectively) that the job fails with `code`; `message` is
    /// set on exactly one rank, the one that reports it.
    #[error("{}", message.as_deref().unwrap_or("another rank failed"))]
    Agreed { code: u8, message: Option<String> },
}

impl Error {
    /// Process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) | Error::Usage(_) => EXIT_USAGE,
            Error::Check(_) | Error::Runtime(_) | Error::Io { .. } => EXIT_FAILURE,
            Error::Interrupted { signal } => crate::measure::stop::exit_code(*signal),
            Error::Agreed { code, .. } => *code,
        }
    }

    pub fn io(path: impl AsRef<std::path::Path>, source: std::io::Error) -> Error {
        Error::Io {
            path: path.as_ref().display().to_string(),
            cause: source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_follow_the_docs() {
        // docs/reliability.md, "Exit codes": 1 a failed run (an I/O error mid-run), 2 bad input.
        let io = Error::io("x.csv", std::io::Error::other("disk full"));
        assert_eq!(io.exit_code(), EXIT_FAILURE);
        assert_eq!(Error::Runtime("x".into()).exit_code(), EXIT_FAILURE);
        assert_eq!(Error::Check("x".into()).exit_code(), EXIT_FAILURE);
        assert_eq!(Error::Input("x".into()).exit_code(), EXIT_USAGE);
    }
}
