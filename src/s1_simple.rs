//! Stage placeholder.
