//! Tests of the fusion planners (`super`): the timeline by hand, OMGS, MG-WFBP and
//! LayerFusion against brute force and the simple plans.

use super::*;
use crate::netmodel::AlphaBeta;
use crate::schedule::plan::{buckets, Fusion};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn per_layer(n: usize) -> Vec<Vec<usize>> {
    (0..n).map(|i| vec![i]).collect()
}

fn single(n: usize) -> Vec<Vec<usize>> {
    vec![(0..n).collect()]
}

#[test]
fn timeline_by_hand() {
    // t_b = [1, 2, 1, 3] -> backward ends 1, 3, 4, 7. p = [10, 20, 30, 40].
    // t_s(d) = 0.01 d, t_c(d) = 1 + 0.1 d. Groups {0}, {1,2}, {3}:
    //   g0: ready 1; compress at max(1, 0) = 1, t_s(10) = 0.1 -> comm 1.1;
    //       t_c(10) = 2 -> end 3.1.
    //   g1: ready 4 (end of position 2); compress at max(4, 3.1) = 4,
    //       t_s(50) = 0.5 -> comm 4.5; t_c(50) = 6 -> end 10.5.
    //   g2: ready 7; compress at max(7, 10.5) = 10.5, t_s(40) = 0.4 -> comm 10.9;
    //       t_c(40) = 5 -> end 15.9. Iteration end 15.9; slack of g2 = 10.5 - 7 = 3.5.
    let t_b = [1.0, 2.0, 1.0, 3.0];
    let p = [10, 20, 30, 40];
    let ts = |d: usize, _k: usize| 0.01 * d as f64;
    let tc = |d: usize| 1.0 + 0.1 * d as f64;
    let groups = vec![vec![0], vec![1, 2], vec![3]];
    let tl = timeline(&t_b, &p, &groups, &ts, &tc);
    let want = [
        (1.0, 1.0, 1.1, 3.1),
        (4.0, 4.0, 4.5, 10.5),
        (7.0, 10.5, 10.9, 15.9),
    ];
    for (g, w) in want.iter().enumerate() {
        let got = (
            tl.ready_s[g],
            tl.start_compress_s[g],
            tl.start_comm_s[g],
            tl.end_comm_s[g],
        );
        assert!(
            close(got.0, w.0) && close(got.1, w.1) && close(got.2, w.2) && close(got.3, w.3),
            "group {g}: {got:?} vs {w:?}"
        );
    }
    assert!(close(tl.backward_end_s, 7.0) && close(tl.iteration_end_s, 15.9));
    assert!(close(tl.slack_s(0), 0.0) && close(tl.slack_s(1), 0.0) && close(tl.slack_s(2), 3.5));
    assert!(close(
        predicted_iteration_s(&t_b, &p, &groups, &ts, &tc),
        15.9
    ));
    // No layers: nothing to do.
    let empty = timeline(&[], &[], &[], &ts, &tc);
    assert_eq!(empty.iteration_end_s, 0.0);
}

#[test]
#[should_panic(expected = "contiguous")]
fn timeline_rejects_non_contiguous_groups() {
    timeline(
        &[1.0, 1.0],
        &[1, 1],
        &[vec![1], vec![0]],
        &|_, _| 0.0,
        &|_| 0.0,
    );
}

#[test]
fn check_groups_finds_gaps_and_missing_positions() {
    assert!(check_groups(&[vec![0, 1], vec![2]], 3).is_ok());
    assert!(check_groups(&[vec![0], vec![]], 1).is_err());
    assert!(check_groups(&[vec![0, 2]], 3).is_err());
    assert!(check_groups(&[vec![0]], 2).is_err());
}

// Two layers, t_b = [1, 1], p = [100, 100], t_s(d) = 0.1 + 0.001 d
// (t_s(100) = 0.2, t_s(200) = 0.3), t_c(d) = alpha + 0.01 d.
const TS_FIXED: f64 = 0.1;
fn ts2(d: usize, _k: usize) -> f64 {
    TS_FIXED + 0.001 * d as f64
}

