//! The emulated accelerator: a thread that plays forward then backward, layer by layer
//! in backward order, waiting each layer's modelled time and announcing "gradient of
//! layer l ready". Compression and communication stay real (on the MPI thread).
//!
//! With device compression (`--compress-on device`) the communication thread also
//! queues *kernels* on this stream ([`Device::enqueue`]): a kernel queued while a
//! backward layer runs starts when that layer ends (after kernels queued before it) and
//! delays the remaining layers, as a DDP communication hook's kernels do on the current
//! stream (docs/methods.md, "Device kernels"); after backward it starts at once. The
//! queue is bookkeeping on the device clock (no handshake with this thread): the thread
//! adds the queued time to its next layer's deadline. The simulator's device stream
//! follows the same rule (src/sim/model/clock.rs, `DevStream`). While the host does the real
//! work the device is charged for, the communication thread pauses the device clock
//! ([`Device::pause`]): that host time does not exist on the emulated timeline.

use crate::config::ComputeMode;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// Drift of one iteration's realised compute from the model (a share): the larger of
/// `|fwd_s - fwd_model_s| / fwd_model_s` and `|bwd_s - bwd_model_s| / bwd_model_s`, over
/// the phases the model gives time (0 when it gives none). A thread that wakes late
/// (a busy machine, or layers shorter than the timer's slack) makes the forward longer
/// and, with absolute deadlines, the backward shorter: both count.
pub fn compute_drift(fwd_s: f64, fwd_model_s: f64, bwd_s: f64, bwd_model_s: f64) -> f64 {
    let rel = |real: f64, model: f64| {
        if model > 0.0 {
            (real - model).abs() / model
        } else {
            0.0
        }
    };
    rel(fwd_s, fwd_model_s).max(rel(bwd_s, bwd_model_s))
}

/// State shared between the device thread and the communication thread.
pub struct DeviceState {
    /// Iterations requested so far (the device runs iteration `go - 1`).
    pub go: u64,
    /// Gradients ready in the current iteration (count, in backward order).
    pub ready: usize,
    /// Seconds since the engine's base instant: forward end, backward end.
    pub fwd_end_s: f64,
    pub bwd_end_s: f64,
    /// Per backward position: the time its gradient became ready.
    pub ready_at_s: Vec<f64>,
    pub quit: bool,
    /// Layers of this iteration's backward (ready == layers: backward is over).
    pub layers: usize,
    /// Start and deadline of the layer running now (device clock).
    pub layer_start_s: f64,
    pub layer_end_s: f64,
    /// Kernels queued to run after the current layer, before the next (s).
    pub delay_s: f64,
    /// Kernels queued for the boundary before the current layer (it started when its
    /// predecessor's gradient became ready, before their request reached us): the
    /// current layer ends this much later (s).
    pub extend_s: f64,
    /// End of the last queued kernel (device clock).
    pub queue_end_s: f64,
    /// What the model asked of this iteration (s): the forward, and the backward with
    /// the kernels queued on the stream during it (the span between the forward's and
    /// the last layer's deadlines). The realised spans are `fwd_end_s` and `bwd_end_s`
    /// less their starts; [`compute_drift`] compares the two.
    pub fwd_model_s: f64,
    pub bwd_model_s: f64,
}

/// The device clock's pauses: total paused time and the start of the current pause
/// (wall seconds since the base instant).
#[derive(Default)]
struct Pause {
    total_s: f64,
    since_s: Option<f64>,
}

pub struct Device {
    pub state: Mutex<DeviceState>,
    pub to_device: Condvar,
    pub to_comm: Condvar,
    pub base: Instant,
    pause: Mutex<Pause>,
}

impl Device {
    pub fn new(layers: usize) -> Device {
        Device {
            state: Mutex::new(DeviceState {
                go: 0,
                ready: 0,
                fwd_end_s: 0.0,
                bwd_end_s: 0.0,
                ready_at_s: vec![0.0; layers],
                quit: false,
                layers,
                layer_start_s: 0.0,
                layer_end_s: 0.0,
                delay_s: 0.0,
                extend_s: 0.0,
                queue_end_s: 0.0,
                fwd_model_s: 0.0,
                bwd_model_s: 0.0,
            }),
            to_device: Condvar::new(),
            to_comm: Condvar::new(),
            base: Instant::now(),
            pause: Mutex::new(Pause::default()),
        }
    }

    /// The device clock: wall seconds since the base instant less the paused time
    /// (frozen during a pause).
    pub fn now_s(&self) -> f64 {
        let wall = self.base.elapsed().as_secs_f64();
        let p = self.pause.lock().unwrap_or_else(|e| e.into_inner());
        p.since_s.unwrap_or(wall) - p.total_s
    }

    /// Freeze the device clock (nothing on the device advances) until [`Device::resume`].
    pub fn pause(&self) {
        let wall = self.base.elapsed().as_secs_f64();
        let mut p = self.pause.lock().unwrap_or_else(|e| e.into_inner());
        if p.since_s.is_none() {
            p.since_s = Some(wall);
        }
    }

