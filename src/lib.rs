#![doc = include_str!("../README.md")]

pub mod print;
pub mod rng;
pub mod s1_simple;
pub mod s2_trainable;
pub mod s3_causal;
pub mod s4_multihead;
pub mod s5_gpt;
