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
//! follows the same rule (src/sim/clock.rs, `DevStream`). While the host does the real
//! work the device is charged for, the communication thread pauses the device clock
//! ([`Device::pause`]): that host time does not exist on the emulated timeline.

use crate::config::ComputeMode;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
                std::thread::sleep(Duration::from_secs_f64(left - 1e-4));
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
            self.wait_until(deadline, mode);
            {
                let now = self.now_s();
                let mut st = self.lock();
                st.fwd_end_s = now;
                st.layer_end_s = now;
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
                ComputeMode::Sleep => std::thread::sleep(Duration::from_secs_f64(left)),
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
}
