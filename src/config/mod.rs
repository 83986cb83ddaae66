//! Bench configuration: the TOML schema (unknown keys are errors), its validation into
//! a [`Config`], and the expansion of every section into a list of [`Case`]s (lists
//! expand to the cartesian product). The CLI subcommands build the same sections.

use crate::measure::shape::Shape;
use crate::units::parse_bytes;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;
use thiserror::Error;

mod cases;
mod converge;
mod e2e;
mod micro;
mod sweep;
pub use cases::*;
pub use converge::{
    sections_from_file, ConvergeCase, ConvergeSection, CONVERGE_NOT_DILATED, TEACHER_HIDDEN,
};
pub use e2e::*;
pub use micro::*;
pub use sweep::{Sweep, MAX_SKETCH_COLS_PER_K, MAX_SKETCH_ROWS};

/// A configuration problem, located by where the value came from.
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{file}: {msg}")]
    Syntax { file: String, msg: String },
    #[error("{location}: {msg}")]
    Invalid { location: String, msg: String },
    /// The file cannot be read: not a regular file, too large, not UTF-8.
    #[error(transparent)]
    Read(#[from] crate::input::InputError),
    #[error("config file {file} does not exist; {hint}")]
    NotFound { file: String, hint: String },
    /// A file of `[[converge]]` sections and no benchmark section: a convergence check's
    /// config, read by [`converge::sections_from_file`].
    #[error(
        "{file}: holds only [[converge]] sections, a convergence check: run it with \
         `gradcomp converge --config {file}`; `gradcomp run` needs at least one \
         [[micro-comm]], [[micro-compress]], [[micro]] or [[e2e]] table"
    )]
    ConvergeOnly { file: String },
}

/// Levenshtein distance of two short names (bytes).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.as_bytes().iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &y) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(x != y))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// What to say when config `path` does not exist: the closest names among the TOML
/// files beside it and in `bench-configs/` (from the working directory), or where the
/// shipped configs are.
pub fn missing_config_hint(path: &Path) -> String {
    let want = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let beside = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => Path::new(".").to_path_buf(),
    };
    let mut found: Vec<(usize, String)> = Vec::new();
    for dir in [beside, Path::new("bench-configs").to_path_buf()] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            // Only configs that can be read (a dangling link, such as the path asked
            // for itself, is not one).
            if p.extension().map_or(true, |x| x != "toml") || !p.is_file() {
                continue;
            }
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().to_lowercase())
                .unwrap_or_default();
            let d = edit_distance(&want, &stem);
            let close = d <= (want.len().max(stem.len()) / 3).max(2)
                || (!want.is_empty() && (stem.contains(&want) || want.contains(&stem)));
            let shown = if dir == Path::new(".") {
                p.file_name()
                    .map_or(String::new(), |n| n.to_string_lossy().into())
            } else {
                p.display().to_string()
            };
            if close && !found.iter().any(|(_, s)| *s == shown) {
                found.push((d, shown));
            }
        }
    }
    found.sort();
    if found.is_empty() {
        "the shipped configs are in bench-configs/ (e.g. bench-configs/laptop.toml)".into()
    } else {
        format!(
            "did you mean {}?",
            found
                .into_iter()
                .take(3)
                .map(|(_, s)| s)
                .collect::<Vec<_>>()
                .join(" or ")
        )
    }
}

/// Bad input: exit code 2 ([`crate::error::Error::Usage`]).
impl From<ConfigError> for crate::error::Error {
    fn from(e: ConfigError) -> Self {
        crate::error::Error::Usage(Box::new(e))
    }
}

/// Where a value came from, for error messages: a CLI flag or a key of a TOML section.
#[derive(Clone, Debug)]
pub enum Origin {
    Cli,
    File {
        file: String,
        section: &'static str,
        index: usize,
    },
}

