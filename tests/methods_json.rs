//! `gradcomp methods --json` (src/compress/describe.rs) and its committed copy
//! `analysis/methods.json`, which the analysis package and `analysis/profile_compress.py`
//! read where no binary is at hand: the copy is exactly what the binary prints.

use std::process::Command;

fn methods(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gradcomp"))
        .arg("methods")
        .args(args)
        .output()
        .expect("run gradcomp methods")
}

#[test]
fn the_committed_copy_is_the_binarys_output() {
    let out = methods(&["--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/analysis/methods.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        printed == committed,
        "analysis/methods.json differs from `gradcomp methods --json`; regenerate it: \
         make methods-json"
    );
    let j: serde_json::Value = serde_json::from_str(&printed).unwrap();
    let names: Vec<&str> = j["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, gradcomp::compress::registry::METHODS);
}

#[test]
fn the_table_lists_every_method_and_parameter() {
    let out = methods(&[]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for m in gradcomp::compress::registry::METHODS {
        assert!(
            text.contains(&format!("\n{m}: ")) || text.starts_with(&format!("{m}: ")),
            "{m}"
        );
    }
    for p in gradcomp::compress::params::PARAMS {
        assert!(text.contains(p.flag), "{}", p.key);
    }
}
