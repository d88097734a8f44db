//! The `optimizer_state` target; see [`fuzz_inputs::optimizer_state`] for its input and what it runs.
#![no_main]

libfuzzer_sys::fuzz_target!(
    init: fuzz_inputs::seeds::on_start("optimizer_state"),
    |data: &[u8]| fuzz_inputs::optimizer_state(data)
);
