//! The planners' costs in an e2e run (docs/methods.md, "Fusion, pipelining and planners
//! (e2e)", "Costs the planners are given"): given in full, fitted from a micro-comm CSV,
//! or calibrated here by real exchanges and one real step of every tensor, then handed
//! to [`planner::choose`].

use super::exec;
use super::{E2eSetup, TensorSpec};
use crate::comm::exchange::Exchange;
use crate::comm::World;
use crate::compress::{Wire, WireLen};
use crate::error::{Error, Result};
use crate::schedule::plan::PlannerKind;
use crate::schedule::planner;
use ndarray::ArrayViewMut2;

/// Plan buckets with a cost-model planner ([`planner::choose`]). Costs are given in full
/// (`s.planner_costs`), or come from `s.cost_comm` (fitted from a micro-comm CSV) or are
/// calibrated here ([`calibrate`]): the exchange of the method's collective up to the
/// largest message a plan sends (one to three regimes), and one real step of every tensor
/// (every round's compress + feedback and the copies, the exchange, then decompress of
/// what every rank sent: the work the engine does besides communication), fitted as
/// `fixed_s per call + per_element_s * elements`. Parameters are max-reduced over ranks
/// so every rank plans the same buckets. `t_c(e) = rounds * t(e * (wire bytes per
/// element) / rounds)`, `t` the collective's [`crate::netmodel::CommFit`] (one
/// alpha-beta line, or two or three regimes); `t_s(e, k)` charges `k` calls (one for merged
/// compression); the backward times as the schedule that runs sees them
/// ([`planner::planning_backward`]).
pub(super) fn plan_with_costs(
    world: &World,
    s: &E2eSetup,
    grads: Option<&[ndarray::Array2<f32>]>,
    comp: &mut dyn crate::compress::Compressor,
    kind: PlannerKind,
    bwd_order: &[usize],
    bwd_times: &[f64],
) -> Result<planner::Choice> {
    use crate::netmodel::{AlphaBeta, CommFit};
    let rounds = comp.rounds();
    // Wire bytes per gradient element, from the declared capacities.
    let (mut wire, mut elems) = (0usize, 0usize);
    let mut cap = WireLen::default();
    for (t, ts) in s.tensors.iter().enumerate() {
        elems += ts.numel();
        for r in 0..rounds {
            let c = comp.wire_capacity(t, r);
            wire += c.bytes();
            cap = cap.max(c);
        }
    }
    let bytes_per_elem = wire as f64 / elems.max(1) as f64;
    let (fit, per_element_s, fixed_s) = match s.planner_costs {
        Some(fc) => (
            CommFit::line(AlphaBeta::new(fc.alpha_s, fc.beta_s_per_byte)),
            fc.per_element_s,
            fc.fixed_s,
        ),
        None => {
            // The largest message a candidate plan sends: the whole model in one group.
            let max_words = wire.div_ceil(4 * rounds.max(1));
            calibrate(world, s, grads, comp, cap, max_words)?
        }
    };
    // Device compression: the work besides communication is the device's, a line fitted
    // to each tensor's kernels (every round's compress and decompress).
    let (per_element_s, fixed_s) = match (s.compress_on, s.device_costs) {
        (crate::devcost::CompressOn::Device, Some(d)) => {
            let points: Vec<(f64, f64)> = s
                .tensors
                .iter()
                .enumerate()
                .map(|(t, ts)| {
                    let shape = (ts.rows, ts.cols);
                    (
                        ts.numel() as f64,
                        d.unit_s(comp, t, shape, rounds, 0, world.size),
                    )
                })
                .collect();
            let c = crate::netmodel::CompressCost::fit(&points)
                .map(|(c, _)| c)
                .unwrap_or_default();
            (c.per_element_s, c.fixed_s.max(0.0))
        }
        _ => (per_element_s, fixed_s),
    };
    let p: Vec<usize> = bwd_order.iter().map(|&t| s.tensors[t].numel()).collect();
    let per_round = rounds.max(1) as f64;
    let t_c = move |e: usize| per_round * fit.time_s(e as f64 * bytes_per_elem / per_round);
    let merge = s.merge;
    let t_s = move |e: usize, k: usize| {
        let calls = if merge { 1 } else { k };
        calls as f64 * fixed_s + per_element_s * e as f64
    };
    let t_b = planner::planning_backward(bwd_times, s.pipelining);
    Ok(planner::choose(kind, &t_b, &p, &t_s, &t_c))
}

