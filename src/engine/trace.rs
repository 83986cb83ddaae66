//! Chrome trace (the JSON Trace Event Format that Perfetto and chrome://tracing open) of
//! rank 0's timed iterations: forward, backward per layer, compress, collectives,
//! decompress. Events go into a buffer reserved up front; recording allocates nothing.

use super::device::Device;
use super::TensorSpec;
use serde::Serialize;

pub const ITER: u32 = 0;
pub const DEVICE: u32 = 1;
pub const COMM: u32 = 2;

#[derive(Clone, Copy, Debug)]
struct Span {
    name: &'static str,
    tid: u32,
    /// Tensor id (compress, decompress, backward) or bucket index (collective).
    id: i64,
    start_s: f64,
    end_s: f64,
}

/// Recorded spans; `dropped` counts those that did not fit.
pub struct Trace {
    spans: Vec<Span>,
    pub dropped: usize,
    /// Time dilation: spans are recorded in wall seconds and written / K.
    pub dilation: crate::measure::dilation::Dilation,
}

impl Trace {
    pub fn with_capacity(n: usize) -> Trace {
        Trace {
            spans: Vec::with_capacity(n),
            dropped: 0,
            dilation: crate::measure::dilation::Dilation::NONE,
        }
    }

    /// Make room for `n` more spans (setup, outside timed regions).
    pub fn reserve(&mut self, n: usize) {
        self.spans.reserve(n);
    }

    pub fn span(&mut self, name: &'static str, tid: u32, id: i64, start_s: f64, end_s: f64) {
        if self.spans.len() < self.spans.capacity() {
            self.spans.push(Span {
                name,
                tid,
                id,
                start_s,
                end_s,
            });
        } else {
            self.dropped += 1;
        }
    }

    /// Forward and per-layer backward spans of the iteration that started at `t0`.
    pub fn iteration(
        &mut self,
        dev: &Device,
        t0: f64,
        fwd_end: f64,
        t_end: f64,
        bwd_order: &[usize],
    ) {
        self.span("iteration", ITER, -1, t0, t_end);
        self.span("forward", DEVICE, -1, t0, fwd_end);
        let st = dev.lock();
        let mut prev = fwd_end;
        for (pos, &t) in bwd_order.iter().enumerate() {
            let at = st.ready_at_s[pos];
            if self.spans.len() < self.spans.capacity() {
                self.spans.push(Span {
                    name: "backward",
                    tid: DEVICE,
                    id: t as i64,
                    start_s: prev,
                    end_s: at,
                });
            } else {
                self.dropped += 1;
            }
            prev = at;
        }
    }

    /// The trace as JSON; `tensors` names the layers.
    pub fn to_json(&self, tensors: &[TensorSpec]) -> serde_json::Result<Vec<u8>> {
        #[derive(Serialize)]
        struct Ev<'a> {
            name: &'a str,
            cat: &'a str,
            ph: &'a str,
            ts: f64,
            dur: f64,
            pid: u32,
            tid: u32,
            args: serde_json::Value,
        }
        let mut evs = Vec::with_capacity(self.spans.len() + 3);
        for (tid, name) in [
            (ITER, "iteration"),
            (DEVICE, "device (emulated)"),
            (COMM, "communication (MPI)"),
        ] {
            evs.push(serde_json::json!({"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}));
        }
        for s in &self.spans {
            let label = match (s.name, usize::try_from(s.id).ok()) {
                ("collective" | "collective r0" | "collective r1", Some(b)) => {
                    format!("bucket {b}")
                }
                (_, Some(t)) => tensors
                    .get(t)
                    .map_or_else(|| format!("{t}"), |x| x.name.clone()),
                _ => String::new(),
            };
            let ev = Ev {
                name: s.name,
                cat: if s.tid == DEVICE { "compute" } else { "sync" },
                ph: "X",
                ts: self.dilation.emulated_s(s.start_s) * 1e6,
                dur: (self.dilation.emulated_s(s.end_s - s.start_s) * 1e6).max(0.0),
                pid: 0,
                tid: s.tid,
                args: serde_json::json!({ "what": label }),
            };
            evs.push(serde_json::to_value(ev)?);
        }
        serde_json::to_vec(
            &serde_json::json!({ "traceEvents": evs, "displayTimeUnit": "ms", "otherData": { "dropped_spans": self.dropped } }),
        )
    }
}
