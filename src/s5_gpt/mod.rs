//! Stage 5 placeholder.
