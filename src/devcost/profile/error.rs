//! [`ProfileError`], every way a compress profile can be bad or fall short of a run, and
//! [`Loc`], the file and line an error names.

use std::fmt;

use thiserror::Error;

use super::{COPY, HEADER, SCRIPT};

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
    /// The file cannot be opened or read (missing, not a regular file, too large).
    #[error(transparent)]
    File(Box<crate::input::InputError>),
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
    /// Process exit code, as for [`crate::Error::exit_code`]: 2 (bad input; the binary
    /// reads profiles and never writes them).
    pub fn exit_code(&self) -> u8 {
        crate::error::EXIT_USAGE
    }
}

/// Bad input ([`crate::error::Error::Usage`], exit 2).
impl From<ProfileError> for crate::error::Error {
    fn from(e: ProfileError) -> Self {
        crate::error::Error::Usage(Box::new(e))
    }
}
