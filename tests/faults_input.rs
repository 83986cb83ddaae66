//! Bad input (issue 19 items 5 and 7, issue 30 items 4 and 6): config files that are not
//! files, huge configs, repeated entries, every numeric flag at its extremes, and small
//! command-line slips; each refused up front with one clear line and exit 2, never a
//! panic or a hang. Every test runs the release binary (under mpirun or alone).
//!
//! `GRADCOMP_TEST_BIN=/path/to/gradcomp` runs these tests against another build (to see
//! them fail on an older revision). The helpers these files share are in
//! tests/common/faults.rs.

mod common;
use common::faults::{
    alone, bin, case_ids, err_text, our_lines, refused, refused_alone, run, strs,
};
use common::tmpdir;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

// ---- item 5: config files that are not files, huge configs, repeated entries --------

#[test]
fn config_files_that_are_not_regular_or_too_big_are_refused() {
    let dir = tmpdir("cfg");
    refused(
        1,
        &["run", "/dev/zero"],
        &["/dev/zero", "not a regular file"],
    );
    let fifo = dir.join("fifo.toml");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let f = fifo.to_str().unwrap();
    refused(2, &["run", f], &[f, "not a regular file"]);
    let big = dir.join("big.toml");
    let mut text = String::from("[[micro-comm]]\ncollectives = [\"allreduce\"]\n");
    text.push_str(&format!("# {}\n", "x".repeat(5 << 20)));
    std::fs::write(&big, text).unwrap();
    let b = big.to_str().unwrap();
    refused(3, &["run", b], &[b, "MiB"]);
    // A directory is not a config either.
    let d = dir.to_str().unwrap();
    refused(1, &["run", d], &[d, "not a regular file"]);
}

#[test]
fn case_count_is_capped_and_repeated_entries_are_refused() {
    let dir = tmpdir("cases");
    // 400 shapes x 300 densities = 120000 cases.
    let shapes: Vec<String> = (1..=400).map(|i| format!("\"{i}\"")).collect();
    let dens: Vec<String> = (1..=300)
        .map(|i| format!("{}", i as f64 / 1000.0))
        .collect();
    let cfg = dir.join("many.toml");
    std::fs::write(
        &cfg,
        format!(
            "[[micro]]\nmethods = [\"topk\"]\nshapes = [{}]\ndensities = [{}]\n",
            shapes.join(","),
            dens.join(",")
        ),
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    refused(
        2,
        &["run", c, "--out", d(&dir, "o1")],
        &["120000 cases", "at most"],
    );
    let rep = dir.join("rep.toml");
    std::fs::write(
        &rep,
        "[[micro]]\nmethods = [\"topk\"]\nshapes = [\"100\", \"64\", \"100\"]\n",
    )
    .unwrap();
    let r = rep.to_str().unwrap();
    refused(3, &["run", r, "--out", d(&dir, "o2")], &[r, "100", "twice"]);
    refused(
        2,
        &["micro-comm", "--sizes", "4,8,4", "--out", d(&dir, "o3")],
        &["--sizes", "twice"],
    );
    refused(
        2,
        &[
            "micro-comm",
            "--collectives",
            "allreduce,allgather,allreduce",
            "--max-bytes",
            "64",
            "--out",
            d(&dir, "o4"),
        ],
        &["--collectives", "allreduce", "twice"],
    );
}

#[test]
fn a_section_repeated_on_purpose_gets_distinct_case_ids() {
    let dir = tmpdir("repeat");
    let cfg = dir.join("twice.toml");
    let section =
        "[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [4, 64]\niters = 5\nwarmup = 1\n";
    std::fs::write(&cfg, format!("{section}{section}")).unwrap();
    let c = cfg.to_str().unwrap();
    let out_dir = d(&dir, "o");
    let args = ["run", c, "--quiet", "--out", out_dir];
    let first = run(3, &args, 120);
    assert!(first.status.success(), "{}", err_text(&first));
    let ids = case_ids(&Path::new(out_dir).join("micro_comm.csv"));
    assert_eq!(ids.len(), 4);
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 4, "{ids:?}");
    let mut again = args.to_vec();
    again.push("--resume");
    let second = run(3, &again, 120);
    assert!(second.status.success(), "{}", err_text(&second));
    assert_eq!(
        case_ids(&Path::new(out_dir).join("micro_comm.csv")).len(),
        4
    );
}

fn d(dir: &Path, name: &str) -> &'static str {
    Box::leak(
        dir.join(name)
            .to_string_lossy()
            .into_owned()
            .into_boxed_str(),
    )
}

