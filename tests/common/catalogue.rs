//! tests/data/bad-inputs.tsv, the one catalogue of bad inputs (issue 52): its rows, their
//! files written out, and a run bounded in time. Read by tests/bad_inputs.rs and
//! tests/file_inputs.rs (and, for its `analysis` rows, analysis/tests/test_bad_inputs.py).

use super::*;
use std::path::Path;
use std::process::{Command, Output};

/// Seconds a refused run may take: mpirun's start and the ranks' exits.
pub const LIMIT_S: u64 = 60;

/// One row of the catalogue (the columns are described in its header).
#[derive(Debug, Clone)]
pub struct Row {
    pub tool: String,
    pub id: String,
    /// Ranks under mpirun; 0 runs the binary alone; None for `analysis` rows.
    pub ranks: Option<usize>,
    pub exit: i32,
    pub expect: Vec<String>,
    /// (path below the row's folder, content as written in the catalogue).
    pub files: Vec<(String, String)>,
    pub args: Vec<String>,
}

/// Every row of tests/data/bad-inputs.tsv.
pub fn rows() -> Vec<Row> {
    let path = root().join("tests/data/bad-inputs.tsv");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|(n, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(
                f.len(),
                7,
                "bad-inputs.tsv line {}: 7 tab-separated fields: {l}",
                n + 1
            );
            let list = |s: &str, sep: &str| -> Vec<String> {
                if s == "-" {
                    Vec::new()
                } else {
                    s.split(sep).map(String::from).collect()
                }
            };
            Row {
                tool: f[0].to_string(),
                id: f[1].to_string(),
                ranks: f[2].parse().ok(),
                exit: f[3]
                    .parse()
                    .unwrap_or_else(|_| panic!("line {}: exit '{}'", n + 1, f[3])),
                expect: list(f[4], " | "),
                files: list(f[5], ";")
                    .into_iter()
                    .map(|e| {
                        let (p, c) = e
                            .split_once('=')
                            .unwrap_or_else(|| panic!("line {}: file '{e}' has no '='", n + 1));
                        (p.to_string(), c.to_string())
                    })
                    .collect(),
                args: list(f[6], " "),
            }
        })
        .collect()
}

/// The catalogue's rows for the binary.
pub fn gradcomp_rows() -> Vec<Row> {
    rows()
        .into_iter()
        .filter(|r| r.tool == "gradcomp")
        .collect()
}

/// A file's CONTENT: the escapes `\n`, `\t`, `\\`, `\xHH` decoded and the named fixtures
/// `{BINARY}` and `{DEEP_JSON}` written out (`{DIR}` is handled by [`write_files`]).
pub fn content(text: &str) -> Vec<u8> {
    let text = text
        .replace(
            "{BINARY}",
            "\\x89PNG\\r\\n\\x1a\\n\\xff\\xfe\\x00\\x01binary\\n",
        )
        .replace(
            "{DEEP_JSON}",
            &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        );
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 1 < b.len() {
            match b[i + 1] {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'\\' => out.push(b'\\'),
                b'x' => {
                    let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap();
                    out.push(u8::from_str_radix(hex, 16).unwrap());
                    i += 2;
                }
                c => panic!("bad-inputs.tsv: unknown escape \\{}", c as char),
            }
            i += 2;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Write a row's files below `dir`.
pub fn write_files(row: &Row, dir: &Path) {
    for (p, c) in &row.files {
        let p = dir.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        if c == "{DIR}" {
            std::fs::create_dir_all(&p).unwrap();
        } else {
            std::fs::write(&p, content(c)).unwrap();
        }
    }
}

/// `gradcomp ARGS` in `cwd`, on `np` ranks under mpirun (0: the binary alone), killed after
/// [`LIMIT_S`] (exit 124 then).
pub fn run_limited(np: usize, args: &[String], cwd: &Path) -> Output {
    let _one = one_mpi_job();
    let mut cmd = Command::new("timeout");
    cmd.current_dir(cwd).args(["-k", "5", &LIMIT_S.to_string()]);
    cmd.env_remove("SLURM_NTASKS");
    if np > 0 {
        cmd.arg(mpirun_cmd());
        if is_open_mpi(&mpirun_cmd()) {
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
                .env("OMPI_MCA_orte_tmpdir_base", ompi_tmpdir());
            cmd.args(["--oversubscribe", "--bind-to", "none"]);
        }
        cmd.arg("-np").arg(np.to_string());
    }
    cmd.arg(BIN).args(args);
    cmd.output().expect("cannot launch timeout/mpirun")
}

/// The one `gradcomp:` line of a refused run, checked: the expected exit code (not the
/// time limit's 124) and every fragment of `expect`. `what` names the case in failures.
pub fn check_refusal(what: &str, out: &Output, exit: i32, expect: &[String]) -> String {
    let err = stderr(out);
    assert_ne!(
        out.status.code(),
        Some(124),
        "{what}: still running after {LIMIT_S} s\n{err}"
    );
    assert_eq!(out.status.code(), Some(exit), "{what}: exit code\n{err}");
    let ours: Vec<&str> = err.lines().filter(|l| l.starts_with("gradcomp:")).collect();
    assert_eq!(
        ours.len(),
        1,
        "{what}: exactly one message expected, got:\n{err}"
    );
    for e in expect {
        assert!(
            ours[0].contains(e.as_str()),
            "{what}: '{e}' missing from: {}",
            ours[0]
        );
    }
    ours[0].to_string()
}
