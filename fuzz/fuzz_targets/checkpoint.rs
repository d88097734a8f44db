//! The `checkpoint` target; see [`fuzz_inputs::checkpoint`] for its input and what it runs.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: fuzz_inputs::seeds::on_start("checkpoint"),
    |data: &[u8]| fuzz_inputs::checkpoint(data)
);
