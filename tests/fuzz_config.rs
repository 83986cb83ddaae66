//! Property tests of the bench-config parser and the size / shape / fusion string parsers.
//!
//! Contract under test: `gradcomp::config::parse` never panics; it returns `Ok`, or an
//! `Err` whose `Display` is one non-empty line. The string parsers (`units::parse_bytes`,
//! `measure::shape::Shape::parse`, `schedule::plan::Fusion::parse`) never panic and name the
//! offending input in their errors. Inputs: arbitrary text, structured mutations of the
//! shipped configs in `bench-configs/`, and targeted generators; plus deterministic
//! regression cases whose errors must name the offending key.
//!
//! Bounded: each property runs a fixed number of cases and persists no failures to disk
//! (a failure prints its minimal input instead).
//!
//! Long (about 980 lines) on purpose: its four parts (arbitrary text, mutations of the
//! shipped configs, the string parsers, the regression cases) test one contract through
//! the same helpers (`pt`, `check_parse`, `bench_configs`), and the mutation generator
//! (`token`, `key`, `mutation`, `apply`: some 300 lines) is one grammar read top to bottom.

use gradcomp::config::parse;
use gradcomp::measure::shape::{Shape, MAX_TENSOR_ELEMENTS};
use gradcomp::schedule::plan::Fusion;
use gradcomp::units::parse_bytes;
use proptest::prelude::*;
use proptest::test_runner::Config as PtConfig;
use std::path::PathBuf;

const FILE: &str = "fuzz.toml";

fn pt(cases: u32) -> PtConfig {
    PtConfig {
        cases,
        failure_persistence: None,
        ..PtConfig::default()
    }
}

/// The parser contract: never panics (proptest reports a panic as a failure with the
/// input); an error is one non-empty line.
fn check_parse(text: &str) -> Result<(), TestCaseError> {
    if let Err(e) = parse(text, FILE) {
        let msg = e.to_string();
        prop_assert!(
            !msg.trim().is_empty(),
            "empty error message for input {text:?}"
        );
        prop_assert!(
            !msg.contains('\n'),
            "multi-line error message {msg:?} for input {text:?}"
        );
    }
    Ok(())
}