/// Planner costs measured now (see [`plan_with_costs`]): the exchange's fit (from
/// `s.cost_comm`, or calibrated at sizes up to `max_words`, the largest message a plan
/// can send) and `(per_element_s, fixed_s)` of one real step of every tensor in backward
/// order from `grads` (memory, not cache, as in the iterations), every copy the engine
/// makes besides communication included: the append into the bucket's wire and, for
/// merged compression, the pack and unpack copies. Max-reduced over ranks so every rank
/// plans alike.
fn calibrate(
    world: &World,
    s: &E2eSetup,
    grads: Option<&[ndarray::Array2<f32>]>,
    comp: &mut dyn crate::compress::Compressor,
    cap: WireLen,
    max_words: usize,
) -> Result<(crate::netmodel::CommFit, f64, f64)> {
    use crate::netmodel::CompressCost;
    let rounds = comp.rounds();
    let agg = comp.aggregation();
    let effective = s.collective.effective(agg);
    let fit = match s
        .cost_comm
        .and_then(|c| c.get(effective, world.size).copied())
    {
        Some(fit) => fit,
        None => {
            let exact = (0..s.tensors.len()).all(|t| comp.wire_capacity(t, 0).gather_exact);
            calibrate_comm(world, s.collective, agg, exact, max_words)?
        }
    };
    // Work besides communication: one real step per tensor (outside timed regions).
    let m = s.tensors.len();
    let mut points = Vec::with_capacity(m);
    let mut w = Wire::with_touched_capacity(cap);
    let mut bucket = Wire::with_touched_capacity(cap);
    let mut ex = Exchange::with_mode(world, cap, s.collective)?;
    let numel_max = s.tensors.iter().map(TensorSpec::numel).max().unwrap_or(0);
    let mut out = vec![0f32; numel_max];
    let mut packed = if s.merge {
        vec![0f32; numel_max]
    } else {
        Vec::new()
    };
    comp.begin_step(0);
    for t in (0..m).rev() {
        let ts = &s.tensors[t];
        let generated;
        let g = match grads {
            Some(gs) => gs[t].view(),
            None => {
                generated = crate::measure::tensors::gradient(
                    crate::measure::shape::Shape {
                        rows: ts.rows,
                        cols: ts.cols,
                    },
                    s.seed ^ t as u64,
                    1,
                    world.rank,
                );
                generated.view()
            }
        };
        let mut work_s = 0.0;
        // Time dilation: host work stretched to K x its CPU time as the engine's is, and
        // every time / K (src/measure/dilation.rs), so the costs are in the backward
        // times' (emulated) seconds.
        let d = world.dilation();
        if s.merge {
            // Op::Pack: the gradient into the merged buffer, the copy the engine makes.
            let src = g
                .as_slice()
                .ok_or_else(|| Error::Runtime("gradient not contiguous".into()))?;
            let t0 = world.time();
            let span = d.start();
            packed[..src.len()].copy_from_slice(src);
            d.stretch(span);
            work_s += d.emulated_s(world.time() - t0);
        }
        for r in 0..rounds {
            let t0 = world.time();
            let span = d.start();
            comp.compress(t, r, g, &mut w)?;
            comp.feedback(t, r)?;
            bucket.clear();
            exec::append(&mut bucket, &w);
            d.stretch(span);
            work_s += d.emulated_s(world.time() - t0);
            let exact = comp.wire_capacity(t, r).exact_gather_of(comp.name(), &w)?;
            ex.run(world, &w, exact, |agg, off, inc, own| {
                comp.ring_merge(t, agg, off, inc, own).map_err(Error::from)
            })?;
            let view = ArrayViewMut2::from_shape((ts.rows, ts.cols), &mut out[..ts.numel()])
                .map_err(|e| Error::Runtime(e.to_string()))?;
            let t1 = world.time();
            let span = d.start();
            comp.decompress(t, r, &ex.received(), view)?;
            d.stretch(span);
            work_s += d.emulated_s(world.time() - t1);
        }
        if s.merge {
            // Op::Unpack: the merged result back into the bucket's tensors.
            let t0 = world.time();
            let span = d.start();
            packed[..ts.numel()].copy_from_slice(&out[..ts.numel()]);
            d.stretch(span);
            work_s += d.emulated_s(world.time() - t0);
        }
        points.push((ts.numel() as f64, work_s));
    }
    let cc = CompressCost::fit_sums(&points)
        .map(|(c, _)| c)
        .unwrap_or_default();
    let mut comm = fit.to_params();
    world.max_in_place(&mut comm);
    let fit = crate::netmodel::CommFit::from_params(comm);
    let mut params = [cc.per_element_s, cc.fixed_s];
    world.max_in_place(&mut params);
    Ok((fit, params[0], params[1].max(0.0)))
}

