//! The virtual clock of one iteration (part of [`super`], the simulator): a bucket's
//! compression [`Unit`]s and their device times, the emulated device's stream
//! ([`DevStream`]), and the walk of the schedule's operations that charges each by the
//! cost model ([`simulate_clock`]).

use super::credit::{self, Credit};
use super::wire::{self, UnitWire};
use super::{exchange_collectives, exchange_s, gather_scale, CostModel, Nets, SimCase, SimResult};
use crate::compress::WireLen;
use crate::devcost::DeviceCosts;
use crate::netmodel::CompressCost;
use crate::schedule::{self, Executed, Op as SchedOp};

/// One compression unit of a bucket: its elements, wire per round, and (device
/// compression) device seconds per round of compress and decompress.
pub(super) struct Unit {
    pub(super) elems: usize,
    /// Elements its compression selects over (the host cost's selection term).
    pub(super) selected: usize,
    pub(super) wire: UnitWire,
    pub(super) dev_s: Vec<[f64; 2]>,
}

/// Device seconds per phase and round of [compress, decompress] of a `shape` unit of
/// `case`'s compressor with kernels `k` ([`DeviceCosts::op_s`]).
pub(super) fn unit_device_s(
    d: &DeviceCosts,
    case: &SimCase,
    shape: (usize, usize),
    k: &wire::PhaseKernels,
) -> Vec<Vec<[f64; 2]>> {
    use crate::roofline::Stage;
    let n = case.world_size.max(1);
    let m = case.base_method.as_str();
    k.iter()
        .enumerate()
        .map(|(ph, rounds)| {
            rounds
                .iter()
                .enumerate()
                .map(|(r, [c, dc])| {
                    [
                        d.op_s(m, Stage::Compress, r, ph, shape, n, c),
                        d.op_s(m, Stage::Decompress, r, ph, shape, n, dc),
                    ]
                })
                .collect()
        })
        .collect()
}

/// The emulated device's stream on the virtual clock: the backward kernels in order from
/// the end of forward and, with device compression, compression kernels queued at time
/// `t` run at the first kernel boundary at or after `t` (after kernels queued before
/// them), delaying the remaining backward (a DDP communication hook launches on the
/// current stream once its bucket is ready; docs/methods.md, "Device kernels"). The
/// communication thread does not wait for them, except that a collective waits for the
/// compression kernels before it and the step for the last kernel. The engine's device
/// queue runs the same rule (src/engine/device.rs).
pub(super) struct DevStream<'a> {
    bwd: &'a [f64],
    /// `rest[p]`: backward time of positions `p..` (`rest[m] = 0`).
    rest: Vec<f64>,
    fwd_end: f64,
    /// When the last kernel run so far ends.
    free: f64,
    /// Next backward position to run.
    next: usize,
    /// End of each backward position run so far.
    ready: Vec<f64>,
}

