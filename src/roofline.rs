//! The roofline device model (docs/device.md, "Device compression costs"): a kernel
//! launch as the bytes it moves and the flops it does ([`Kernel`]), which half of a
//! round a kernel list describes ([`Stage`]), and a device ([`DeviceSpec`], presets with
//! their cited sources) that prices a kernel as
//! `launch_s + max(bytes / memory bandwidth, flops / throughput)`. Methods list their
//! kernels in these terms (`crate::compress`); `crate::devcost` charges them.

/// Which half of a round a kernel list describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Compression of one tensor for one round, error feedback included.
    Compress,
    /// Decompression of one round's received data (every worker's piece of a gathered
    /// wire) into the tensor's update, residual updates that need it included.
    Decompress,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Compress => "compress",
            Stage::Decompress => "decompress",
        }
    }
}

/// One device kernel launch: the bytes it moves to and from device memory and the
/// floating-point operations it does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Kernel {
    /// What it is (`abs`, `radix select pass`, `P = M Q`, ...), for listings and tests.
    pub name: &'static str,
    pub bytes: f64,
    pub flops: f64,
    /// The reading of the reference code this launch belongs to, where references (or
    /// readings of one) launch the same step differently; `None`: every reading launches
    /// it. A [`DeviceSpec`] launches only the kernels of the readings it selects.
    pub reading: Option<Reading>,
}

/// One reading of a step that references launch differently: `choice` (a key of
/// [`READINGS`]) and the `variant` this kernel belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub choice: &'static str,
    pub variant: &'static str,
}

/// The steps whose launches differ between references, with their variants (the first is
/// the default) and where each comes from (docs/methods.md, "Device kernels"; selected
/// with `--compress-device NAME:CHOICE=VARIANT`).
pub const READINGS: &[(&str, &[&str], &str)] = &[
    (
        "topk_decompress",
        &["loop", "dense-sum", "index-add"],
        "top-k decompression of the gathered pairs: `loop` a Python loop over the workers \
         (HKBU-HPML/OMGS-SGD hv_distributed_optimizer.py `synchronize`), `dense-sum` a \
         dense tensor per worker summed (sands-lab/grace communicator/allgather.py \
         `wait_receive`, compressor/topk.py `desparsify`, `Compressor.aggregate`), \
         `index-add` one `index_add_` of every worker's pairs \
         (analysis/profile_compress.py `decompress_topk`)",
    ),
    (
        "orth",
        &["reference", "gram-schmidt", "householder"],
        "orthogonalisation of a low-rank factor (powersgd, acpsgd): `reference` each \
         method's own (PyTorch's powerSGD_hook `_orthogonalize`: Gram-Schmidt per column; \
         lzhangbv/acpsgd: `torch.linalg.qr`, read as unblocked Householder), \
         `gram-schmidt` or `householder` for both",
    ),
];

/// Whether the default readings (each choice's first variant) launch `k`.
pub fn launched_by_default(k: &Kernel) -> bool {
    match k.reading {
        None => true,
        Some(r) => READINGS
            .iter()
            .find(|c| c.0 == r.choice)
            .is_some_and(|c| c.1[0] == r.variant),
    }
}

impl Kernel {
    /// A memory-bound kernel moving `bytes` (reads plus writes).
    pub fn mem(name: &'static str, bytes: f64) -> Kernel {
        Kernel {
            name,
            bytes,
            flops: 0.0,
            reading: None,
        }
    }

    /// This kernel as part of reading `variant` of `choice` ([`READINGS`]) only.
    pub fn in_reading(self, choice: &'static str, variant: &'static str) -> Kernel {
        debug_assert!(
            READINGS
                .iter()
                .any(|r| r.0 == choice && r.1.contains(&variant)),
            "{choice}={variant} is not a reading"
        );
        Kernel {
            reading: Some(Reading { choice, variant }),
            ..self
        }
    }

    /// A copy of `bytes`: read them and write them.
    pub fn copy(name: &'static str, bytes: f64) -> Kernel {
        Kernel::mem(name, 2.0 * bytes)
    }

    /// A dense fp32 GEMM `(m x k) (k x n)`: reads both operands, writes the product.
    pub fn gemm(name: &'static str, m: usize, k: usize, n: usize) -> Kernel {
        let (m, k, n) = (m as f64, k as f64, n as f64);
        Kernel {
            name,
            bytes: 4.0 * (m * k + k * n + m * n),
            flops: 2.0 * m * k * n,
            reading: None,
        }
    }
}

/// A device's throughput for the roofline of one kernel. Presets from vendor
/// specifications times stated efficiency factors (docs/device.md, "Device
/// compression costs").
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceSpec {
    pub name: String,
    /// Per kernel: launch and dispatch latency (s).
    pub launch_s: f64,
    /// Achievable device-memory bandwidth (bytes/s).
    pub mem_bytes_per_s: f64,
    /// Achievable fp32 throughput (FLOP/s).
    pub flops_per_s: f64,
    /// The readings selected where references differ ([`READINGS`]); a choice not listed
    /// takes its first (default) variant.
    pub readings: Vec<Reading>,
}