/// The cost of the exchange a method uses, measured now: messages from 4 KiB up to
/// `max_words` words (at least 4 MiB, at most 256 MiB, and for gathers at most 256 MiB
/// received by a rank) in steps of 4x, median of 5 after
/// one warm-up (of 3 above 4 MiB), max over ranks; one alpha-beta line or two or three regimes
/// ([`CommFit::fit`](crate::netmodel::CommFit::fit)): a shared-memory or shaped
/// link prices a message in cache, or under a burst, differently from a large one.
fn calibrate_comm(
    world: &World,
    mode: crate::comm::exchange::CollectiveMode,
    agg: crate::compress::Aggregation,
    gather_exact: bool,
    max_words: usize,
) -> Result<crate::netmodel::CommFit> {
    use crate::compress::Aggregation as A;
    // A gather receives every rank's message: keep the largest n-fold receive at 256 MiB.
    use crate::comm::exchange::CollectiveMode as M;
    let gathers = agg == A::AllGather || matches!(mode, M::AllGather | M::Ps);
    let max_words = if gathers {
        max_words.min((1 << 26) / world.size.max(1))
    } else {
        max_words
    };
    let sizes = calibration_sizes_words(max_words);
    let cap = *sizes.last().unwrap_or(&1);
    let wl = WireLen::of(agg, cap, gather_exact);
    let mut ex = Exchange::with_mode(world, wl, mode)?;
    let mut w = Wire::with_touched_capacity(wl);
    let mut points = Vec::new();
    for &n in &sizes {
        w.clear();
        match agg {
            A::AllReduce => w.sum_f32.resize(n, 1.0),
            A::AllGather => w.gather_u32.resize(n, 1),
            A::Ring => w.ring_u32.resize(n, 1),
        }
        let mut times = [0f64; 6];
        let reps = if n > 1 << 20 { 4 } else { times.len() };
        for x in times[..reps].iter_mut() {
            world.barrier();
            let t0 = world.time();
            ex.run(
                world,
                &w,
                gather_exact,
                |_, _, inc: &[u32], own: &mut [u32]| {
                    for (o, i) in own.iter_mut().zip(inc) {
                        *o ^= *i;
                    }
                    Ok(())
                },
            )?;
            // Under time dilation in emulated seconds (the link is shaped to rate / K).
            *x = world.dilation().emulated_s(world.time() - t0);
        }
        world.max_in_place(&mut times);
        let mut t = times[1..reps].to_vec();
        t.sort_by(f64::total_cmp);
        points.push(((4 * n) as f64, t[t.len() / 2]));
    }
    crate::netmodel::CommFit::fit(&points, "the collective's calibration")
        .map(|(f, _)| f)
        .map_err(|e| Error::Runtime(format!("calibrating the collective: {e}")))
}

/// Message sizes (words) of [`calibrate_comm`]: 4 KiB times powers of 4 below `top`,
/// then `top` itself: `max_words` clamped to 4 MiB..256 MiB (a message beyond the cache
/// costs more per byte than one in it, so the largest a plan sends is measured).
fn calibration_sizes_words(max_words: usize) -> Vec<usize> {
    let top = max_words.clamp(1 << 20, 1 << 26);
    let mut sizes = vec![1usize << 10];
    while sizes.last().is_some_and(|&s| s * 4 < top) {
        sizes.push(sizes.last().map_or(top, |&s| s * 4));
    }
    sizes.push(top);
    sizes
}

#[cfg(test)]
mod tests {
    use super::calibration_sizes_words;

    /// The calibration reaches the largest message a plan sends (ResNet-50's 25.6 M
    /// gradient words in one S-SGD bucket; at most 256 MiB), never below 4 MiB, in steps
    /// of 4 from 4 KiB: enough sizes on each side for a two-regime fit.
    #[test]
    fn calibration_sizes_span_the_plans_messages() {
        let s = calibration_sizes_words(25_557_032);
        assert_eq!(s.first(), Some(&(1 << 10)));
        assert_eq!(s.last(), Some(&25_557_032));
        assert!(s[..s.len() - 1].windows(2).all(|w| w[1] == 4 * w[0]));
        assert_eq!(s[s.len() - 2], 1 << 24);
        assert_eq!(calibration_sizes_words(10).last(), Some(&(1 << 20)));
        assert_eq!(calibration_sizes_words(1 << 20).len(), 6);
        assert_eq!(calibration_sizes_words(3 << 20).last(), Some(&(3 << 20)));
        assert_eq!(calibration_sizes_words(1 << 30).last(), Some(&(1 << 26)));
        assert!(calibration_sizes_words(0).len() >= 6);
    }
}