#[test]
fn omgs_merges_when_saved_startup_exceeds_added_wait() {
    // alpha = 2: t_c(100) = 3, t_c(200) = 4.
    // Per layer: g0 ready 1, compress 1 -> 1.2, comm 1.2 -> 4.2;
    //            g1 ready 2, compress at max(2, 4.2) = 4.2 -> 4.4, comm -> 7.4.
    // Merge g0 with g1: slack[g0] = 0 (first group);
    //   t_wait = t_b[1] + t_s(200) - t_s(100) - t_s(100) - slack = 1 + 0.3 - 0.4 - 0 = 0.9
    //   t_save = t_c(100) + t_c(100) - t_c(200) = 3 + 3 - 4 = 2  -> 0.9 < 2: merge.
    // Merged: ready 2, compress 2 -> 2.3, comm 2.3 -> 6.3 (< 7.4).
    let t_b = [1.0, 1.0];
    let p = [100, 100];
    let tc = |d: usize| 2.0 + 0.01 * d as f64;
    let groups = per_layer(2);
    let tl = timeline(&t_b, &p, &groups, &ts2, &tc);
    assert!(close(tl.iteration_end_s, 7.4));
    let m = omgs_terms(&t_b, &p, &groups, &tl, 0, &ts2, &tc);
    assert!(
        close(m.t_wait_s, 0.9) && close(m.t_save_s, 2.0) && m.merges(),
        "{m:?}"
    );
    let plan = omgs(&t_b, &p, &ts2, &tc);
    assert_eq!(plan, single(2));
    assert!(close(
        predicted_iteration_s(&t_b, &p, &plan, &ts2, &tc),
        6.3
    ));
}

#[test]
fn omgs_keeps_layers_apart_when_merging_does_not_pay() {
    // alpha = 0.5: t_c(100) = 1.5, t_c(200) = 2.5.
    //   t_wait = 0.9 as above; t_save = 1.5 + 1.5 - 2.5 = 0.5 -> 0.9 > 0.5: no merge.
    // Per layer: g0 1 -> 1.2 -> 2.7; g1 compress at max(2, 2.7) = 2.7 -> 2.9 -> 4.4.
    // Merged would be: 2 -> 2.3 -> 4.8, worse, as the rule predicts.
    let t_b = [1.0, 1.0];
    let p = [100, 100];
    let tc = |d: usize| 0.5 + 0.01 * d as f64;
    let groups = per_layer(2);
    let tl = timeline(&t_b, &p, &groups, &ts2, &tc);
    let m = omgs_terms(&t_b, &p, &groups, &tl, 0, &ts2, &tc);
    assert!(
        close(m.t_wait_s, 0.9) && close(m.t_save_s, 0.5) && !m.merges(),
        "{m:?}"
    );
    assert_eq!(omgs(&t_b, &p, &ts2, &tc), per_layer(2));
    assert!(close(
        predicted_iteration_s(&t_b, &p, &per_layer(2), &ts2, &tc),
        4.4
    ));
    assert!(close(
        predicted_iteration_s(&t_b, &p, &single(2), &ts2, &tc),
        4.8
    ));
}

#[test]
fn omgs_slack_makes_a_later_merge_pay() {
    // t_b = [1, 1, 1], p = [100; 3], t_s = 0, t_c(d) = 0.5 + 0.02 d:
    // t_c(100) = 2.5, t_c(200) = 4.5, so t_save = 0.5 for any two single layers.
    // Per layer: g0 ready 1, comm 1 -> 3.5; g1 ready 2, comm 3.5 -> 6 (slack 1.5);
    //            g2 ready 3, comm 6 -> 8.5.
    // g0+g1: t_wait = t_b[1] - slack[g0] = 1 - 0 = 1 >= 0.5: keep g0 alone.
    // g1+g2: t_wait = t_b[2] - min(slack[g1], t_b[2]) = 1 - min(1.5, 1) = 0 < 0.5: merge.
    // Plan {0}, {1, 2}: g1 ready 3, comm max(3, 3.5) = 3.5 -> 3.5 + 4.5 = 8 (< 8.5).
    let t_b = [1.0, 1.0, 1.0];
    let p = [100, 100, 100];
    let tc = |d: usize| 0.5 + 0.02 * d as f64;
    let groups = per_layer(3);
    let tl = timeline(&t_b, &p, &groups, &|_, _| 0.0, &tc);
    assert!(close(tl.slack_s(1), 1.5));
    let m0 = omgs_terms(&t_b, &p, &groups, &tl, 0, &|_, _| 0.0, &tc);
    let m1 = omgs_terms(&t_b, &p, &groups, &tl, 1, &|_, _| 0.0, &tc);
    assert!(close(m0.t_wait_s, 1.0) && !m0.merges(), "{m0:?}");
    assert!(
        close(m1.t_wait_s, 0.0) && close(m1.t_save_s, 0.5) && m1.merges(),
        "{m1:?}"
    );
    let plan = omgs(&t_b, &p, &|_, _| 0.0, &tc);
    assert_eq!(plan, vec![vec![0], vec![1, 2]]);
    assert!(close(
        predicted_iteration_s(&t_b, &p, &plan, &|_, _| 0.0, &tc),
        8.0
    ));
    assert!(close(
        predicted_iteration_s(&t_b, &p, &groups, &|_, _| 0.0, &tc),
        8.5
    ));
    // Same plan through MG-WFBP (t_s = 0).
    assert_eq!(mgwfbp(&t_b, &p, &tc), plan);
}

