//! A run's data from outside: a feeder's CSV (the coordinator's file), its rows as an agent receives
//! them, and a `${var}` template. None panics; a CSV's records are as wide as its header and
//! travel to an agent as the same fields; a template renders whatever values it is given.
#![no_main]
use libfuzzer_sys::fuzz_target;
use shared::plan::{Records, Template, decode_rows, encode_row};

fuzz_target!(|data: &[u8]| {
    let (head, rest) = data.split_at(data.len().min(2));
    let columns = usize::from(head.first().copied().unwrap_or(1) % 8) + 1;
    // Rows as a peer might send them.
    let _ = decode_rows(rest, columns, |fields| assert_eq!(fields.len(), columns));
    // A CSV file, and its rows as the coordinator ships them.
    if let Ok(mut records) = Records::new(std::io::Cursor::new(data)) {
        let width = records.names().len();
        let mut sent = Vec::new();
        let mut n = 0u64;
        while let Ok(Some(fields)) = records.next_record() {
            assert_eq!(fields.len(), width);
            encode_row(&fields, &mut sent);
            n += 1;
        }
        assert_eq!(decode_rows(&sent, width, |_| {}), Ok(n));
    }
    // A template against a few names, rendered with the input as every value.
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = Template::compile(text, &["a", "b", "id"]) {
            let mut out = Vec::new();
            let mut rng = shared::rng::Rng::new(1);
            t.render(&[rest, head, data], 7, &mut rng, &mut out);
        }
    }
});
