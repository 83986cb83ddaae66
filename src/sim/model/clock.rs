//! The virtual clock of one iteration (part of [`super`], the simulator): a bucket's
//! compression [`Unit`]s and their device times, the emulated device's stream
//! ([`DevStream`]), and the walk of the schedule's operations that charges each by the
//! cost model ([`simulate_clock`]).

use super::credit::{self, Credit};
use super::wire::{self, UnitWire};
use super::{
    exchange_collectives, exchange_s, gather_scale, CostModel, MethodCosts, Nets, SimCase,
    SimResult,
};
use crate::compress::WireLen;
use crate::devcost::DeviceCosts;
use crate::netmodel::CompressCost;
use crate::schedule::{self, Executed, Op as SchedOp};

/// One compression unit of a bucket: its elements, wire per round, and (device
/// compression) device seconds per round of compress and decompress.
pub(in crate::sim) struct Unit {
    pub(in crate::sim) elems: usize,
    /// Elements its compression selects over (the host cost's selection term).
    pub(in crate::sim) selected: usize,
    pub(in crate::sim) wire: UnitWire,
    pub(in crate::sim) dev_s: Vec<[f64; 2]>,
}

/// Device seconds per phase and round of [compress, decompress] of a `shape` unit of
/// `case`'s compressor with kernels `k` ([`DeviceCosts::op_s`]).
pub(in crate::sim) fn unit_device_s(
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
pub(in crate::sim) struct DevStream<'a> {
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
    pub(in crate::sim) fn new(fwd_end: f64, bwd: &'a [f64]) -> DevStream<'a> {
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
    pub(in crate::sim) fn ready_s(&mut self, k: usize) -> f64 {
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
    pub(in crate::sim) fn kernel(&mut self, t: f64, d: f64) -> f64 {
        // A backward kernel that started before the request finishes first.
        while self.next < self.bwd.len() && self.free < t {
            self.step();
        }
        self.free = self.free.max(t) + d;
        self.free
    }

    /// End of backward if no more kernels were inserted.
    pub(in crate::sim) fn projected_bwd_end(&self) -> f64 {
        self.free + self.rest[self.next]
    }
}

/// The iteration `walk` gives in steady state. Without a link shaper, one walk; with
/// one (credit.rs), the credit at the iteration's start is what the previous identical
/// iteration left, found by repeating the walk from a full bucket until it stops moving
/// (the end credit does not decrease with the start credit and is bounded by the burst,
/// so the starts decrease to the fixed point; 1 byte is far below any message).
pub(in crate::sim) fn steady_state(
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
pub(in crate::sim) fn simulate_clock(
    case: &SimCase,
    costs: &CostModel,
    nets: Nets,
    device: Option<&DeviceCosts>,
    bwd_times: &[f64],
    groups: &[Vec<usize>],
    bucket_units: &[Vec<Unit>],
    rounds: usize,
    credit: Option<Credit>,
) -> (SimResult, f64) {
    let m = bwd_times.len();
    // Virtual clock. Host effects (host.rs): the device starts `start_s` late, CPU
    // phases run at `cpu_share` of a core, a bucket's first exchange waits `sync_s` more,
    // and the communication thread's work runs `bwd_slowdown` times slower while
    // backward still runs.
    let fwd_end = costs.host.start_s + case.workload.fwd_s;
    let mut walk = Walk {
        case,
        costs,
        nets,
        device,
        groups,
        bucket_units,
        rounds,
        n: case.world_size.max(1),
        mc: costs.method(&case.base_method),
        cpu: 1.0 / costs.host.cpu_share,
        gather_used: bucket_units
            .iter()
            .flatten()
            .any(|u| u.wire.iter().any(|l| l.gather_u32 > 0)),
        dev: DevStream::new(fwd_end, bwd_times),
        r: SimResult {
            fwd_s: fwd_end,
            buckets: groups.len(),
            ..SimResult::default()
        },
        clock: 0.0,
        waited: false,
        w: WireLen::default(),
        queue_end: 0.0,
        paused: 0.0,
        credit,
    };
    let buckets = schedule::buckets(groups, m, case.merge);
    let ops = schedule::iteration(&buckets, rounds, case.merge, case.pipelining, m);
    let mut executed = Vec::with_capacity(ops.len());
    for op in ops {
        let bwd_end = walk.dev.projected_bwd_end();
        let wire = match op {
            SchedOp::Wait { bucket, ready: k } => {
                walk.wait(bucket, k);
                WireLen::default()
            }
            SchedOp::Pack { bucket } | SchedOp::Unpack { bucket } => {
                walk.pack(bucket, bwd_end);
                WireLen::default()
            }
            SchedOp::Compress {
                bucket,
                slot,
                round,
            } => walk.compress(bucket, slot, round, bwd_end),
            SchedOp::Exchange { bucket, round } => walk.exchange(bucket, round, bwd_end),
            SchedOp::Decompress {
                bucket,
                slot,
                round,
            } => {
                walk.decompress(bucket, slot, round, bwd_end);
                WireLen::default()
            }
        };
        executed.push(Executed { op, wire });
    }
    walk.finish(executed)
}

/// The state of [`simulate_clock`]'s walk: the case and its costs, the clock, the device
/// stream and the iteration charged so far.
struct Walk<'a> {
    case: &'a SimCase,
    costs: &'a CostModel,
    nets: Nets<'a>,
    device: Option<&'a DeviceCosts>,
    groups: &'a [Vec<usize>],
    bucket_units: &'a [Vec<Unit>],
    rounds: usize,
    n: usize,
    mc: MethodCosts,
    /// The host's CPU share, inverted (host work stretches by it).
    cpu: f64,
    /// Whether any unit has a gather section (the exchange's all-gathers run).
    gather_used: bool,
    dev: DevStream<'a>,
    r: SimResult,
    clock: f64,
    /// Did the communication thread wait for the device before this bucket?
    waited: bool,
    /// The bucket's wire so far (the units compressed since its first).
    w: WireLen,
    /// Device compression: end of the last kernel queued (the communication thread
    /// queues kernels without waiting for them).
    queue_end: f64,
    /// Device compression on a shared core (cpu_share < 1): the engine pauses the device
    /// clock for the rank's host work, which takes `cpu` times its time at full speed; the
    /// rank's own share is paused, the rest (the cores it waits for other ranks' work) is
    /// spent inside its next collective, where the ranks that computed last run last
    /// (measured at 4 ranks on 2 cores: extra exchange time about 1x the host work;
    /// host.rs). `paused` holds that rest until the next exchange.
    paused: f64,
    credit: Option<Credit>,
}

impl Walk<'_> {
    /// Advance the clock by host work `work` (s at full speed), slowed while backward
    /// runs ([`advance`]); returns the elapsed time, to add to its phase.
    fn host_work(&mut self, work: f64, bwd_end: f64) -> f64 {
        let t0 = self.clock;
        self.clock = advance(t0, work, bwd_end, self.costs.host.bwd_slowdown);
        self.clock - t0
    }

    /// The part of host work `charged` that a paused device clock does not cover.
    fn unpaused(&self, charged: f64) -> f64 {
        charged * (1.0 - self.costs.host.cpu_share.min(1.0))
    }

    /// A method phase's cost per round for `e` elements selecting over `sel`.
    fn per_round(&self, c: CompressCost, e: usize, sel: usize) -> f64 {
        c.time_s(e, sel) / self.rounds as f64
    }

    /// Wait for the first `k` gradients of `bucket`.
    fn wait(&mut self, bucket: usize, k: usize) {
        let t = self.dev.ready_s(k);
        self.waited = if self.case.pipelining {
            t > self.clock
        } else {
            bucket == 0
        };
        self.clock = f64::max(self.clock, t);
    }

    /// Merged compression's copy of `bucket` into one tensor (or back).
    fn pack(&mut self, bucket: usize, bwd_end: f64) {
        let e: usize = self.bucket_units[bucket].iter().map(|u| u.elems).sum();
        let pb = self.costs.pack_s_per_byte;
        match self.device {
            // One copy kernel per tensor of the bucket (torch.cat, and back).
            Some(d) => {
                let c = d.copy_s(4.0 * e as f64, self.groups[bucket].len());
                self.queue_end = self.dev.kernel(self.clock, c);
                self.r.pack_s += c;
                self.paused += self.unpaused(self.cpu * pb * 4.0 * e as f64);
            }
            None => self.r.pack_s += self.host_work(self.cpu * pb * 4.0 * e as f64, bwd_end),
        }
    }

    /// Compress and feed back unit `slot` of `bucket` in `round`, appending its wire to
    /// the bucket's; returns the unit's wire.
    fn compress(&mut self, bucket: usize, slot: usize, round: usize, bwd_end: f64) -> WireLen {
        if slot == 0 {
            self.w = WireLen {
                gather_exact: true,
                ..WireLen::default()
            };
        }
        let units = self.bucket_units;
        let u = &units[bucket][slot];
        let l = u.wire[round];
        let mc = self.mc;
        let c = self.cpu
            * (self.per_round(mc.compress, u.elems, u.selected)
                + self.per_round(mc.feedback, u.elems, 0));
        self.r.host_compress_s += c;
        // Appending the unit's wire to the bucket's.
        let append =
            self.cpu * (self.costs.pack_fixed_s + self.costs.pack_s_per_byte * l.bytes() as f64);
        match self.device {
            // The method's kernels write straight into the bucket's buffer (as
            // DDP's bucket views and Power-SGD's flat P buffer do): no append.
            Some(_) => {
                let d = u.dev_s[round][0];
                self.queue_end = self.dev.kernel(self.clock, d);
                self.r.compress_s += d;
                self.paused += self.unpaused(c + append);
            }
            None => {
                self.r.compress_s += self.host_work(c, bwd_end);
                self.r.pack_s += self.host_work(append, bwd_end);
            }
        }
        self.w = self.w.plus(l);
        l
    }

    /// Exchange `bucket`'s wire of `round` (after its compression kernels); returns it.
    fn exchange(&mut self, bucket: usize, round: usize, bwd_end: f64) -> WireLen {
        let (case, n, gather_used) = (self.case, self.n, self.gather_used);
        // The collective waits for the bucket's compression kernels.
        self.clock = self.clock.max(self.queue_end);
        if gather_used {
            // Trailer: one length word per unit.
            self.w.gather_u32 += self.bucket_units[bucket].len();
        }
        let sync = if self.waited && round == 0 {
            self.costs.host.sync_for(case.pipelining)
        } else {
            0.0
        };
        let (clock, w, nets) = (self.clock, self.w, self.nets);
        let t = match self.credit.as_mut() {
            None => exchange_s(nets, case.collective, n, w, gather_used),
            // The collectives one after another, each on the credit left.
            Some(cr) => {
                let mut t = 0.0;
                for c in exchange_collectives(nets, case.collective, n, w, gather_used) {
                    let v = credit::link_bytes(c.op, n, c.m_bytes);
                    t += cr.exchange(clock + sync + t, c.net_s, v, c.floor_s(n)) + c.local_s;
                }
                t
            }
        } + sync
            + std::mem::take(&mut self.paused);
        self.r.comm_s += self.host_work(t, bwd_end);
        if let Some(cr) = self.credit.as_mut() {
            cr.busy_until(self.clock);
        }
        self.r.wire_bytes += w.bytes() as u64;
        w
    }

    /// Split the received data of unit `slot` of `bucket` in `round` and decompress it
    /// (every worker's piece).
    fn decompress(&mut self, bucket: usize, slot: usize, round: usize, bwd_end: f64) {
        let (n, cpu, mc) = (self.n, self.cpu, self.mc);
        let units = self.bucket_units;
        let u = &units[bucket][slot];
        let l = u.wire[round];
        let d = cpu
            * (mc.decompress.fixed_s
                + mc.decompress.per_element_s
                    * u.elems as f64
                    * gather_scale(n, u.elems, l.gather_u32))
            / self.rounds as f64;
        self.r.host_decompress_s += d;
        // Splitting copies every worker's gathered piece of this unit.
        let split = cpu
            * (self.costs.pack_fixed_s
                + self.costs.pack_s_per_byte * 4.0 * (n * l.gather_u32) as f64);
        match self.device {
            // Each worker's piece is a view of the received buffer: no split.
            Some(_) => {
                let dd = u.dev_s[round][1];
                self.queue_end = self.dev.kernel(self.clock, dd);
                self.r.decompress_s += dd;
                self.paused += self.unpaused(d + split);
            }
            None => {
                self.r.pack_s += self.host_work(split, bwd_end);
                self.r.decompress_s += self.host_work(d, bwd_end);
            }
        }
    }

    /// The iteration's end: the last bucket holds the last gradient, so the clock is
    /// past the end of backward; the step ends with the last decompression kernel.
    /// Returns the iteration and the credit at its end.
    fn finish(mut self, executed: Vec<Executed>) -> (SimResult, f64) {
        let m = self.dev.bwd.len();
        let bwd_end = self.dev.ready_s(m);
        let fwd_end = self.r.fwd_s;
        // What the last decompressions leave is paid in the next iteration's first
        // collective: in steady state, once per iteration.
        let paused = self.paused;
        let mut r = self.r;
        r.comm_s += paused;
        let t_end = self.clock.max(bwd_end).max(self.queue_end) + paused;
        r.bwd_s = bwd_end - fwd_end;
        r.exposed_s = (t_end - bwd_end).max(0.0);
        r.bwd_sync_s = t_end - fwd_end;
        r.iter_s = t_end;
        r.executed = vec![executed];
        let credit_end = self.credit.map_or(0.0, |c| c.at(t_end));
        (r, credit_end)
    }
}

/// The clock after `work` seconds of full-speed work started at `clock`, running
/// `slowdown` times slower until `bwd_end` (host.rs, `bwd_slowdown`).
pub(in crate::sim) fn advance(clock: f64, work: f64, bwd_end: f64, slowdown: f64) -> f64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// With a link shaper the walk repeats, each start the previous walk's end credit,
    /// from a full bucket until the end moves less than 1 byte from the start. A walk
    /// ending with `start / 2 + 500` bytes from a burst of 3,048 starts at
    /// `1,000 + 2,048 / 2^k`; its end moves `1,024 / 2^k`, first under 1 byte at k = 11
    /// (0.5; at k = 10 exactly 1): 12 walks, the iteration the one from 1,001 bytes.
    /// Without a shaper, one walk without credit.
    #[test]
    fn the_steady_state_repeats_the_walk_until_the_credit_moves_under_a_byte() {
        let shaper = credit::Shaper {
            rate_bytes_per_s: 1e6,
            burst_bytes: 3048.0,
            dilation: 1,
        };
        let starts = RefCell::new(Vec::new());
        let walk = |c: Option<Credit>| {
            let s = c.map_or(-1.0, |c| c.at(0.0));
            starts.borrow_mut().push(s);
            let r = SimResult {
                iter_s: s,
                ..SimResult::default()
            };
            (r, s / 2.0 + 500.0)
        };
        let r = steady_state(Some(shaper), walk);
        let want: Vec<f64> = (0..=11).map(|k| 1000.0 + 2048.0 / 2f64.powi(k)).collect();
        assert_eq!(*starts.borrow(), want);
        assert_eq!(r.iter_s, 1001.0);
        starts.borrow_mut().clear();
        assert_eq!(steady_state(None, walk).iter_s, -1.0);
        assert_eq!(*starts.borrow(), vec![-1.0]);
    }
}
