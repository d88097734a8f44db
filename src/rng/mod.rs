//! Where the book's numbers come from: replayed random number generators.
//!
//! PyTorch's `torch.manual_seed` and NumPy's `np.random.seed` both drive an MT19937. [`Mt19937`] is
//! that generator; [`torch`] and [`numpy`] turn its words into weights exactly as each library
//! does.

mod mt19937;
pub mod numpy;
pub mod torch;

pub use mt19937::Mt19937;
