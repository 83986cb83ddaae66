//! Tests of device compression: the device stream's kernel boundaries, a schedule by hand,
//! and host work paused on a shared core.

use super::*;

/// The device stream runs a requested kernel at the next kernel boundary and delays the
/// remaining backward by its length; after backward it runs at once.
#[test]
fn device_kernels_run_at_the_next_boundary_and_delay_the_rest_of_backward() {
    let bwd = [0.3, 0.2, 0.1];
    let mut d = crate::sim::clock::DevStream::new(1.0, &bwd);
    assert!(close(d.ready_s(0), 1.0));
    assert!(close(d.ready_s(1), 1.3));
    // Requested during position 1's kernel (1.3 .. 1.5): runs 1.5 .. 1.55.
    assert!(close(d.kernel(1.4, 0.05), 1.55));
    assert!(close(d.projected_bwd_end(), 1.65));
    assert!(close(d.ready_s(3), 1.65));
    // Requested exactly at a boundary: before the next backward kernel.
    let mut e = crate::sim::clock::DevStream::new(0.0, &bwd);
    assert!(close(e.kernel(0.3, 0.1), 0.4));
    assert!(close(e.ready_s(3), 0.7));
    // After backward: at the request time.
    assert!(close(e.kernel(2.0, 0.1), 2.1));
    assert!(close(e.ready_s(3), 0.7));
}

/// Device compression by hand: ssgd on `tiny` (backward order 0.1, 0.2, 0.3 s after a
/// 1 s forward), pipelining on, one bucket per tensor; every kernel costs one 0.01 s
/// launch (S-SGD: one compress, one decompress kernel per tensor) and every exchange
/// 0.01 s. Compression runs at the bucket's boundary and pushes the next layer back;
/// decompression after the exchange waits for the running layer.
#[test]
fn device_compression_schedule_by_hand() {
    let mut costs = CostModel::with_network(Box::new(Lin { a: 0.01, b: 0.0 }));
    costs.device = Some(launch_only_device(0.01));
    let mut case = tiny_ssgd(true);
    case.compress_on = CompressOn::Device;
    let r = simulate(&case, &costs).unwrap();
    // Bucket 0: ready 1.1, compress 1.1-1.11, exchange 1.11-1.12, layer 1 runs
    // 1.11-1.31, decompress 1.31-1.32. Bucket 1: compress 1.32-1.33, exchange 1.33-1.34,
    // layer 2 1.33-1.63, decompress 1.63-1.64. Bucket 2: compress 1.64-1.65, exchange
    // 1.65-1.66, decompress 1.66-1.67.
    assert!(close(r.bwd_s, 0.63), "bwd {}", r.bwd_s);
    assert!(close(r.iter_s, 1.67), "iter {}", r.iter_s);
    assert!(close(r.exposed_s, 0.04), "exposed {}", r.exposed_s);
    assert!(close(r.compress_s, 0.03) && close(r.decompress_s, 0.03));
    assert!(close(r.comm_s, 0.03) && close(r.pack_s, 0.0));
    // The host model's cost is reported beside it (tiny's sizes at the reference fit).
    assert!(r.host_compress_s > 0.0);
    // Without a device model the case is refused, naming the flag.
    let e = simulate(&case, &tiny_costs()).unwrap_err().to_string();
    assert!(e.contains("--compress-device"), "{e}");
}

#[test]
fn paused_host_work_on_a_shared_core_is_paid_in_the_next_exchange() {
    // Device compression on an oversubscribed host (cpu_share 0.5): the engine pauses the
    // device clock for the host's own compression, but the share of the core the rank
    // waits for other ranks is spent inside the next collective (measured at 4 ranks on
    // 2 cores: extra exchange time about 1x the host work). With share 1 nothing changes.
    let device = launch_only_device(0.01);
    let run = |share: f64, pipelining: bool| {
        let mut costs = tiny_costs();
        costs.pack_s_per_byte = 0.0;
        costs.pack_fixed_s = 0.0;
        costs.device = Some(device.clone());
        costs.host.cpu_share = share;
        let mut case = SimCase::new(
            tiny(),
            "ssgd",
            Fusion::None,
            pipelining,
            CollectiveMode::Native,
            4,
            MethodParams::default(),
        );
        case.compress_on = CompressOn::Device;
        simulate(&case, &costs).unwrap()
    };
    for pipelining in [false, true] {
        let full = run(1.0, pipelining);
        let half = run(0.5, pipelining);
        // Host work at full speed: ssgd's compress + decompress, 1e-4 s per element each
        // over 600 elements (tiny_costs), the gathered pieces at factor 1 for a sum.
        let work = full.host_compress_s + full.host_decompress_s;
        assert!(close(work, 0.12), "host work {work}");
        assert!(
            close(half.comm_s - full.comm_s, work),
            "pipelining {pipelining}: comm {} vs {}",
            half.comm_s,
            full.comm_s
        );
        // The device-charged phases are the same; the host columns report the share.
        assert!(close(half.compress_s, full.compress_s));
        assert!(close(half.host_compress_s, 2.0 * full.host_compress_s));
        assert!(half.iter_s > full.iter_s);
    }
}

