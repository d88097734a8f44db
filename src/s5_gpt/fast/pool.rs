//! Fast layer. Buffer reuse: the buffers of one step's nodes, handed out again to the next step's.
//!
//! The graph is the same at every step, so each request finds a buffer of exactly its size after
//! the first step, and training allocates no memory from then on. Reuse changes no bit: every
//! buffer handed out is overwritten in full before it is read.

use std::collections::BTreeMap;

/// Buffers that finished nodes gave back, filed by capacity.
#[derive(Debug, Default)]
pub struct Pool {
    f32s: BTreeMap<usize, Vec<Vec<f32>>>,
}

impl Pool {
    /// Keeps `buffer` for later (an empty one is dropped).
    pub fn put(&mut self, buffer: Vec<f32>) {
        keep(&mut self.f32s, buffer);
    }

    /// A buffer of `len` values that still hold an earlier step's numbers: the caller must
    /// overwrite every one. Skipping the zero-fill saves a pass over memory per node.
    pub fn take(&mut self, len: usize) -> Vec<f32> {
        take_fitting(&mut self.f32s, len)
    }
}

fn keep<T>(store: &mut BTreeMap<usize, Vec<Vec<T>>>, buffer: Vec<T>) {
    if buffer.capacity() > 0 {
        store.entry(buffer.capacity()).or_default().push(buffer);
    }
}

/// Removes the smallest buffer that holds `len` values from `store` (or makes one) and sets its
/// length.
fn take_fitting<T: Copy + Default>(store: &mut BTreeMap<usize, Vec<Vec<T>>>, len: usize) -> Vec<T> {
    let mut buffer = match store.range_mut(len..).next() {
        Some((&capacity, buffers)) => {
            let buffer = buffers.pop().expect("no empty lists are kept");
            if buffers.is_empty() {
                store.remove(&capacity);
            }
            buffer
        }
        None => Vec::new(),
    };
    buffer.resize(len, T::default());
    buffer
}
