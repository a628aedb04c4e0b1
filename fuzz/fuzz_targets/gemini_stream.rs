#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agent_core_fuzz::check("gemini_stream", data));
