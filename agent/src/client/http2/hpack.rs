//! HPACK (RFC 7541), as much as a client needs: the request's header block encoded once, without
//! the dynamic table (every request is the same bytes, so nothing is gained by indexing), and any
//! reply's header block decoded with the table the server keeps, of which stampede only keeps the
//! status.
use std::collections::VecDeque;
use std::sync::OnceLock;

/// The table size the decoder allows the server (SETTINGS_HEADER_TABLE_SIZE's default, which
/// stampede does not change).
pub const TABLE_SIZE: usize = 4096;

/// A header block that does not decode: the session's COMPRESSION_ERROR (RFC 9113 4.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a reply's header block does not decode (HPACK): {0}")]
pub struct HpackError(pub &'static str);

/// The static table (RFC 7541 Appendix A), from index 1.
const STATIC: [(&str, &str); 61] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The length in bits of each symbol's Huffman code (RFC 7541 Appendix B), 256 being EOS. The code
/// is canonical: codes of one length are consecutive in symbol order, shorter lengths first, so the
/// lengths alone define it.
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

const EOS: u16 = 256;
const MAX_CODE: usize = 30;

/// The canonical code's decoding tables: per length, its first code, and where its symbols begin
/// in `symbols` (sorted by length, then value).
struct Huffman {
    first: [u32; MAX_CODE + 2],
    start: [u16; MAX_CODE + 2],
    count: [u16; MAX_CODE + 2],
    symbols: [u16; 257],
}

fn huffman() -> &'static Huffman {
    static TABLE: OnceLock<Huffman> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut count = [0u16; MAX_CODE + 2];
        for &l in &CODE_LENGTHS {
            count[usize::from(l)] += 1;
        }
        let mut symbols = [0u16; 257];
        let mut start = [0u16; MAX_CODE + 2];
        let mut first = [0u32; MAX_CODE + 2];
        let (mut code, mut at) = (0u32, 0u16);
        for len in 1..=MAX_CODE {
            code <<= 1;
            first[len] = code;
            start[len] = at;
            for (s, &l) in CODE_LENGTHS.iter().enumerate() {
                if usize::from(l) == len {
                    symbols[usize::from(at)] = s as u16;
                    at += 1;
                }
            }
            code += u32::from(count[len]);
        }
        Huffman {
            first,
            start,
            count,
            symbols,
        }
    })
}

/// Decodes a Huffman-coded string onto `out` (RFC 7541 5.2): the padding must be the EOS code's
/// first bits, shorter than a byte, and EOS itself must not appear.
pub fn huffman_decode(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let h = huffman();
    let (mut code, mut len) = (0u32, 0usize);
    for &b in bytes {
        for i in (0..8).rev() {
            code = (code << 1) | u32::from((b >> i) & 1);
            len += 1;
            let offset = code.wrapping_sub(h.first[len]);
            if offset < u32::from(h.count[len]) {
                let s = h.symbols[usize::from(h.start[len]) + offset as usize];
                if s == EOS {
                    return Err(HpackError("a Huffman string holds EOS"));
                }
                out.push(s as u8);
                code = 0;
                len = 0;
            } else if len == MAX_CODE {
                return Err(HpackError("a Huffman code that is not in the table"));
            }
        }
    }
    // What is left must be padding: fewer than 8 bits, all ones (EOS's most significant bits).
    if len >= 8 || code != (1 << len) - 1 {
        return Err(HpackError(
            "a Huffman string's padding is not EOS's first bits",
        ));
    }
    Ok(())
}

/// Encodes an integer with an `n`-bit prefix whose other bits are `flags` (RFC 7541 5.1).
fn put_int(out: &mut Vec<u8>, n: u8, flags: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(flags | v as u8);
        return;
    }
    out.push(flags | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

/// Decodes an integer with an `n`-bit prefix at `buf[*at]`, advancing `at` past it.
fn get_int(buf: &[u8], at: &mut usize, n: u8) -> Result<usize, HpackError> {
    let short = HpackError("a header block ends inside an integer");
    let max = (1usize << n) - 1;
    let first = *buf.get(*at).ok_or(short.clone())?;
    *at += 1;
    let mut v = usize::from(first) & max;
    if v < max {
        return Ok(v);
    }
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*at).ok_or(short.clone())?;
        *at += 1;
        // Nothing in a reply's header block comes near 2^28; more is an attack or garbage.
        if shift > 21 {
            return Err(HpackError("an integer too large"));
        }
        v += usize::from(b & 0x7f) << shift;
        shift += 7;
        if b & 0x80 == 0 {
            return Ok(v);
        }
    }
}

/// Steps over a string literal at `block[*at]`.
fn skip_string(block: &[u8], at: &mut usize) -> Result<(), HpackError> {
    let len = get_int(block, at, 7)?;
    *at = at
        .checked_add(len)
        .filter(|&e| e <= block.len())
        .ok_or(HpackError("a string runs past its header block"))?;
    Ok(())
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 7, 0, s.len());
    out.extend_from_slice(s);
}