/// Fraction of the peak memory bandwidth a streaming kernel achieves (BabelStream-style
/// triad on V100/A100 reaches 85-90 %; element-wise PyTorch kernels with index and mask
/// traffic somewhat less).
pub const MEM_EFFICIENCY: f64 = 0.8;
/// Fraction of the fp32 peak a cuBLAS SGEMM reaches on the shapes that are compute
/// bound at all (the tall-skinny low-rank GEMMs are memory bound on every preset).
pub const FLOPS_EFFICIENCY: f64 = 0.7;
/// Per-kernel launch latency: a CUDA launch (2-5 us) plus PyTorch's eager dispatch.
pub const LAUNCH_S: f64 = 5e-6;
/// Largest `launch_us` option: 2,000x [`LAUNCH_S`]. A launch this slow is no GPU's; past
/// it a value is a unit mistake (seconds or nanoseconds given as microseconds), and
/// every queued kernel would stall the emulated device for that long.
pub const MAX_LAUNCH_US: f64 = 10_000.0;

/// (name, peak memory GB/s, peak fp32 TFLOP/s, source)
const PRESETS: &[(&str, f64, f64, &str)] = &[
    (
        "v100",
        900.0,
        15.7,
        "NVIDIA Tesla V100 SXM2 datasheet: 900 GB/s HBM2, 15.7 TFLOP/s fp32",
    ),
    (
        "rtx2080ti",
        616.0,
        13.4,
        "NVIDIA GeForce RTX 2080 Ti (Turing) specifications: 616 GB/s GDDR6, 13.4 TFLOP/s fp32",
    ),
    (
        "a100",
        1555.0,
        19.5,
        "NVIDIA A100 SXM4 40GB datasheet: 1,555 GB/s HBM2, 19.5 TFLOP/s fp32",
    ),
    (
        "h100",
        3350.0,
        67.0,
        "NVIDIA H100 SXM5 datasheet: 3.35 TB/s HBM3, 67 TFLOP/s fp32",
    ),
    (
        "h200",
        4800.0,
        67.0,
        "NVIDIA H200 SXM datasheet: 4.8 TB/s HBM3e, 67 TFLOP/s fp32",
    ),
    // OMGS-SGD's GPU (Shi et al., INFOCOM 2020; HKBU-HPML/OMGS-SGD utils.py at ac10b98).
    // NVIDIA publishes no datasheet for this mining board; the figures are the GP102-100
    // board's configuration as the TechPowerUp GPU database lists it (board PG611 SKU 100).
    (
        "p102-100",
        440.32,
        10.7712,
        "NVIDIA P102-100 (GP102, board PG611 SKU 100; TechPowerUp GPU database, no NVIDIA datasheet): 320-bit GDDR5X at 11 Gb/s (1376 MHz) = 440.32 GB/s; 3200 CUDA cores x 2 x 1683 MHz boost = 10.7712 TFLOP/s fp32",
    ),
];

impl DeviceSpec {
    /// The preset called `name` (`v100`, `rtx2080ti`, `a100`, `h100`, `h200`, `p102-100`).
    pub fn preset(name: &str) -> Option<DeviceSpec> {
        PRESETS
            .iter()
            .find(|p| p.0 == name)
            .map(|&(name, gbps, tflops, _)| DeviceSpec {
                name: name.to_string(),
                launch_s: LAUNCH_S,
                mem_bytes_per_s: MEM_EFFICIENCY * gbps * 1e9,
                flops_per_s: FLOPS_EFFICIENCY * tflops * 1e12,
                readings: Vec::new(),
            })
    }