/// With device compression, Marsit's ring merges are priced by its own decompress kernels
/// (docs/methods.md, "Device kernels"), so its ring pays transport only; S-SGD over the
/// same ring (`--collective ring`) still pays NCCL's reduction at the device's gamma.
#[test]
fn device_marsit_ring_pays_transport_only_and_ssgd_ring_pays_the_reduction() {
    let link = network::Link {
        alpha_s: 1e-5,
        beta_s_per_byte: 1e-9,
        gamma_s_per_byte: 0.25e-9,
    };
    // A slow device memory makes its reduction term (3 / bandwidth s/B) large.
    let mut device = launch_only_device(1e-6);
    device.spec.mem_bytes_per_s = 1e8;
    let gamma_dev = device.spec.reduce_s_per_byte();
    let mut costs = CostModel::with_network(Box::new(network::Analytic::new("t", link)));
    costs.device = Some(device);
    let n = 4;
    let run = |method: &str, collective: CollectiveMode| {
        let mut case = SimCase::new(
            tiny(),
            method,
            Fusion::Single,
            false,
            collective,
            n,
            MethodParams::default(),
        );
        case.compress_on = CompressOn::Device;
        simulate(&case, &costs).unwrap()
    };
    let transport = network::Link {
        gamma_s_per_byte: 0.0,
        ..link
    };
    let marsit = run("marsit", CollectiveMode::Native);
    assert_eq!(marsit.buckets, 1);
    let m = marsit.wire_bytes as f64;
    let want = network::our_ring_s(&transport, n, m);
    assert!(
        close(marsit.comm_s, want),
        "marsit comm {} want {want}",
        marsit.comm_s
    );
    let ssgd = run("ssgd", CollectiveMode::Ring);
    let m = ssgd.wire_bytes as f64;
    let reducing = network::Link {
        gamma_s_per_byte: gamma_dev,
        ..link
    };
    let want = network::our_ring_s(&reducing, n, m);
    assert!(
        close(ssgd.comm_s, want),
        "ssgd comm {} want {want}",
        ssgd.comm_s
    );
}

/// A merged bucket's device copies by hand: `tiny`'s 3 tensors compressed as one merged
/// unit (as omgs and sketch-fusion do), every kernel one 0.01 s launch: the copy into the
/// bucket is one launch per tensor (torch.cat), and so is the copy back: 6 launches,
/// 0.06 s of `pack_s` (one launch per bucket would give 0.02).
#[test]
fn device_copies_of_a_fused_bucket_are_one_launch_per_tensor() {
    let mut costs = CostModel::with_network(Box::new(Lin { a: 0.01, b: 0.0 }));
    costs.device = Some(launch_only_device(0.01));
    let mut case = tiny_ssgd(true);
    case.fusion = Fusion::Single;
    case.merge = true;
    case.compress_on = CompressOn::Device;
    let r = simulate(&case, &costs).unwrap();
    assert_eq!(r.plan.len(), 1);
    assert!(close(r.pack_s, 0.06), "pack {}", r.pack_s);
}

/// Merged device compression copies the bucket into one tensor and back: one copy
/// kernel per tensor each way, `launch + 2 x bytes / bandwidth` (roofline.rs `copy_s`)
/// of its 4-byte elements. `tiny` (600 elements in 3 tensors) in one bucket at 10 ms a
/// launch and 1 MB/s: 2 x (3 x 10 ms + 2 x 2,400 B / 1 MB/s) = 69.6 ms. On half a core
/// the host's share of the copies (`pack_s_per_byte` x 4 bytes an element, each way)
/// and of the wire's append (2,400 bytes) is paid in the exchanges: half of
/// 2 x 1 us x 2,400 B for each of the three, 7.2 ms more communication than on a whole core;
/// the one bucket's exchange follows backward, so the iteration is 7.2 ms longer too (the
/// copy back's share, paused after the last exchange, paid at the iteration's end).
/// On the host the same three are host work in `pack_s`: 3 x 2.4 ms, twice that on half
/// a core.
#[test]
fn merged_compression_copies_the_bucket_each_way() {
    let mut device = launch_only_device(0.01);
    device.spec.mem_bytes_per_s = 1e6;
    let run = |share: f64, on: CompressOn| {
        let mut costs = tiny_costs();
        costs.methods.insert("ssgd".into(), MethodCosts::default());
        costs.pack_fixed_s = 0.0;
        costs.pack_s_per_byte = 1e-6;
        costs.device = Some(device.clone());
        costs.host.cpu_share = share;
        let mut case = SimCase::new(
            tiny(),
            "ssgd",
            Fusion::Bytes(1 << 30),
            true,
            CollectiveMode::Native,
            2,
            MethodParams::default(),
        );
        case.merge = true;
        case.compress_on = on;
        simulate(&case, &costs).unwrap()
    };
    let whole = run(1.0, CompressOn::Device);
    assert!(close(whole.pack_s, 0.0696), "{whole:?}");
    let half = run(0.5, CompressOn::Device);
    assert!(close(half.pack_s, 0.0696), "{half:?}");
    assert!(
        close(half.comm_s - whole.comm_s, 7.2e-3),
        "{} vs {}",
        half.comm_s,
        whole.comm_s
    );
    assert!(
        close(half.iter_s - whole.iter_s, 7.2e-3),
        "{} vs {}",
        half.iter_s,
        whole.iter_s
    );
    for (share, want) in [(1.0, 7.2e-3), (0.5, 14.4e-3)] {
        let host = run(share, CompressOn::Host);
        assert!(close(host.pack_s, want), "{share}: {host:?}");
    }
}
