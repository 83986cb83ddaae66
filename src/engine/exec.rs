//! The executor of the iteration schedule on real data (src/schedule/): one rank's
//! compressor, buckets, wire buffers and exchange, running [`Op`]s in order. The e2e
//! engine drives it with synthetic gradients on the device thread's clock; `gradcomp
//! converge` (src/converge/) with a model's real gradients, keeping the averaged
//! outputs. The simulator walks the same [`Op`] lists on its virtual clock
//! (src/sim/model/clock.rs). Buffers are sized once from the method's declared capacities:
//! executing an operation allocates nothing.

use super::trace::{self, Trace};
use super::{Layout, TensorSpec};
use crate::comm::exchange::Exchange;
use crate::comm::World;
use crate::compress::{Compressor, Wire, WireLen};
use crate::error::{Error, Result};
use crate::measure::dilation::Dilation;
use crate::schedule::{self, Bucket, Executed, Op};
use ndarray::{Array2, ArrayView2, ArrayViewMut2};

mod bucket_wire;
pub(crate) use bucket_wire::{append, unit_shape, Capacities};
use bucket_wire::{capacities, merge_units, unit_received, UnitLayout};

/// Time spent per kind of work in one iteration (s) and the bytes sent. With device
/// compression, `pack_s`, `compress_s` and `decompress_s` are the device kernels'
/// charged times and the `host_` fields the real host work's; on the host they agree.
#[derive(Clone, Copy, Debug, Default)]
pub struct OpTimes {
    pub pack_s: f64,
    pub compress_s: f64,
    pub comm_s: f64,
    pub decompress_s: f64,
    pub host_compress_s: f64,
    pub host_decompress_s: f64,
    pub wire_bytes: u64,
}

/// The emulated device's stream as device compression uses it
/// ([`super::device::Device`]): pause its clock while the host does work the device is
/// charged for, queue a kernel of the charged length (returns its end), wait for a time.
pub trait DeviceStream {
    fn pause(&self);
    fn resume(&self);
    fn enqueue(&self, seconds: f64, at_s: f64) -> f64;
    fn wait_clock(&self, t_s: f64);
    fn ready_at(&self, k: usize) -> f64;
}

impl DeviceStream for super::device::Device {
    fn pause(&self) {
        super::device::Device::pause(self)
    }
    fn resume(&self) {
        super::device::Device::resume(self)
    }
    fn enqueue(&self, seconds: f64, at_s: f64) -> f64 {
        super::device::Device::enqueue(self, seconds, at_s)
    }
    fn ready_at(&self, k: usize) -> f64 {
        super::device::Device::ready_at(self, k)
    }
    fn wait_clock(&self, t_s: f64) {
        super::device::Device::wait_clock(self, t_s)
    }
}

/// Device seconds charged per operation with device compression (src/devcost/): per
/// phase and bucket the pack (= unpack) copy, per phase, bucket, slot and round the
/// unit's [compress, decompress] kernels.
struct DeviceCharges {
    pack_s: Vec<Vec<f64>>,
    unit_s: Vec<Vec<Vec<Vec<[f64; 2]>>>>,
}

impl DeviceCharges {
    /// Every charge K x longer: the emulated device runs K times slower under time
    /// dilation, as its forward and backward do.
    fn dilated(mut self, d: Dilation) -> DeviceCharges {
        if d.is_on() {
            self.pack_s
                .iter_mut()
                .flatten()
                .for_each(|x| *x = d.wall_s(*x));
            for x in self.unit_s.iter_mut().flatten().flatten().flatten() {
                *x = [d.wall_s(x[0]), d.wall_s(x[1])];
            }
        }
        self
    }