    /// A preset, optionally with options after a colon, comma-separated:
    /// `launch_us=X` replaces its launch latency (e.g. `v100:launch_us=1` for launches
    /// captured in a CUDA graph) and `CHOICE=VARIANT` selects a reading ([`READINGS`],
    /// e.g. `v100:topk_decompress=index-add`). The error names the value and what is
    /// allowed.
    pub fn parse(s: &str) -> Result<DeviceSpec, String> {
        let (name, opts) = s.split_once(':').unwrap_or((s, ""));
        let mut spec = DeviceSpec::preset(name).ok_or_else(|| {
            format!(
                "unknown compression device '{name}'; allowed: {} (optionally \
                 NAME:launch_us=X,CHOICE=VARIANT)",
                DeviceSpec::preset_names().collect::<Vec<_>>().join(", ")
            )
        })?;
        if opts.is_empty() {
            return Ok(spec);
        }
        let allowed = || {
            let mut a = vec![format!(
                "launch_us=X (0 <= X <= {MAX_LAUNCH_US} microseconds per kernel launch)"
            )];
            a.extend(
                READINGS
                    .iter()
                    .map(|(c, v, _)| format!("{c}={}", v.join("|"))),
            );
            a.join(", ")
        };
        for opt in opts.split(',') {
            let bad = || {
                format!(
                    "'{s}': option '{opt}' is not allowed; after the preset name give \
                     comma-separated {}, e.g. '{name}:launch_us=1'",
                    allowed()
                )
            };
            let (key, value) = opt.split_once('=').ok_or_else(bad)?;
            if opts
                .split(',')
                .filter(|o| o.split('=').next() == Some(key))
                .count()
                > 1
            {
                return Err(format!(
                    "'{s}': option '{key}' is given more than once; give it once"
                ));
            }
            if key == "launch_us" {
                let us = value
                    .parse::<f64>()
                    .ok()
                    .filter(|v| (0.0..=MAX_LAUNCH_US).contains(v))
                    .ok_or_else(bad)?;
                spec.launch_s = us * 1e-6;
                continue;
            }
            let (choice, variants, _) = READINGS.iter().find(|r| r.0 == key).ok_or_else(bad)?;
            let variant = variants.iter().find(|v| **v == value).ok_or_else(bad)?;
            spec.readings.push(Reading { choice, variant });
        }
        spec.name = s.to_string();
        Ok(spec)
    }

    /// Whether this device launches `k`: kernels of no reading always, others when their
    /// reading is the selected (or default) variant of its choice.
    pub fn launches(&self, k: &Kernel) -> bool {
        let Some(r) = k.reading else {
            return true;
        };
        match self.readings.iter().find(|s| s.choice == r.choice) {
            Some(s) => s.variant == r.variant,
            None => launched_by_default(k),
        }
    }

