//! Every `gradcomp` row of tests/data/bad-inputs.tsv, the one catalogue of bad inputs
//! (issue 52; docs/reliability.md): the run exits with the row's code within the time
//! limit, prints exactly one `gradcomp:` line holding every fragment, and writes no CSV
//! into `{OUT}`. The `file-*` rows are run by tests/file_inputs.rs (a FIFO and /dev/zero).

mod common;
use common::catalogue::*;
use common::*;
use std::collections::BTreeSet;
use std::process::Command;

/// Replace the row placeholders `{TMP}`, `{OUT}`, `{ROOT}`.
fn fill(s: &str, tmp: &std::path::Path) -> String {
    s.replace("{OUT}", tmp.join("out").to_str().unwrap())
        .replace("{TMP}", tmp.to_str().unwrap())
        .replace("{ROOT}", root().to_str().unwrap())
}

#[test]
fn every_gradcomp_row_is_refused_with_one_line() {
    let base = tmpdir("catalogue");
    let rows: Vec<Row> = gradcomp_rows()
        .into_iter()
        .filter(|r| !r.id.starts_with("file-"))
        .collect();
    assert!(rows.len() >= 60, "{} rows", rows.len());
    for r in &rows {
        let np = r.ranks.unwrap_or_else(|| panic!("{}: ranks", r.id));
        if skip_np(np) {
            continue;
        }
        let tmp = base.join(&r.id);
        std::fs::create_dir_all(&tmp).unwrap();
        write_files(r, &tmp);
        let args: Vec<String> = r.args.iter().map(|a| fill(a, &tmp)).collect();
        let expect: Vec<String> = r.expect.iter().map(|e| fill(e, &tmp)).collect();
        let t0 = std::time::Instant::now();
        let out = run_limited(np, &args, &tmp);
        let what = format!("{} ({args:?})", r.id);
        check_refusal(&what, &out, r.exit, &expect);
        let out_dir = tmp.join("out");
        let csvs: Vec<_> = std::fs::read_dir(&out_dir)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "csv"))
                    .collect()
            })
            .unwrap_or_default();
        assert!(csvs.is_empty(), "{what}: wrote {csvs:?}");
        eprintln!("{}: refused in {:.1} s", r.id, t0.elapsed().as_secs_f64());
    }
    let _ = std::fs::remove_dir_all(&base);
}

/// Every subcommand `gradcomp --help` lists has a row; ids are unique over both tools.
#[test]
fn every_subcommand_is_in_the_catalogue() {
    let out = Command::new(BIN).arg("--help").output().unwrap();
    assert_ok(&out);
    let help = stdout(&out);
    let listed: BTreeSet<String> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(String::from)
        .collect();
    assert!(listed.len() >= 11, "{listed:?}");
    let all = rows();
    let covered: BTreeSet<String> = all
        .iter()
        .filter(|r| r.tool == "gradcomp")
        .filter_map(|r| r.args.first().cloned())
        .collect();
    let missing: Vec<_> = listed.difference(&covered).collect();
    assert!(
        missing.is_empty(),
        "subcommands without a catalogue row: {missing:?}"
    );
    let unknown: Vec<_> = covered.difference(&listed).collect();
    assert!(unknown.is_empty(), "rows for no subcommand: {unknown:?}");
    let mut ids = BTreeSet::new();
    for r in &all {
        assert!(ids.insert(&r.id), "id '{}' appears twice", r.id);
        assert!(
            r.tool == "gradcomp" || r.tool == "analysis",
            "{}: tool '{}'",
            r.id,
            r.tool
        );
        assert!(!r.expect.is_empty(), "{}: no fragment to expect", r.id);
    }
}