    fn new(
        comp: &dyn Compressor,
        plans: &[Vec<Bucket>],
        (tensors, merge, world_size): (&[TensorSpec], bool, usize),
        rounds: usize,
        d: &crate::devcost::DeviceCosts,
    ) -> DeviceCharges {
        use crate::roofline::{Kernel, Stage};
        let list = |u: usize, r: usize, ph: usize, st: Stage| {
            let mut v: Vec<Kernel> = Vec::new();
            comp.device_kernels(u, r, ph, st, &mut |k| v.push(k));
            let shape = unit_shape(tensors, plans, merge, u);
            d.op_s(comp.name(), st, r, ph, shape, world_size, &v)
        };
        DeviceCharges {
            pack_s: plans
                .iter()
                .map(|plan| {
                    plan.iter()
                        .map(|b| {
                            let e: usize = b.tensors.iter().map(|&t| tensors[t].numel()).sum();
                            d.copy_s(4.0 * e as f64, b.tensors.len())
                        })
                        .collect()
                })
                .collect(),
            unit_s: plans
                .iter()
                .enumerate()
                .map(|(ph, plan)| {
                    plan.iter()
                        .map(|b| {
                            b.units
                                .iter()
                                .map(|&u| {
                                    (0..rounds)
                                        .map(|r| {
                                            [
                                                list(u, r, ph, Stage::Compress),
                                                list(u, r, ph, Stage::Decompress),
                                            ]
                                        })
                                        .collect()
                                })
                                .collect()
                        })
                        .collect()
                })
                .collect(),
        }
    }
}

/// The caller's side of an iteration: the clock times are taken on, how to wait for
/// gradients (`wait(n)`: until the first `n` in backward order are ready), and an
/// optional trace of the spans.
pub struct Hooks<'a> {
    pub now: &'a dyn Fn() -> f64,
    pub wait: &'a mut dyn FnMut(usize),
    pub trace: Option<&'a mut Trace>,
    /// The device stream, for device compression (the executor was built with device
    /// costs); `None` charges everything on the host.
    pub device: Option<&'a dyn DeviceStream>,
}

/// One rank's state for running a case's schedule.
pub struct Executor {
    pub(crate) comp: Box<dyn Compressor>,
    /// Buckets per phase of the method's step cycle.
    pub(crate) plans: Vec<Vec<Bucket>>,
    /// The schedule of one iteration per phase ([`schedule::iteration`]).
    ops: Vec<Vec<Op>>,
    merge: bool,
    tensors: Vec<TensorSpec>,
    pub(crate) caps: Capacities,
    rounds: usize,
    unit_wire: Wire,
    bucket_wire: Wire,
    ex: Exchange,
    layout: Vec<UnitLayout>,
    gather_scratch: Vec<u32>,
    gather_counts: Vec<usize>,
    /// Merged compression: the bucket packed into one tensor (and, after the last round,
    /// the unpack target when there are no outputs to write).
    packed: Vec<f32>,
    /// Decompress target: a merged unit, or a tensor when the caller keeps no outputs.
    unit_out: Vec<f32>,
    /// What the last iteration of each phase ran ([`Executed`]).
    executed: Vec<Vec<Executed>>,
    /// Device compression: what each operation is charged on the device stream.
    device: Option<DeviceCharges>,
    /// Device compression: end of the last kernel queued (device clock).
    queue_end_s: f64,
    /// Device compression: when the communication thread launches its next kernel on
    /// the device clock, as the simulator's clock has it (the bucket's gradients ready,
    /// or the previous collective's end), free of this thread's wake-up latency.
    launch_s: f64,
    /// Time dilation (src/measure/dilation.rs): every host operation below is stretched
    /// to K x its CPU time; the device's charged kernels are K x longer.
    dil: Dilation,
}

