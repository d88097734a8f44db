//! How far apart two results are, in units in the last place (ULPs) and absolutely.

use ndarray::{ArrayBase, Data, Dimension};

// ANCHOR: ulps
/// How many f32 values lie between `a` and `b`, counting one of the two: 0 when they are equal
/// (+0 and −0 too), 1 for neighbours. The bits of a float, read as a signed integer and with the
/// negative ones flipped, count the floats in order.
pub fn ulps(a: f32, b: f32) -> u64 {
    let ordered = |x: f32| {
        let bits = i64::from(x.to_bits() as i32);
        if bits < 0 {
            i64::from(i32::MIN) - bits
        } else {
            bits
        }
    };
    (ordered(a) - ordered(b)).unsigned_abs()
}

/// The spacing of the f32 values at `x`: one ULP of it.
pub fn ulp_of(x: f32) -> f32 {
    let x = x.abs();
    x.next_up() - x
}

/// The largest differences between two arrays of the same shape, element by element.
///
/// Element by element, ULPs say little where an output is near 0: there the weighted values have
/// cancelled, and a difference of the size of the rounding of the larger terms is many ULPs of
/// the small result. `scaled_ulps` measures each difference in ULPs of the largest |b| instead.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Difference {
    /// The largest [`ulps`] between two elements.
    pub ulps: u64,
    /// The largest |a − b|.
    pub absolute: f32,
    /// The largest |a − b| in ULPs of the largest |b|.
    pub scaled_ulps: f32,
}

impl Difference {
    /// Compares `a` and `b` element by element.
    pub fn between<S, T, D>(a: &ArrayBase<S, D>, b: &ArrayBase<T, D>) -> Self
    where
        S: Data<Elem = f32>,
        T: Data<Elem = f32>,
        D: Dimension,
    {
        assert_eq!(a.shape(), b.shape(), "compare arrays of one shape");
        let pairs = a.iter().zip(b.iter());
        let most = pairs.fold(Difference::default(), |most, (&a, &b)| Difference {
            ulps: most.ulps.max(ulps(a, b)),
            absolute: most.absolute.max((a - b).abs()),
            scaled_ulps: 0.0,
        });
        let largest = b.fold(0.0f32, |m, &x| m.max(x.abs()));
        let scaled_ulps = if most.absolute == 0.0 {
            0.0
        } else {
            most.absolute / ulp_of(largest)
        };
        Difference {
            scaled_ulps,
            ..most
        }
    }

    /// The larger of two differences, field by field.
    pub fn max(self, other: Difference) -> Difference {
        Difference {
            ulps: self.ulps.max(other.ulps),
            absolute: self.absolute.max(other.absolute),
            scaled_ulps: self.scaled_ulps.max(other.scaled_ulps),
        }
    }
}
// ANCHOR_END: ulps
