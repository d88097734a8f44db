//! The `args` target; see [`fuzz_inputs::args`] for its input and what it runs.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: fuzz_inputs::seeds::on_start("args"),
    |data: &[u8]| fuzz_inputs::args(data)
);
