//! The `prompt` target; see [`fuzz_inputs::prompt`] for its input and what it runs.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: fuzz_inputs::seeds::on_start("prompt"),
    |data: &[u8]| fuzz_inputs::prompt(data)
);
