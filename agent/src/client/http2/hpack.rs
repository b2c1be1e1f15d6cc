//! HPACK (RFC 7541), as much as a client needs: the request's header block encoded once, without
//! the dynamic table (every request is the same bytes, so nothing is gained by indexing), and any
//! reply's header block decoded with the table the server keeps, of which stampede only keeps the
//! status. Decoding is on the hot path (a reply each): strings the server indexes are decoded once
//! while they keep coming (nginx indexes four in every reply), and Huffman codes are read eight bits
//! at a time.
use std::collections::VecDeque;
use std::ops::Deref;
use std::rc::Rc;
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
    /// By the next 8 bits: the symbol whose code they begin with and its length, for the codes of
    /// at most 8 bits (what text is made of); a length of 0 means a longer code.
    short: [(u8, u8); 256],
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
        let mut short = [(0u8, 0u8); 256];
        for len in 1..=8 {
            for k in 0..count[len] {
                let sym = symbols[usize::from(start[len] + k)];
                let code = (first[len] + u32::from(k)) as usize;
                let free = 8 - len;
                for rest in 0..1usize << free {
                    short[(code << free) | rest] = (sym as u8, len as u8);
                }
            }
        }
        Huffman {
            first,
            start,
            count,
            symbols,
            short,
        }
    })
}

/// Decodes a Huffman-coded string onto `out` (RFC 7541 5.2): the padding must be the EOS code's
/// first bits, shorter than a byte, and EOS itself must not appear.
///
/// Eight bits at a time where the next code is that short (every letter, digit and most of
/// punctuation), bit by bit through the canonical code otherwise.
pub fn huffman_decode(bytes: &[u8], out: &mut Vec<u8>) -> Result<(), HpackError> {
    let h = huffman();
    // The bits not yet decoded, the oldest highest: `have` of them, at the bottom of `acc`.
    let (mut acc, mut have) = (0u64, 0u32);
    let mut next = bytes.iter();
    out.reserve(bytes.len() + bytes.len() / 2);
    loop {
        while have <= 56 {
            match next.next() {
                Some(&b) => {
                    acc = (acc << 8) | u64::from(b);
                    have += 8;
                }
                None => break,
            }
        }
        if have == 0 {
            return Ok(());
        }
        // The next 8 bits, ones past the end (EOS's first bits, what padding must be).
        let peek = if have >= 8 {
            (acc >> (have - 8)) as u8
        } else {
            ((acc << (8 - have)) as u8) | (0xff >> have)
        };
        let (sym, len) = h.short[usize::from(peek)];
        if len != 0 && u32::from(len) <= have {
            out.push(sym);
            have -= u32::from(len);
            continue;
        }
        // A code longer than 8 bits, or the padding.
        let (mut code, mut len) = (0u32, 0usize);
        loop {
            if have == 0 {
                // What is left must be padding: fewer than 8 bits, all ones.
                return if len < 8 && code == (1 << len) - 1 {
                    Ok(())
                } else {
                    Err(HpackError(
                        "a Huffman string's padding is not EOS's first bits",
                    ))
                };
            }
            have -= 1;
            code = (code << 1) | ((acc >> have) & 1) as u32;
            len += 1;
            let offset = code.wrapping_sub(h.first[len]);
            if offset < u32::from(h.count[len]) {
                let s = h.symbols[usize::from(h.start[len]) + offset as usize];
                if s == EOS {
                    return Err(HpackError("a Huffman string holds EOS"));
                }
                out.push(s as u8);
                break;
            } else if len == MAX_CODE {
                return Err(HpackError("a Huffman code that is not in the table"));
            }
        }
    }
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
    table: VecDeque<(Text, Text)>,
    size: usize,
    max: usize,
    /// Reused for every string decoded that is not indexed, and for the name of a field that is not.
    scratch: Vec<u8>,
    name: Vec<u8>,
    /// The strings indexed lately, by their coded bytes: a server that indexes the same fields in
    /// every reply (nginx sends its server, date, content type and length "with incremental
    /// indexing", four entries a reply) has them decoded once, not once a reply.
    recent: [Recent; RECENT],
    /// Counts the strings looked up in `recent`, to tell the least recently used.
    uses: u64,
}

/// How many indexed strings the decoder remembers, and the longest it remembers.
const RECENT: usize = 8;
const RECENT_BYTES: usize = 128;

/// A string the server indexed: its bytes in the block (the Huffman bit, then the octets) and what
/// they decode to.
#[derive(Debug, Default)]
struct Recent {
    huffman: bool,
    coded: Vec<u8>,
    text: Option<Rc<[u8]>>,
    /// When it was last decoded or found (`Decoder::uses`).
    used: u64,
}

/// A name or value in the table: a static name, or a decoded string, shared with `recent`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Text {
    Static(&'static [u8]),
    Shared(Rc<[u8]>),
}

