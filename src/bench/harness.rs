//! The measurement protocol shared by every benchmark: barrier, warm-up, timed
//! iterations each timed on every rank with MPI_Wtime, then the per-iteration max over
//! ranks (each rank's own times are kept too, for samples.csv). Nothing is allocated inside the timed region. The barrier before each
//! iteration also agrees whether to stop (a signal, [`super::stop`]).

use crate::comm::World;
use crate::error::Result;
use std::hint::black_box;

/// Per-iteration durations (s) of one timed series.
pub struct Times {
    /// This rank's own durations (samples.csv).
    pub local: Vec<f64>,
    /// Per iteration, the max over ranks (the summary statistics' input).
    pub max: Vec<f64>,
}

impl Times {
    /// `local` and, reduced over ranks after the timed region, its per-iteration max.
    pub fn reduce(world: &World, local: Vec<f64>) -> Times {
        let mut max = local.clone();
        world.max_in_place(&mut max);
        Times { local, max }
    }
}

/// Run `warmup + iters` iterations of `op` on `state`; `prep` runs before each one,
/// outside the timed region (e.g. to restore an in-place input). Returns the `iters`
/// timed durations (s) of this rank and, per iteration, their max over ranks; under time
/// dilation in emulated seconds (wall / K; src/measure/dilation.rs).
pub fn time_iterations<S: ?Sized>(
    world: &World,
    iters: u64,
    warmup: u64,
    state: &mut S,
    mut prep: impl FnMut(&mut S),
    mut op: impl FnMut(&mut S) -> Result<()>,
) -> Result<Times> {
    let mut times = Vec::with_capacity(iters as usize);
    for i in 0..warmup + iters {
        prep(state);
        world.sync_or_stop()?;
        let t0 = world.time();
        op(state)?;
        let t1 = world.time();
        if i >= warmup {
            // A dilated run's wall time in the emulated cluster's seconds.
            times.push(world.dilation().emulated_s(t1 - t0));
        }
    }
    Ok(Times::reduce(world, times))
}

/// Calibrated CPU work for overlap tests (like OSU's `do_compute_cpu`): a dependent
/// floating-point chain whose length is chosen so that one `run` takes the target time.
pub struct Compute {
    steps: u64,
    acc: f64,
}

impl Compute {
    /// Calibrate on this core so that `run` takes about `target_s` seconds.
    pub fn calibrate(target_s: f64) -> Compute {
        let mut c = Compute {
            steps: 1 << 14,
            acc: 1.0,
        };
        // Grow until a trial is long enough to time reliably, then scale.
        loop {
            let t0 = crate::comm::wtime();
            c.run();
            let dt = crate::comm::wtime() - t0;
            if dt > 2e-3 || c.steps >= 1 << 40 {
                let per_step = dt / c.steps as f64;
                c.steps = ((target_s / per_step).round() as u64).max(1);
                return c;
            }
            c.steps *= 4;
        }
    }

    pub fn run(&mut self) {
        let mut x = self.acc;
        for _ in 0..self.steps {
            x = black_box(x * 1.000_000_1 + 1e-9);
        }
        self.acc = if x.is_finite() { x.fract() + 1.0 } else { 1.0 };
    }
}