impl Origin {
    /// An error for `key` (TOML spelling; the CLI flag is derived from it).
    pub fn invalid(&self, key: &str, msg: impl fmt::Display) -> ConfigError {
        // One line whatever the user typed (a value may hold a newline).
        let msg = clip(&msg.to_string().replace('\r', "\\r").replace('\n', "\\n"));
        let location = match self {
            Origin::Cli => {
                let flag = match key {
                    "shapes" => "shape",
                    "models" => "model",
                    "densities" => "density",
                    "ranks" => "rank",
                    "lowrank_ranks" => "lowrank_rank",
                    "min_time_s" => "min_time",
                    "max_time_s" => "max_time",
                    k => k,
                };
                format!("--{}", flag.replace('_', "-"))
            }
            Origin::File {
                file,
                section,
                index,
            } => format!("{file}: [[{section}]] #{index}, key '{key}'"),
        };
        ConfigError::Invalid {
            location,
            msg: msg.to_string(),
        }
    }
}

/// Refuse a list that names one value twice: both entries would run the same case under
/// one case_id (so `--resume` could not tell them apart).
///
/// Also refuses a list longer than [`MAX_CASES`] (every entry is at least one case)
/// before looking at it further: a list of 200000 sizes used to take seconds of CPU per
/// rank before the case count refused it. Linear time: entries are compared only within
/// groups of the same `show` text.
pub fn no_repeats<T: PartialEq>(
    origin: &Origin,
    key: &str,
    items: &[T],
    show: impl Fn(&T) -> String,
) -> Result<(), ConfigError> {
    check_list_len(origin, key, items.len())?;
    let mut seen: std::collections::HashMap<String, Vec<usize>> = Default::default();
    for (i, x) in items.iter().enumerate() {
        let text = show(x);
        let same = seen.entry(text.clone()).or_default();
        if same.iter().any(|&j| items[j] == *x) {
            return Err(origin.invalid(
                key,
                format!("'{text}' appears twice; each entry is one case, remove the repeat"),
            ));
        }
        same.push(i);
    }
    Ok(())
}

/// Refuse a list of more than [`MAX_CASES`] entries (each is at least one case).
pub fn check_list_len(origin: &Origin, key: &str, len: usize) -> Result<(), ConfigError> {
    if len as u128 > MAX_CASES {
        return Err(origin.invalid(
            key,
            format!("has {len} entries; at most {MAX_CASES} (each entry is at least one case): shorten it or split the sweep into several runs"),
        ));
    }
    Ok(())
}

pub use crate::units::{clip, MAX_ECHO_BYTES};

/// A fusion plan (`fusion` key or flag). A threshold of 0 bytes is refused rather than run
/// as `none` without a word: the user meant a size and lost its unit or digits.
pub fn parse_fusion(
    origin: &Origin,
    key: &str,
    s: &str,
) -> Result<crate::schedule::plan::Fusion, ConfigError> {
    if s.trim() != "none" && parse_bytes(s.trim()) == Ok(0) {
        return Err(origin.invalid(
            key,
            format!("'{s}' is a threshold of 0 bytes, which fuses nothing; write none (each tensor alone) or a positive size such as 25MiB"),
        ));
    }
    crate::schedule::plan::Fusion::parse(s).map_err(|m| origin.invalid(key, m))
}

/// Memory every rank holds whatever it runs (MPI library, code, stacks): ~19 MiB
/// measured (VmHWM, Open MPI 4.1), bounded with room.
pub const BASE_RSS_BYTES: u64 = 64 << 20;

/// The buffer micro-compress reads to measure memory bandwidth (measure::tensors).
pub const MEMORY_PROBE_BYTES: u64 = 256 << 20;

/// Share of the node's available memory a run may plan to use; the rest is a margin
/// for the OS, page cache and estimate error.
pub const MEMORY_USABLE_FRACTION: f64 = 0.9;

/// Largest config file read (bytes): far above any real sweep, small enough that a
/// wrong path (a device, a log file) is refused instead of read.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// Largest per-worker batch: 16x the largest per-worker batch of the large-batch
/// literature (LARS trains AlexNet at 32k global, 64k on ResNet-50 across many
/// workers: You et al. 2017), so only a typo or a unit mistake exceeds it.
pub const MAX_BATCH: usize = 1 << 20;