fn resnetish() -> (Vec<f64>, Vec<usize>) {
    // 50 layers with varied sizes and backward times (deterministic).
    let p: Vec<usize> = (0..50)
        .map(|i| 1000 + (i * 7919 % 97) * 3000 + if i % 10 == 0 { 2_000_000 } else { 0 })
        .collect();
    let t_b: Vec<f64> = p.iter().map(|&d| 1e-5 + d as f64 * 2e-10).collect();
    (t_b, p)
}

#[test]
fn mgwfbp_extremes() {
    let (t_b, p) = resnetish();
    let huge = dense_allreduce_cost(AlphaBeta::new(1e3, 1e-10));
    assert_eq!(mgwfbp(&t_b, &p, &huge), single(p.len()));
    let zero = dense_allreduce_cost(AlphaBeta::new(0.0, 1e-10));
    assert_eq!(mgwfbp(&t_b, &p, &zero), per_layer(p.len()));
    // A middle alpha merges some but not all, and never predicts worse than per layer.
    let mid = dense_allreduce_cost(AlphaBeta::new(5e-5, 1e-10));
    let plan = mgwfbp(&t_b, &p, &mid);
    assert!(plan.len() > 1 && plan.len() < p.len(), "{}", plan.len());
    check_groups(&plan, p.len()).unwrap();
    let pl = predicted_iteration_s(&t_b, &p, &per_layer(p.len()), &|_, _| 0.0, &mid);
    assert!(predicted_iteration_s(&t_b, &p, &plan, &|_, _| 0.0, &mid) <= pl + 1e-12);
}

#[test]
fn layerfusion_is_never_worse_than_per_layer_single_or_fixed_thresholds() {
    let (t_b, p) = resnetish();
    let sizes: Vec<u64> = p.iter().map(|&d| 4 * d as u64).collect();
    for (alpha, beta, ts_fixed, ts_per) in [
        (0.0, 1e-10, 0.0, 0.0),
        (5e-5, 1e-10, 0.0, 0.0),
        (1e-3, 1e-9, 1e-5, 1e-10),
        (1e-6, 1e-11, 5e-5, 5e-9),
        (1e3, 1e-10, 0.0, 0.0),
    ] {
        let ts = move |d: usize, _k: usize| {
            if d == 0 {
                0.0
            } else {
                ts_fixed + ts_per * d as f64
            }
        };
        let tc = move |d: usize| alpha + beta * (4 * d) as f64;
        let plan = layerfusion(&t_b, &p, &ts, &tc);
        check_groups(&plan, p.len()).unwrap();
        let best = predicted_iteration_s(&t_b, &p, &plan, &ts, &tc);
        let mut others = vec![
            per_layer(p.len()),
            single(p.len()),
            omgs(&t_b, &p, &ts, &tc),
        ];
        for mib in [1u64, 4, 25] {
            others.push(buckets(
                &sizes,
                Fusion::Bytes(mib << 20),
                1.0,
                crate::compress::CloseRule::AtThreshold,
            ));
        }
        for o in &others {
            let t = predicted_iteration_s(&t_b, &p, o, &ts, &tc);
            assert!(
                best <= t + 1e-9,
                "alpha {alpha}: layerfusion {best} > {t} for {} groups",
                o.len()
            );
        }
    }
}

