#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| iowarden_fuzz::check_input("slo", data));