impl Executor {
    /// Buffers and schedule for `layout` (built by [`super::layout`]; a caller may have
    /// replaced its compressor, as converge's no-feedback control does) of case `s`.
    pub(crate) fn new(
        world: &World,
        s: &super::E2eSetup,
        layout: Layout,
        pipelining: bool,
    ) -> Result<Executor> {
        let Layout {
            comp,
            plans,
            pack_len,
            ..
        } = layout;
        let m = s.tensors.len();
        let rounds = comp.rounds();
        let caps = capacities(comp.as_ref(), &plans, rounds);
        let ex = Exchange::with_mode(world, caps.bucket_cap, s.collective)?;
        let max_units = plans
            .iter()
            .flatten()
            .map(|b| b.units.len())
            .max()
            .unwrap_or(0);
        let max_numel = s
            .tensors
            .iter()
            .map(TensorSpec::numel)
            .max()
            .unwrap_or(0)
            .max(pack_len);
        let ops: Vec<Vec<Op>> = plans
            .iter()
            .map(|b| schedule::iteration(b, rounds, s.merge, pipelining, m))
            .collect();
        let device = match (s.compress_on, s.device_costs) {
            (crate::devcost::CompressOn::Host, _) => None,
            (crate::devcost::CompressOn::Device, Some(d)) => Some(
                DeviceCharges::new(
                    comp.as_ref(),
                    &plans,
                    (s.tensors, s.merge, world.size),
                    rounds,
                    d,
                )
                .dilated(world.dilation()),
            ),
            (crate::devcost::CompressOn::Device, None) => {
                return Err(Error::Input(
                    "e2e: compress_on = device needs a device cost model (compress_device)".into(),
                ))
            }
        };
        Ok(Executor {
            device,
            queue_end_s: 0.0,
            launch_s: 0.0,
            dil: world.dilation(),
            unit_wire: Wire::with_touched_capacity(caps.unit_cap),
            bucket_wire: Wire::with_touched_capacity(caps.bucket_cap),
            gather_scratch: vec![0u32; caps.unit_cap.gather_u32 * world.size],
            gather_counts: vec![0usize; world.size],
            layout: vec![UnitLayout::default(); max_units],
            packed: vec![0f32; pack_len],
            unit_out: vec![0f32; max_numel],
            executed: ops.iter().map(|o| Vec::with_capacity(o.len())).collect(),
            ops,
            comp,
            merge: s.merge,
            tensors: s.tensors.to_vec(),
            caps,
            rounds,
            ex,
            plans,
        })
    }