/// Longest modelled device time of one emulated iteration (forward plus backward, s):
/// an e2e case times warm-up and several iterations of it, so past an hour a case
/// would run for most of a day; the usual cause is a batch or profile value off by
/// orders of magnitude.
pub const MAX_ITERATION_COMPUTE_S: f64 = 3600.0;

/// Most cases one run may expand to: a sweep beyond it is a mistake or belongs in
/// several runs (each case is one row and one collective agreement).
pub const MAX_CASES: u128 = 100_000;

/// The whole TOML file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    #[serde(default)]
    pub run: RunSection,
    #[serde(default, rename = "micro-comm")]
    pub micro_comm: Vec<MicroCommSection>,
    #[serde(default, rename = "micro-compress")]
    pub micro_compress: Vec<CompressSection>,
    #[serde(default)]
    pub micro: Vec<CompressSection>,
    #[serde(default)]
    pub e2e: Vec<E2eSection>,
    /// `[[converge]]`: run by `gradcomp converge --config FILE` (src/converge/), not by
    /// `gradcomp run`.
    #[serde(default)]
    pub converge: Vec<ConvergeSection>,
}

/// A resolved configuration: what one invocation will run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Config {
    pub seed: u64,
    pub expect_ranks: Option<usize>,
    pub case_timeout_s: Option<f64>,
    /// Write samples.csv (`[run] samples = true` or `--samples`; default off).
    pub samples: bool,
    /// Every case (micro and e2e) runs this many times, round after round (`[run]
    /// rounds`, `--rounds`).
    pub rounds: usize,
    /// Time dilation K (`[run] time_dilation`, `--time-dilation`; 1 = none): the run
    /// emulates a cluster whose clocks run K times slower (src/measure/dilation.rs).
    pub time_dilation: u32,
    pub micro_comm: Vec<MicroCommSpec>,
    pub micro_compress: Vec<CompressSpec>,
    pub micro: Vec<CompressSpec>,
    pub e2e: Vec<E2eSpec>,
    /// `[[converge]]` sections of the file, which `gradcomp run` does not run
    /// (`gradcomp converge --config FILE` does); [`Config::notes`] says so.
    #[serde(skip)]
    pub converge_sections: usize,
}

impl Config {
    /// What this run will not do that its config or flags may lead one to expect, one
    /// line each (printed once by rank 0): `[[converge]]` sections left to `gradcomp
    /// converge`, and fusion values a method with its own fusion (omgs, sketch-fusion)
    /// does not sweep. `what` names the config (its file, or "the command line").
    pub fn notes(&self, what: &str) -> Vec<String> {
        let mut out = Vec::new();
        if self.converge_sections > 0 {
            out.push(format!(
                "{what}: {} [[converge]] section(s) not run by `gradcomp run`; run them with `gradcomp converge --config {what} --out DIR` (make bench does)",
                self.converge_sections
            ));
        }
        for s in &self.e2e {
            for m in &s.methods {
                let Some(own) = implied_fusion(m) else {
                    continue;
                };
                let others: Vec<String> = s
                    .fusion
                    .iter()
                    .filter(|f| **f != own)
                    .map(ToString::to_string)
                    .collect();
                if !others.is_empty() {
                    out.push(format!(
                        "{m} keeps its own fusion ({own}): it runs once per case, not with fusion {}",
                        others.join(", ")
                    ));
                }
            }
        }
        out.dedup();
        out
    }
}

/// Most timed iterations one case may ask for (`iters`, `--iters`, and e2e's
/// `max_iters`): every timed iteration keeps one sample per rank, so the count sizes
/// buffers; beyond it a case is a mistake, not a measurement.
pub const MAX_ITERS: u64 = 1_000_000;

/// Most warm-up iterations one case may ask for (`warmup`, `--warmup`).
pub const MAX_WARMUP: u64 = 1_000_000;

/// Longest `--case-timeout` / `[run] case_timeout_s` (seconds): one year. Far beyond any
/// allocation, and small enough to be a time the watchdog can wait for.
pub const MAX_CASE_TIMEOUT_S: f64 = 365.0 * 24.0 * 3600.0;

