//! The wire types and the [`Compressor`] trait's defaults, by hand.
use super::*;
use ndarray::Array2;

#[test]
fn aggregations_are_named_as_configs_write_them() {
    assert_eq!(Aggregation::AllReduce.name(), "allreduce");
    assert_eq!(Aggregation::AllGather.name(), "allgather");
    assert_eq!(Aggregation::Ring.name(), "ring");
}

/// fp32: 4 bytes an element, one phase, the threshold as given, DDP's rule.
#[test]
fn gradient_bytes_sizing_by_hand() {
    let f = FusionSizing::gradient_bytes(&[(2, 3), (1, 5)]);
    assert_eq!(f.phase_bytes, [vec![24, 20]]);
    assert_eq!(f.threshold_scale, [1.0]);
    assert_eq!(f.rule, CloseRule::AtThreshold);
}

#[test]
fn a_compress_error_is_bad_input() {
    let e: crate::error::Error = CompressError::Unsupported {
        method: "m",
        msg: "x".into(),
    }
    .into();
    assert!(matches!(e, crate::error::Error::Usage(_)), "{e:?}");
    assert_eq!(e.to_string(), "method m: x");
}

fn len(sum_f32: usize, gather_u32: usize, ring_u32: usize, gather_exact: bool) -> WireLen {
    WireLen {
        sum_f32,
        gather_u32,
        ring_u32,
        gather_exact,
    }
}

/// 1, 2 and 3 words: 4 x 6 = 24 bytes.
#[test]
fn a_wire_is_four_bytes_a_word_of_every_section() {
    let mut w = Wire::with_touched_capacity(len(1, 2, 3, true));
    assert_eq!(w.lens(), len(0, 0, 0, false));
    assert!(w.sum_f32.capacity() >= 1 && w.gather_u32.capacity() >= 2);
    assert!(w.ring_u32.capacity() >= 3);
    w.sum_f32.push(1.0);
    w.gather_u32.extend([1, 2]);
    w.ring_u32.extend([1, 2, 3]);
    assert_eq!(w.lens(), len(1, 2, 3, false));
    assert_eq!(w.bytes(), 24);
    assert_eq!(len(1, 2, 3, false).bytes(), 24);
    w.clear();
    assert_eq!((w.lens(), w.bytes()), (len(0, 0, 0, false), 0));
    let mut r = Wire::default();
    r.reserve(len(5, 6, 7, false));
    assert!(r.sum_f32.capacity() >= 5 && r.gather_u32.capacity() >= 6);
    assert!(r.ring_u32.capacity() >= 7);
}

#[test]
fn a_wire_len_of_an_aggregation_fills_its_one_section() {
    assert_eq!(
        WireLen::of(Aggregation::AllReduce, 5, true),
        len(5, 0, 0, false)
    );
    assert_eq!(
        WireLen::of(Aggregation::AllGather, 5, true),
        len(0, 5, 0, true)
    );
    assert_eq!(
        WireLen::of(Aggregation::AllGather, 5, false),
        len(0, 5, 0, false)
    );
    assert_eq!(WireLen::of(Aggregation::Ring, 5, true), len(0, 0, 5, false));
}

/// Section by section; exact only when both are.
#[test]
fn wire_lens_max_and_plus_by_section() {
    let (a, b) = (len(1, 20, 3, true), len(10, 2, 30, false));
    assert_eq!(a.max(b), len(10, 20, 30, false));
    assert_eq!(a.plus(b), len(11, 22, 33, false));
    assert_eq!(a.max(a), len(1, 20, 3, true));
    assert_eq!(a.plus(a), len(2, 40, 6, true));
}

/// An exact gather section must hold its declared words; a variable one any number.
#[test]
fn an_exact_gather_section_must_hold_its_words() {
    let mut w = Wire::default();
    w.gather_u32.extend([1, 2]);
    assert!(len(0, 2, 0, true).exact_gather_of("m", &w).unwrap());
    assert!(!len(0, 3, 0, false).exact_gather_of("m", &w).unwrap());
    let e = len(0, 3, 0, true).exact_gather_of("m", &w).unwrap_err();
    assert_eq!(
        e.to_string(),
        "method m: declared an exact gather section of 3 words but produced 2 (a bug in the method)"
    );
}