#[test]
fn layerfusion_matches_brute_force_on_small_cases() {
    // All 2^(L-1) contiguous partitions of L = 6 layers, a few cost settings.
    let t_b = [0.3, 0.1, 0.5, 0.2, 0.4, 0.1];
    let p = [50, 400, 10, 300, 120, 800];
    for (alpha, beta, ts_fixed) in [
        (0.2, 1e-3, 0.05),
        (0.0, 1e-3, 0.0),
        (1.0, 1e-4, 0.0),
        (0.05, 5e-3, 0.2),
    ] {
        let ts = move |d: usize, _k: usize| ts_fixed + 1e-4 * d as f64;
        let tc = move |d: usize| alpha + beta * d as f64;
        let mut brute = f64::INFINITY;
        for mask in 0u32..(1 << 5) {
            let mut groups = vec![vec![0]];
            for i in 1..6 {
                if mask & (1 << (i - 1)) != 0 {
                    groups.push(vec![i]);
                } else {
                    groups.last_mut().unwrap().push(i);
                }
            }
            brute = brute.min(predicted_iteration_s(&t_b, &p, &groups, &ts, &tc));
        }
        let plan = layerfusion(&t_b, &p, &ts, &tc);
        let got = predicted_iteration_s(&t_b, &p, &plan, &ts, &tc);
        assert!(
            close(got, brute),
            "alpha {alpha}: {got} vs brute force {brute}"
        );
    }
}

#[test]
fn planners_handle_empty_and_single_layer() {
    let tc = |d: usize| 1.0 + d as f64;
    assert!(omgs(&[], &[], &|_, _| 0.0, &tc).is_empty());
    assert!(layerfusion(&[], &[], &|_, _| 0.0, &tc).is_empty());
    assert_eq!(omgs(&[1.0], &[5], &|_, _| 0.0, &tc), vec![vec![0]]);
    assert_eq!(layerfusion(&[1.0], &[5], &|_, _| 0.0, &tc), vec![vec![0]]);
    assert_eq!(mgwfbp(&[1.0], &[5], &tc), vec![vec![0]]);
}

/// Under its own cost model a planner's choice is never rated worse than its own plan
/// or any simple plan (none, single, 1/4/25/64 MiB), and on instances where the
/// planner's plan is worse, a simple plan replaces it and says so.
#[test]
fn choice_is_never_worse_than_the_simple_plans() {
    use crate::schedule::plan::{buckets, Fusion, PlannerKind};
    use rand::{Rng, SeedableRng};
    let mut rng = rand_pcg::Pcg64::seed_from_u64(5);
    let mut replaced = 0;
    for _ in 0..300 {
        let n = rng.gen_range(1..40);
        let t_b: Vec<f64> = (0..n).map(|_| rng.gen_range(0.0..2e-3)).collect();
        let p: Vec<usize> = (0..n).map(|_| rng.gen_range(1..3_000_000)).collect();
        let (alpha, beta) = (rng.gen_range(0.0..5e-3), rng.gen_range(0.0..4e-9));
        let (fixed, per) = (rng.gen_range(0.0..1e-3), rng.gen_range(0.0..2e-9));
        let ts = move |d: usize, k: usize| k as f64 * fixed + per * d as f64;
        let tc = move |d: usize| alpha + beta * (4 * d) as f64;
        let bytes: Vec<u64> = p.iter().map(|&d| 4 * d as u64).collect();
        let rule = crate::compress::CloseRule::AtThreshold;
        for kind in [
            PlannerKind::Mgwfbp,
            PlannerKind::Omgs,
            PlannerKind::LayerFusion,
        ] {
            let c = choose(kind, &t_b, &p, &ts, &tc);
            check_groups(&c.groups, n).unwrap();
            assert!(close(
                c.predicted_s,
                predicted_iteration_s(&t_b, &p, &c.groups, &ts, &tc)
            ));
            let own = match kind {
                PlannerKind::Mgwfbp => mgwfbp(&t_b, &p, &tc),
                PlannerKind::Omgs => omgs(&t_b, &p, &ts, &tc),
                PlannerKind::LayerFusion => layerfusion(&t_b, &p, &ts, &tc),
            };
            let own_s = predicted_iteration_s(&t_b, &p, &own, &ts, &tc);
            assert!(c.predicted_s <= own_s + 1e-12);
            let mut simple = vec![per_layer(n), single(n)];
            for t in SIMPLE_THRESHOLDS_BYTES {
                simple.push(buckets(&bytes, Fusion::Bytes(t), 1.0, rule));
            }
            for g in &simple {
                let t = predicted_iteration_s(&t_b, &p, g, &ts, &tc);
                assert!(
                    c.predicted_s <= t + TIE_S,
                    "{kind:?}: chose {} > simple {t}",
                    c.predicted_s
                );
            }
            match &c.replaced {
                Some((_, s)) => {
                    replaced += 1;
                    assert!(close(*s, own_s) && c.predicted_s < own_s);
                }
                None => assert_eq!(c.groups, own),
            }
        }
    }
    // MG-WFBP decides without compression costs and OMGS greedily: some instances
    // must have been replaced, or the comparison is not exercised.
    assert!(
        replaced > 0,
        "no planner plan was ever rated worse than a simple plan"
    );
}