impl<'a> DevStream<'a> {
    pub(super) fn new(fwd_end: f64, bwd: &'a [f64]) -> DevStream<'a> {
        let mut rest = vec![0.0; bwd.len() + 1];
        for p in (0..bwd.len()).rev() {
            rest[p] = rest[p + 1] + bwd[p];
        }
        DevStream {
            bwd,
            rest,
            fwd_end,
            free: fwd_end,
            next: 0,
            ready: Vec::with_capacity(bwd.len()),
        }
    }

    fn step(&mut self) {
        self.free += self.bwd[self.next];
        self.ready.push(self.free);
        self.next += 1;
    }

    /// When the first `k` gradients (backward order) are ready.
    pub(super) fn ready_s(&mut self, k: usize) -> f64 {
        while self.next < k {
            self.step();
        }
        if k == 0 {
            self.fwd_end
        } else {
            self.ready[k - 1]
        }
    }

    /// Run a kernel of `d` s requested at `t`; returns its end.
    pub(super) fn kernel(&mut self, t: f64, d: f64) -> f64 {
        // A backward kernel that started before the request finishes first.
        while self.next < self.bwd.len() && self.free < t {
            self.step();
        }
        self.free = self.free.max(t) + d;
        self.free
    }

    /// End of backward if no more kernels were inserted.
    pub(super) fn projected_bwd_end(&self) -> f64 {
        self.free + self.rest[self.next]
    }
}

/// The iteration `walk` gives in steady state. Without a link shaper, one walk; with
/// one (credit.rs), the credit at the iteration's start is what the previous identical
/// iteration left, found by repeating the walk from a full bucket until it stops moving
/// (the end credit does not decrease with the start credit and is bounded by the burst,
/// so the starts decrease to the fixed point; 1 byte is far below any message).
pub(super) fn steady_state(
    shaper: Option<credit::Shaper>,
    walk: impl Fn(Option<Credit>) -> (SimResult, f64),
) -> SimResult {
    let Some(shaper) = shaper else {
        return walk(None).0;
    };
    let mut start = shaper.burst_bytes;
    let mut out = walk(Some(Credit::new(shaper, start)));
    for _ in 0..50 {
        if (out.1 - start).abs() < 1.0 {
            break;
        }
        start = out.1;
        out = walk(Some(Credit::new(shaper, start)));
    }
    out.0
}

/// One iteration of `groups` (positions in backward order) with their units on the
/// virtual clock ([`simulate`](super::simulate)): the operations of [`schedule::iteration`], the list the
/// engine runs, each charged by the cost model: compression on the host, or (`device`)
/// as kernels on the device stream ([`DevStream`]); with a link shaper, each exchange on
/// the `credit` its link holds. Returns the iteration and the credit at its end (the next
/// iteration's start; 0 without a shaper).
#[allow(clippy::too_many_arguments)]
pub(super) fn simulate_clock(
    case: &SimCase,
    costs: &CostModel,
    nets: Nets,
    device: Option<&DeviceCosts>,
    bwd_times: &[f64],
    groups: &[Vec<usize>],
    bucket_units: &[Vec<Unit>],
    rounds: usize,
    mut credit: Option<Credit>,
) -> (SimResult, f64) {
    let wl = &case.workload;
    let m = bwd_times.len();
    let n = case.world_size.max(1);
    let mc = costs.method(&case.base_method);
    let per_round = |c: CompressCost, e: usize, sel: usize| c.time_s(e, sel) / rounds as f64;
    let gather_used = bucket_units
        .iter()
        .flatten()
        .any(|u| u.wire.iter().any(|l| l.gather_u32 > 0));

    // Virtual clock. Host effects (host.rs): the device starts `start_s` late, CPU
    // phases run at `cpu_share` of a core, a bucket's first exchange waits `sync_s` more,
    // and the communication thread's work runs `bwd_slowdown` times slower while
    // backward still runs.
    let host = &costs.host;
    let cpu = 1.0 / host.cpu_share;
    let fwd_end = host.start_s + wl.fwd_s;
    let mut dev = DevStream::new(fwd_end, bwd_times);
    let mut r = SimResult {
        fwd_s: fwd_end,
        buckets: groups.len(),
        ..SimResult::default()
    };
    let pb = costs.pack_s_per_byte;
    // Advance the clock by host work `work` (s at full speed) and add the elapsed time
    // to `phase`.
    let run = |clock: &mut f64, phase: &mut f64, work: f64, bwd_end: f64| {
        let t0 = *clock;
        *clock = advance(t0, work, bwd_end, host.bwd_slowdown);
        *phase += *clock - t0;
    };
    let buckets = schedule::buckets(groups, m, case.merge);
    let ops = schedule::iteration(&buckets, rounds, case.merge, case.pipelining, m);
    let bucket_elems = |bi: usize| -> usize { bucket_units[bi].iter().map(|u| u.elems).sum() };
    let mut clock = 0.0;
    // Did the communication thread wait for the device before this bucket?
    let mut waited = false;
    let mut w = WireLen::default();
    let mut executed = Vec::with_capacity(ops.len());
    // Device compression: end of the last kernel queued (the communication thread
    // queues kernels without waiting for them).
    let mut queue_end = 0.0f64;
    // Device compression on a shared core (cpu_share < 1): the engine pauses the device
    // clock for the rank's host work, which takes `cpu` times its time at full speed; the
    // rank's own share is paused, the rest (the cores it waits for other ranks' work) is
    // spent inside its next collective, where the ranks that computed last run last
    // (measured at 4 ranks on 2 cores: extra exchange time about 1x the host work;
    // host.rs). `paused` holds that rest until the next exchange.
    let mut paused = 0.0f64;
    let unpaused = |charged: f64| charged * (1.0 - host.cpu_share.min(1.0));
    for op in ops {
        let mut wire = WireLen::default();
        let bwd_end = dev.projected_bwd_end();
        match op {
            SchedOp::Wait { bucket, ready: k } => {
                let t = dev.ready_s(k);
                waited = if case.pipelining {
                    t > clock
                } else {
                    bucket == 0
                };
                clock = f64::max(clock, t);
            }
            SchedOp::Pack { bucket } | SchedOp::Unpack { bucket } => {
                let e = bucket_elems(bucket);
                match device {
                    // One copy kernel per tensor of the bucket (torch.cat, and back).
                    Some(d) => {
                        let c = d.copy_s(4.0 * e as f64, groups[bucket].len());
                        queue_end = dev.kernel(clock, c);
                        r.pack_s += c;
                        paused += unpaused(cpu * pb * 4.0 * e as f64);
                    }
                    None => run(
                        &mut clock,
                        &mut r.pack_s,
                        cpu * pb * 4.0 * e as f64,
                        bwd_end,
                    ),
                }
            }
            SchedOp::Compress {
                bucket,
                slot,
                round,
            } => {
                if slot == 0 {
                    w = WireLen {
                        gather_exact: true,
                        ..WireLen::default()
                    };
                }
                let u = &bucket_units[bucket][slot];
                let l = u.wire[round];
                let c = cpu
                    * (per_round(mc.compress, u.elems, u.selected)
                        + per_round(mc.feedback, u.elems, 0));
                r.host_compress_s += c;
                // Appending the unit's wire to the bucket's.
                let append = cpu * (costs.pack_fixed_s + pb * l.bytes() as f64);
                match device {
                    // The method's kernels write straight into the bucket's buffer (as
                    // DDP's bucket views and Power-SGD's flat P buffer do): no append.
                    Some(_) => {
                        let d = u.dev_s[round][0];
                        queue_end = dev.kernel(clock, d);
                        r.compress_s += d;
                        paused += unpaused(c + append);
                    }
                    None => {
                        run(&mut clock, &mut r.compress_s, c, bwd_end);
                        run(&mut clock, &mut r.pack_s, append, bwd_end);
                    }
                }
                w = w.plus(l);
                wire = l;
            }
            SchedOp::Exchange { bucket, round } => {
                // The collective waits for the bucket's compression kernels.
                clock = clock.max(queue_end);
                if gather_used {
                    // Trailer: one length word per unit.
                    w.gather_u32 += bucket_units[bucket].len();
                }
                let sync = if waited && round == 0 {
                    host.sync_for(case.pipelining)
                } else {
                    0.0
                };
                let t = match credit.as_mut() {
                    None => exchange_s(nets, case.collective, n, w, gather_used),
                    // The collectives one after another, each on the credit left.
                    Some(cr) => {
                        let mut t = 0.0;
                        for c in exchange_collectives(nets, case.collective, n, w, gather_used) {
                            let v = credit::link_bytes(c.op, n, c.m_bytes);
                            t +=
                                cr.exchange(clock + sync + t, c.net_s, v, c.floor_s(n)) + c.local_s;
                        }
                        t
                    }
                } + sync
                    + std::mem::take(&mut paused);
                run(&mut clock, &mut r.comm_s, t, bwd_end);
                if let Some(cr) = credit.as_mut() {
                    cr.busy_until(clock);
                }
                r.wire_bytes += w.bytes() as u64;
                wire = w;
            }
            SchedOp::Decompress {
                bucket,
                slot,
                round,
            } => {
                let u = &bucket_units[bucket][slot];
                let l = u.wire[round];
                let d = cpu
                    * (mc.decompress.fixed_s
                        + mc.decompress.per_element_s
                            * u.elems as f64
                            * gather_scale(n, u.elems, l.gather_u32))
                    / rounds as f64;
                r.host_decompress_s += d;
                // Splitting copies every worker's gathered piece of this unit.
                let split = cpu * (costs.pack_fixed_s + pb * 4.0 * (n * l.gather_u32) as f64);
                match device {
                    // Each worker's piece is a view of the received buffer: no split.
                    Some(_) => {
                        let dd = u.dev_s[round][1];
                        queue_end = dev.kernel(clock, dd);
                        r.decompress_s += dd;
                        paused += unpaused(d + split);
                    }
                    None => {
                        run(&mut clock, &mut r.pack_s, split, bwd_end);
                        run(&mut clock, &mut r.decompress_s, d, bwd_end);
                    }
                }
            }
        }
        executed.push(Executed { op, wire });
    }
    // The last bucket holds the last gradient, so the clock is past the end of backward.
    // The step ends with the last decompression kernel.
    let bwd_end = dev.ready_s(m);
    // What the last decompressions leave is paid in the next iteration's first
    // collective: in steady state, once per iteration.
    r.comm_s += paused;
    let t_end = clock.max(bwd_end).max(queue_end) + paused;
    r.bwd_s = bwd_end - fwd_end;
    r.exposed_s = (t_end - bwd_end).max(0.0);
    r.bwd_sync_s = t_end - fwd_end;
    r.iter_s = t_end;
    r.executed = vec![executed];
    let credit_end = credit.map_or(0.0, |c| c.at(t_end));
    (r, credit_end)
}

/// The clock after `work` seconds of full-speed work started at `clock`, running
/// `slowdown` times slower until `bwd_end` (host.rs, `bwd_slowdown`).
pub(super) fn advance(clock: f64, work: f64, bwd_end: f64, slowdown: f64) -> f64 {
    if clock >= bwd_end || slowdown <= 1.0 {
        return clock + work;
    }
    let slowed = work * slowdown;
    if clock + slowed <= bwd_end {
        clock + slowed
    } else {
        bwd_end + (work - (bwd_end - clock) / slowdown)
    }
}
