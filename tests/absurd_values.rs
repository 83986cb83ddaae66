//! Values that scale a time or a size are bounded before any case runs, and a panic on
//! one rank ends the whole job (issue 52, item 2). Before: `--batch 1000000000` and
//! `launch_us=1e12` slept forever with run.json `running`; `launch_us=1e30` panicked on
//! every rank ("cannot convert float seconds to Duration") and then deadlocked.

mod common;
use common::*;
use std::time::{Duration, Instant};

fn e2e(out: &str, extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "e2e",
        "--model",
        "resnet20",
        "--methods",
        "topk",
        "--pipelining",
        "off",
        "--iters",
        "1",
        "--warmup",
        "0",
        "--out",
        out,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn refused_within(np: usize, args: &[String], words: &[&str]) {
    let t0 = Instant::now();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_refused(np, &a, words);
    assert!(
        t0.elapsed() < Duration::from_secs(60),
        "{args:?}: {:?}",
        t0.elapsed()
    );
}

#[test]
fn absurd_batches_and_launch_costs_are_refused_up_front() {
    let d = tmpdir("absurd");
    let out = d.join("o");
    let o = out.to_str().unwrap();
    for b in ["1000000000", "18446744073709551615", "1048577"] {
        refused_within(2, &e2e(o, &["--batch", b]), &["--batch", b, "1048576"]);
    }
    for us in ["1e12", "1e30", "1e308", "10001"] {
        let dev = format!("v100:launch_us={us}");
        refused_within(
            2,
            &e2e(o, &["--compress-on", "device", "--compress-device", &dev]),
            &["launch_us", "10000"],
        );
    }
    refused_within(
        2,
        &e2e(
            o,
            &[
                "--compress-on",
                "device",
                "--compress-device",
                "v100:launch_us=1,launch_us=2",
            ],
        ),
        &["launch_us", "more than once"],
    );
    // A batch under the bound whose modelled iteration is still hours long
    // (VGG-16 at 1,048,576 images on the p102-100 preset).
    refused_within(
        2,
        &[
            "e2e",
            "--model",
            "vgg16",
            "--methods",
            "ssgd",
            "--device",
            "p102-100",
            "--batch",
            "1048576",
            "--out",
            o,
        ]
        .map(String::from),
        &["vgg16", "modelled compute", "3600 s"],
    );
    // A compute profile in microseconds written as seconds (every tensor 100 s, 59
    // tensors): refused, not slept; the same times in seconds run.
    let model = std::process::Command::new(BIN)
        .args(["models", "resnet20"])
        .output()
        .unwrap();
    assert!(model.status.success());
    let names: Vec<String> = String::from_utf8_lossy(&model.stdout)
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().nth(2).map(String::from))
        .collect();
    assert_eq!(names.len(), 59);
    let profile = |t: &str| {
        let mut text = String::from("tensor,backward_s\n");
        for n in &names {
            text.push_str(&format!("{n},{t}\n"));
        }
        let p = d.join(format!("profile-{t}.csv"));
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_string()
    };
    let slow = profile("100");
    refused_within(
        2,
        &e2e(o, &["--compute-profile", &slow]),
        &[
            "--compute-profile",
            "resnet20",
            "3600 s",
            "not microseconds",
        ],
    );
    let fine = profile("0.0001");
    let ok = mpirun(
        2,
        &e2e(o, &["--compute-profile", &fine])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_ok(&ok);
    assert_eq!(rows_in(&out.join("e2e.csv")), 1);
}

/// A panic on rank 1 of 3 while the others wait in a collective: the job ends at once
/// (MPI_Abort, exit 101) with one line saying which rank, never a deadlock.
#[test]
fn a_panic_on_one_rank_ends_the_whole_job() {
    let d = tmpdir("panic");
    let out = d.join("o");
    let t0 = Instant::now();
    let o = mpirun(
        3,
        &[
            "micro-comm",
            "--collectives",
            "allreduce",
            "--max-bytes",
            "1KiB",
            "--inject-panic",
            "1",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let secs = t0.elapsed().as_secs_f64();
    let err = stderr(&o);
    assert!(!o.status.success(), "{err}");
    assert!(secs < 30.0, "took {secs:.1} s: {err}");
    assert!(
        err.contains("rank 1 of 3 panicked; it aborts the whole job (MPI_Abort)"),
        "{err}"
    );
    assert!(err.contains("injected by --inject-panic 1"), "{err}");
}