/// Refuse an iteration or warm-up count beyond [`MAX_ITERS`] / [`MAX_WARMUP`] (and
/// 0 iterations) before anything is sized by it.
pub(crate) fn check_counts(
    origin: &Origin,
    iters: Option<u64>,
    warmup: Option<u64>,
) -> Result<(), ConfigError> {
    match iters {
        Some(0) => {
            return Err(origin.invalid(
                "iters",
                "0 iterations: give at least 1 (or leave it out for the size-scaled default)",
            ))
        }
        Some(n) if n > MAX_ITERS => {
            return Err(origin.invalid(
                "iters",
                format!("{n} iterations is more than {MAX_ITERS}, the most one case may time; give 1 to {MAX_ITERS} (or leave it out for the default)"),
            ))
        }
        _ => {}
    }
    if let Some(n) = warmup.filter(|&n| n > MAX_WARMUP) {
        return Err(origin.invalid(
            "warmup",
            format!("{n} warm-up iterations is more than {MAX_WARMUP}; give 0 to {MAX_WARMUP} (or leave it out for the default)"),
        ));
    }
    Ok(())
}

/// A case timeout in seconds: positive, finite, at most [`MAX_CASE_TIMEOUT_S`]. `Err`
/// holds the reason (the caller names the flag or key).
pub fn check_case_timeout(t: f64) -> Result<f64, String> {
    if t.is_finite() && t > 0.0 && t <= MAX_CASE_TIMEOUT_S {
        Ok(t)
    } else {
        // 1e300 as 1e300, not as 301 digits.
        let shown = if t.abs() < 1e15 {
            t.to_string()
        } else {
            format!("{t:e}")
        };
        Err(format!(
            "{shown} is not a number of seconds in (0, {MAX_CASE_TIMEOUT_S:.0}] (e.g. 600)"
        ))
    }
}

/// Most rounds of the e2e cases one run may ask for (`[run] rounds`, `--rounds`).
pub const MAX_ROUNDS: usize = 100;

static WARNINGS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Record a warning about accepted but deprecated input (printed once by rank 0).
pub(crate) fn warn(msg: String) {
    if let Ok(mut w) = WARNINGS.lock() {
        if !w.contains(&msg) {
            w.push(msg);
        }
    }
}

/// The warnings recorded while reading configs and flags, emptied.
pub fn take_warnings() -> Vec<String> {
    WARNINGS
        .lock()
        .map(|mut w| std::mem::take(&mut *w))
        .unwrap_or_default()
}

/// Read, parse and validate a TOML bench config.
/// Only a regular file of at most [`MAX_CONFIG_BYTES`] is read: a device (`/dev/zero`)
/// or a FIFO would never end, a huge file is not a config.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let Some(text) = crate::input::read_to_string_if_exists(
        path,
        MAX_CONFIG_BYTES,
        "a TOML bench config (lists expand to cases, so configs stay small)",
    )?
    else {
        return Err(ConfigError::NotFound {
            hint: missing_config_hint(path),
            file,
        });
    };
    parse(&text, &file)
}