/// The header block of one request, in field order: the pseudo-headers first (RFC 9113 8.3), each
/// name from the static table where it is there, no field added to the dynamic table.
pub fn encode_request(
    method: &str,
    scheme: &str,
    authority: &str,
    path: &str,
    fields: &[(&[u8], &[u8])],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + fields.len() * 32);
    let indexed = |name: &str, value: &str| {
        STATIC
            .iter()
            .position(|&(n, v)| n == name && v == value)
            .map(|i| i + 1)
    };
    for (name, value) in [
        (":method", method),
        (":scheme", scheme),
        (":authority", authority),
        (":path", path),
    ] {
        if let Some(i) = indexed(name, value) {
            put_int(&mut out, 7, 0x80, i);
        } else {
            let i = STATIC
                .iter()
                .position(|&(n, _)| n == name)
                .map_or(0, |i| i + 1);
            // Literal without indexing, its name from the static table.
            put_int(&mut out, 4, 0, i);
            put_str(&mut out, value.as_bytes());
        }
    }
    for &(name, value) in fields {
        match STATIC.iter().position(|&(n, _)| n.as_bytes() == name) {
            Some(i) => put_int(&mut out, 4, 0, i + 1),
            None => {
                out.push(0);
                put_str(&mut out, name);
            }
        }
        put_str(&mut out, value);
    }
    out
}

/// The decoder's dynamic table: the server's newest entries first, their sizes counted as RFC 7541
/// 4.1 counts them.
#[derive(Debug)]
pub struct Decoder {
    table: VecDeque<(Vec<u8>, Vec<u8>)>,
    size: usize,
    max: usize,
    /// Reused for every string decoded, so a reply's block allocates only for what it indexes.
    scratch: Vec<u8>,
    name: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            scratch: Vec::new(),
            name: Vec::new(),
        }
    }
}

/// What stampede keeps of a reply's header block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decoded {
    /// `:status`, when the block has one that is three digits.
    pub status: Option<u16>,
    /// Fields in the block, the pseudo-headers among them.
    pub fields: usize,
}

impl Decoder {
    /// Decodes one whole header block (HEADERS and its CONTINUATIONs), updating the table.
    pub fn decode(&mut self, block: &[u8]) -> Result<Decoded, HpackError> {
        let mut out = Decoded::default();
        self.decode_each(
            block,
            |name| name == b":status",
            |name, value| out.note(name, value),
        )?;
        Ok(out)
    }

    /// Decodes a header block, each field given to `field` as it comes; the value of a field that
    /// is not indexed only when `wanted` says so by its name (given as empty otherwise).
    fn decode_each(
        &mut self,
        block: &[u8],
        wanted: impl Fn(&[u8]) -> bool,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<(), HpackError> {
        let mut at = 0;
        let mut may_resize = true;
        while at < block.len() {
            let b = block[at];
            if b & 0x80 != 0 {
                let i = get_int(block, &mut at, 7)?;
                self.with_entry(i, &mut field)?;
            } else if b & 0xe0 == 0x20 {
                // Dynamic table size update: only before the block's first field (4.2).
                let size = get_int(block, &mut at, 5)?;
                if !may_resize || size > TABLE_SIZE {
                    return Err(HpackError("a table size update out of place or too large"));
                }
                self.max = size;
                self.evict(0);
                continue;
            } else {
                let (prefix, index) = if b & 0x40 != 0 { (6, true) } else { (4, false) };
                let i = get_int(block, &mut at, prefix)?;
                let mut name = std::mem::take(&mut self.name);
                name.clear();
                if i == 0 {
                    self.string(block, &mut at)?;
                    name.extend_from_slice(&self.scratch);
                } else {
                    self.with_entry(i, |n, _| name.extend_from_slice(n))?;
                }
                if index || wanted(&name) {
                    self.string(block, &mut at)?;
                    field(&name, &self.scratch);
                    if index {
                        self.insert(name.clone(), self.scratch.clone());
                    }
                } else {
                    // A value neither kept nor indexed is stepped over, not decoded: most of a
                    // reply's block (its date, its server) costs nothing but its length.
                    skip_string(block, &mut at)?;
                    field(&name, b"");
                }
                self.name = name;
            }
            may_resize = false;
        }
        Ok(())
    }

    /// Decodes a string literal at `block[*at]` into `scratch`.
    fn string(&mut self, block: &[u8], at: &mut usize) -> Result<(), HpackError> {
        let huffman = block
            .get(*at)
            .ok_or(HpackError("a header block ends before a string"))?
            & 0x80
            != 0;
        let len = get_int(block, at, 7)?;
        let end = at
            .checked_add(len)
            .filter(|&e| e <= block.len())
            .ok_or(HpackError("a string runs past its header block"))?;
        let raw = &block[*at..end];
        *at = end;
        self.scratch.clear();
        if huffman {
            huffman_decode(raw, &mut self.scratch)
        } else {
            self.scratch.extend_from_slice(raw);
            Ok(())
        }
    }

    fn with_entry(&self, i: usize, f: impl FnOnce(&[u8], &[u8])) -> Result<(), HpackError> {
        if i == 0 {
            return Err(HpackError("index 0"));
        }
        if let Some(&(n, v)) = STATIC.get(i - 1) {
            f(n.as_bytes(), v.as_bytes());
            return Ok(());
        }
        let (n, v) = self
            .table
            .get(i - 1 - STATIC.len())
            .ok_or(HpackError("an index past the table"))?;
        f(n, v);
        Ok(())
    }

    fn insert(&mut self, name: Vec<u8>, value: Vec<u8>) {
        let size = name.len() + value.len() + 32;
        if size > self.max {
            // An entry larger than the table empties it and is not added (4.4).
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.size += size;
        self.table.push_front((name, value));
    }

    /// Evicts the oldest entries until `room` more fits.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + 32;
        }
    }
}

