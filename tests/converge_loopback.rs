//! `converge` at 8 ranks on the in-process loopback backend (no mpirun: 8 MPI ranks on a
//! 2-core CI machine would take minutes): Count Sketch's two-round method at its default
//! sizes (density 0.0076, 20 columns per kept element) runs its 600 steps at three seeds
//! without diverging (docs/methods.md, "sketch"; 1,000 steps at 8 workers without the
//! engine are `compress::sketch::tests::residuals_stay_bounded_over_1000_steps_at_8_workers`).

mod common;

use gradcomp::comm::loopback;
use gradcomp::config::sections_from_file;
use gradcomp::config::Origin;
use gradcomp::converge::{self, CaseOutcome, RunContext};

/// Outcomes of the `[[converge]]` section `toml` at `n` loopback ranks and `seed`.
fn run(n: usize, seed: u64, toml: &str) -> Vec<CaseOutcome> {
    let dir = std::env::temp_dir().join(format!(
        "gradcomp-conv-loopback-{}-{n}-{seed}-{}",
        std::process::id(),
        toml.len()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.toml");
    std::fs::write(&path, toml).unwrap();
    let (_, sections) = sections_from_file(&path).unwrap();
    let origin = Origin::File {
        file: path.display().to_string(),
        section: "converge",
        index: 0,
    };
    let cases = sections[0].validate(&origin, n, seed).unwrap();
    let done = std::collections::HashSet::new();
    let mut out = loopback::run(n, |world| {
        let ctx = RunContext {
            run_id: "loopback",
            quiet: true,
            done: &done,
        };
        let mut summary = gradcomp::record::meta::RunSummary::default();
        converge::run_all(&world, &cases, &ctx, None, &mut summary).unwrap()
    });
    out.swap_remove(0)
}

/// Count Sketch and Sketch-Fusion at their default sizes over 600 steps at 8 workers and
/// three seeds (the 128-128 student of tests/converge.rs): every case runs to its end with
/// finite losses, and their steps to dense's target (the rule written again in
/// tests/common) are reported.
#[test]
fn sketch_at_default_sizes_at_8_ranks_three_seeds() {
    let toml = "[[converge]]\nmethods = [\"ssgd\", \"sketch\", \"sketch-fusion\"]\nhidden = [128, 128]\nsteps = 600\neval_every = 50\nseeds = [1, 2, 3]\n";
    let o = run(8, 1, toml);
    assert_eq!(o.len(), 9);
    let finals: Vec<(f64, f64)> = o
        .iter()
        .filter(|c| c.method == "ssgd")
        .map(|c| (c.final_eval_loss, c.final_eval_accuracy))
        .collect();
    let t = common::dense_target(&finals);
    let mut report = Vec::new();
    for c in &o {
        assert_eq!(c.status, "done", "{} seed {}", c.method, c.seed);
        assert!(
            c.final_eval_loss.is_finite(),
            "{} seed {}",
            c.method,
            c.seed
        );
        let curve: Vec<(u64, f64, f64)> = c
            .curve
            .iter()
            .map(|p| (p.step + 1, p.loss, p.accuracy))
            .collect();
        report.push((c.method.clone(), c.seed, common::steps_to_target(&curve, t)));
    }
    // Dense reaches its own target at every seed (the bound is above its mean).
    for (m, seed, steps) in &report {
        if m == "ssgd" {
            assert!(steps.is_some(), "dense seed {seed}: {report:?}");
        }
    }
    eprintln!("8 ranks, target {t:?}: {report:?}");
}
