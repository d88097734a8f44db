//! The `corpus` target; see [`fuzz_inputs::corpus`] for its input and what it runs.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: fuzz_inputs::seeds::on_start("corpus"),
    |data: &[u8]| fuzz_inputs::corpus(data)
);
