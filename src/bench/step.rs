//! One tensor's step through compress -> exchange -> decompress, and the state it runs
//! on: shared by `micro` (compress.rs) and `micro --check` (check.rs), which import it
//! from here rather than from each other.

use crate::comm::exchange::Exchange;
use crate::comm::World;
use crate::compress::{registry, Compressor, MethodParams, Wire, WireLen, WorkerCtx};
use crate::error::{Error, Result};
use crate::measure::shape::Shape;
use crate::measure::tensors::{gradient, GRADIENT_SETS};
use ndarray::{Array2, ArrayView2};

/// One method built for one tensor on this rank, with its gradients, output and wire.
pub(super) struct Setup {
    pub(super) comp: Box<dyn Compressor>,
    pub(super) grads: Vec<Array2<f32>>,
    pub(super) out: Array2<f32>,
    pub(super) wire: Wire,
    /// The one-worker exchange's element counts (`micro-compress`).
    pub(super) counts: Vec<usize>,
}

/// Build `method` for one tensor of `shape` among `world_size` workers, with its
/// [`GRADIENT_SETS`] gradients of this rank.
pub(super) fn setup(
    world: &World,
    method: &str,
    shape: Shape,
    params: &MethodParams,
    seed: u64,
    world_size: usize,
) -> Result<Setup> {
    let ctx = WorkerCtx {
        rank: world.rank,
        world_size,
        seed,
    };
    let mut comp = registry::build(method, params, ctx)?;
    comp.register(0, shape.rows, shape.cols)?;
    let cap = (0..comp.rounds())
        .map(|r| comp.wire_capacity(0, r))
        .fold(WireLen::default(), WireLen::max);
    let wire = Wire::with_touched_capacity(cap);
    let grads = (0..GRADIENT_SETS)
        .map(|s| gradient(shape, seed, s, world.rank))
        .collect();
    Ok(Setup {
        comp,
        grads,
        out: Array2::zeros((shape.rows, shape.cols)),
        wire,
        counts: vec![0; 1],
    })
}

/// One step of compress -> exchange -> decompress over all rounds; returns the phase
/// times (compress, feedback, comm, decompress) of this rank (under time dilation in
/// emulated seconds) and the bytes it sent.
pub(super) fn one_step(
    world: &World,
    comp: &mut dyn Compressor,
    wire: &mut Wire,
    ex: &mut Exchange,
    g: ArrayView2<f32>,
    out: &mut Array2<f32>,
    step: u64,
) -> Result<(f64, f64, f64, f64, u64)> {
    comp.begin_step(step);
    let (mut tc, mut tf, mut tx, mut td) = (0.0, 0.0, 0.0, 0.0);
    let mut bytes = 0u64;
    world.sync_or_stop()?;
    // Time dilation: host work stretched to K x its CPU time, the exchange's reductions
    // padded inside `World`, every time / K (src/measure/dilation.rs).
    let d = world.dilation();
    for round in 0..comp.rounds() {
        let t0 = world.time();
        let span = d.start();
        comp.compress(0, round, g, wire)?;
        d.stretch(span);
        let t1 = world.time();
        let span = d.start();
        comp.feedback(0, round)?;
        d.stretch(span);
        let t2 = world.time();
        let exact = comp
            .wire_capacity(0, round)
            .exact_gather_of(comp.name(), wire)?;
        ex.run(world, wire, exact, |agg, off, inc, own| {
            comp.ring_merge(0, agg, off, inc, own).map_err(Error::from)
        })?;
        let t3 = world.time();
        let span = d.start();
        comp.decompress(0, round, &ex.received(), out.view_mut())?;
        d.stretch(span);
        let t4 = world.time();
        tc += d.emulated_s(t1 - t0);
        tf += d.emulated_s(t2 - t1);
        tx += d.emulated_s(t3 - t2);
        td += d.emulated_s(t4 - t3);
        bytes += wire.bytes() as u64;
    }
    Ok((tc, tf, tx, td, bytes))
}