/// Parse and validate TOML text; `file` names it in messages.
pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
    let raw: FileConfig = toml::from_str(text).map_err(|e| ConfigError::Syntax {
        file: file.to_string(),
        msg: clip(&one_line(&e, text)),
    })?;
    let mut micro_comm = Vec::new();
    for (i, s) in raw.micro_comm.iter().enumerate() {
        micro_comm.push(s.validate(&Origin::File {
            file: file.to_string(),
            section: "micro-comm",
            index: i + 1,
        })?);
    }
    let section = |name: &'static str, i: usize| Origin::File {
        file: file.to_string(),
        section: name,
        index: i + 1,
    };
    let mut micro_compress = Vec::new();
    for (i, s) in raw.micro_compress.iter().enumerate() {
        micro_compress.push(s.validate(&section("micro-compress", i), false)?);
    }
    let mut micro = Vec::new();
    for (i, s) in raw.micro.iter().enumerate() {
        micro.push(s.validate(&section("micro", i), true)?);
    }
    let mut e2e = Vec::new();
    for (i, s) in raw.e2e.iter().enumerate() {
        e2e.push(s.validate(&section("e2e", i))?);
    }
    if micro_comm.is_empty() && micro_compress.is_empty() && micro.is_empty() && e2e.is_empty() {
        if !raw.converge.is_empty() {
            return Err(ConfigError::ConvergeOnly {
                file: file.to_string(),
            });
        }
        return Err(ConfigError::Syntax {
            file: file.to_string(),
            msg: "defines no benchmark section; add at least one [[micro-comm]], [[micro-compress]], [[micro]] or [[e2e]] table".into(),
        });
    }
    if raw.run.expect_ranks == Some(0) {
        return Err(Origin::File {
            file: file.to_string(),
            section: "run",
            index: 1,
        }
        .invalid(
            "expect_ranks",
            "0 ranks: give the number of MPI ranks the job must have (>= 1)",
        ));
    }
    if !(1..=MAX_ROUNDS).contains(&raw.run.rounds) {
        return Err(Origin::File {
            file: file.to_string(),
            section: "run",
            index: 1,
        }
        .invalid(
            "rounds",
            format!(
                "{} rounds: give 1 (each e2e case once) to {MAX_ROUNDS}",
                raw.run.rounds
            ),
        ));
    }
    if let Some(t) = raw.run.case_timeout_s {
        check_case_timeout(t).map_err(|m| {
            Origin::File {
                file: file.to_string(),
                section: "run",
                index: 1,
            }
            .invalid("case_timeout_s", m)
        })?;
    }
    crate::measure::dilation::Dilation::new(raw.run.time_dilation).map_err(|m| {
        Origin::File {
            file: file.to_string(),
            section: "run",
            index: 1,
        }
        .invalid("time_dilation", m)
    })?;
    Ok(Config {
        time_dilation: raw.run.time_dilation,
        seed: raw.run.seed,
        expect_ranks: raw.run.expect_ranks,
        case_timeout_s: raw.run.case_timeout_s,
        samples: raw.run.samples,
        rounds: raw.run.rounds,
        converge_sections: raw.converge.len(),
        micro_comm,
        micro_compress,
        micro,
        e2e,
    })
}

