//! Cost-model fusion planners (OMGS-SGD, MG-WFBP, Sketch-Fusion's LayerFusion; see
//! docs/methods.md, "Fusion, pipelining and planners (e2e)"): pure functions on a layer
//! timeline.
//!
//! **Conventions.** Layers are given in **backward order** (position 0 is the first
//! gradient to become ready, i.e. the last layer of the forward pass), as
//! [`super::plan::buckets`] takes them: `t_b[i]` is the backward time of position `i`
//! (s), `p[i]` its elements. A plan is a `Vec<Vec<usize>>` of positions, contiguous and
//! in order, covering `0..L` — the same shape `plan::buckets` returns. Costs are given
//! per group: `t_s(d, k)` the work besides communication for a group of `k` tensors with
//! `d` elements in all (compression, feedback and decompression of every round; `k`
//! carries per-call fixed costs; 0 for dense) and `t_c(d)` the communication time of
//! the group's message (e.g. [`crate::netmodel::AlphaBeta`] of the method's wire
//! bytes).
//!
//! **Timeline model** ([`timeline`]). Backward runs position after position from
//! time 0, so position `i`'s gradient is ready at `B_i = t_b[0] + ... + t_b[i]`. A
//! group is ready when its last position's backward ends. As in our engine
//! (engine/mod.rs), **one thread** compresses and then communicates bucket after bucket
//! (a single stream): a group's compression starts at `max(ready, end of the previous
//! group's communication)`, its communication follows the compression at once, and so
//! never starts before the previous one ends. Compression never delays backward.
//! `iteration_end_s` is measured from the start of backward (forward is not modelled)
//! to the end of the last communication.
//!
//! **OMGS-SGD's own model differs** (Shi et al., INFOCOM 2020; reference code
//! HKBU-HPML/OMGS-SGD, `_generate_groups_mgs`): there a group's top-k runs on the GPU in
//! line with the backward computation (the next layer's backward starts only after it),
//! and only the all-gathers run beside the computation, one after another, each starting
//! once its group's sparsification and the previous all-gather have ended. Here, as in
//! the e2e engine, compression runs on the communication thread, serialised with the
//! communication; the merge test ([`omgs_terms`]) is OMGS's, evaluated on this timeline
//! (docs/methods.md, "omgs").

/// Planner costs given in full, for a plan that is the same run to run: the exchange of a
/// group of `e` elements costs `rounds * alpha_s + beta_s_per_byte * e * wire bytes per
/// element`, its other work `calls * fixed_s + per_element_s * e`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FixedCosts {
    pub alpha_s: f64,
    pub beta_s_per_byte: f64,
    pub per_element_s: f64,
    pub fixed_s: f64,
}

/// Differences below this (s) are ties: merges and DP improvements must gain more.
pub const TIE_S: f64 = 1e-12;

/// A modelled iteration under one plan (all times in s from the start of backward).
#[derive(Clone, Debug, PartialEq)]
pub struct Timeline {
    /// Per group: when its last gradient is ready (end of its last layer's backward).
    pub ready_s: Vec<f64>,
    /// Per group: when its compression starts (`max(ready, previous end_comm)`).
    pub start_compress_s: Vec<f64>,
    /// Per group: when its communication starts (compression start + `t_s`).
    pub start_comm_s: Vec<f64>,
    /// Per group: when its communication ends (communication start + `t_c`).
    pub end_comm_s: Vec<f64>,
    /// End of the whole backward.
    pub backward_end_s: f64,
    /// End of the last communication (or of backward, with no layers).
    pub iteration_end_s: f64,
}

impl Timeline {
    /// How long group `g` waits after it is ready for the previous group's
    /// communication to end (OMGS's `slack`): `max(0, end_comm[g-1] - ready[g])`, 0 for
    /// the first group.
    pub fn slack_s(&self, g: usize) -> f64 {
        if g == 0 {
            0.0
        } else {
            (self.end_comm_s[g - 1] - self.ready_s[g]).max(0.0)
        }
    }
}

/// `Ok` when `groups` are non-empty, contiguous, in order and cover `0..n` exactly.
pub fn check_groups(groups: &[Vec<usize>], n: usize) -> Result<(), String> {
    let mut next = 0usize;
    for (gi, g) in groups.iter().enumerate() {
        if g.is_empty() {
            return Err(format!("group {gi} is empty"));
        }
        for &i in g {
            if i != next {
                return Err(format!("group {gi} has position {i} where {next} was expected (groups must be contiguous, in backward order)"));
            }
            next += 1;
        }
    }
    if next != n {
        return Err(format!(
            "groups cover positions 0..{next} but there are {n} layers"
        ));
    }
    Ok(())
}