/// Worker `w`'s words start after the counts of the workers before it.
#[test]
fn received_gathered_slices_each_workers_section() {
    let words = [1, 2, 3, 4, 5];
    let counts = [2, 0, 3];
    let r = Received {
        sum_f32: &[],
        gathered_u32: &words,
        gather_counts: &counts,
        ring_u32: &[],
        world_size: 3,
    };
    assert_eq!(r.gathered(0), [1, 2]);
    assert!(r.gathered(1).is_empty());
    assert_eq!(r.gathered(2), [3, 4, 5]);
}

/// A compressor that overrides nothing it need not: the dense average.
struct Dense {
    shape: (usize, usize),
}

impl Compressor for Dense {
    fn name(&self) -> &'static str {
        "dense"
    }
    fn aggregation(&self) -> Aggregation {
        Aggregation::AllReduce
    }
    fn register(&mut self, _t: TensorId, rows: usize, cols: usize) -> Result<()> {
        self.shape = (rows, cols);
        Ok(())
    }
    fn wire_capacity(&self, _t: TensorId, _round: usize) -> WireLen {
        len(self.shape.0 * self.shape.1, 0, 0, false)
    }
    fn compress(
        &mut self,
        _t: TensorId,
        _round: usize,
        grad: ArrayView2<f32>,
        wire: &mut Wire,
    ) -> Result<()> {
        wire.clear();
        wire.sum_f32.extend(grad.iter());
        Ok(())
    }
    fn device_kernels(
        &self,
        _t: TensorId,
        _round: usize,
        _phase: usize,
        _stage: crate::roofline::Stage,
        _out: &mut dyn FnMut(crate::roofline::Kernel),
    ) {
    }
    fn decompress(
        &mut self,
        _t: TensorId,
        _round: usize,
        received: &Received,
        mut out: ArrayViewMut2<f32>,
    ) -> Result<()> {
        let n = received.world_size as f32;
        for (o, s) in out.iter_mut().zip(received.sum_f32) {
            *o = s / n;
        }
        Ok(())
    }
}

/// The trait's defaults: one round, one phase, the phase's wire the capacity, no
/// selection apart, no ring, real-valued check gradients, each worker's share its own
/// decode, the verdict the mean of the shares at rtol 1e-5.
#[test]
fn the_compressor_defaults() {
    let mut c = Dense { shape: (0, 0) };
    c.register(0, 2, 2).unwrap();
    assert_eq!((c.rounds(), c.phases()), (1, 1));
    assert_eq!(c.phase_wire(0, 0, 0), len(4, 0, 0, false));
    assert_eq!(c.selection_elems(0), 0);
    c.begin_step(3);
    assert!(c.feedback(0, 0).is_ok());
    let e = c.ring_merge(0, 1, 0, &[1], &mut [2]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "method dense: does not aggregate along a ring"
    );
    assert!(!c.check_integer_gradient());
    let g = Array2::from_shape_vec((2, 2), vec![1.0f32, -2.0, 3.0, 4.5]).unwrap();
    let mut fresh = Dense { shape: (0, 0) };
    fresh.register(check::CHECKED, 2, 2).unwrap();
    assert_eq!(
        c.check_share(g.view(), &mut fresh).unwrap(),
        [1.0, -2.0, 3.0, 4.5]
    );
    // Two workers' shares summed; the result their mean, then one element off.
    let summed = [2.0f32, -4.0, 6.0, 9.0];
    let p = MethodParams::default();
    let probe = |r: usize, c: usize| Array2::zeros((r, c));
    let mut ctx = check::CheckCtx::two_workers((2, 2), &p, &summed, &mut fresh, &probe);
    let ok = c.check_verdict(&[1.0, -2.0, 3.0, 4.5], &summed, &mut ctx);
    assert_eq!(ok.unwrap(), Ok(()));
    let off = c.check_verdict(&[1.0, -2.0, 3.0, 4.6], &summed, &mut ctx);
    assert!(off.unwrap().unwrap_err().contains("element 3 is 4.6"));
}