impl Decoded {
    fn note(&mut self, name: &[u8], value: &[u8]) {
        self.fields += 1;
        if name == b":status" && value.len() == 3 && value.iter().all(u8::is_ascii_digit) {
            self.status = std::str::from_utf8(value).ok().and_then(|s| s.parse().ok());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn the_canonical_code_is_the_rfc_s() {
        // RFC 7541 Appendix B: '0' is 00000 (5 bits), 'a' 00011, ' ' 010100 (6), EOS thirty ones.
        let h = huffman();
        let code_of = |sym: u16| {
            let len = usize::from(CODE_LENGTHS[usize::from(sym)]);
            let at = (h.start[len]..h.start[len] + h.count[len])
                .position(|i| h.symbols[usize::from(i)] == sym)
                .unwrap();
            (h.first[len] + at as u32, len)
        };
        assert_eq!(code_of(u16::from(b'0')), (0, 5));
        assert_eq!(code_of(u16::from(b'a')), (3, 5));
        assert_eq!(code_of(u16::from(b' ')), (0x14, 6));
        assert_eq!(code_of(u16::from(b'!')), (0x3f8, 10));
        assert_eq!(code_of(EOS), ((1 << 30) - 1, 30));
    }

    #[test]
    fn rfc_7541_c_4_1_decodes_a_huffman_coded_request() {
        let mut d = Decoder::default();
        let block = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
        assert_eq!(d.decode(&block).unwrap().fields, 4);
        // :authority www.example.com was indexed: entry 62.
        assert_eq!(
            d.table[0],
            (b":authority".to_vec(), b"www.example.com".to_vec())
        );
        assert_eq!(d.size, 57);
        let mut out = Vec::new();
        huffman_decode(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff"), &mut out).unwrap();
        assert_eq!(out, b"www.example.com");
    }

    #[test]
    fn blocks_another_implementation_encoded_decode_to_its_fields() {
        let text = include_str!("testdata/hpack-python.txt");
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let mut d = Decoder::default();
        for pair in lines.chunks(2) {
            let mut got = Vec::new();
            d.decode_each(
                &hex(pair[0]),
                |_| true,
                |n, v| got.push(format!("{}: {}", n.escape_ascii(), v.escape_ascii())),
            )
            .unwrap();
            assert_eq!(got.join("\t"), pair[1]);
            assert!(d.size <= TABLE_SIZE);
        }
        assert_eq!(lines.len(), 6);
        let mut again = Decoder::default();
        let status: Vec<_> = lines
            .chunks(2)
            .map(|p| again.decode(&hex(p[0])).unwrap().status)
            .collect();
        assert_eq!(status, [Some(200), None, Some(503)]);
    }

    #[test]
    fn bad_huffman_and_truncated_blocks_are_errors_not_panics() {
        let mut out = Vec::new();
        // Eight bits of padding.
        assert!(huffman_decode(&[0xff], &mut out).is_err());
        // Thirty ones: EOS.
        assert!(huffman_decode(&[0xff, 0xff, 0xff, 0xfc], &mut out).is_err());
        let mut d = Decoder::default();
        for bad in [
            &[0x80][..],
            &[0xbf],
            &[0x41, 0x85, b'a'],
            &[0x7f, 0xff, 0xff, 0xff],
        ] {
            assert!(d.decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_request_block_reads_back_through_the_decoder() {
        let block = encode_request(
            "GET",
            "https",
            "example.com:8443",
            "/a?b=1",
            &[(b"user-agent", b"stampede"), (b"x-one", b"1")],
        );
        let mut d = Decoder::default();
        assert_eq!(d.decode(&block).unwrap().fields, 6);
        assert!(d.table.is_empty(), "nothing indexed");
        // GET, https and "/" come from the static table.
        assert_eq!(
            &encode_request("GET", "http", "h", "/", &[])[..2],
            &[0x82, 0x86]
        );
    }
}
