//! Lesson layer. The values the autograd works on: float32 arrays with a shape, and the ids that
//! name them on the tape.

/// An n-dimensional float32 array in row-major order: the tutorial's `Tensor.data` (DTYPE =
/// float32).
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    /// # Panics
    /// If `data` does not hold exactly the number of values `shape` describes.
    pub fn new(shape: &[usize], data: Vec<f32>) -> Self {
        let len: usize = shape.iter().product();
        assert_eq!(
            data.len(),
            len,
            "shape {shape:?} needs {len} values, got {}",
            data.len()
        );
        Tensor {
            shape: shape.to_vec(),
            data,
        }
    }

    /// The size of the last axis (C, V or T, depending on the tensor).
    pub fn last_dim(&self) -> usize {
        *self.shape.last().unwrap_or(&1)
    }

    /// `ndim` in NumPy's terms; AdamW decays only tensors with two or more.
    pub fn ndim(&self) -> usize {
        self.shape.len()
    }

    /// Splits the shape (…, R, C) into (matrices, R, C): a stack of R×C matrices.
    pub fn matrices(&self) -> (usize, usize, usize) {
        let n = self.shape.len();
        assert!(n >= 2, "need at least two axes, got {:?}", self.shape);
        (
            self.shape[..n - 2].iter().product(),
            self.shape[n - 2],
            self.shape[n - 1],
        )
    }
}

/// A node on the tape: the index of a value and of its gradient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeId(pub usize);
