//! The emulated accelerator: a thread that plays forward then backward, layer by layer
//! in backward order, waiting each layer's modelled time and announcing "gradient of
//! layer l ready". Compression and communication stay real (on the MPI thread).

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How the device waits out a layer's compute time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum ComputeMode {
    /// No compute: every gradient is ready at once.
    None,
    /// Sleep until each layer's deadline (leaves the core to MPI ranks; default).
    Sleep,
    /// Busy-wait until each deadline (occupies a core like a real host thread driving a GPU).
    Spin,
}

impl ComputeMode {
    pub fn parse(s: &str) -> Option<ComputeMode> {
        match s {
            "none" => Some(ComputeMode::None),
            "sleep" => Some(ComputeMode::Sleep),
            "spin" => Some(ComputeMode::Spin),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ComputeMode::None => "none",
            ComputeMode::Sleep => "sleep",
            ComputeMode::Spin => "spin",
        }
    }
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
}

pub struct Device {
    pub state: Mutex<DeviceState>,
    pub to_device: Condvar,
    pub to_comm: Condvar,
    pub base: Instant,
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
            }),
            to_device: Condvar::new(),
            to_comm: Condvar::new(),
            base: Instant::now(),
        }
    }

    pub fn now_s(&self) -> f64 {
        self.base.elapsed().as_secs_f64()
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
            self.lock().fwd_end_s = self.now_s();
            for (pos, &b) in bwd_s.iter().enumerate() {
                if mode != ComputeMode::None {
                    deadline += b;
                    self.wait_until(deadline, mode);
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