fn backward_ends(t_b: &[f64]) -> Vec<f64> {
    let mut acc = 0.0;
    t_b.iter()
        .map(|&t| {
            acc += t;
            acc
        })
        .collect()
}

/// The backward times a planner models for a schedule: `t_b` itself with pipelining
/// (wait-free backprop: a group is ready when its last layer's backward ends), else every
/// group ready when the whole backward ends (`[sum, 0, ..., 0]`): without pipelining the
/// engine starts the first exchange after backward, and a plan should be chosen, and its
/// time predicted, for that schedule.
pub fn planning_backward(t_b: &[f64], pipelining: bool) -> Vec<f64> {
    if pipelining || t_b.is_empty() {
        return t_b.to_vec();
    }
    let mut t = vec![0.0; t_b.len()];
    t[0] = t_b.iter().sum();
    t
}

fn group_elems(p: &[usize], g: &[usize]) -> usize {
    g.iter().map(|&i| p[i]).sum()
}

/// The modelled timeline of one plan (see the module docs for the model).
/// Panics when `t_b` and `p` differ in length or `groups` is not a contiguous,
/// in-order partition of the positions (a programming error).
pub fn timeline(
    t_b: &[f64],
    p: &[usize],
    groups: &[Vec<usize>],
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> Timeline {
    assert_eq!(
        t_b.len(),
        p.len(),
        "timeline: t_b has {} layers but p has {}",
        t_b.len(),
        p.len()
    );
    if let Err(e) = check_groups(groups, t_b.len()) {
        panic!("timeline: {e}");
    }
    let ends = backward_ends(t_b);
    let backward_end_s = ends.last().copied().unwrap_or(0.0);
    let k = groups.len();
    let mut tl = Timeline {
        ready_s: Vec::with_capacity(k),
        start_compress_s: Vec::with_capacity(k),
        start_comm_s: Vec::with_capacity(k),
        end_comm_s: Vec::with_capacity(k),
        backward_end_s,
        iteration_end_s: backward_end_s,
    };
    let mut free = 0.0f64; // when the communication thread is next free
    for g in groups {
        let ready = ends[*g.last().unwrap()];
        let d = group_elems(p, g);
        let sc = ready.max(free);
        let st = sc + t_s(d, g.len());
        let end = st + t_c(d);
        tl.ready_s.push(ready);
        tl.start_compress_s.push(sc);
        tl.start_comm_s.push(st);
        tl.end_comm_s.push(end);
        free = end;
    }
    tl.iteration_end_s = backward_end_s.max(free);
    tl
}

/// The modelled iteration end (s from the start of backward) of a plan.
pub fn predicted_iteration_s(
    t_b: &[f64],
    p: &[usize],
    groups: &[Vec<usize>],
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> f64 {
    timeline(t_b, p, groups, t_s, t_c).iteration_end_s
}

/// OMGS's two sides of merging group `g` with group `g + 1` under `groups`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MergeTerms {
    /// Waiting time merging adds: `t_b(next) + t_s(a+b) - t_s(a) - t_s(b) - slack` (with
    /// the groups' tensor counts: per-tensor fixed costs do not cancel by merging).
    pub t_wait_s: f64,
    /// Startup time merging saves: `t_c(a) + t_c(b) - t_c(a+b)`.
    pub t_save_s: f64,
}

impl MergeTerms {
    /// OMGS merges when the added wait is smaller than the saved startup (by more
    /// than [`TIE_S`], so exact ties — e.g. alpha = 0 — do not merge).
    pub fn merges(&self) -> bool {
        self.t_save_s - self.t_wait_s > TIE_S
    }
}

/// OMGS-SGD's merge test (Shi et al., INFOCOM 2020, §IV; docs/methods.md, "omgs") for
/// group `g` and the one after it in backward order, on the timeline `tl` of `groups`.
///
/// Index mapping: the paper numbers layers in forward order and walks backward from
/// layer L; its "layer l" and "the next one" `l-1` are our groups `g` and `g+1`, so
/// `t_b[l-1]` is the backward time of group `g+1` (`ready[g+1] - ready[g]`), `p_l` and
/// `p_{l-1}` the elements of groups `g` and `g+1`, and `slack[l]` is
/// [`Timeline::slack_s`]`(g)`: how long group `g` waits after it is ready for the
/// previous group's communication (single-stream model: the wait before its
/// compression, which delays its communication by as much). The slack is capped at
/// `t_b[l-1]` (gradcomp's cap, not OMGS's): beyond that the group would wait regardless,
/// and merging adds no wait (never a negative one), so with `t_save = 0` a merge never
/// pays.
pub fn omgs_terms(
    t_b: &[f64],
    p: &[usize],
    groups: &[Vec<usize>],
    tl: &Timeline,
    g: usize,
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> MergeTerms {
    debug_assert_eq!(t_b.len(), p.len());
    let a = group_elems(p, &groups[g]);
    let b = group_elems(p, &groups[g + 1]);
    let (ka, kb) = (groups[g].len(), groups[g + 1].len());
    let delay = tl.ready_s[g + 1] - tl.ready_s[g];
    let slack = tl.slack_s(g).min(delay);
    MergeTerms {
        t_wait_s: delay + t_s(a + b, ka + kb) - t_s(a, ka) - t_s(b, kb) - slack,
        t_save_s: t_c(a) + t_c(b) - t_c(a + b),
    }
}

/// OMGS-SGD's merge plan (Shi et al., INFOCOM 2020; docs/methods.md, "omgs"): starting
/// from one group per layer, walk the groups in backward order (from the first gradient
/// to be ready); merge the current group with the next while [`MergeTerms::merges`], then
/// move on. The timeline is recomputed after each merge. O(L^2) cost evaluations.
pub fn omgs(
    t_b: &[f64],
    p: &[usize],
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> Vec<Vec<usize>> {
    assert_eq!(
        t_b.len(),
        p.len(),
        "omgs: t_b has {} layers but p has {}",
        t_b.len(),
        p.len()
    );
    let mut groups: Vec<Vec<usize>> = (0..t_b.len()).map(|i| vec![i]).collect();
    let mut g = 0;
    while g + 1 < groups.len() {
        let tl = timeline(t_b, p, &groups, t_s, t_c);
        if omgs_terms(t_b, p, &groups, &tl, g, t_s, t_c).merges() {
            let next = groups.remove(g + 1);
            groups[g].extend(next);
        } else {
            g += 1;
        }
    }
    groups
}

/// Fusion thresholds (fp32 gradient bytes) a planner's plan is rated against, with "none"
/// and "single": 1 and 4 MiB, PyTorch DDP's 25 MiB and Horovod's 64 MiB.
pub const SIMPLE_THRESHOLDS_BYTES: [u64; 4] = [1 << 20, 4 << 20, 25 << 20, 64 << 20];

/// What [`choose`] returns.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    pub groups: Vec<Vec<usize>>,
    /// The modelled iteration end of `groups` ([`predicted_iteration_s`], full costs).
    pub predicted_s: f64,
    /// `None` when the planner's plan was kept, else the simple plan that replaced it
    /// (`none`, `single`, `25MiB`, ...) and the planner's own prediction.
    pub replaced: Option<(String, f64)>,
}

/// The plan of `kind`'s own algorithm with its modelled iteration end, never replaced by a
/// simple plan: what the paper ran (e.g. OMGS-SGD's merge for a headline that reports it;
/// `simulate --planner-fallback off`).
pub fn own(
    kind: crate::schedule::plan::PlannerKind,
    t_b: &[f64],
    p: &[usize],
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> Choice {
    use crate::schedule::plan::PlannerKind;
    let groups = match kind {
        PlannerKind::Mgwfbp => mgwfbp(t_b, p, t_c),
        PlannerKind::Omgs => omgs(t_b, p, t_s, t_c),
        PlannerKind::LayerFusion => layerfusion(t_b, p, t_s, t_c),
    };
    let predicted_s = predicted_iteration_s(t_b, p, &groups, t_s, t_c);
    Choice {
        groups,
        predicted_s,
        replaced: None,
    }
}

/// Plan with `kind`, then rate its plan and the simple ones (one group per layer, one
/// group, [`SIMPLE_THRESHOLDS_BYTES`] over the layers' fp32 bytes `4 p`) under the same
/// full cost model, and keep the planner's plan unless a simple plan is predicted faster
/// by more than [`TIE_S`]: a planner never returns a plan its own model rates worse than
/// the plans a user would try by hand. MG-WFBP, the dense planner, decides with no
/// compression cost (as published) but is rated with `t_s` like the others. Engine and
/// simulator both plan through this.
pub fn choose(
    kind: crate::schedule::plan::PlannerKind,
    t_b: &[f64],
    p: &[usize],
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> Choice {
    use crate::schedule::plan::{buckets, Fusion};
    let Choice {
        groups,
        predicted_s: own_s,
        ..
    } = own(kind, t_b, p, t_s, t_c);
    let bytes: Vec<u64> = p.iter().map(|&d| 4 * d as u64).collect();
    let rule = crate::compress::CloseRule::AtThreshold;
    let mut simple = vec![
        (
            Fusion::None.to_string(),
            buckets(&bytes, Fusion::None, 1.0, rule),
        ),
        (
            Fusion::Single.to_string(),
            buckets(&bytes, Fusion::Single, 1.0, rule),
        ),
    ];
    for t in SIMPLE_THRESHOLDS_BYTES {
        let f = Fusion::Bytes(t);
        simple.push((f.to_string(), buckets(&bytes, f, 1.0, rule)));
    }
    let mut best: Option<(String, Vec<Vec<usize>>, f64)> = None;
    for (name, g) in simple {
        if g.is_empty() {
            continue;
        }
        let t = predicted_iteration_s(t_b, p, &g, t_s, t_c);
        if t < own_s - TIE_S && best.as_ref().map_or(true, |b| t < b.2 - TIE_S) {
            best = Some((name, g, t));
        }
    }
    match best {
        None => Choice {
            groups,
            predicted_s: own_s,
            replaced: None,
        },
        Some((name, g, t)) => Choice {
            groups: g,
            predicted_s: t,
            replaced: Some((name, own_s)),
        },
    }
}

/// MG-WFBP's merge plan for dense S-SGD (Shi et al., INFOCOM 2019): the OMGS planner
/// with no compression (`t_s = 0`) and `t_c` the dense all-reduce of a group's elements.
pub fn mgwfbp(t_b: &[f64], p: &[usize], t_c: &dyn Fn(usize) -> f64) -> Vec<Vec<usize>> {
    omgs(t_b, p, &|_, _| 0.0, t_c)
}

/// `t_c` of an fp32 dense all-reduce under an alpha-beta model: `alpha + beta * 4 d`.
/// The `plan_source` of a planner's choice: the planner's name when its plan was kept,
/// else `SIMPLE (PLANNER predicted T)`, T in plain units, e.g. `single (mgwfbp predicted 549.250ms)`.
pub fn plan_source_of(kind: crate::schedule::plan::PlannerKind, c: &Choice) -> String {
    let name = crate::schedule::plan::Fusion::Planner(kind).to_string();
    match &c.replaced {
        None => name,
        Some((simple, own_s)) => format!(
            "{simple} ({name} predicted {})",
            crate::units::fmt_seconds(*own_s)
        ),
    }
}

#[cfg(test)]
fn dense_allreduce_cost(ab: crate::netmodel::AlphaBeta) -> impl Fn(usize) -> f64 {
    move |d| ab.time_elements_s(d, 4.0)
}

/// Sketch-Fusion's LayerFusion (Dai et al., JPDC 2024; docs/methods.md, "layerfusion"),
/// our reconstruction (each choice under "Reconstructed choices" there): the contiguous
/// grouping that **minimises the modelled iteration end**
/// ([`predicted_iteration_s`]: backward times, then per group the sketch/compression
/// cost `t_s` and the all-reduce of the sketch `t_c`, single stream). No
/// hyper-parameter: the plan follows from the costs alone.
///
/// Exact dynamic programme over prefixes, O(L^2) cost evaluations: `E[0] = 0`,
/// `E[j] = min_{i<j} max(B_{j-1}, E[i]) + t_s(P[i..j], j - i) + t_c(P[i..j])`, where `E[j]` is
/// the earliest end of communication of the first `j` positions and `P[i..j]` the
/// elements of positions `i..j`. Optimal because a group's end is non-decreasing in the
/// previous group's end, so an optimal plan's prefixes are optimal. Ties (within
/// [`TIE_S`]) keep the smaller last group, i.e. more, earlier buckets.
pub fn layerfusion(
    t_b: &[f64],
    p: &[usize],
    t_s: &dyn Fn(usize, usize) -> f64,
    t_c: &dyn Fn(usize) -> f64,
) -> Vec<Vec<usize>> {
    assert_eq!(
        t_b.len(),
        p.len(),
        "layerfusion: t_b has {} layers but p has {}",
        t_b.len(),
        p.len()
    );
    let n = t_b.len();
    if n == 0 {
        return Vec::new();
    }
    let ends = backward_ends(t_b);
    let mut pre = vec![0usize; n + 1];
    for i in 0..n {
        pre[i + 1] = pre[i] + p[i];
    }
    let mut best = vec![f64::INFINITY; n + 1];
    let mut from = vec![0usize; n + 1];
    best[0] = 0.0;
    for j in 1..=n {
        let ready = ends[j - 1];
        for i in (0..j).rev() {
            let d = pre[j] - pre[i];
            let e = ready.max(best[i]) + t_s(d, j - i) + t_c(d);
            if e < best[j] - TIE_S {
                best[j] = e;
                from[j] = i;
            }
        }
    }
    let mut groups = Vec::new();
    let mut j = n;
    while j > 0 {
        let i = from[j];
        groups.push((i..j).collect());
        j = i;
    }
    groups.reverse();
    groups
}

#[cfg(test)]
mod tests;