/// A planner's prediction is printed in plain units, not `5.4925e-1 s`.
#[test]
fn a_replaced_plan_names_the_prediction_in_plain_units() {
    let c = Choice {
        groups: vec![],
        predicted_s: 0.3,
        replaced: Some(("single".into(), 0.549_25)),
    };
    assert_eq!(
        plan_source_of(crate::schedule::plan::PlannerKind::Mgwfbp, &c),
        "single (mgwfbp predicted 549.250ms)"
    );
}

/// OMGS's merge terms by hand for groups of different sizes and tensor counts, under costs
/// that are not linear (so a term computed from the wrong group does not cancel): groups
/// {0} and {1, 2} of p = [10, 20, 30], t_b = [1, 1, 1]. Group 0 is ready at 1, group 1 at
/// 3 (delay 2); group 0 is the first, so no slack. a = 10, b = 50, ka = 1, kb = 2:
/// t_wait = 2 + t_s(60, 3) - t_s(10, 1) - t_s(50, 2), t_save = t_c(10) + t_c(50) - t_c(60)
/// (Shi et al., INFOCOM 2020, Sec. IV; issue 49: `groups[g + 1]` as `groups[g * 1]` passed).
#[test]
fn omgs_terms_by_hand_for_unequal_groups() {
    let t_s = |d: usize, k: usize| 1e-3 * (d * d) as f64 + 0.1 * (k * k) as f64;
    let t_c = |d: usize| 1.0 + 1e-4 * (d * d) as f64;
    let (t_b, p) = ([1.0, 1.0, 1.0], [10usize, 20, 30]);
    let groups = [vec![0], vec![1, 2]];
    let tl = timeline(&t_b, &p, &groups, &t_s, &t_c);
    let m = omgs_terms(&t_b, &p, &groups, &tl, 0, &t_s, &t_c);
    // t_s: 3.6 + 0.9 = 4.5; 0.1 + 0.1 = 0.2; 2.5 + 0.4 = 2.9. t_c: 1.01, 1.25, 1.36.
    assert!(close(m.t_wait_s, 2.0 + 4.5 - 0.2 - 2.9), "{m:?}");
    assert!(close(m.t_save_s, 1.01 + 1.25 - 1.36), "{m:?}");
}

/// A merge must gain more than TIE_S (its doc): a saving of exactly TIE_S over no added
/// wait does not merge (issue 49: `>` as `>=` passed).
#[test]
fn a_merge_gaining_exactly_the_tie_does_not_merge() {
    let at_tie = MergeTerms {
        t_wait_s: 0.0,
        t_save_s: TIE_S,
    };
    assert!(!at_tie.merges());
    let above = MergeTerms {
        t_wait_s: 0.0,
        t_save_s: 2.0 * TIE_S,
    };
    assert!(above.merges());
}

/// The simple thresholds a planner's plan is rated against, in bytes written out: 1 and
/// 4 MiB, PyTorch DDP's 25 MiB (`bucket_cap_mb` default) and Horovod's 64 MiB
/// (`HOROVOD_FUSION_THRESHOLD` default) (issue 49: `<<` as `>>` made them 0 and passed).
#[test]
fn simple_thresholds_are_1_4_25_and_64_mib() {
    assert_eq!(
        SIMPLE_THRESHOLDS_BYTES,
        [1_048_576, 4_194_304, 26_214_400, 67_108_864]
    );
}