    /// Let the device clock run again after [`Device::pause`].
    pub fn resume(&self) {
        let wall = self.base.elapsed().as_secs_f64();
        let mut p = self.pause.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(since) = p.since_s.take() {
            p.total_s += wall - since;
        }
    }

    /// Queue a kernel of `seconds`, launched at `at_s` (device clock), on the device
    /// stream (communication thread); returns its end. It runs at the first layer
    /// boundary at or after `at_s`, after the kernels queued before it: before the
    /// layer running now when that layer started at or after `at_s` (the launch was
    /// due at its start: the layer is pushed back), else after it; at once when
    /// backward is over.
    pub fn enqueue(&self, seconds: f64, at_s: f64) -> f64 {
        let mut st = self.lock();
        let start = if st.ready >= st.layers {
            st.queue_end_s.max(at_s)
        } else if at_s <= st.layer_start_s && st.queue_end_s <= st.layer_start_s + st.extend_s {
            let start = st.layer_start_s + st.extend_s;
            st.extend_s += seconds;
            st.layer_end_s += seconds;
            start
        } else {
            st.delay_s += seconds;
            st.queue_end_s.max(st.layer_end_s)
        };
        st.queue_end_s = start + seconds;
        st.queue_end_s
    }

    /// When the first `k` gradients of this iteration were ready (device clock; the end
    /// of forward for `k = 0`).
    pub fn ready_at(&self, k: usize) -> f64 {
        let st = self.lock();
        if k == 0 {
            st.fwd_end_s
        } else {
            st.ready_at_s[k - 1]
        }
    }