    /// Names of the presets.
    pub fn preset_names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|p| p.0)
    }

    /// The vendor source of preset `name`.
    pub fn preset_source(name: &str) -> Option<&'static str> {
        PRESETS.iter().find(|p| p.0 == name).map(|p| p.3)
    }

    /// Roofline time of one kernel (s); 0 for a kernel of a reading this device does not
    /// select ([`DeviceSpec::launches`]).
    pub fn kernel_s(&self, k: &Kernel) -> f64 {
        if !self.launches(k) {
            return 0.0;
        }
        self.launch_s + f64::max(k.bytes / self.mem_bytes_per_s, k.flops / self.flops_per_s)
    }

    /// Time of a copy of `bytes` in `launches` kernels (packing, unpacking, splitting).
    pub fn copy_s(&self, bytes: f64, launches: usize) -> f64 {
        launches as f64 * self.launch_s + 2.0 * bytes / self.mem_bytes_per_s
    }

    /// Seconds per byte of an element-wise fp32 reduction `a += b` (reads two operands,
    /// writes one): the reduction arithmetic inside a collective when NCCL runs it on the
    /// device (the simulator's `gamma`).
    pub fn reduce_s_per_byte(&self) -> f64 {
        3.0 / self.mem_bytes_per_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_price_kernels_by_roofline() {
        let v = DeviceSpec::preset("v100").unwrap();
        assert!((v.mem_bytes_per_s - 720e9).abs() < 1.0);
        // 720 MB at 720 GB/s: 1 ms plus one launch.
        let k = Kernel::mem("stream", 720e6);
        assert!((v.kernel_s(&k) - (1e-3 + LAUNCH_S)).abs() < 1e-12);
        // A square GEMM is compute bound: 2 n^3 flops at 0.7 x 15.7 TFLOP/s.
        let g = Kernel::gemm("gemm", 4096, 4096, 4096);
        let want = LAUNCH_S + 2.0 * 4096f64.powi(3) / (0.7 * 15.7e12);
        assert!((v.kernel_s(&g) - want).abs() < 1e-12);
        // A rank-4 GEMM is memory bound.
        let p = Kernel::gemm("P = M Q", 4096, 4096, 4);
        assert!((v.kernel_s(&p) - (LAUNCH_S + p.bytes / 720e9)).abs() < 1e-12);
        // Faster devices are faster.
        let h = DeviceSpec::preset("h100").unwrap();
        assert!(h.kernel_s(&k) < DeviceSpec::preset("a100").unwrap().kernel_s(&k));
        assert!(DeviceSpec::preset("a100").unwrap().kernel_s(&k) < v.kernel_s(&k));
        assert!(DeviceSpec::preset("p100").is_none());
        // A launch latency override: only the launch term changes.
        let g = DeviceSpec::parse("v100:launch_us=1").unwrap();
        assert!((g.kernel_s(&k) - (1e-3 + 1e-6)).abs() < 1e-12);
        assert_eq!(g.mem_bytes_per_s, v.mem_bytes_per_s);
        assert_eq!(g.name, "v100:launch_us=1");
        for bad in [
            "p100",
            "v100:launch_us=-1",
            "v100:launch=1",
            "v100:launch_us=x",
            // Past the bound (a unit mistake): 1e12 us slept forever, 1e30 panicked.
            "v100:launch_us=10000.001",
            "v100:launch_us=1e12",
            "v100:launch_us=1e30",
            "v100:launch_us=inf",
            "v100:launch_us=NaN",
            "v100:launch_us=1,launch_us=2",
        ] {
            let e = DeviceSpec::parse(bad).unwrap_err();
            assert!(e.contains("launch_us") && e.contains("'"), "{bad}: {e}");
        }
        // The bound itself is allowed; a repeated reading is refused like a repeated launch.
        let g = DeviceSpec::parse("v100:launch_us=10000").unwrap();
        assert!((g.launch_s - 1e-2).abs() < 1e-15);
        let e = DeviceSpec::parse("v100:orth=reference,orth=householder").unwrap_err();
        assert!(e.contains("more than once"), "{e}");
        for n in DeviceSpec::preset_names() {
            assert!(DeviceSpec::preset_source(n).unwrap().contains("NVIDIA"));
        }
    }

    /// `CHOICE=VARIANT` selects which reading's kernels launch; the default is each
    /// choice's first variant; a kernel of no reading always launches; bad options name
    /// what is allowed.
    #[test]
    fn readings_select_which_kernels_launch() {
        let k = Kernel::mem("x", 1e6);
        let of = |v: &'static str| k.in_reading("topk_decompress", v);
        let v = DeviceSpec::preset("v100").unwrap();
        assert!(v.launches(&k) && v.launches(&of("loop")));
        assert!(!v.launches(&of("dense-sum")) && !v.launches(&of("index-add")));
        assert_eq!(v.kernel_s(&of("index-add")), 0.0);
        let s = DeviceSpec::parse("v100:launch_us=2,topk_decompress=index-add").unwrap();
        assert!(s.launches(&k) && s.launches(&of("index-add")) && !s.launches(&of("loop")));
        assert!((s.kernel_s(&of("index-add")) - (2e-6 + 1e6 / 720e9)).abs() < 1e-15);
        assert_eq!(s.name, "v100:launch_us=2,topk_decompress=index-add");
        // A choice selected twice is refused, not decided by its last selection.
        let e = DeviceSpec::parse("h200:topk_decompress=loop,topk_decompress=dense-sum");
        assert!(e.unwrap_err().contains("more than once"));
        for bad in [
            "v100:topk_decompress=scatter",
            "v100:qr=call",
            "v100:topk_decompress",
            "v100:launch_us=1,",
        ] {
            let e = DeviceSpec::parse(bad).unwrap_err();
            assert!(
                e.contains("topk_decompress=loop|dense-sum|index-add") && e.contains(bad),
                "{bad}: {e}"
            );
        }
    }

    /// Each preset's peak bandwidth and fp32 throughput are the numbers its cited source
    /// states; P102-100's follow from its bus, data rate, cores and clock (computed here
    /// from those primary figures, not from the preset).
    #[test]
    fn presets_match_their_cited_sources() {
        for &(name, gbps, tflops, source) in PRESETS {
            let spec = DeviceSpec::preset(name).unwrap();
            let peak_gbps = spec.mem_bytes_per_s / MEM_EFFICIENCY / 1e9;
            let peak_tflops = spec.flops_per_s / FLOPS_EFFICIENCY / 1e12;
            assert!((peak_gbps - gbps).abs() < 1e-6 && (peak_tflops - tflops).abs() < 1e-9);
            let tb = format!("{} TB/s", gbps / 1000.0);
            let gb = format!("{gbps} GB/s");
            let gb_sep = format!("{},{:03} GB/s", (gbps / 1000.0) as u64, gbps as u64 % 1000);
            assert!(
                source.contains(&gb) || source.contains(&tb) || source.contains(&gb_sep),
                "{name}: {gbps} GB/s not in its source '{source}'"
            );
            assert!(
                source.contains(&format!("{tflops} TFLOP/s")),
                "{name}: {tflops} TFLOP/s not in its source '{source}'"
            );
        }
        let p = DeviceSpec::preset("p102-100").unwrap();
        let bus_bits = 320.0;
        let gbit_per_pin = 4.0 * 2.0 * 1.376; // GDDR5X: 8 transfers per 1376 MHz clock
        assert!(
            (p.mem_bytes_per_s / MEM_EFFICIENCY - bus_bits / 8.0 * gbit_per_pin * 1e9).abs() < 1e3
        );
        assert!((p.flops_per_s / FLOPS_EFFICIENCY - 3200.0 * 2.0 * 1.683e9).abs() < 1e3);
    }
}
