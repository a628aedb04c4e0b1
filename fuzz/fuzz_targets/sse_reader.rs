#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_core_fuzz::check("sse_reader", data));
