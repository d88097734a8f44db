//! PyTorch-style printing. Written with stages 1–2.