    /// Operations in the largest phase's iteration (trace sizing).
    pub fn max_ops(&self) -> usize {
        self.ops.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// Buckets per step: the mean over the phases, rounded (ACP-SGD's P and Q steps differ).
    pub fn buckets_per_step(&self) -> usize {
        let total: usize = self.plans.iter().map(Vec::len).sum();
        (total as f64 / self.plans.len().max(1) as f64).round() as usize
    }

    /// What the last iteration of each phase ran, phase by phase.
    pub fn executed(&self) -> &[Vec<Executed>] {
        &self.executed
    }

    /// Run step `step`'s iteration: its phase's operations in order, adding their times
    /// to `t`. `grads` are the model's gradients (registration order); `outs`, when
    /// given, receive the averaged update each method's `decompress` writes (else a
    /// scratch buffer does).
    pub fn iteration(
        &mut self,
        world: &World,
        step: u64,
        grads: &[Array2<f32>],
        mut outs: Option<&mut [Array2<f32>]>,
        hooks: &mut Hooks,
        t: &mut OpTimes,
    ) -> Result<()> {
        self.comp.begin_step(step);
        self.launch_s = 0.0;
        let phase = step as usize % self.plans.len();
        let ops = std::mem::take(&mut self.ops);
        self.executed[phase].clear();
        let mut r = Ok(());
        for &op in &ops[phase] {
            r = self.run_op(world, phase, op, grads, outs.as_deref_mut(), hooks, t);
            if r.is_err() {
                break;
            }
        }
        self.ops = ops;
        if let (Some(d), Some(_)) = (hooks.device, &self.device) {
            // The step ends when the device has run the last decompression.
            d.wait_clock(self.queue_end_s);
        }
        r
    }

    #[allow(clippy::too_many_arguments)] // `iteration`'s arguments plus the operation
    fn run_op(
        &mut self,
        world: &World,
        phase: usize,
        op: Op,
        grads: &[Array2<f32>],
        outs: Option<&mut [Array2<f32>]>,
        hooks: &mut Hooks,
        t: &mut OpTimes,
    ) -> Result<()> {
        let now = hooks.now;
        // Device compression: the host work below runs with the device clock paused, and
        // the operation's charged kernel then runs on the device stream.
        let dev = hooks.device.filter(|_| self.device.is_some());
        let host_work = !matches!(op, Op::Wait { .. });
        if let (Some(d), true) = (dev, host_work) {
            d.pause();
        }
        let trace = hooks.trace.as_deref_mut();
        let mut wire = WireLen::default();
        match op {
            Op::Wait { ready, .. } => {
                (hooks.wait)(ready);
                if let Some(d) = dev {
                    self.launch_s = self.launch_s.max(d.ready_at(ready));
                }
            }
            Op::Pack { bucket } => self.pack(phase, bucket, grads, now, t)?,
            Op::Compress {
                bucket,
                slot,
                round,
            } => wire = self.compress(world, (phase, bucket, slot, round), grads, now, trace, t)?,
            Op::Exchange { bucket, round } => {
                wire = self.exchange(world, (phase, bucket, round), dev, now, trace, t)?
            }
            Op::Decompress {
                bucket,
                slot,
                round,
            } => self.decompress(world, (phase, bucket, slot, round), outs, now, trace, t)?,
            Op::Unpack { bucket } => self.unpack(phase, bucket, outs, now, t)?,
        }
        if let (Some(d), true) = (dev, host_work) {
            self.charge_device(d, phase, op, hooks.trace.as_deref_mut(), t);
        }
        self.executed[phase].push(Executed { op, wire });
        Ok(())
    }

    /// [`Op::Pack`]: copy `bucket`'s gradients into the pack buffer (merged compression).
    fn pack(
        &mut self,
        phase: usize,
        bucket: usize,
        grads: &[Array2<f32>],
        now: &dyn Fn() -> f64,
        t: &mut OpTimes,
    ) -> Result<()> {
        let ta = now();
        let span = self.dil.start();
        let mut off = 0;
        for &tn in &self.plans[phase][bucket].tensors {
            let g = grads[tn]
                .as_slice()
                .ok_or_else(|| Error::Runtime("gradient not contiguous".into()))?;
            self.packed[off..off + g.len()].copy_from_slice(g);
            off += g.len();
        }
        self.dil.stretch(span);
        t.pack_s += now() - ta;
        Ok(())
    }

    /// [`Op::Compress`] of unit `slot` of `bucket` in `round` (`at`: phase, bucket, slot,
    /// round): compress and feed back, then append its wire to the bucket's; returns the
    /// unit's wire.
    fn compress(
        &mut self,
        world: &World,
        at: (usize, usize, usize, usize),
        grads: &[Array2<f32>],
        now: &dyn Fn() -> f64,
        trace: Option<&mut Trace>,
        t: &mut OpTimes,
    ) -> Result<WireLen> {
        let (phase, bucket, slot, round) = at;
        let b = &self.plans[phase][bucket];
        let unit = b.units[slot];
        if slot == 0 {
            self.bucket_wire.clear();
        }
        let (ta, wa) = (now(), world.time());
        let span = self.dil.start();
        let (rows, cols) = unit_shape(&self.tensors, &self.plans, self.merge, unit);
        let g = if self.merge {
            ArrayView2::from_shape((rows, cols), &self.packed[..rows * cols])
                .map_err(|e| Error::Runtime(e.to_string()))?
        } else {
            grads[unit].view()
        };
        self.comp.compress(unit, round, g, &mut self.unit_wire)?;
        self.comp.feedback(unit, round)?;
        self.dil.stretch(span);
        t.host_compress_s += world.time() - wa;
        let tb = now();
        let span = self.dil.start();
        self.layout[slot] = append(&mut self.bucket_wire, &self.unit_wire);
        self.dil.stretch(span);
        t.pack_s += now() - tb;
        t.compress_s += tb - ta;
        if let Some(tr) = trace {
            tr.span("compress", trace::COMM, unit as i64, ta, tb);
        }
        Ok(self.unit_wire.lens())
    }

    /// [`Op::Exchange`] of `bucket`'s wire in `round` (`at`: phase, bucket, round): the
    /// gathered lengths' trailer, then (device compression) the wait for the bucket's
    /// kernels, then the collectives; returns the bucket's wire.
    fn exchange(
        &mut self,
        world: &World,
        at: (usize, usize, usize),
        dev: Option<&dyn DeviceStream>,
        now: &dyn Fn() -> f64,
        trace: Option<&mut Trace>,
        t: &mut OpTimes,
    ) -> Result<WireLen> {
        let (phase, bucket, round) = at;
        let b = &self.plans[phase][bucket];
        let units = b.units.len();
        if self.caps.gather_used {
            // Trailer: each unit's gathered length, so receivers can split.
            let ta = now();
            let span = self.dil.start();
            for l in &self.layout[..units] {
                self.bucket_wire.gather_u32.push(l.gather_len as u32);
            }
            self.dil.stretch(span);
            t.pack_s += now() - ta;
        }
        if let Some(d) = dev {
            // Ranks leave their paused host work at different wall times: align
            // them while paused, so the exchange does not time that skew. Then
            // the collective waits for the bucket's compression kernels (NCCL's
            // stream waits on their event).
            world.barrier();
            d.resume();
            d.wait_clock(self.queue_end_s);
        }
        let ta = now();
        let lay = &self.layout[..units];
        let declared = self.caps.bucket_wires[phase][bucket][round];
        let exact = declared.exact_gather_of(self.comp.name(), &self.bucket_wire)?;
        let comp = self.comp.as_mut();
        self.ex
            .run(world, &self.bucket_wire, exact, |agg, off, inc, own| {
                merge_units(comp, &b.units, lay, agg, off, inc, own)
            })?;
        let tb = now();
        t.comm_s += tb - ta;
        self.launch_s = tb;
        t.wire_bytes += self.bucket_wire.bytes() as u64;
        if let Some(tr) = trace {
            let name = if self.rounds > 1 {
                ["collective r0", "collective r1"][round.min(1)]
            } else {
                "collective"
            };
            tr.span(name, trace::COMM, bucket as i64, ta, tb);
        }
        Ok(WireLen {
            gather_exact: declared.gather_exact,
            ..self.bucket_wire.lens()
        })
    }

    /// [`Op::Decompress`] of unit `slot` of `bucket` in `round` (`at`: phase, bucket, slot,
    /// round): split its received data, then decompress into `outs` (or a scratch buffer).
    fn decompress(
        &mut self,
        world: &World,
        at: (usize, usize, usize, usize),
        outs: Option<&mut [Array2<f32>]>,
        now: &dyn Fn() -> f64,
        trace: Option<&mut Trace>,
        t: &mut OpTimes,
    ) -> Result<()> {
        let (phase, bucket, slot, round) = at;
        let b = &self.plans[phase][bucket];
        let unit = b.units[slot];
        let tc = now();
        let span = self.dil.start();
        let (rows, cols) = unit_shape(&self.tensors, &self.plans, self.merge, unit);
        let rec = self.ex.received();
        let unit_rec = unit_received(
            &rec,
            &self.layout[slot],
            slot,
            b.units.len(),
            &mut self.gather_scratch,
            &mut self.gather_counts,
        )?;
        self.dil.stretch(span);
        let (td, wd) = (now(), world.time());
        let span = self.dil.start();
        let view = match outs {
            Some(o) if !self.merge => o[unit].view_mut(),
            _ => ArrayViewMut2::from_shape((rows, cols), &mut self.unit_out[..rows * cols])
                .map_err(|e| Error::Runtime(e.to_string()))?,
        };
        self.comp.decompress(unit, round, &unit_rec, view)?;
        self.dil.stretch(span);
        t.host_decompress_s += world.time() - wd;
        let te = now();
        t.pack_s += td - tc;
        t.decompress_s += te - td;
        if let Some(tr) = trace {
            tr.span("decompress", trace::COMM, unit as i64, td, te);
        }
        Ok(())
    }

    /// [`Op::Unpack`]: the merged result back into `bucket`'s tensors (or, without
    /// outputs, into the pack buffer: the same copy).
    fn unpack(
        &mut self,
        phase: usize,
        bucket: usize,
        mut outs: Option<&mut [Array2<f32>]>,
        now: &dyn Fn() -> f64,
        t: &mut OpTimes,
    ) -> Result<()> {
        let ta = now();
        let span = self.dil.start();
        let mut off = 0;
        for &tn in &self.plans[phase][bucket].tensors {
            let n = self.tensors[tn].numel();
            let src = &self.unit_out[off..off + n];
            match outs.as_deref_mut() {
                Some(o) => o[tn]
                    .as_slice_mut()
                    .ok_or_else(|| Error::Runtime("output not contiguous".into()))?
                    .copy_from_slice(src),
                None => self.packed[off..off + n].copy_from_slice(src),
            }
            off += n;
        }
        self.dil.stretch(span);
        t.pack_s += now() - ta;
        Ok(())
    }

    /// Device compression, after `op`'s host work: resume the device clock (the host
    /// work's times read a paused clock, zero) and queue the kernel the device is charged
    /// for it, not waited for (the communication thread goes on launching).
    fn charge_device(
        &mut self,
        d: &dyn DeviceStream,
        phase: usize,
        op: Op,
        trace: Option<&mut Trace>,
        t: &mut OpTimes,
    ) {
        d.resume();
        let Some(c) = &self.device else {
            return;
        };
        let (charged, into) = match op {
            Op::Pack { bucket } | Op::Unpack { bucket } => (c.pack_s[phase][bucket], &mut t.pack_s),
            Op::Compress {
                bucket,
                slot,
                round,
            } => (c.unit_s[phase][bucket][slot][round][0], &mut t.compress_s),
            Op::Decompress {
                bucket,
                slot,
                round,
            } => (c.unit_s[phase][bucket][slot][round][1], &mut t.decompress_s),
            Op::Wait { .. } | Op::Exchange { .. } => (0.0, &mut t.comm_s),
        };
        if charged > 0.0 {
            let end = d.enqueue(charged, self.launch_s);
            self.queue_end_s = self.queue_end_s.max(end);
            if let Some(tr) = trace {
                tr.span("device kernel", trace::DEVICE, -1, end - charged, end);
            }
            *into += charged;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compress::{registry, MethodParams, WorkerCtx};
    use crate::devcost::DeviceCosts;

    /// Device charges of a bucket of three tensors, against a hand computation from the
    /// preset's constants: the copy into the bucket is one launch per tensor plus reading
    /// and writing its bytes (`3 launch + 2 * 4 d / bandwidth`); each tensor's compress and
    /// decompress are its own kernel lists, so a bucket costs the sum of its tensors'.
    #[test]
    fn device_charges_of_a_multi_tensor_bucket() {
        let tensors: Vec<TensorSpec> = [(64, 27), (64, 1), (128, 576)]
            .iter()
            .enumerate()
            .map(|(i, &(rows, cols))| TensorSpec {
                name: format!("t{i}"),
                rows,
                cols,
            })
            .collect();
        let ctx = WorkerCtx {
            rank: 0,
            world_size: 4,
            seed: 1,
        };
        let d = DeviceCosts::preset("v100").unwrap();
        let (launch_s, bw) = (d.spec.launch_s, d.spec.mem_bytes_per_s);
        for method in ["ssgd", "topk"] {
            let mut comp = registry::build(method, &MethodParams::default(), ctx).unwrap();
            for (t, s) in tensors.iter().enumerate() {
                comp.register(t, s.rows, s.cols).unwrap();
            }
            let plans = vec![vec![Bucket {
                tensors: vec![0, 1, 2],
                units: vec![0, 1, 2],
                ready_after: 3,
            }]];
            let ch = DeviceCharges::new(comp.as_ref(), &plans, (&tensors, false, 4), 1, &d);
            let elems: usize = tensors.iter().map(TensorSpec::numel).sum();
            let want = 3.0 * launch_s + 2.0 * 4.0 * elems as f64 / bw;
            assert!(
                (ch.pack_s[0][0] - want).abs() <= 1e-12,
                "{method}: pack {} vs {want}",
                ch.pack_s[0][0]
            );
            // One entry per unit, each at least one launch per kernel it lists.
            assert_eq!(ch.unit_s[0][0].len(), 3, "{method}");
            for (u, per_round) in ch.unit_s[0][0].iter().enumerate() {
                for st in [
                    crate::roofline::Stage::Compress,
                    crate::roofline::Stage::Decompress,
                ] {
                    let mut n = 0;
                    comp.device_kernels(u, 0, 0, st, &mut |k| {
                        n += usize::from(d.spec.launches(&k))
                    });
                    let i = usize::from(st == crate::roofline::Stage::Decompress);
                    assert!(
                        per_round[0][i] >= n as f64 * launch_s,
                        "{method} unit {u}: {} s for {n} kernels",
                        per_round[0][i]
                    );
                }
            }
        }
    }
}