/// The shipped configs, (name, text), sorted by name.
fn bench_configs() -> Vec<(String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench-configs");
    let mut v: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && !converge_only(p))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read_to_string(&p).expect("read config"),
            )
        })
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no bench-configs/*.toml found");
    v
}

/// A `gradcomp converge --config` file (sketch-size.toml): the bench loader refuses it
/// as such, and converge's own loader reads it.
fn converge_only(p: &std::path::Path) -> bool {
    matches!(
        gradcomp::config::load(p),
        Err(gradcomp::config::ConfigError::ConvergeOnly { .. })
    )
}

#[test]
fn shipped_configs_parse() {
    for (name, text) in bench_configs() {
        if let Err(e) = parse(&text, &name) {
            panic!("bench-configs/{name} does not parse: {e}");
        }
    }
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench-configs");
    let mut converge_configs = 0;
    for p in std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()) {
        if p.extension().is_some_and(|x| x == "toml") && converge_only(&p) {
            let (_, sections) = gradcomp::config::sections_from_file(&p)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", p.display()));
            assert!(!sections.is_empty(), "{}", p.display());
            converge_configs += 1;
        }
    }
    assert!(
        converge_configs >= 1,
        "sketch-size.toml is a converge config"
    );
}

// ---------------------------------------------------------------------------------------
// (a) arbitrary text

/// Text made of TOML's punctuation and a few keywords: reaches far deeper into the
/// grammar than uniformly random unicode.
fn tomlish() -> impl Strategy<Value = String> {
    let atom = prop_oneof![
        Just("[".to_string()),
        Just("]".to_string()),
        Just("[[".to_string()),
        Just("]]".to_string()),
        Just("=".to_string()),
        Just(" = ".to_string()),
        Just("\n".to_string()),
        Just("\r\n".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\"\"\"".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just(",".to_string()),
        Just(".".to_string()),
        Just("#".to_string()),
        Just("\\".to_string()),
        Just("\\u00e9".to_string()),
        Just("micro".to_string()),
        Just("micro-comm".to_string()),
        Just("micro-compress".to_string()),
        Just("e2e".to_string()),
        Just("run".to_string()),
        Just("params".to_string()),
        Just("methods".to_string()),
        Just("shapes".to_string()),
        Just("collectives".to_string()),
        Just("\"allreduce\"".to_string()),
        Just("\"topk\"".to_string()),
        Just("nan".to_string()),
        Just("inf".to_string()),
        Just("-1".to_string()),
        Just("1e400".to_string()),
        Just("1979-05-27T07:32:00Z".to_string()),
        "[a-z_]{1,8}",
        "[0-9]{1,22}",
        "\\PC{1,3}",
    ];
    proptest::collection::vec(atom, 0..60).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(pt(2000))]

    #[test]
    fn arbitrary_unicode_never_panics(s in any::<String>()) {
        check_parse(&s)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_parse(&String::from_utf8_lossy(&b))?;
    }

    #[test]
    fn toml_like_text_never_panics(s in tomlish()) {
        check_parse(&s)?;
    }
}

// ---------------------------------------------------------------------------------------
// (b) structured mutations of the shipped configs

/// Every key the schema knows (sections, params), plus dotted params keys.
const KEYS: &[&str] = &[
    "seed",
    "expect_ranks",
    "collectives",
    "min_bytes",
    "max_bytes",
    "sizes",
    "iters",
    "warmup",
    "check",
    "methods",
    "shapes",
    "densities",
    "ranks",
    "lowrank_ranks",
    "params",
    "models",
    "fusion",
    "pipelining",
    "collective",
    "device",
    "batch",
    "compute",
    "compute_profile",
    "cost_comm",
    "density",
    "rank",
    "min_compression_rate",
    "start_iter",
    "momentum",
    "nesterov",
    "clip_norm",
    "warmup_steps_per_epoch",
    "sketch_rows",
    "sketch_cols_per_k",
    "qsgd_levels",
    "params.density",
    "params.rank",
    "params.qsgd_levels",
    "params.sketch_cols_per_k",
    "params.momentum",
    "params.min_compression_rate",
];

/// Section headers to splice in.
const HEADERS: &[&str] = &[
    "[run]",
    "[[micro-comm]]",
    "[[micro-compress]]",
    "[[micro]]",
    "[[e2e]]",
    "[micro.params]",
    "[e2e.params]",
    "[micro-compress.params]",
    "[[micro.params]]",
    "[run.params]",
    "[params]",
    "[[run]]",
    "[micro]",
    "[e2e]",
];

/// A TOML value (or not quite one): numbers incl. negative / huge / NaN / inf, strings
/// that stress the unit and shape parsers, arrays, tables, dates, garbage.
fn token() -> impl Strategy<Value = String> {
    let fixed: Vec<&'static str> = vec![
        "0",
        "-0",
        "1",
        "-1",
        "4",
        "7",
        "-0.1",
        "0.0",
        "-0.0",
        "1.5",
        "1e-30",
        "0.999999999",
        "1.0000001",
        "nan",
        "+nan",
        "-nan",
        "inf",
        "+inf",
        "-inf",
        "1e400",
        "-1e400",
        "1e308",
        "9223372036854775807",
        "-9223372036854775808",
        "9223372036854775808",
        "18446744073709551615",
        "99999999999999999999999999",
        "0x10",
        "0o17",
        "0b101",
        "1_000",
        "true",
        "false",
        "\"\"",
        "''",
        "\" \"",
        "\"0\"",
        "\"4\"",
        "\"16EiB\"",
        "\"1GiB\"",
        "\"1025MiB\"",
        "\"17179869184GiB\"",
        "\"99999999999999999999\"",
        "\"4294967296GiB\"",
        "\"64 KiB\"",
        "\"-4\"",
        "\"1.5KiB\"",
        "\"99999999999x99999999999\"",
        "\"1x0\"",
        "\"0x1\"",
        "\"x\"",
        "\"1x\"",
        "\"x1\"",
        "\"1x1x1\"",
        "\"64x48\"",
        "\"1_0\"",
        "\"___\"",
        "\"65536x32768\"",
        "\"32768x32768\"",
        "\"none\"",
        "\"single\"",
        "\"omgs\"",
        "\"mgwfbp\"",
        "\"layerfusion\"",
        "\"0B\"",
        "\"resnet20\"",
        "\"nosuchmodel\"",
        "\"topk\"",
        "\"omgs\"",
        "\"sketch-fusion\"",
        "\"allreduce\"",
        "\"allgather\"",
        "\"ps\"",
        "\"auto\"",
        "\"ring-allreduce\"",
        "\"spin\"",
        "\"none\"",
        "\"h100\"",
        "\"a\\nb\"",
        "\"\\u0000\"",
        "\"\\t\"",
        "\"é\"",
        "\"日本\"",
        "\"🦀\"",
        "\"/nonexistent/profile.csv\"",
        "\"\"\"multi\nline\"\"\"",
        "[]",
        "[[]]",
        "[1, -2]",
        "[\"\"]",
        "[nan]",
        "[inf, -inf]",
        "[-0.1]",
        "[0]",
        "[\"0\"]",
        "[\"1x0\"]",
        "[true, false]",
        "[1, \"a\"]",
        "[\"topk\", \"topk\"]",
        "[\"nosuchmethod\"]",
        "[\"nosuchmodel\"]",
        "[[1], [2]]",
        "{}",
        "{ a = 1 }",
        "{ density = nan }",
        "{ rank = 0 }",
        "{ density = 0.5, rank = 2 }",
        "{ qsgd_levels = 0 }",
        "1979-05-27T07:32:00Z",
        "07:32:00",
        "1979-05-27",
        "=",
        "[",
        "{",
        "\"",
        "'",
        "#",
        "",
    ];
    prop_oneof![
        4 => proptest::sample::select(fixed).prop_map(str::to_string),
        1 => any::<i64>().prop_map(|i| i.to_string()),
        1 => any::<u64>().prop_map(|u| u.to_string()),
        1 => any::<f64>().prop_map(|f| format!("{f:?}")),
        1 => "[0-9]{1,30}(B|KiB|MiB|GiB|EiB|kb|x[0-9]{1,20})?".prop_map(|s| format!("\"{s}\"")),
        1 => "\\PC{0,8}".prop_map(|s| format!("{s:?}")),
        1 => "\\PC{0,8}",
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(KEYS.to_vec()).prop_map(str::to_string),
        1 => "[a-z_]{1,12}",
        1 => Just("\"quoted key\"".to_string()),
        1 => Just("".to_string()),
    ]
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Duplicate(usize),
    Swap(usize, usize),
    /// Replace the value of the `=` line at this index (mod the number of such lines).
    ReplaceValue(usize, String),
    /// Rename the key of the `=` line at this index.
    RenameKey(usize, String),
    /// Insert `key = value` before this line.
    InsertPair(usize, String, String),
    /// Insert a section header before this line.
    InsertHeader(usize, String),
    /// Insert raw text at this byte position (snapped to a char boundary).
    InsertText(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let i = any::<usize>();
    prop_oneof![
        2 => i.prop_map(Mutation::Delete),
        1 => i.prop_map(Mutation::Duplicate),
        1 => (i, any::<usize>()).prop_map(|(a, b)| Mutation::Swap(a, b)),
        4 => (i, token()).prop_map(|(a, t)| Mutation::ReplaceValue(a, t)),
        2 => (i, key()).prop_map(|(a, k)| Mutation::RenameKey(a, k)),
        2 => (i, key(), token()).prop_map(|(a, k, t)| Mutation::InsertPair(a, k, t)),
        1 => (i, proptest::sample::select(HEADERS.to_vec())).prop_map(|(a, h)| Mutation::InsertHeader(a, h.to_string())),
        1 => (i, "\\PC{1,3}|[\\[\\]=\"'{},.#\n]").prop_map(|(a, s)| Mutation::InsertText(a, s)),
    ]
}

fn apply(text: &str, muts: &[Mutation]) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    for m in muts {
        let assigns: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(_, l)| l.contains('=') && !l.trim_start().starts_with('#'))
            .map(|(i, _)| i)
            .collect();
        match m {
            Mutation::Delete(i) if !lines.is_empty() => {
                let n = lines.len();
                lines.remove(i % n);
            }
            Mutation::Duplicate(i) if !lines.is_empty() => {
                let j = i % lines.len();
                let l = lines[j].clone();
                lines.insert(j, l);
            }
            Mutation::Swap(a, b) if !lines.is_empty() => {
                let n = lines.len();
                lines.swap(a % n, b % n);
            }
            Mutation::ReplaceValue(i, t) if !assigns.is_empty() => {
                let j = assigns[i % assigns.len()];
                let k = lines[j]
                    .split_once('=')
                    .map(|(k, _)| k.to_string())
                    .unwrap_or_default();
                lines[j] = format!("{k}= {t}");
            }
            Mutation::RenameKey(i, key) if !assigns.is_empty() => {
                let j = assigns[i % assigns.len()];
                let v = lines[j]
                    .split_once('=')
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_default();
                lines[j] = format!("{key} ={v}");
            }
            Mutation::InsertPair(i, key, t) => {
                let j = i % (lines.len() + 1);
                lines.insert(j, format!("{key} = {t}"));
            }
            Mutation::InsertHeader(i, h) => {
                let j = i % (lines.len() + 1);
                lines.insert(j, h.clone());
            }
            Mutation::InsertText(i, s) => {
                let mut joined = lines.join("\n");
                let mut p = i % (joined.len() + 1);
                while !joined.is_char_boundary(p) {
                    p -= 1;
                }
                joined.insert_str(p, s);
                lines = joined.split('\n').map(str::to_string).collect();
            }
            _ => {}
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

proptest! {
    #![proptest_config(pt(2000))]

    #[test]
    fn mutated_bench_configs_never_panic(
        which in any::<usize>(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let configs = bench_configs();
        let (_, text) = &configs[which % configs.len()];
        check_parse(&apply(text, &muts))?;
    }

    /// A single value replaced: stays syntactically valid most of the time, so this
    /// reaches the validation of every key.
    #[test]
    fn one_value_replaced_never_panics(which in any::<usize>(), i in any::<usize>(), t in token()) {
        let configs = bench_configs();
        let (_, text) = &configs[which % configs.len()];
        check_parse(&apply(text, &[Mutation::ReplaceValue(i, t)]))?;
    }
}

// ---------------------------------------------------------------------------------------
// (c) the string parsers

/// Units as README.md documents them: binary `KiB`/`MiB`/`GiB`, powers of ten `kB`/`MB`/`GB`
/// (case-insensitive), and a bare `K`/`M`/`G` refused as ambiguous (`None`).
const UNITS: &[(&str, Option<u64>)] = &[
    ("", Some(1)),
    ("b", Some(1)),
    ("B", Some(1)),
    ("k", None),
    ("K", None),
    ("kb", Some(1_000)),
    ("KB", Some(1_000)),
    ("KiB", Some(1 << 10)),
    ("kib", Some(1 << 10)),
    ("m", None),
    ("MB", Some(1_000_000)),
    ("MiB", Some(1 << 20)),
    ("g", None),
    ("GB", Some(1_000_000_000)),
    ("GiB", Some(1 << 30)),
];
fn size_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ \t]{0,2}[0-9]{0,25}[ ]{0,2}(B|b|K|k|KB|KiB|kib|M|MiB|G|GiB|GB|T|TiB|EiB|PiB|x|%|\\.5|_|-|)[ \t]{0,2}",
        "-?[0-9_.eE+-]{0,12}[A-Za-z]{0,4}",
        any::<String>(),
        "\\PC{0,12}",
    ]
}

fn shape_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[ ]{0,2}[0-9_]{0,22}[ ]{0,2}",
        "[ ]{0,2}[0-9_]{0,22}[ ]{0,2}[xX][ ]{0,2}[0-9_]{0,22}[ ]{0,2}",
        "[0-9]{0,5}[xX*,][0-9]{0,5}([xX][0-9]{0,5})?",
        "-?[0-9]{1,6}[xX]-?[0-9]{1,6}",
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| format!("{a}x{b}")),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| format!(
            "{}x{}",
            a % 100_000,
            b % 100_000
        )),
        any::<String>(),
        "\\PC{0,12}",
    ]
}

fn fusion_text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(vec![
            "none",
            "single",
            "mgwfbp",
            "omgs",
            "layerfusion",
            " none ",
            "None",
            "SINGLE",
            "0",
            "00",
            ""
        ])
        .prop_map(str::to_string),
        size_text(),
    ]
}

proptest! {
    #![proptest_config(pt(2000))]

    #[test]
    fn parse_bytes_never_panics_and_names_input(s in size_text()) {
        match parse_bytes(&s) {
            Ok(_) => {}
            Err(e) => prop_assert!(e.contains(s.trim()), "parse_bytes({s:?}) error does not name the input: {e}"),
        }
    }

    /// Oracle: `N<unit>` is `N * unit` when that fits in u64, else an error; a bare K/M/G is an
    /// ambiguity error.
    #[test]
    fn parse_bytes_matches_oracle(n in prop_oneof![any::<u64>(), 0u64..100_000], u in 0..UNITS.len(), sp in "[ ]{0,2}") {
        let (unit, mult) = UNITS[u];
        let s = format!("{sp}{n}{sp}{unit}{sp}");
        let Some(mult) = mult else {
            let e = parse_bytes(&s).expect_err("a bare K/M/G must be refused");
            prop_assert!(e.contains(s.trim()) && e.contains("ambiguous"), "parse_bytes({s:?}) ambiguity error: {e}");
            return Ok(());
        };
        match n.checked_mul(mult) {
            Some(want) => prop_assert_eq!(parse_bytes(&s), Ok(want), "parse_bytes({:?})", s),
            None => {
                let e = parse_bytes(&s).expect_err("overflow must be an error");
                prop_assert!(e.contains(s.trim()) && e.contains("too large"), "parse_bytes({s:?}) overflow error: {e}");
            }
        }
    }

    #[test]
    fn shape_parse_never_panics_and_names_input(s in shape_text()) {
        match Shape::parse(&s) {
            Ok(sh) => {
                prop_assert!(sh.rows >= 1 && sh.cols >= 1, "Shape::parse({s:?}) = {sh:?} has an empty dimension");
                prop_assert!(sh.rows.checked_mul(sh.cols).is_some_and(|n| n <= MAX_TENSOR_ELEMENTS), "Shape::parse({s:?}) = {sh:?} too large");
            }
            Err(e) => prop_assert!(e.contains(&s), "Shape::parse({s:?}) error does not name the input: {e}"),
        }
    }

    /// Oracle: `RxC` is Ok iff both are >= 1 and the product fits MAX_TENSOR_ELEMENTS.
    #[test]
    fn shape_parse_matches_oracle(
        r in prop_oneof![any::<u64>(), 0u64..70_000],
        c in prop_oneof![any::<u64>(), 0u64..70_000],
        one_d in any::<bool>(),
    ) {
        let (s, rows, cols) = if one_d { (c.to_string(), 1u128, c as u128) } else { (format!("{r}x{c}"), r as u128, c as u128) };
        let ok = rows >= 1 && cols >= 1 && rows * cols <= MAX_TENSOR_ELEMENTS as u128;
        match Shape::parse(&s) {
            Ok(sh) => {
                prop_assert!(ok, "Shape::parse({s:?}) accepted {sh:?}");
                prop_assert_eq!((sh.rows as u128, sh.cols as u128), (rows, cols));
            }
            Err(e) => {
                prop_assert!(!ok, "Shape::parse({s:?}) rejected a valid shape: {e}");
                prop_assert!(e.contains(&s), "Shape::parse({s:?}) error does not name the input: {e}");
            }
        }
    }

    #[test]
    fn fusion_parse_never_panics_and_names_input(s in fusion_text()) {
        match Fusion::parse(&s) {
            Ok(f) => {
                // Display round-trips through parse.
                let shown = f.to_string();
                prop_assert_eq!(Fusion::parse(&shown), Ok(f), "Fusion::parse({:?}) = {:?} displays as {:?}", s, f, shown);
            }
            Err(e) => prop_assert!(e.contains(s.trim()), "Fusion::parse({s:?}) error does not name the input: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Deterministic regressions: each must be rejected with a one-line message naming the key.

fn parse_err(text: &str) -> String {
    match parse(text, FILE) {
        Ok(c) => panic!("expected an error, got Ok({c:?}) for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn expect_err(text: &str, key: &str, also: &[&str]) {
    let msg = parse_err(text);
    assert!(!msg.contains('\n'), "multi-line error {msg:?} for:\n{text}");
    assert!(
        msg.contains(key),
        "error does not name key '{key}': {msg}\ninput:\n{text}"
    );
    for a in also {
        assert!(
            msg.contains(a),
            "error does not contain {a:?}: {msg}\ninput:\n{text}"
        );
    }
}

/// Values of the wrong TOML type (negative or fractional for an unsigned integer, a
/// number for a string) are rejected by the TOML deserializer; gradcomp adds the key of
/// the line it points at. Here: rejected, one line, pointing at the line of `key =`.
fn expect_type_err(text: &str, key: &str) {
    let msg = parse_err(text);
    assert!(!msg.contains('\n'), "multi-line error {msg:?} for:\n{text}");
    let line = text
        .lines()
        .position(|l| l.trim_start().starts_with(&format!("{key} =")))
        .unwrap_or_else(|| panic!("test bug: no line '{key} =' in:\n{text}"))
        + 1;
    assert!(
        msg.contains(&format!("line {line},")),
        "error does not point at line {line} ('{key}'): {msg}\ninput:\n{text}"
    );
}

const MICRO: &str =
    "[[micro]]\nmethods = [\"topk\", \"powersgd\", \"sketch\", \"dgc\"]\nshapes = [\"64x48\"]\n";
const COMM: &str = "[[micro-comm]]\ncollectives = [\"allreduce\"]\n";
const E2E: &str = "[[e2e]]\nmethods = [\"topk\"]\n";

/// Wrong-typed values: (input, key).
fn type_error_cases() -> Vec<(String, &'static str)> {
    vec![
        (format!("{COMM}iters = -1\n"), "iters"),
        (format!("{COMM}warmup = -1\n"), "warmup"),
        (format!("{MICRO}iters = -1\n"), "iters"),
        (
            format!("{E2E}models = [\"resnet20\"]\niters = -1\n"),
            "iters",
        ),
        (format!("[run]\nseed = 1.5\n{COMM}"), "seed"),
        (format!("[run]\nseed = -1\n{COMM}"), "seed"),
        (format!("[run]\nseed = \"1\"\n{COMM}"), "seed"),
        (format!("[run]\nexpect_ranks = -2\n{COMM}"), "expect_ranks"),
        (format!("{MICRO}ranks = [-1]\n"), "ranks"),
        (format!("{MICRO}densities = [\"0.1\"]\n"), "densities"),
        (
            "[[micro]]\nmethods = [\"topk\"]\nshapes = [64]\n".to_string(),
            "shapes",
        ),
        (format!("{COMM}min_bytes = -4\n"), "min_bytes"),
        (format!("{COMM}max_bytes = 1.5\n"), "max_bytes"),
        (format!("{COMM}sizes = [-4]\n"), "sizes"),
        (
            format!("{E2E}models = [\"resnet20\"]\nbatch = -1\n"),
            "batch",
        ),
        (format!("{MICRO}[micro.params]\nrank = -1\n"), "rank"),
        (format!("{MICRO}[micro.params]\nrank = 1.5\n"), "rank"),
    ]
}

#[test]
fn regression_type_errors_are_rejected_at_their_line() {
    for (text, key) in type_error_cases() {
        expect_type_err(&text, key);
    }
}

/// Wrong-typed values (`iters = -1`, `seed = 1.5`, ...): the message names the key.
#[test]
fn type_errors_name_the_key() {
    let mut missing = Vec::new();
    for (text, key) in type_error_cases() {
        let msg = parse_err(&text);
        if !msg.contains(key) {
            missing.push(format!("{key}: {msg}"));
        }
    }
    assert!(
        missing.is_empty(),
        "errors that do not name their key:\n{}",
        missing.join("\n")
    );
}

/// One-line rule vs. user strings that hold a newline: it is escaped in the message.
#[test]
fn errors_stay_one_line_with_newlines_in_values() {
    let cases = [
        format!("{COMM}min_bytes = \"a\\nb\"\n"),
        "[[micro-comm]]\ncollectives = [\"all\\nreduce\"]\n".to_string(),
        "[[micro]]\nmethods = [\"top\\nk\"]\nshapes = [\"64\"]\n".to_string(),
        "[[micro]]\nmethods = [\"topk\"]\nshapes = [\"\"\"6\n4x48\"\"\"]\n".to_string(),
        format!("{E2E}models = [\"resnet\\n20\"]\n"),
        format!("{E2E}models = [\"resnet20\"]\nfusion = [\"1\\nXB\"]\n"),
    ];
    let bad: Vec<String> = cases
        .iter()
        .map(|t| parse_err(t))
        .filter(|m| m.contains('\n'))
        .collect();
    assert!(
        bad.is_empty(),
        "multi-line errors:\n{}",
        bad.join("\n---\n")
    );
}

/// `Fusion`'s Display (the e2e.csv `fusion` column) is exact: it parses back to the
/// same threshold (1030 B and 1050 B do not share a label).
#[test]
fn fusion_display_round_trips() {
    for b in [1030u64, 1050, (25 << 20) + 1] {
        let f = Fusion::Bytes(b);
        assert_eq!(
            Fusion::parse(&f.to_string()),
            Ok(f),
            "{b} bytes displays as {f}"
        );
    }
}

#[test]
fn regression_bad_density() {
    for v in ["nan", "-nan", "inf", "-0.1", "0", "0.0", "1.5"] {
        expect_err(
            &format!("{MICRO}[micro.params]\ndensity = {v}\n"),
            "density",
            &[],
        );
        expect_err(&format!("{MICRO}densities = [{v}]\n"), "density", &[]);
        expect_err(&format!("[[micro-compress]]\nmethods = [\"sketch\"]\nshapes = [\"100\"]\nparams = {{ density = {v} }}\n"), "density", &[]);
        expect_err(
            &format!("{E2E}models = [\"resnet20\"]\n[e2e.params]\ndensity = {v}\n"),
            "density",
            &[],
        );
    }
}

#[test]
fn regression_bad_rank() {
    expect_err(&format!("{MICRO}[micro.params]\nrank = 0\n"), "rank", &[]);
    expect_err(&format!("{MICRO}ranks = [0]\n"), "rank", &[]);
    expect_err(&format!("{MICRO}ranks = [4, 0]\n"), "rank", &[]);
    expect_err(&format!("{MICRO}ranks = []\n"), "ranks", &[]);
    expect_err(&format!("{MICRO}densities = []\n"), "densities", &[]);
}

#[test]
fn regression_bad_sizes() {
    expect_err(&format!("{COMM}sizes = [\"0\"]\n"), "sizes", &["0"]);
    expect_err(&format!("{COMM}sizes = [0]\n"), "sizes", &[]);
    expect_err(&format!("{COMM}sizes = [6]\n"), "sizes", &[]);
    expect_err(&format!("{COMM}sizes = []\n"), "sizes", &[]);
    expect_err(&format!("{COMM}sizes = [\"2GiB\"]\n"), "sizes", &[]);
    expect_err(
        &format!("{COMM}sizes = [\"99999999999999999999\"]\n"),
        "sizes",
        &["99999999999999999999"],
    );
    expect_err(
        &format!("{COMM}max_bytes = \"16EiB\"\n"),
        "max_bytes",
        &["16EiB"],
    );
    expect_err(
        &format!("{COMM}max_bytes = \"17179869184GiB\"\n"),
        "max_bytes",
        &["17179869184GiB"],
    );
    expect_err(&format!("{COMM}min_bytes = \"\"\n"), "min_bytes", &[]);
    expect_err(&format!("{COMM}min_bytes = \"-4\"\n"), "min_bytes", &["-4"]);
    expect_err(
        &format!("{COMM}min_bytes = \"1MiB\"\nmax_bytes = \"4KiB\"\n"),
        "min_bytes",
        &[],
    );
}

#[test]
fn regression_bad_shapes() {
    for s in [
        "99999999999x99999999999",
        "18446744073709551615x2",
        "1x0",
        "0x1",
        "0",
        "",
        "x",
        "1x",
        "65536x32768",
        "-1x4",
        "1x1x1",
    ] {
        expect_err(
            &format!("[[micro]]\nmethods = [\"topk\"]\nshapes = [\"{s}\"]\n"),
            "shapes",
            &[s],
        );
    }
    expect_err(
        "[[micro]]\nmethods = [\"topk\"]\nshapes = []\n",
        "shapes",
        &[],
    );
}

#[test]
fn regression_bad_counts() {
    expect_err(&format!("{COMM}iters = 0\n"), "iters", &[]);
    expect_err(&format!("{MICRO}iters = 0\n"), "iters", &[]);
    expect_err(
        &format!("[run]\nexpect_ranks = 0\n{COMM}"),
        "expect_ranks",
        &[],
    );
}

#[test]
fn regression_bad_e2e() {
    expect_err(&format!("{E2E}models = []\n"), "models", &[]);
    expect_err(
        &format!("{E2E}models = [\"nosuchmodel\"]\n"),
        "models",
        &["nosuchmodel"],
    );
    expect_err(
        "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = [\"nosuchmethod\"]\n",
        "methods",
        &["nosuchmethod"],
    );
    expect_err(
        "[[e2e]]\nmodels = [\"resnet20\"]\nmethods = []\n",
        "methods",
        &[],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\nfusion = []\n"),
        "fusion",
        &[],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\nfusion = [\"big\"]\n"),
        "fusion",
        &["big"],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\nfusion = [\"16EiB\"]\n"),
        "fusion",
        &["16EiB"],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\npipelining = []\n"),
        "pipelining",
        &[],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\ncollective = [\"bcast\"]\n"),
        "collective",
        &["bcast"],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\ncompute = \"warp\"\n"),
        "compute",
        &["warp"],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\ndevice = \"abacus\"\n"),
        "device",
        &[],
    );
    expect_err(
        &format!("{E2E}models = [\"resnet20\"]\nbatch = 0\n"),
        "batch",
        &[],
    );
}

#[test]
fn regression_bad_params() {
    expect_err(
        "[[micro]]\nmethods = [\"qsgd\"]\nshapes = [\"10\"]\n[micro.params]\nqsgd_levels = 0\n",
        "qsgd_levels",
        &[],
    );
    expect_err("[[micro]]\nmethods = [\"qsgd\"]\nshapes = [\"10\"]\n[micro.params]\nqsgd_levels = 16777217\n", "qsgd_levels", &[]);
    expect_err(
        "[[micro]]\nmethods = [\"sketch\"]\nshapes = [\"10\"]\n[micro.params]\nsketch_rows = 0\n",
        "sketch_rows",
        &[],
    );
    expect_err("[[micro]]\nmethods = [\"sketch\"]\nshapes = [\"10\"]\n[micro.params]\nsketch_cols_per_k = nan\n", "sketch_cols_per_k", &[]);
    expect_err(
        "[[micro]]\nmethods = [\"dgc\"]\nshapes = [\"10\"]\n[micro.params]\nmomentum = 1.0\n",
        "momentum",
        &[],
    );
    expect_err(
        "[[micro]]\nmethods = [\"dgc\"]\nshapes = [\"10\"]\n[micro.params]\nclip_norm = inf\n",
        "clip_norm",
        &[],
    );
    expect_err("[[micro]]\nmethods = [\"powersgd\"]\nshapes = [\"10\"]\n[micro.params]\nmin_compression_rate = nan\n", "min_compression_rate", &[]);
    expect_err(
        "[[micro]]\nmethods = [\"topk\"]\nshapes = [\"10\"]\n[micro.params]\nno_such_param = 1\n",
        "no_such_param",
        &[],
    );
    expect_err(
        "[[micro]]\nmethods = [\"nope\"]\nshapes = [\"10\"]\n",
        "methods",
        &["nope"],
    );
    expect_err(
        "[[micro-compress]]\nmethods = [\"topk\"]\nshapes = [\"10\"]\ncheck = true\n",
        "check",
        &[],
    );
}

/// `ranks` (read by MPI users as a process count) is now `lowrank_ranks`; the old key
/// still sweeps the same ranks, with a warning naming the new key; both at once are
/// refused.
#[test]
fn lowrank_ranks_replaces_ranks_with_a_warning() {
    let new = parse(&format!("{MICRO}lowrank_ranks = [2, 8]\n"), FILE).unwrap();
    let _ = gradcomp::config::take_warnings();
    let old = parse(&format!("{MICRO}ranks = [2, 8]\n"), FILE).unwrap();
    assert_eq!(
        new.cases(),
        old.cases(),
        "the old key sweeps the same ranks"
    );
    let w = gradcomp::config::take_warnings();
    assert!(
        w.iter()
            .any(|m| m.contains("ranks is deprecated") && m.contains("lowrank_ranks")),
        "{w:?}"
    );
    expect_err(
        &format!("{MICRO}ranks = [2]\nlowrank_ranks = [4]\n"),
        "ranks",
        &["lowrank_ranks only"],
    );
}
