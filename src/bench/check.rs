//! `micro --check` (docs/methods.md, "`--check`"): run step 0 on fresh state and judge the
//! result by the method's own reference ([`Compressor::check_share`],
//! [`Compressor::check_verdict`]; src/compress/check.rs), and against rank 0's result.
//! This file only drives: the step, the MPI sums of the shares, the agreement.

use super::step::{one_step, setup};
use super::Fault;
use crate::comm::exchange::Exchange;
use crate::comm::World;
use crate::compress::check::{flat, CheckCtx, Verdict, CHECKED};
use crate::compress::{registry, MethodParams, WireLen, WorkerCtx};
use crate::error::Result;
use crate::measure::shape::Shape;
use crate::measure::tensors::{gradient, integer_gradient};

/// `--check` for micro: run step 0 on fresh state and compare the decompressed result
/// with the method's reference computed outside any timed region, and with rank 0's result:
/// every method gives every worker the same average (each decodes the same exchanged
/// data), bit for bit, so a rank that disagrees fails the check even where the
/// reference has a tolerance (a ring one step short, a rank decoding stale data).
/// Agreed across ranks. `corrupt`: this rank damages its result first (self-test).
pub(super) fn check_method(
    world: &World,
    method: &str,
    shape: Shape,
    params: &MethodParams,
    seed: u64,
    corrupt: Option<Fault>,
) -> Result<Verdict> {
    let n = world.size;
    let mut s = setup(world, method, shape, params, seed, n)?;
    let g = if s.comp.check_integer_gradient() {
        integer_gradient(shape, world.rank)
    } else {
        s.grads[0].clone()
    };
    let cap = (0..s.comp.rounds())
        .map(|r| s.comp.wire_capacity(CHECKED, r))
        .fold(WireLen::default(), WireLen::max);
    let mut ex = Exchange::new(world, cap)?;
    one_step(
        world,
        s.comp.as_mut(),
        &mut s.wire,
        &mut ex,
        g.view(),
        &mut s.out,
        0,
    )?;
    let mut out = flat(&s.out.view())?.to_vec();
    if let Some(fault) = corrupt {
        damage(&mut out, fault);
    }
    let ctx = WorkerCtx {
        rank: world.rank,
        world_size: n,
        seed,
    };
    let mut fresh = registry::build(method, params, ctx)?;
    fresh.register(CHECKED, shape.rows, shape.cols)?;
    fresh.begin_step(0);
    let mut summed = s.comp.check_share(g.view(), fresh.as_mut())?;
    world.sum_f32_in_place(&mut summed);
    let probe = |rows, cols| gradient(Shape { rows, cols }, seed ^ 0x5eed, 0, 0);
    let mut c = CheckCtx {
        rows: shape.rows,
        cols: shape.cols,
        world_size: n,
        params,
        received: ex.received(),
        fresh: fresh.as_mut(),
        probe: &probe,
    };
    let local = s.comp.check_verdict(&out, &summed, &mut c)?;
    Ok(agree(world, local, &out))
}

/// This rank's verdict `local` on its result `out`, failed where `out` differs from rank
/// 0's, agreed across ranks: every rank returns the first failing rank's reason.
fn agree(world: &World, local: Verdict, out: &[f32]) -> Verdict {
    let mut root = out.to_vec();
    world.broadcast_f32(&mut root);
    let local = local.and_then(|()| match out.iter().zip(&root).position(|(a, b)| a.to_bits() != b.to_bits()) {
        None => Ok(()),
        Some(i) => Err(format!(
            "rank {}'s result differs from rank 0's at element {i} ({} vs {}): the workers do not agree",
            world.rank, out[i], root[i]
        )),
    });
    // Every rank reports the first failing rank's reason.
    let n = world.size as u64;
    let first = world.max_u64(if local.is_err() {
        n - world.rank as u64
    } else {
        0
    });
    if first == 0 {
        return Ok(());
    }
    let from = (n - first) as usize;
    let msg = world.broadcast_string_from(from, local.err().as_deref().unwrap_or(""));
    Err(if from == 0 {
        msg
    } else {
        format!("rank {from}: {msg}")
    })
}

/// The self-test's damage to this rank's result, at its largest-magnitude element.
fn damage(out: &mut [f32], fault: Fault) {
    let i = out
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .map_or(0, |(i, _)| i);
    out[i] = match fault {
        // Flip the sign of the largest-magnitude element: wrong for every method.
        Fault::Gross if out[i] == 0.0 => 1.0,
        Fault::Gross => -out[i] * 2.0,
        // One ulp away from zero: inside every reference tolerance.
        Fault::Ulp => f32::from_bits(out[i].to_bits() + 1),
    };
}