impl Deref for Text {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Text::Static(s) => s,
            Text::Shared(s) => s,
        }
    }
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
            scratch: Vec::new(),
            name: Vec::new(),
            recent: Default::default(),
            uses: 0,
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
                let (n, v) = self.entry(i)?;
                field(&n, &v);
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
                if index {
                    let name = if i == 0 {
                        self.text(block, &mut at)?
                    } else {
                        self.entry(i)?.0
                    };
                    let value = self.text(block, &mut at)?;
                    field(&name, &value);
                    self.insert(name, value);
                } else {
                    // Not indexed: nothing of it is kept, so a new name is decoded into scratch
                    // space, not remembered among the indexed strings.
                    let mut name = std::mem::take(&mut self.name);
                    name.clear();
                    if i == 0 {
                        self.string(block, &mut at)?;
                        name.extend_from_slice(&self.scratch);
                    } else {
                        name.extend_from_slice(&self.entry(i)?.0);
                    }
                    if wanted(&name) {
                        self.string(block, &mut at)?;
                        field(&name, &self.scratch);
                    } else {
                        // A value neither kept nor indexed is stepped over, not decoded: most of
                        // a reply's block (its date, its server) costs nothing but its length.
                        skip_string(block, &mut at)?;
                        field(&name, b"");
                    }
                    self.name = name;
                }
            }
            may_resize = false;
        }
        Ok(())
    }

    /// The string literal at `block[*at]` (`*at` is moved past it), split into whether it is
    /// Huffman-coded and its octets.
    fn literal<'b>(block: &'b [u8], at: &mut usize) -> Result<(bool, &'b [u8]), HpackError> {
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
        Ok((huffman, raw))
    }

    /// Decodes a string literal at `block[*at]` into `scratch`.
    fn string(&mut self, block: &[u8], at: &mut usize) -> Result<(), HpackError> {
        let (huffman, raw) = Self::literal(block, at)?;
        self.scratch.clear();
        if huffman {
            huffman_decode(raw, &mut self.scratch)
        } else {
            self.scratch.extend_from_slice(raw);
            Ok(())
        }
    }

    /// A string literal at `block[*at]` that goes into the table (or names a field): decoded once
    /// for as long as `recent` remembers its bytes.
    fn text(&mut self, block: &[u8], at: &mut usize) -> Result<Text, HpackError> {
        let (huffman, raw) = Self::literal(block, at)?;
        self.uses += 1;
        if let Some(r) = self
            .recent
            .iter_mut()
            .find(|r| r.huffman == huffman && r.coded == raw)
            && let Some(text) = &r.text
        {
            r.used = self.uses;
            return Ok(Text::Shared(text.clone()));
        }
        self.scratch.clear();
        if huffman {
            huffman_decode(raw, &mut self.scratch)?;
        } else {
            self.scratch.extend_from_slice(raw);
        }
        let text: Rc<[u8]> = Rc::from(&self.scratch[..]);
        if raw.len() <= RECENT_BYTES
            && let Some(r) = self.recent.iter_mut().min_by_key(|r| r.used)
        {
            r.used = self.uses;
            r.huffman = huffman;
            r.coded.clear();
            r.coded.extend_from_slice(raw);
            r.text = Some(text.clone());
        }
        Ok(Text::Shared(text))
    }

    /// The field at index `i`: the static table's, then the dynamic table's, newest first.
    fn entry(&self, i: usize) -> Result<(Text, Text), HpackError> {
        if i == 0 {
            return Err(HpackError("index 0"));
        }
        if let Some(&(n, v)) = STATIC.get(i - 1) {
            return Ok((Text::Static(n.as_bytes()), Text::Static(v.as_bytes())));
        }
        self.table
            .get(i - 1 - STATIC.len())
            .cloned()
            .ok_or(HpackError("an index past the table"))
    }

    fn insert(&mut self, name: Text, value: Text) {
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
        assert_eq!(&*d.table[0].0, b":authority");
        assert_eq!(&*d.table[0].1, b"www.example.com");
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

    /// Each symbol's code and length, from the canonical code's tables.
    fn code_of(sym: u16) -> (u32, usize) {
        let h = huffman();
        let len = usize::from(CODE_LENGTHS[usize::from(sym)]);
        let at = (h.start[len]..h.start[len] + h.count[len])
            .position(|i| h.symbols[usize::from(i)] == sym)
            .unwrap();
        (h.first[len] + at as u32, len)
    }

    /// RFC 7541 5.2's encoding: the codes one after another, the last byte padded with EOS's
    /// first bits; `pad_bits` more ones (to make bad padding) or a code of `extra` appended.
    fn huffman_encode(text: &[u8], extra: Option<u16>, pad_bits: usize) -> Vec<u8> {
        let mut bits: Vec<bool> = Vec::new();
        for sym in text.iter().map(|&b| u16::from(b)).chain(extra) {
            let (code, len) = code_of(sym);
            bits.extend((0..len).rev().map(|i| code >> i & 1 == 1));
        }
        bits.extend(std::iter::repeat_n(true, pad_bits));
        while !bits.len().is_multiple_of(8) {
            bits.push(true);
        }
        bits.chunks(8)
            .map(|c| c.iter().fold(0u8, |b, &bit| b << 1 | u8::from(bit)))
            .collect()
    }

    /// The decoder as it was before it took 8 bits at a time: one bit at a time through the
    /// canonical code, the reference the fast one is held to.
    fn huffman_decode_bitwise(bytes: &[u8]) -> Result<Vec<u8>, HpackError> {
        let h = huffman();
        let mut out = Vec::new();
        let (mut code, mut len) = (0u32, 0usize);
        for &b in bytes {
            for i in (0..8).rev() {
                code = (code << 1) | u32::from((b >> i) & 1);
                len += 1;
                let offset = code.wrapping_sub(h.first[len]);
                if offset < u32::from(h.count[len]) {
                    let s = h.symbols[usize::from(h.start[len]) + offset as usize];
                    if s == EOS {
                        return Err(HpackError("EOS"));
                    }
                    out.push(s as u8);
                    code = 0;
                    len = 0;
                } else if len == MAX_CODE {
                    return Err(HpackError("no such code"));
                }
            }
        }
        if len >= 8 || code != (1 << len) - 1 {
            return Err(HpackError("padding"));
        }
        Ok(out)
    }

    proptest::proptest! {
        #[test]
        fn the_fast_huffman_decoder_agrees_with_the_bitwise_one_on_any_text(
            text in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            extra in proptest::option::of(0u16..=256),
            pad_bits in 0usize..10,
        ) {
            let coded = huffman_encode(&text, extra, pad_bits);
            let mut fast = Vec::new();
            let got = huffman_decode(&coded, &mut fast).map(|()| fast);
            let want = huffman_decode_bitwise(&coded);
            proptest::prop_assert_eq!(got.is_ok(), want.is_ok(), "{:?}", coded);
            if let Ok(w) = want {
                proptest::prop_assert_eq!(got.unwrap(), w);
            }
            // Well-formed input (no EOS, padding under a byte) decodes to the text.
            if extra.is_none_or(|e| e != EOS) && pad_bits == 0 {
                let mut out = Vec::new();
                huffman_decode(&coded, &mut out).unwrap();
                let mut whole = text.clone();
                whole.extend(extra.map(|e| e as u8));
                proptest::prop_assert_eq!(out, whole);
            }
        }

        #[test]
        fn arbitrary_bytes_decode_alike_fast_and_bitwise(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..48),
        ) {
            let mut fast = Vec::new();
            let got = huffman_decode(&bytes, &mut fast).map(|()| fast);
            let want = huffman_decode_bitwise(&bytes);
            proptest::prop_assert_eq!(got.is_ok(), want.is_ok());
            if let Ok(w) = want {
                proptest::prop_assert_eq!(got.unwrap(), w);
            }
        }
    }

    #[test]
    fn a_string_indexed_in_every_reply_is_decoded_once_and_the_table_stays_right() {
        // nginx's way: server, date and content type "with incremental indexing" in every reply,
        // the date changing once a second.
        let block = |date: &[u8]| {
            let mut b = vec![0x88]; // :status 200
            for (index, value) in [(54, &b"nginx/1.22.1"[..]), (33, date), (31, b"text/plain")] {
                put_int(&mut b, 6, 0x40, index);
                let coded = huffman_encode(value, None, 0);
                put_int(&mut b, 7, 0x80, coded.len());
                b.extend_from_slice(&coded);
            }
            b
        };
        let mut d = Decoder::default();
        let mut texts = Vec::new();
        for second in 0..40 {
            let date = format!("Sat, 05 Dec 2026 12:00:{:02} GMT", second / 2);
            let mut got = Vec::new();
            d.decode_each(
                &block(date.as_bytes()),
                |_| true,
                |n, v| got.push((n.to_vec(), v.to_vec())),
            )
            .unwrap();
            assert_eq!(got[2], (b"date".to_vec(), date.clone().into_bytes()));
            // Referred to by index, the newest entries read back as sent.
            let mut back = Vec::new();
            d.decode_each(
                &[0xbe, 0xbf, 0xc0],
                |_| true,
                |n, v| back.push((n.to_vec(), v.to_vec())),
            )
            .unwrap();
            assert_eq!(back, vec![got[3].clone(), got[2].clone(), got[1].clone()]);
            assert_eq!(
                d.size,
                d.table
                    .iter()
                    .map(|(n, v)| n.len() + v.len() + 32)
                    .sum::<usize>()
            );
            assert!(d.size <= TABLE_SIZE);
            if let Text::Shared(server) = &d.table[2].1 {
                texts.push(server.clone());
            }
        }
        // The server's value was decoded once and shared since, not decoded into a new string a
        // reply.
        assert!(texts.windows(2).all(|w| Rc::ptr_eq(&w[0], &w[1])));
        // The same octets, once Huffman-coded and once not, are two strings.
        let mut d = Decoder::default();
        let coded = huffman_encode(b"abc", None, 0);
        let mut b = vec![0x40 | 54];
        put_int(&mut b, 7, 0x80, coded.len());
        b.extend_from_slice(&coded);
        b.push(0x40 | 54);
        put_int(&mut b, 7, 0, coded.len());
        b.extend_from_slice(&coded);
        d.decode(&b).unwrap();
        assert_eq!(&*d.table[1].1, b"abc");
        assert_eq!(&*d.table[0].1, &coded[..]);
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