// ---- item 7: small slips -------------------------------------------------------------

#[test]
fn small_slips_get_the_real_message() {
    let dir = tmpdir("slips");
    refused(
        2,
        &[
            "micro",
            "--methods",
            "topk",
            "--shape",
            "100",
            "--density",
            "-1",
        ],
        &["--density", "-1", "(0, 1]"],
    );
    refused(
        1,
        &[
            "micro-compress",
            "--methods",
            "topk",
            "--shape",
            "100",
            "--density",
            "-0.5,0.1",
        ],
        &["--density", "-0.5"],
    );
    let file = dir.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let f = file.to_str().unwrap();
    refused(
        3,
        &["micro-comm", "--max-bytes", "64", "--out", f],
        &[f, "is not a directory"],
    );
    let sim = Command::new(bin())
        .args([
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--world-sizes",
            "18446744073709551615",
            "--out",
            d(&dir, "sim"),
        ])
        .output()
        .unwrap();
    assert_eq!(sim.status.code(), Some(2), "{}", err_text(&sim));
    assert!(
        err_text(&sim).contains("--world-sizes") && err_text(&sim).contains("at most"),
        "{}",
        err_text(&sim)
    );
}

// ---- issue 30, item 4: absurd counts ---------------------------------------------------

/// Every numeric flag of every subcommand, fed its extremes (0, -1, i64::MAX, u64::MAX,
/// 1e10; 1e308, inf, NaN for the real-valued ones), and the TOML keys the same way: each
/// run either works or exits 2 with one line naming the flag, within 60 s. No panic
/// (101), abort (134) or hang. The runs start the binary alone (an MPI singleton, one
/// rank) so that some 300 of them take seconds, not minutes.
#[test]
fn every_numeric_flag_refuses_its_extremes() {
    let dir = tmpdir("extremes");
    let ints = [
        "0",
        "-1",
        "9223372036854775807",
        "18446744073709551615",
        "10000000000",
    ];
    let reals = ["0", "-1", "1e308", "inf", "NaN", "10000000000"];
    let mc = "micro-comm --sizes 4 --iters 2 --warmup 1";
    let micro =
        "micro --shape 64x64 --iters 2 --warmup 1 --methods topk,dgc,powersgd,acpsgd,sketch,qsgd";
    let e2e = "e2e --model resnet20 --methods ssgd,topk --iters 1 --warmup 0 --compute none --pipelining off";
    let conv = "converge --methods ssgd,topk,sketch --steps 3 --batch 8 --train-samples 256 --eval-samples 64 --hidden 16";
    let sim = "simulate --model resnet20 --methods ssgd,topk --world-sizes 8";
    // (base command, flag, values, flags the base sets that this flag replaces)
    let mut cases: Vec<(String, String)> = Vec::new();
    let mut add = |base: &str, flag: &str, values: &[&str]| {
        for v in values {
            // The flag replaces the base's own value of it.
            let mut words: Vec<&str> = base.split(' ').collect();
            if let Some(i) = words.iter().position(|w| *w == flag) {
                words.drain(i..=i + 1);
            }
            cases.push((format!("{} {flag}", words.join(" ")), v.to_string()));
        }
    };
    for f in [
        "--iters",
        "--warmup",
        "--seed",
        "--expect-ranks",
        "--stop-grace",
        "--rounds",
    ] {
        add(mc, f, &ints);
    }
    for f in ["--sizes", "--min-bytes", "--max-bytes"] {
        add("micro-comm --iters 2 --warmup 1", f, &ints);
    }
    add(mc, "--case-timeout", &reals);
    for f in [
        "--iters",
        "--warmup",
        "--sketch-rows",
        "--qsgd-levels",
        "--lowrank-rank",
        "--start-iter",
        "--warmup-steps-per-epoch",
    ] {
        add(micro, f, &ints);
    }
    for f in [
        "--density",
        "--sketch-cols-per-k",
        "--min-compression-rate",
        "--momentum",
        "--clip-norm",
    ] {
        add(micro, f, &reals);
    }
    add(
        "micro-compress --shape 64x64 --methods topk,sketch --iters 2 --warmup 1",
        "--iters",
        &ints,
    );
    add(
        "micro-compress --shape 64x64 --methods topk,sketch --iters 2 --warmup 1",
        "--warmup",
        &ints,
    );
    for f in [
        "--iters",
        "--warmup",
        "--batch",
        "--rounds",
        "--sketch-rows",
    ] {
        add(e2e, f, &ints);
    }
    add(&format!("{e2e} --min-time 0.01"), "--max-iters", &ints);
    add(&format!("{e2e} --min-time 0.01"), "--max-time", &reals);
    add(e2e, "--min-time", &reals);
    add(e2e, "--target-ci", &reals);
    for f in [
        "--steps",
        "--batch",
        "--eval-every",
        "--train-samples",
        "--eval-samples",
        "--hidden",
        "--sketch-rows",
    ] {
        add(conv, f, &ints);
    }
    for f in ["--lr", "--sgd-momentum", "--sketch-cols-per-k"] {
        add(conv, f, &reals);
    }
    for f in ["--world-sizes", "--ranks-per-node", "--batch"] {
        add(sim, f, &ints);
    }
    add(sim, "--tolerance", &reals);
    // The same counts from a bench config.
    let toml_cases = [
        (
            "micro-comm",
            "collectives = [\"allreduce\"]\nsizes = [4]",
            "iters",
        ),
        (
            "micro-comm",
            "collectives = [\"allreduce\"]\nsizes = [4]",
            "warmup",
        ),
        ("micro", "methods = [\"topk\"]\nshapes = [\"64\"]", "iters"),
        ("micro", "methods = [\"topk\"]\nshapes = [\"64\"]", "warmup"),
        (
            "micro-compress",
            "methods = [\"topk\"]\nshapes = [\"64\"]",
            "iters",
        ),
        (
            "e2e",
            "models = [\"resnet20\"]\nmethods = [\"ssgd\"]\ncompute = \"none\"",
            "iters",
        ),
        (
            "e2e",
            "models = [\"resnet20\"]\nmethods = [\"ssgd\"]\ncompute = \"none\"",
            "warmup",
        ),
    ];
    let mut jobs: Vec<(Vec<String>, String)> = cases
        .iter()
        .enumerate()
        .map(|(i, (cmd, v))| {
            let mut a: Vec<String> = cmd.split(' ').map(String::from).collect();
            let flag = a.last().unwrap().clone();
            a.push(v.clone());
            a.extend([
                "--out".into(),
                dir.join(format!("o{i}")).display().to_string(),
            ]);
            (a, flag)
        })
        .collect();
    for (i, (section, body, key)) in toml_cases.iter().enumerate() {
        for v in ["9223372036854775807", "10000000000"] {
            let path = dir.join(format!("c{i}-{v}.toml"));
            std::fs::write(&path, format!("[[{section}]]\n{body}\n{key} = {v}\n")).unwrap();
            jobs.push((
                vec![
                    "run".into(),
                    path.display().to_string(),
                    "--out".into(),
                    dir.join(format!("t{i}-{v}")).display().to_string(),
                ],
                format!("key '{key}'"),
            ));
        }
    }
    for (key, v) in [
        ("case_timeout_s", "1e300"),
        ("rounds", "9223372036854775807"),
    ] {
        let path = dir.join(format!("run-{key}.toml"));
        std::fs::write(
            &path,
            format!("[run]\n{key} = {v}\n[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [4]\niters = 2\n"),
        )
        .unwrap();
        jobs.push((
            vec![
                "run".into(),
                path.display().to_string(),
                "--out".into(),
                dir.join(key).display().to_string(),
            ],
            format!("key '{key}'"),
        ));
    }
    let jobs = std::sync::Mutex::new(jobs);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let Some((args, flag)) = jobs.lock().unwrap().pop() else {
                    break;
                };
                let child = Command::new(bin())
                    .args(&args)
                    .env_remove("SLURM_NTASKS")
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let t0 = Instant::now();
                let mut child = child;
                let status = loop {
                    if let Some(st) = child.try_wait().unwrap() {
                        break Some(st);
                    }
                    if t0.elapsed() > Duration::from_secs(60) {
                        let _ = child.kill();
                        break None;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                };
                let out = child.wait_with_output().unwrap();
                let lines = our_lines(&out);
                let verdict = match status.and_then(|s| s.code()) {
                    None => Some("did not end within 60 s, or died by a signal".to_string()),
                    Some(0) => None,
                    Some(2) if lines.len() == 1 && lines[0].contains(flag.as_str()) => None,
                    Some(2) => Some(format!("exit 2 without one line naming {flag}")),
                    Some(c) => Some(format!("exit {c}")),
                };
                if let Some(v) = verdict {
                    failures.lock().unwrap().push(format!(
                        "{}: {v}: {}",
                        args[..args.len() - 2].join(" "),
                        err_text(&out)
                            .lines()
                            .take(3)
                            .collect::<Vec<_>>()
                            .join(" | ")
                    ));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} extreme value(s) mishandled:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Slips that used to be found late or not at all: a `--trace` into a missing folder
/// (found only after the first case ran), a CSV that is a directory or a link to
/// /dev/null under `--resume` (exit 1), `--fusion 0B` (ran as `none` without a word),
/// `simulate --world-sizes 8,8` (duplicate rows), a config of 200000 sizes (seconds of
/// CPU per rank before the refusal), a 3 MB key (echoed twice in a 6 MB line), and
/// `simulate -q` (refused, though -q was a global flag).
#[test]
fn small_slips_of_issue_30_are_refused_up_front_and_clearly() {
    let dir = tmpdir("slips-30");
    let e2e = |extra: &[&str], out: &Path| -> Vec<String> {
        let mut a: Vec<String> = [
            "e2e",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--iters",
            "1",
            "--warmup",
            "0",
            "--compute",
            "none",
            "--pipelining",
            "off",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a.extend(["--out".to_string(), out.display().to_string()]);
        a
    };
    let t = dir.join("t");
    refused_alone(
        &strs(&e2e(&["--trace", "/nonexistent/dir/t.json"], &t)),
        &["--trace", "/nonexistent/dir", "does not exist"],
    );
    assert!(!t.join("e2e.csv").exists(), "a case ran before the refusal");

    for (name, make) in [
        (
            "dir",
            Box::new(|p: &Path| std::fs::create_dir_all(p).unwrap()) as Box<dyn Fn(&Path)>,
        ),
        (
            "null",
            Box::new(|p: &Path| std::os::unix::fs::symlink("/dev/null", p).unwrap()),
        ),
    ] {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        make(&d.join("micro_comm.csv"));
        refused_alone(
            &[
                "micro-comm",
                "--sizes",
                "4",
                "--iters",
                "2",
                "--out",
                d.to_str().unwrap(),
                "--resume",
            ],
            &["micro_comm.csv", "not a regular file"],
        );
    }

    refused_alone(
        &strs(&e2e(&["--fusion", "0B"], &dir.join("f"))),
        &["--fusion", "0B", "none"],
    );
    refused_alone(
        &[
            "converge",
            "--methods",
            "ssgd",
            "--fusion",
            "0",
            "--out",
            dir.join("cf").to_str().unwrap(),
        ],
        &["--fusion", "0 bytes"],
    );
    refused_alone(
        &[
            "simulate",
            "--model",
            "resnet20",
            "--methods",
            "ssgd",
            "--world-sizes",
            "8,8",
            "--out",
            dir.join("s").to_str().unwrap(),
        ],
        &["--world-sizes", "'8' appears twice"],
    );

    let big = dir.join("big.toml");
    let sizes: Vec<String> = (1..=200_000).map(|i| (4 * i).to_string()).collect();
    std::fs::write(
        &big,
        format!(
            "[[micro-comm]]\ncollectives = [\"allreduce\"]\nsizes = [{}]\n",
            sizes.join(",")
        ),
    )
    .unwrap();
    let t0 = Instant::now();
    refused_alone(
        &[
            "run",
            big.to_str().unwrap(),
            "--out",
            dir.join("b").to_str().unwrap(),
        ],
        &["key 'sizes'", "200000 entries"],
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "{:?} to refuse",
        t0.elapsed()
    );

    let key = dir.join("key.toml");
    std::fs::write(
        &key,
        format!(
            "[[micro-comm]]\ncollectives = [\"allreduce\"]\n{} = 1\n",
            "k".repeat(3 << 20)
        ),
    )
    .unwrap();
    let line = refused_alone(
        &[
            "run",
            key.to_str().unwrap(),
            "--out",
            dir.join("k").to_str().unwrap(),
        ],
        &["key.toml", "line 3", "left out"],
    );
    assert!(line.len() < 2000, "{} bytes", line.len());

    let sim = alone(&[
        "simulate",
        "-q",
        "--model",
        "resnet20",
        "--methods",
        "ssgd",
        "--out",
        dir.join("q").to_str().unwrap(),
    ]);
    assert_eq!(sim.status.code(), Some(0), "{}", err_text(&sim));
    assert!(!err_text(&sim).contains("[gradcomp]"), "{}", err_text(&sim));
}