/// A TOML error as one line: `line L, column C[, key 'K']: message`. The key is read
/// from the line the error points at, so type errors (`iters = -1`) name it too.
fn one_line(e: &toml::de::Error, text: &str) -> String {
    let msg = e.message().trim().replace(['\r', '\n'], " ");
    match e.span() {
        Some(span) => {
            let start = span.start.min(text.len());
            let start = (0..=start)
                .rev()
                .find(|&i| text.is_char_boundary(i))
                .unwrap_or(0);
            let before = &text[..start];
            let line = before.matches('\n').count() + 1;
            let col = before.len() - before.rfind('\n').map_or(0, |p| p + 1) + 1;
            let line_text = text[before.rfind('\n').map_or(0, |p| p + 1)..]
                .lines()
                .next()
                .unwrap_or("");
            let key = line_text
                .split_once('=')
                .map(|(k, _)| k.trim())
                .filter(|k| {
                    !k.is_empty()
                        && k.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
                })
                .map(|k| format!(", key '{k}'"))
                .unwrap_or_default();
            format!("line {line}, column {col}{key}: {msg}")
        }
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[run]
seed = 7

[[micro-comm]]
collectives = ["allreduce", "ring-allreduce"]
min_bytes = "4"
max_bytes = "16KiB"
iters = 10
"#;

    #[test]
    fn case_count_matches_the_expansion_of_every_shipped_config() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-configs");
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "toml") {
                let cfg = match load(&path) {
                    Err(ConfigError::ConvergeOnly { .. }) => {
                        // A `converge --config` file (sketch-size.toml): its own loader.
                        let (_, sections) = converge::sections_from_file(&path).unwrap();
                        assert!(!sections.is_empty(), "{}", path.display());
                        continue;
                    }
                    r => r.unwrap(),
                };
                let cases = cfg.cases();
                assert_eq!(cfg.case_count(), cases.len() as u128, "{}", path.display());
                let ids = cfg.case_ids(&cases, 4);
                let unique: std::collections::HashSet<_> = ids.iter().collect();
                assert_eq!(unique.len(), ids.len(), "{}", path.display());
                n += 1;
            }
        }
        assert!(n > 3);
    }

    #[test]
    fn a_converge_only_file_is_refused_naming_the_converge_command() {
        let text = "[run]\nseed = 3\n\n[[converge]]\nmethods = [\"ssgd\"]\nseeds = [1]\n";
        let e = parse(text, "dir/check.toml").unwrap_err();
        assert!(
            matches!(&e, ConfigError::ConvergeOnly { file } if file == "dir/check.toml"),
            "{e:?}"
        );
        let msg = e.to_string();
        assert!(
            msg.starts_with("dir/check.toml: holds only [[converge]] sections")
                && msg.contains("`gradcomp converge --config dir/check.toml`"),
            "{msg}"
        );
        // Neither a benchmark nor a converge section: the plain refusal.
        let e = parse("[run]\nseed = 3\n", "dir/empty.toml").unwrap_err();
        assert!(matches!(&e, ConfigError::Syntax { .. }), "{e:?}");
        assert!(
            e.to_string().contains("defines no benchmark section"),
            "{e}"
        );
    }

    #[test]
    fn equivalent_collectives_are_one_case_in_count_and_expansion() {
        let c = parse(
            "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"ssgd\", \"signsgd\"]\ncollective = [\"auto\", \"allgather\", \"ps\"]\npipelining = [true]\n",
            "x.toml",
        )
        .unwrap();
        // ssgd: auto (all-reduce), allgather, ps; signsgd: auto = allgather, ps.
        assert_eq!(c.cases().len(), 5);
        assert_eq!(c.case_count(), 5);
    }

    #[test]
    fn parses_and_expands_cartesian_product() {
        let c = parse(GOOD, "x.toml").unwrap();
        assert_eq!(c.seed, 7);
        let cases = c.cases();
        // 4, 8, ..., 16384: 13 sizes x 2 collectives
        assert_eq!(cases.len(), 26);
        assert_eq!(
            cases[0],
            Case::MicroComm {
                collective: Collective::Allreduce,
                bytes: 4,
                iters: 10,
                warmup: 100,
                check: false
            }
        );
    }

    #[test]
    fn rounds_repeat_every_case_round_after_round() {
        let e2e = "\n[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"ssgd\", \"topk\"]\n";
        let one = parse(&format!("{GOOD}{e2e}"), "x.toml").unwrap();
        assert_eq!(one.rounds, 1);
        let three = parse(
            &format!("{}{e2e}", GOOD.replace("seed = 7", "seed = 7\nrounds = 3")),
            "x.toml",
        )
        .unwrap();
        let (c1, c3) = (one.cases(), three.cases());
        let e2e_cases = c1.iter().filter(|c| matches!(c, Case::E2e(_))).count();
        assert!(
            e2e_cases >= 2 && c1.len() > e2e_cases,
            "micro and e2e cases in one round"
        );
        // The whole list, micro cases and e2e cases in their order, three times over.
        assert_eq!(c3, [c1.clone(), c1.clone(), c1].concat());
        assert_eq!(three.case_count(), c3.len() as u128);
        let ids = three.case_ids(&c3, 2);
        let unique: std::collections::HashSet<_> = ids.iter().collect();
        assert_eq!(unique.len(), ids.len(), "every repeat has its own id");
        for bad in ["0", "101"] {
            let e = err(&format!(
                "{}{e2e}",
                GOOD.replace("seed = 7", &format!("seed = 7\nrounds = {bad}"))
            ));
            assert!(e.contains("rounds") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn samples_are_off_unless_the_run_section_asks_for_them() {
        assert!(!parse(GOOD, "x.toml").unwrap().samples);
        let on = GOOD.replace("seed = 7", "seed = 7\nsamples = true");
        assert!(parse(&on, "x.toml").unwrap().samples);
        let e = err(&GOOD.replace("seed = 7", "seed = 7\nsamples = \"no\""));
        assert!(e.contains("samples"), "{e}");
    }

    #[test]
    fn sizes_end_at_max_even_if_not_power_of_two() {
        let s = MicroCommSection {
            collectives: vec!["allreduce".into()],
            min_bytes: SizeSpec::Bytes(4),
            max_bytes: SizeSpec::Bytes(20),
            sizes: None,
            iters: None,
            warmup: None,
            check: false,
        };
        assert_eq!(s.validate(&Origin::Cli).unwrap().sizes, vec![4, 8, 16, 20]);
    }

    fn err(text: &str) -> String {
        parse(text, "bad.toml").unwrap_err().to_string()
    }

    /// TOML `pipelining` takes what the command line takes (on/off) as well as booleans.
    #[test]
    fn pipelining_takes_booleans_and_on_off() {
        let e2e = |p: &str| {
            parse(
                &format!(
                    "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"ssgd\"]\npipelining = {p}\n"
                ),
                "x.toml",
            )
            .map(|c| c.e2e[0].pipelining.clone())
            .map_err(|e| e.to_string())
        };
        assert_eq!(e2e("[false, true]").unwrap(), [false, true]);
        assert_eq!(e2e("[\"off\", \"on\"]").unwrap(), [false, true]);
        assert_eq!(e2e("[\"on\"]").unwrap(), [true]);
        let e = e2e("[\"maybe\"]").unwrap_err();
        assert!(e.contains("'maybe' is not on or off"), "{e}");
    }

    /// `gradcomp run` says which sections it leaves out and which fusion values a
    /// method with its own fusion does not sweep.
    #[test]
    fn notes_name_skipped_converge_sections_and_fixed_fusions() {
        let c = parse(
            "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"ssgd\", \"omgs\"]\nfusion = [\"none\", \"25MiB\", \"mgwfbp\"]\n\n[[converge]]\nmethods = [\"ssgd\"]\n",
            "x.toml",
        )
        .unwrap();
        let notes = c.notes("x.toml");
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[0].contains("1 [[converge]] section(s) not run by `gradcomp run`")
                && notes[0].contains("gradcomp converge --config x.toml"),
            "{notes:?}"
        );
        assert_eq!(
            notes[1],
            "omgs keeps its own fusion (omgs): it runs once per case, not with fusion none, 25MiB, mgwfbp"
        );
        let quiet = parse(GOOD, "x.toml").unwrap();
        assert!(quiet.notes("x.toml").is_empty());
    }

    /// A config that does not exist: exit 2 with the close names of the shipped configs.
    #[test]
    fn a_missing_config_gets_a_suggestion() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let e = load(&root.join("bench-configs/laptp.toml")).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("does not exist") && msg.contains("did you mean"),
            "{msg}"
        );
        assert!(msg.contains("bench-configs/laptop.toml"), "{msg}");
        assert_eq!(crate::error::Error::from(e).exit_code(), 2);
        let far = load(&root.join("bench-configs/zzzzzzzzzzzzzzzzzzzz.toml"))
            .unwrap_err()
            .to_string();
        assert!(far.contains("bench-configs/"), "{far}");
    }

    #[test]
    fn rejects_bad_input_with_location() {
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nfoo = 1\n");
        assert!(
            e.contains("bad.toml: line 3") && e.contains("unknown field `foo`"),
            "{e}"
        );
        let e = err("[[micro-comm]\n");
        assert!(e.contains("line 1"), "{e}");
        let e = err("[[micro-comm]]\ncollectives = [\"bcast\"]\n");
        assert!(
            e.contains("key 'collectives'") && e.contains("'bcast'") && e.contains("allreduce"),
            "{e}"
        );
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nmin_bytes = \"1MiB\"\nmax_bytes = \"4KiB\"\n");
        assert!(e.contains("min_bytes") && e.contains("greater than"), "{e}");
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\niters = 0\n");
        assert!(e.contains("iters"), "{e}");
        let e = err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nmax_bytes = \"12QB\"\n");
        assert!(e.contains("max_bytes") && e.contains("12QB"), "{e}");
        let e = err("[run]\nseed = 1\n");
        assert!(e.contains("no benchmark section"), "{e}");
        for e in [
            err("[[micro-comm]]\ncollectives = [\"allreduce\"]\nmin_bytes = 6\n"),
            err("[[micro-comm]]\ncollectives = []\n"),
        ] {
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