    /// Wait (communication thread) until the device clock reaches `t_s`: sleep, then
    /// yield for the last stretch (a sleep overshoots by the timer slack, ~50 us).
    pub fn wait_clock(&self, t_s: f64) {
        loop {
            let left = t_s - self.now_s();
            if left <= 0.0 {
                return;
            }
            if left > 2e-4 {
                std::thread::sleep(crate::measure::duration_s(left - 1e-4));
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// The device thread: forward for `fwd_s`, then backward `bwd_s[pos]` per backward
    /// position, with absolute deadlines (no drift accumulates from late wake-ups).
    pub fn run(&self, fwd_s: f64, bwd_s: &[f64], mode: ComputeMode) {
        let mut done = 0u64;
        loop {
            {
                let mut st = self.lock();
                while st.go == done && !st.quit {
                    st = self.to_device.wait(st).unwrap_or_else(|e| e.into_inner());
                }
                if st.quit {
                    return;
                }
                done = st.go;
            }
            let start = self.now_s();
            let mut deadline = start
                + if mode == ComputeMode::None {
                    0.0
                } else {
                    fwd_s
                };
            let fwd_deadline = deadline;
            self.wait_until(deadline, mode);
            {
                let now = self.now_s();
                let mut st = self.lock();
                st.fwd_end_s = now;
                st.layer_end_s = now;
                st.fwd_model_s = fwd_deadline - start;
            }
            for (pos, &b) in bwd_s.iter().enumerate() {
                if mode != ComputeMode::None {
                    // Kernels queued during the previous layer run first.
                    let mut st = self.lock();
                    deadline += std::mem::take(&mut st.delay_s);
                    st.layer_start_s = deadline;
                    deadline += b;
                    st.layer_end_s = deadline;
                    drop(st);
                    loop {
                        self.wait_until(deadline, mode);
                        // Kernels inserted before this layer while it ran push it back.
                        let mut st = self.lock();
                        let ext = std::mem::take(&mut st.extend_s);
                        if ext <= 0.0 {
                            break;
                        }
                        deadline += ext;
                    }
                }
                let t = self.now_s();
                let mut st = self.lock();
                st.ready_at_s[pos] = t;
                st.ready = pos + 1;
                if pos + 1 == bwd_s.len() {
                    st.bwd_end_s = t;
                    st.bwd_model_s = deadline - fwd_deadline;
                }
                self.to_comm.notify_one();
            }
        }
    }

    fn wait_until(&self, deadline_s: f64, mode: ComputeMode) {
        loop {
            let left = deadline_s - self.now_s();
            if left <= 0.0 {
                return;
            }
            match mode {
                ComputeMode::Sleep => std::thread::sleep(crate::measure::duration_s(left)),
                _ => std::hint::spin_loop(),
            }
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, DeviceState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start the next iteration (communication thread).
    pub fn start_iteration(&self) {
        let mut st = self.lock();
        st.go += 1;
        st.ready = 0;
        st.delay_s = 0.0;
        st.extend_s = 0.0;
        self.to_device.notify_one();
    }

    /// Block until at least `n` gradients of this iteration are ready.
    pub fn wait_ready(&self, n: usize) {
        let mut st = self.lock();
        while st.ready < n {
            st = self.to_comm.wait(st).unwrap_or_else(|e| e.into_inner());
        }
    }

    pub fn stop(&self) {
        self.lock().quit = true;
        self.to_device.notify_one();
    }

    /// Run `f` (the iterations, on the calling thread) beside the device thread
    /// ([`Device::run`]), and stop the device thread however `f` ends. A panic in `f`
    /// reaches the caller: without the stop on the way out the device thread would wait
    /// for its next iteration forever and the scope with it (under the loopback backend,
    /// where no panic hook aborts, a test then hung in place of failing).
    pub fn beside<R>(
        &self,
        fwd_s: f64,
        bwd_s: &[f64],
        mode: ComputeMode,
        f: impl FnOnce() -> R,
    ) -> R {
        std::thread::scope(|sc| {
            sc.spawn(move || self.run(fwd_s, bwd_s, mode));
            let _stop = StopOnDrop(self);
            f()
        })
    }
}

/// Stops the device thread when dropped, on return or unwind ([`Device::beside`]).
struct StopOnDrop<'a>(&'a Device);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Beside the device thread: `f`'s value is returned, and a panic in `f` reaches the
    /// caller (the device thread stopped on the way out), within 10 s. The run happens
    /// on a thread of its own, so that a device thread left waiting fails this test
    /// instead of hanging it.
    #[test]
    fn a_panic_beside_the_device_thread_reaches_the_caller() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let dev = Device::new(2);
            let bwd = [1e-4, 1e-4];
            let value = dev.beside(1e-4, &bwd, ComputeMode::Sleep, || {
                dev.start_iteration();
                dev.wait_ready(2);
                7
            });
            let dev = Device::new(2); // a stopped device thread does not start again
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                dev.beside(1e-4, &bwd, ComputeMode::Sleep, || -> () {
                    panic!("an iteration failed")
                })
            }));
            let text = caught
                .err()
                .and_then(|e| e.downcast_ref::<&str>().map(|s| s.to_string()));
            tx.send((value, text)).unwrap();
        });
        let got = rx.recv_timeout(Duration::from_secs(10));
        assert_eq!(got, Ok((7, Some("an iteration failed".to_string()))));
    }

    /// One iteration as the engine times it: `t0` before the start, then the realised
    /// forward and backward against the model the device thread recorded.
    fn iteration(dev: &Device, stall: Option<Duration>) -> (f64, f64, f64, f64, f64) {
        let t0 = dev.now_s();
        match stall {
            None => dev.start_iteration(),
            Some(d) => {
                // A busy machine: the device thread is kept off its work (here by
                // holding the state it needs) for `d` after the iteration was started.
                let mut st = dev.lock();
                st.go += 1;
                st.ready = 0;
                dev.to_device.notify_one();
                std::thread::sleep(d);
                drop(st);
            }
        }
        let layers = dev.lock().layers;
        dev.wait_ready(layers);
        let st = dev.lock();
        (
            st.fwd_end_s - t0,
            st.fwd_model_s,
            st.bwd_end_s - st.fwd_end_s,
            st.bwd_model_s,
            compute_drift(
                st.fwd_end_s - t0,
                st.fwd_model_s,
                st.bwd_end_s - st.fwd_end_s,
                st.bwd_model_s,
            ),
        )
    }

    /// The device thread records what the model asked (forward 4 ms, backward 4 x 2 ms),
    /// and a thread kept from running for 30 ms drifts by more than the 10% warning
    /// threshold: the forward realised at least 30 ms against 4 ms modelled, a drift of
    /// at least (30 - 4) / 4 = 6.5.
    #[test]
    fn a_stalled_device_thread_reports_its_drift() {
        let dev = Device::new(4);
        let bwd = [2e-3; 4];
        std::thread::scope(|s| {
            s.spawn(|| dev.run(4e-3, &bwd, ComputeMode::Sleep));
            let (fwd, fwd_model, bwd_real, bwd_model, _) = iteration(&dev, None);
            assert!((fwd_model - 4e-3).abs() < 1e-12, "{fwd_model}");
            assert!((bwd_model - 8e-3).abs() < 1e-12, "{bwd_model}");
            assert!(fwd >= 4e-3 && bwd_real > 0.0, "{fwd} {bwd_real}");
            let (fwd, _, _, _, drift) = iteration(&dev, Some(Duration::from_millis(30)));
            assert!(fwd >= 30e-3, "{fwd}");
            assert!(drift >= (30e-3 - 4e-3) / 4e-3 - 1e-9, "drift {drift}");
            // Past the 10% warning threshold (docs/csv-schema.md, `compute_drift`).
            assert!(drift > 0.10);
            dev.stop();
        });
    }

    /// Drift by hand: the larger relative deviation of the two phases; a phase the model
    /// gives no time does not count.
    #[test]
    fn compute_drift_by_hand() {
        // Forward 10% long, backward 25% short (absolute deadlines: a late forward
        // shortens the backward).
        assert!((compute_drift(1.1e-3, 1e-3, 3e-3, 4e-3) - 0.25).abs() < 1e-12);
        assert!((compute_drift(1.5e-3, 1e-3, 4e-3, 4e-3) - 0.5).abs() < 1e-12);
        assert_eq!(compute_drift(1e-3, 1e-3, 4e-3, 4e-3), 0.0);
        assert_eq!(compute_drift(2e-5, 0.0, 1e-5, 0.0), 0.0);
    }
}