/// A simple plan that only ties the planner's own plan does not replace it: with one
/// layer every plan is the same group, so the planner's is kept (`replaced` None; issue
/// 49: `t < own_s + TIE_S` for `- TIE_S` passed).
#[test]
fn a_tie_with_a_simple_plan_keeps_the_planners_plan() {
    use crate::schedule::plan::PlannerKind;
    let c = choose(PlannerKind::Mgwfbp, &[1.0], &[10], &|_, _| 1.0, &|d| {
        1e-3 * d as f64
    });
    assert_eq!(c.groups, vec![vec![0]]);
    assert_eq!(c.replaced, None);
}

/// Among simple plans that tie, the first in the rating order (none, single, 1, 4, 25,
/// 64 MiB) is kept. Two layers of 10 elements, t_b = [1, 0.1], t_c(d) = 0.001 d (no
/// startup: MG-WFBP never merges), t_s = 1 per group (rated only). Per layer (MG-WFBP's
/// plan and `none`): group 0 ready at 1, sent 2 to 2.01; group 1 ready at 1.1, starts at
/// 2.01, ends 3.02. One group (`single` and every threshold, 80 bytes in all): ready at
/// 1.1, sent 2.1 to 2.12. So `single` replaces MG-WFBP's plan, predicted 3.02 (issue 49:
/// a later tie, `<=`, replacing the first passed).
#[test]
fn among_tied_simple_plans_the_first_is_kept() {
    use crate::schedule::plan::PlannerKind;
    let c = choose(
        PlannerKind::Mgwfbp,
        &[1.0, 0.1],
        &[10, 10],
        &|_, _| 1.0,
        &|d| 1e-3 * d as f64,
    );
    assert_eq!(c.groups, vec![vec![0, 1]]);
    assert!(close(c.predicted_s, 2.12), "{c:?}");
    let (name, own_s) = c.replaced.expect("a simple plan is faster");
    assert_eq!(name, "single");
    assert!(close(own_s, 3.02), "{own_s}");
}

/// LayerFusion by hand where a group's element count decides the plan: p = [100, 1, 1],
/// t_b = [1, 1, 1], no compression, t_c(d) = 1 + 0.01 d. {0}, {1, 2}: group 0 sent 1 to 3,
/// group 1 (2 elements) ready at 3, sent to 4.02. Every other grouping ends at 5.02 (one
/// group: 102 elements from 3; {0}, {1}, {2} and {0, 1}, {2}: the last send starts at 4.01)
/// (issue 49: a group's elements `pre[j] + pre[i]` for `pre[j] - pre[i]` passed).
#[test]
fn layerfusion_by_hand_counts_each_groups_own_elements() {
    let g = layerfusion(&[1.0, 1.0, 1.0], &[100, 1, 1], &|_, _| 0.0, &|d| {
        1.0 + 0.01 * d as f64
    });
    assert_eq!(g, vec![vec![0], vec![1, 2]]);
}

/// LayerFusion's tie rule (its doc: "ties keep the smaller last group"): two layers ready
/// at 1 and 2, every send 1 s whatever its size: {0}, {1} ends at 3 (1 to 2, 2 to 3) and
/// {0, 1} at 3 too; the smaller last group wins (issue 49: `e < best[j] + TIE_S` passed).
#[test]
fn layerfusion_at_a_tie_keeps_the_smaller_last_group() {
    let g = layerfusion(&[1.0, 1.0], &[10, 10], &|_, _| 0.0, &|_| 1.0);
    assert_eq!(g, vec![vec![0], vec![1]]);
}

/// LayerFusion by hand where a group's tensor count decides the plan: t_b = [1, 10],
/// t_s = 0.5 s per tensor, t_c = 1 s. {0}, {1}: group 1 ready at 11, compressed to 11.5,
/// sent to 12.5; {0, 1}: ready at 11, compressed (2 tensors) to 12, sent to 13 (issue 49:
/// the count `j + i` for `j - i` passed).
#[test]
fn layerfusion_by_hand_charges_each_groups_own_tensor_count() {
    let g = layerfusion(&[1.0, 10.0], &[10, 10], &|_, k| 0.5 * k as f64, &|_| 1.0);
    assert_eq!(g, vec![vec![0], vec![1]]);
}
