//! A compact RFC 1951 (raw deflate) decoder in safe Rust, streaming from a
//! [`Read`] into a [`Write`], plus CRC-32 (the zip/gzip polynomial).
//!
//! It exists to unpack one member of a plugin wheel, so it favours being small
//! and obviously bounds-checked over being the fastest possible: Huffman codes
//! of up to [`FAST_BITS`] bits are decoded with one table look-up, longer ones
//! with the canonical-code walk from zlib's `puff.c`. Every malformed input is
//! an [`InflateError`], never a panic.

use std::fmt;
use std::io::{self, Read, Write};

/// What went wrong while inflating.
#[derive(Debug)]
pub(crate) enum InflateError {
    /// Reading the compressed input failed.
    Read(io::Error),
    /// Writing the decompressed output failed.
    Write(io::Error),
    /// The compressed data is not valid deflate data (or exceeds the limit).
    Format(&'static str),
}

impl fmt::Display for InflateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InflateError::Read(e) => write!(f, "reading compressed data: {e}"),
            InflateError::Write(e) => write!(f, "writing decompressed data: {e}"),
            InflateError::Format(m) => write!(f, "invalid deflate data: {m}"),
        }
    }
}

type Result<T> = std::result::Result<T, InflateError>;

fn bad<T>(msg: &'static str) -> Result<T> {
    Err(InflateError::Format(msg))
}

/// Largest code length deflate allows.
const MAX_BITS: usize = 15;
/// Codes up to this many bits are decoded with a single table look-up.
const FAST_BITS: u32 = 10;
/// Back-references reach at most this far back.
const WINDOW: usize = 32 * 1024;
/// Output is handed to the writer once this much (beyond the window) piles up.
const FLUSH_AT: usize = 1024 * 1024;

/// Bit-level reader over a byte source (deflate packs bits LSB first).
struct BitReader<R> {
    src: R,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    eof: bool,
    bits: u64,
    nbits: u32,
}

impl<R: Read> BitReader<R> {
    fn new(src: R) -> Self {
        BitReader {
            src,
            buf: vec![0; 64 * 1024].into_boxed_slice(),
            pos: 0,
            len: 0,
            eof: false,
            bits: 0,
            nbits: 0,
        }
    }

    /// Makes sure the byte buffer has unread bytes unless the source is done.
    fn fill_buf(&mut self) -> Result<()> {
        while self.pos >= self.len && !self.eof {
            match self.src.read(&mut self.buf) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.pos = 0;
                    self.len = n.min(self.buf.len());
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(InflateError::Read(e)),
            }
        }
        Ok(())
    }

    /// Tops the bit buffer up to at least 57 bits, or as many as remain.
    fn refill(&mut self) -> Result<()> {
        while self.nbits <= 56 {
            if self.pos >= self.len {
                self.fill_buf()?;
                if self.pos >= self.len {
                    break;
                }
            }
            let Some(&b) = self.buf.get(self.pos) else {
                break;
            };
            self.bits |= u64::from(b) << self.nbits;
            self.pos += 1;
            self.nbits += 8;
        }
        Ok(())
    }

    /// Reads `n` (at most 32) bits as an integer, LSB first.
    fn bits(&mut self, n: u32) -> Result<u32> {
        debug_assert!(n <= 32);
        if self.nbits < n {
            self.refill()?;
            if self.nbits < n {
                return bad("unexpected end of data");
            }
        }
        let v = (self.bits & ((1u64 << n) - 1)) as u32;
        self.bits >>= n;
        self.nbits -= n;
        Ok(v)
    }

    /// Returns the next `n` bits without consuming them, zero-padded past the
    /// end of the input (the caller checks what it actually consumes).
    fn peek(&mut self, n: u32) -> Result<u32> {
        if self.nbits < n {
            self.refill()?;
        }
        Ok((self.bits & ((1u64 << n) - 1)) as u32)
    }

    fn consume(&mut self, n: u32) -> Result<()> {
        if n > self.nbits {
            return bad("unexpected end of data");
        }
        self.bits >>= n;
        self.nbits -= n;
        Ok(())
    }

    /// Drops the bits up to the next byte boundary.
    fn align(&mut self) {
        let drop = self.nbits % 8;
        self.bits >>= drop;
        self.nbits -= drop;
    }

    /// Copies `n` whole bytes (after [`align`](Self::align)) into `out`.
    fn copy_bytes(&mut self, mut n: usize, out: &mut Vec<u8>) -> Result<()> {
        while n > 0 && self.nbits >= 8 {
            out.push(self.bits as u8);
            self.bits >>= 8;
            self.nbits -= 8;
            n -= 1;
        }
        while n > 0 {
            self.fill_buf()?;
            let avail = self.buf.get(self.pos..self.len).unwrap_or(&[]);
            if avail.is_empty() {
                return bad("unexpected end of data in a stored block");
            }
            let take = avail.len().min(n);
            out.extend_from_slice(&avail[..take]);
            self.pos += take;
            n -= take;
        }
        Ok(())
    }
}

/// A canonical Huffman code, as in `puff.c`, plus a fast look-up table.
struct Huffman {
    /// Number of codes of each length (index 0 unused by decoding).
    count: [u16; MAX_BITS + 1],
    /// Symbols ordered by code.
    symbol: Vec<u16>,
    /// Indexed by the next `FAST_BITS` input bits: `symbol | length << 9`, or
    /// 0 when the code is longer than `FAST_BITS` (or unassigned).
    fast: Vec<u16>,
}

/// Whether a code's lengths over- or under-fill the code space.
#[derive(PartialEq, Eq)]
enum Fill {
    Complete,
    Incomplete,
}

impl Huffman {
    /// Builds the code for the given code lengths (0 = symbol unused).
    /// Over-subscribed codes are an error; incomplete ones are reported so the
    /// caller can decide.
    fn new(lengths: &[u8]) -> Result<(Huffman, Fill)> {
        let mut count = [0u16; MAX_BITS + 1];
        for &l in lengths {
            let l = usize::from(l);
            if l > MAX_BITS {
                return bad("code length too long");
            }
            count[l] += 1;
        }
        // Check the code space: `left` is how many codes of the current length
        // are still free.
        let mut left: i32 = 1;
        for &c in &count[1..] {
            left <<= 1;
            left -= i32::from(c);
            if left < 0 {
                return bad("over-subscribed Huffman code");
            }
        }
        let fill = if left > 0 && usize::from(count[0]) != lengths.len() {
            Fill::Incomplete
        } else {
            Fill::Complete
        };
        // Offsets of each length's first symbol in `symbol`.
        let mut offs = [0u16; MAX_BITS + 2];
        for len in 1..=MAX_BITS {
            offs[len + 1] = offs[len] + count[len];
        }
        let mut symbol = vec![0u16; lengths.len()];
        for (sym, &l) in lengths.iter().enumerate() {
            if l != 0 {
                let o = &mut offs[usize::from(l)];
                symbol[usize::from(*o)] = sym as u16;
                *o += 1;
            }
        }
        // Fast table: walk codes in canonical order.
        let mut fast = vec![0u16; 1 << FAST_BITS];
        let mut code: u32 = 0;
        let mut index = 0usize;
        for len in 1..=FAST_BITS {
            for _ in 0..count[len as usize] {
                let sym = symbol[index];
                index += 1;
                // Deflate sends Huffman codes MSB first; we read LSB first.
                let rev = code.reverse_bits() >> (32 - len);
                let entry = sym | ((len as u16) << 9);
                let mut i = rev as usize;
                while i < fast.len() {
                    fast[i] = entry;
                    i += 1 << len;
                }
                code += 1;
            }
            code <<= 1;
        }
        Ok((
            Huffman {
                count,
                symbol,
                fast,
            },
            fill,
        ))
    }

    /// Decodes one symbol.
    fn decode<R: Read>(&self, br: &mut BitReader<R>) -> Result<u16> {
        let peek = br.peek(MAX_BITS as u32)?;
        let entry = self.fast[(peek & ((1 << FAST_BITS) - 1)) as usize];
        if entry != 0 {
            br.consume(u32::from(entry >> 9))?;
            return Ok(entry & 0x1ff);
        }
        // Slow path: canonical decoding one bit at a time (puff.c).
        let mut code: i32 = 0;
        let mut first: i32 = 0;
        let mut index: i32 = 0;
        for len in 1..=MAX_BITS {
            code |= ((peek >> (len - 1)) & 1) as i32;
            let count = i32::from(self.count[len]);
            if code - count < first {
                br.consume(len as u32)?;
                let i = (index + code - first) as usize;
                return match self.symbol.get(i) {
                    Some(&s) => Ok(s),
                    None => bad("invalid Huffman code"),
                };
            }
            index += count;
            first += count;
            first <<= 1;
            code <<= 1;
        }
        bad("invalid Huffman code")
    }
}

const LEN_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
const LEN_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];
/// The order in which code-length code lengths are sent.
const CL_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Decompressed bytes on their way to the writer; keeps the last [`WINDOW`]
/// bytes for back-references.
struct Output<'w, W: ?Sized> {
    buf: Vec<u8>,
    sink: &'w mut W,
    /// Bytes already handed to `sink`.
    flushed: u64,
    limit: u64,
}

impl<W: Write + ?Sized> Output<'_, W> {
    fn total(&self) -> u64 {
        self.flushed + self.buf.len() as u64
    }

    fn check_limit(&self) -> Result<()> {
        if self.total() > self.limit {
            return bad("more output than the declared size");
        }
        Ok(())
    }

    fn maybe_flush(&mut self) -> Result<()> {
        if self.buf.len() >= FLUSH_AT + WINDOW {
            self.check_limit()?;
            let n = self.buf.len() - WINDOW;
            self.sink
                .write_all(&self.buf[..n])
                .map_err(InflateError::Write)?;
            self.buf.drain(..n);
            self.flushed += n as u64;
        }
        Ok(())
    }

    fn finish(mut self) -> Result<u64> {
        self.check_limit()?;
        self.sink
            .write_all(&self.buf)
            .map_err(InflateError::Write)?;
        self.flushed += self.buf.len() as u64;
        self.buf.clear();
        Ok(self.flushed)
    }

    /// Appends a copy of `len` bytes starting `dist` bytes back.
    fn copy_back(&mut self, dist: usize, len: usize) -> Result<()> {
        if dist == 0 || dist > self.buf.len() {
            return bad("back-reference before the start of the data");
        }
        let start = self.buf.len() - dist;
        if dist >= len {
            self.buf.extend_from_within(start..start + len);
        } else {
            // Overlapping copy: repeat the last `dist` bytes.
            for i in 0..len {
                let b = self.buf[start + i];
                self.buf.push(b);
            }
        }
        Ok(())
    }
}

/// Inflates a raw deflate stream from `src` into `sink`, refusing to produce
/// more than `limit` bytes. Returns the number of bytes written.
pub(crate) fn inflate<R: Read, W: Write + ?Sized>(src: R, sink: &mut W, limit: u64) -> Result<u64> {
    let mut br = BitReader::new(src);
    let mut out = Output {
        buf: Vec::with_capacity(FLUSH_AT + WINDOW + 512),
        sink,
        flushed: 0,
        limit,
    };
    loop {
        let last = br.bits(1)? == 1;
        match br.bits(2)? {
            0 => stored(&mut br, &mut out)?,
            1 => {
                let (lit, dist) = fixed_codes()?;
                codes(&mut br, &mut out, &lit, &dist)?;
            }
            2 => {
                let (lit, dist) = dynamic_codes(&mut br)?;
                codes(&mut br, &mut out, &lit, &dist)?;
            }
            _ => return bad("invalid block type"),
        }
        out.check_limit()?;
        if last {
            return out.finish();
        }
    }
}

fn stored<R: Read, W: Write + ?Sized>(
    br: &mut BitReader<R>,
    out: &mut Output<'_, W>,
) -> Result<()> {
    br.align();
    let len = br.bits(16)?;
    let nlen = br.bits(16)?;
    if len != !nlen & 0xffff {
        return bad("stored block length does not match its complement");
    }
    let len = len as usize;
    if out.total() + len as u64 > out.limit {
        return bad("more output than the declared size");
    }
    br.copy_bytes(len, &mut out.buf)?;
    out.maybe_flush()
}

fn fixed_codes() -> Result<(Huffman, Huffman)> {
    let mut lengths = [0u8; 288];
    lengths[..144].fill(8);
    lengths[144..256].fill(9);
    lengths[256..280].fill(7);
    lengths[280..].fill(8);
    let (lit, _) = Huffman::new(&lengths)?;
    let (dist, _) = Huffman::new(&[5u8; 30])?;
    Ok((lit, dist))
}

fn dynamic_codes<R: Read>(br: &mut BitReader<R>) -> Result<(Huffman, Huffman)> {
    let nlen = br.bits(5)? as usize + 257;
    let ndist = br.bits(5)? as usize + 1;
    let ncode = br.bits(4)? as usize + 4;
    if nlen > 286 || ndist > 30 {
        return bad("too many length or distance codes");
    }
    let mut cl_lengths = [0u8; 19];
    for &i in &CL_ORDER[..ncode] {
        cl_lengths[i] = br.bits(3)? as u8;
    }
    let (cl, fill) = Huffman::new(&cl_lengths)?;
    if fill != Fill::Complete {
        return bad("incomplete code-length code");
    }
    let mut lengths = [0u8; 286 + 30];
    let mut i = 0;
    while i < nlen + ndist {
        let sym = cl.decode(br)?;
        let (value, repeat) = match sym {
            0..=15 => (sym as u8, 1),
            16 => {
                if i == 0 {
                    return bad("length repeat with no previous length");
                }
                (lengths[i - 1], 3 + br.bits(2)? as usize)
            }
            17 => (0, 3 + br.bits(3)? as usize),
            18 => (0, 11 + br.bits(7)? as usize),
            _ => return bad("invalid code-length symbol"),
        };
        if i + repeat > nlen + ndist {
            return bad("code lengths overflow their table");
        }
        lengths[i..i + repeat].fill(value);
        i += repeat;
    }
    if lengths[256] == 0 {
        return bad("no end-of-block code");
    }
    // Incomplete codes are only allowed when they hold a single code.
    let single = |h: &Huffman, n: usize| usize::from(h.count[0]) + usize::from(h.count[1]) == n;
    let (lit, fill) = Huffman::new(&lengths[..nlen])?;
    if fill == Fill::Incomplete && !single(&lit, nlen) {
        return bad("incomplete literal/length code");
    }
    let (dist, fill) = Huffman::new(&lengths[nlen..nlen + ndist])?;
    if fill == Fill::Incomplete && !single(&dist, ndist) {
        return bad("incomplete distance code");
    }
    Ok((lit, dist))
}

fn codes<R: Read, W: Write + ?Sized>(
    br: &mut BitReader<R>,
    out: &mut Output<'_, W>,
    lit: &Huffman,
    dist: &Huffman,
) -> Result<()> {
    loop {
        let sym = lit.decode(br)?;
        match sym {
            0..=255 => out.buf.push(sym as u8),
            256 => return Ok(()),
            _ => {
                let s = usize::from(sym - 257);
                let (Some(&base), Some(&extra)) = (LEN_BASE.get(s), LEN_EXTRA.get(s)) else {
                    return bad("invalid length symbol");
                };
                let len = usize::from(base) + br.bits(u32::from(extra))? as usize;
                let d = usize::from(dist.decode(br)?);
                let (Some(&base), Some(&extra)) = (DIST_BASE.get(d), DIST_EXTRA.get(d)) else {
                    return bad("invalid distance symbol");
                };
                let d = usize::from(base) + br.bits(u32::from(extra))? as usize;
                out.copy_back(d, len)?;
            }
        }
        out.maybe_flush()?;
    }
}

/// CRC-32 (IEEE 802.3, reflected, as used by zip), slicing-by-8 tables.
const CRC_TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut s = 1;
        while s < 8 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            s += 1;
        }
        i += 1;
    }
    t
};

/// Running CRC-32 of a byte stream.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Crc32(u32);

impl Crc32 {
    /// A fresh CRC.
    pub(crate) fn new() -> Self {
        Crc32(0)
    }

    /// Feeds more bytes.
    pub(crate) fn update(&mut self, data: &[u8]) {
        let t = &CRC_TABLES;
        let mut c = !self.0;
        let mut chunks = data.chunks_exact(8);
        for ch in &mut chunks {
            let lo = c ^ u32::from_le_bytes([ch[0], ch[1], ch[2], ch[3]]);
            let hi = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]);
            c = t[7][(lo & 0xff) as usize]
                ^ t[6][((lo >> 8) & 0xff) as usize]
                ^ t[5][((lo >> 16) & 0xff) as usize]
                ^ t[4][(lo >> 24) as usize]
                ^ t[3][(hi & 0xff) as usize]
                ^ t[2][((hi >> 8) & 0xff) as usize]
                ^ t[1][((hi >> 16) & 0xff) as usize]
                ^ t[0][(hi >> 24) as usize];
        }
        for &b in chunks.remainder() {
            c = (c >> 8) ^ t[0][((c ^ u32::from(b)) & 0xff) as usize];
        }
        self.0 = !c;
    }

    /// The CRC of everything fed so far.
    pub(crate) fn value(self) -> u32 {
        self.0
    }
}

/// CRC-32 of one buffer.
#[cfg(test)]
pub(crate) fn crc32(data: &[u8]) -> u32 {
    let mut c = Crc32::new();
    c.update(data);
    c.value()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Decodes a hex fixture.
    pub(crate) fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("fixture hex"))
            .collect()
    }

    /// The generator the fixtures were made with (in Python):
    /// `x = (x * 1103515245 + 12345) % 2**31; byte = (x >> 16) & 0xff`.
    pub(crate) fn lcg(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = (x * 1_103_515_245 + 12_345) % (1 << 31);
                ((x >> 16) & 0xff) as u8
            })
            .collect()
    }

    /// Word salad, as `text(seed, n)` in the fixture generator.
    pub(crate) fn text(seed: u64, n: usize) -> Vec<u8> {
        const WORDS: [&[u8]; 11] = [
            b"alpha", b"beta", b"gamma", b"delta", b"plugin", b"xla", b"tensor", b"the", b"of",
            b"and", b"\n",
        ];
        let r = lcg(seed, n);
        let mut out = Vec::new();
        let mut i = 0;
        while out.len() < n {
            out.extend_from_slice(WORDS[usize::from(r[i % r.len()]) % WORDS.len()]);
            out.push(b' ');
            i += 1;
        }
        out.truncate(n);
        out
    }

    // Raw deflate streams made with Python's
    // `zlib.compressobj(level, zlib.DEFLATED, -15)`:
    // STORED = lcg(1, 1000) at level 0 (a stored block);
    // FIXED = b"hello hello hello, deflate!" (a fixed-Huffman block);
    // DYNAMIC = text(2, 20000) (dynamic Huffman);
    // LONG = a + b"x" * 29000 + a + b"y" * 1000 with a = lcg(7, 3000)
    // (a 32000-byte back-reference and overlapping distance-1 copies);
    // MIXED = text(3, 5000), Z_SYNC_FLUSH (an empty stored block), lcg(4, 500),
    // Z_FULL_FLUSH, b"tail";
    // EMPTY = b"".
    const STORED_HEX: &str = concat!(
        "01e80317fcc67e816b4bfbe2fb54f6bddf7c1ce18701bf31de56720f4767668759aa883c59ea56137bd285a1d83c5455",
        "2f37ae655bda027998cce31a768e5fd9998f1f3f36ee43784d0dfabea6dae4868edc296d4eff56e17020fb8fb1580590",
        "c509dc53cdaa3b489952d3529d069feab5c206139849b2011eac3288319c52469571368f57f6391d16fa8874f5987c17",
        "5c41bb6d718e0f7059c7011b2f333d91c01da50d0dab338d7e5e8f3ee66874a63ab1c39311a864c7dbcae060e1f3bf09",
        "0067a2e325a0213187d562c5a84f7e2e096b949fb06da99e5a0b467080b6cf470ca6a52ad8acfba0ebb7792472239248",
        "80c5a6a785b7d78c90e4ab63445266e39c3325f95eaaba73605d4b717ebea98c571971c3ca5ee52a33ac885166a17b75",
        "67649a69ef6f5642a01d51c502f7bb9245be6f0db638cc10fdbb54511c7b079427937d92c3d4c6a56151013838a7bff1",
        "040d159b801f83d5a469887c9fb601da9317458b12b202335c50d6e156a4ad424a5cdd8661e90312e10f9bea262c61dc",
        "62486b6d14e003854a7246da96c87d1cd1053ee59270435f6c0305b3ebb320354d7e66500136c033e10fc9382ee92919",
        "4f5eb1d1498b3b53fd9f3fee2525357b0d11af4c118c32d4da7fd81657e1a6ce7dc1ae62bf13e4874c3ac1b30c599947",
        "585abd787cba5001ed1bea8a4988eed61485abb02cde3593112d011cd7284330e7b008ed79991351d23a77ad3db4f8c7",
        "ca0322d2c9c6270f04ce7a3fc0682ccf726a09c24200725e4134f896693fbd3a58918be1cca2b192dd77a135fef34bbc",
        "b1e337110dc765bef161e55e06ff35c776895df46e4accb5547ef115c8a0998f5c700bef14c6e50a9c19b41d4cce5606",
        "dc421125e7966f0f213ddff957470ddf2b6afc778dd5e9d9f9b5e0eb72841a8e42141d8a6e5f923afb0be5f6e4c09f45",
        "d62a83bfb1cd6ac4bf8cdedfb2f779f76057fc3b3d7b2ecb9c417b27a5e34858150717e0b9855f63a8f6291243006adb",
        "ee6424528bc43b5dbb3518a2d389ffb2a05930f2dbd5c14d6a4b369c5d78e6d0a3920de59011b0860f413480a689bde9",
        "2f78470d5095871bbfe37f943736e46f39382f0c833a85df51bc48d956bb799579bdd448509da9655d177c130b125c4f",
        "67b004e19e18b3003afecbc41cf72b50387e4ebb13c520c3fe3da4300fe4470ae452017a17813180805f355a2d15ccb0",
        "22152d80d1e6e4cc58af6f057d859c356a74a0f0284ff7f9dc3800b3c4ee544ef1d9eaadc2d7eb1924c456a88bcb546b",
        "af70585a0759fe0006dfa1e61859bac15b23fc5b1e7030421ad4d032729066426c9da2d1ed773e30b6ae920d612ef6a2",
        "1a49dba11d89a8def23856ba6babca535a53f66d1381ae1fa5fc4a3dd7450189e4a40098f6fb4d8664465f59ac",
    );
    const FIXED_HEX: &str = "cb48cdc9c957c840903a0a29a969398925a98a00";
    const DYNAMIC_HEX: &str = concat!(
        "8d5c59721d370cfcc7297435a52cdba9922557a254e5f8d1bc2181de68e7c3b6f4962189b5d100fdfef5e9f9f5e7f7e7",
        "a76fcf3f7e3c3ffd7cfde7db9f6f4f1f2f6f7fbfffb5ffb9df7afffaf4c7cbc7e3dff5fafbfeeebfafcfeba79227acdf",
        "d63ff7839edfbec8dbd5dfbe9e344ffbf8fef2f4e5e5f5e37ae773b1fbc7c726f6abb4c3eb8bd757d653af8d7efe368b",
        "5eefd7fdfdf53d78d6fdb179d0fdb1dec0fdf796c1e3afa2b7d6a2f8b039c8b5fafdd3fae63c65ed440577ad0c3fce21",
        "e6a7165e14396af5b1d063374b0ab724b610e143a4a8873c670f9f87dfe7df0ae395413fb3e711c2fdfbf5cec817d5b7",
        "7eb9f6887b311df50279176392350b2d5b50edf4a35a965b2a20e0e40c5bc87baf7b2b9febec6f8d02db4f2a88b4d577",
        "bd45a6b43e40fa84b77aedd9f0fed3be023607b25b3b86736f9ba0b35c2fb0ff8e19830f8f82ef35e1e0f79a0fdf9d4f",
        "d179e01985867e2f0266431f274d6f2b6e0f6579f4b1c03a391cf561d19db7c23af66df7994df6b9ca4c17acc72c9774",
        "3cc1940eb85727f1985352fc356d4c6cddbb426b01d15e5fd17db0de4174139861518b66fbfd5ba7e0b0604814341e46",
        "b3feb081ac17af6fb486295e8ce6e889d7cb26b1a46174a9719779c80a1dd55a171fa6cd8c244874bdf3dafe89b64721",
        "05647dbf8ebb3dc7bb3b38931c52ee452b590e02b6bb4562670491f42a143f272b8dda26deab756d3f828cd24f7a0889",
        "2cbbdf3a7b0a6c9784599cfac0ba76d41833e1cd6fe9202cb876452f335a21e3fafc4cedf39056345df706e741e068f0",
        "c27a1884968921738a92eca1913961920e10a3b171db90a1db10fa53cb4fb6fde037fbfc23324cec7b4f28e780602a84",
        "efe406639a166039215314c60d4dc66d8ca9d8870c1bf49142339ecb3263c781fea158868e253abd8c87cd1101713dec",
        "6f8cdf32a9212c85420313494f497f4b2c059ec121a8f7516071a528613f5e61c01d7d51ece8692d902213188f75d001",
        "4968ac2465bc719b60989330e627fc5a49b028b418cb98fbe0a0010adc2dc2592c9dc9f13bc26d8e5c2a67c09a139f55",
        "e89ea52c61a9e59641ef98a0245008482fcdd7181fabadcf80aaa212b6c0711d8621ec1149d36a861d13c7fb602f68da",
        "eb3313f476d8815065d5a9c10b541c68a0d821271c7251ad0559e5eac6243806447680e80d0bdc52a5ee0fc18e07be4d",
        "2a47e0535a8318dcb14ac6a22d60e0dee2c26170308dfc5b711623e66b528e75d02190a4f6aca08b8189e57d07ece496",
        "50e4329f00cb94820b23622a965685e71f5563cadfb1cd920d850badb4302fa490304671f0818e845a484010d87eb565",
        "8e5605eb5821aab907bf47882ec2b0b64fd0295a40e08cd01e1ff0d7f21b2439a2dfdc5191f1300a084e0d6c9e9d59e4",
        "6c156c65eaab5ad2215550dedf36f438ac22a6137f55b3ce4e6a56bac9a1292661364429c9196e9fead7392932bd3359",
        "663f7349b6d845259094b9433b21a87c0185a51fad8d57dcd06cc80b259786c0d3e5c06045033894c6218cbaa5d02bcc",
        "c0ba9502233022d558e95e5f12691320459ce805b42d2594b6d50f5c3369b4847364020943652258022f6195f2d6bf3d",
        "d78218e65e8cc25bdbc811120f01d16ff49188b755cc0f90dd860969082467355faf486b082b527b8de603d89df751d8",
        "1b89e2655e918c52ea03560ed5302373d0023b9558206c603e6a55d60ef35c816b00f46e059f7950bd59c4f04bb40255",
        "81cc1e43da1180c0d93f0177e18a086c57609005fc91a16a48e440221cddc4fca51f4279c252194dd81f54dce9984281",
        "931497dcbe90a7096b8a4117347c76b9cc2326aa41f94047d246a46e98c75605ae4d3c56b0e7835b57824b900a9c34e2",
        "a8e76255f42f7004137b6a33204218a7afc427317588605ef86743e794caad26c809c9a875f25d627b14916e13126df6",
        "827a1e856d9e47554389224e8d1fcbaa41816a8d81b6d3be9cf0cf15bac22c9bb68069cb0563cd096879c208c59b3547",
        "de94310d3d7ffb52fb2a1da575558af0a4c0544cb06d93da65d8131e774d6e26b9c36967c679405d207f65f07a628b98",
        "09d4ea149e1cac12b73a1c24a73e445bd2fb627e7b3d43b09c98badb90e071b2e33bafb17579a79a6c7cb0c5a4815c76",
        "7346b6c2761da9a82a16a67e2c898c0613d76f9c810ba38935b35e5913930622e86988ad4084de4829ed92699e0e2d0a",
        "b22d494868d440c189652a3903b94f9d860db5ac3d44fe97cc447684be37bfa3fd1c1a2346e7688f899b2a3a27c20d73",
        "61d171ee412c4b750e3b5ff24556aa9f480dae0ab322b51a7e04bc43c389eb7089a8588b1c0037ca5b3028a4d7addd3a",
        "f58d552c146d8e49405a62d1a4d0aacb0b2f1b5c9232346c079996716103a60a1988cac2bf918ee7be17d39bcafec6ba",
        "61e29a08c71c0bb8a3d3680ad79836740472b261a34ebf5c68abe4ada2e2198d308260f98007568c53276fd9cde641e8",
        "5ad1a74a556316e760b7136e0b68279187e9824bde3a71865a7bddc4ccb09873f5a82030b61c6532819b6f044ea8632d",
        "36dfe1c3aa140ab7a941028c858e5731f5e57411755d683a0cdfd0eac26202897b1c18f862c99ad21f813f4c84381f1f",
        "90428fc624d003281d1695b94f92aae4479fa708f53d4efb59f9dedad59935620e7ec1709447d598354715b09ec9ae74",
        "c2008256e01094ff4f932dcaea19fbc5253f958bb17f2004478855e5ac1eb334988a65fa2e947e52df333f84e0d16721",
        "245ef427b1ad1010ba95afb3687955245da642467e041163d994a77e486b74551c8c144d4a54e1d434c28acc44258e45",
        "39793841a7c6ed4530890d27b04c21b38115875ab95e2fcb6da97e22a7452423408259ec30252711c6e5a1fac7d651a5",
        "94a41590f694e2289436c60f23a15a0a950d7342a7c9b8d4d4a9f41467ad19ee1269458a2400c53a1b4d4855bda63345",
        "80d2101f1ab22cee7702fe3f532dc759e634d28a8fb0db0bd46de12f7007ee48780dafeab721a8357170013130850188",
        "f9b98d81248a7057760763773d108b1ce6aa76ac388d984971a5fc5ea694b16c13784be9eb40c706da864752bda3505e",
        "15a97cacb9463d2f17d5694e953ac4d466e59145bd69406d5f4bd9bf148505560d9f4e15316bc7fc93ce6d9d86ebe254",
        "b558d36cb0c4684b1b396e5c21af9993579ea081e22b5e9538d9338c95f03017f677844f09c100bb0ba115217c553989",
        "eb9c06b1509d0fe34495a21f9c4652e0c7e3159a810faea15c96b13c0cd0d33875ea96ebc8247727d461a415c7f71084",
        "82f3023968c58769099994a54b2e2ebdafc0f0aba8c79d88426f7a8344fc86456e25004857d78f1826de4fe116145607",
        "21125a67a0b0ff11ab176df82402295ca08a27d6b12e1a60f3eb5e95c68a0e5cba50411263981ab32215a7831d4c494e",
        "0f7770bc5b1edb303ad5450d54f6439eab0804f4790adff04268f400d71051afce9832c5826141a652a4bb60f787a47f",
        "89a359380fa5600af094f6b96d2c1743bf17f9361b67089f5a8130f364b65d8760ce534729cf434158877ea0dcf4817b",
        "2fd20837dedc861ead106bce2894ec546a30a56283a8131e0c6fbbaf96e3ded2eba330475274eb8346f78ec022b28a94",
        "d6b8ae96ac450c2dd7f5662be14a8ca4171c582aad987880c1471a25bdcae4b879d62ceda58cb91357001e4e696222c1",
        "78892d655c29715d67884437ba0e97b633d94a4a31dd0872a306a503751b3542a10b9fd3fa2b8e5adacb947e5b987a0e",
        "7705cdd24f9a8b90c59b353af4ab4c592a75ad52efb4ba6c8bfc5fb3f5e9620a97bfda91e0c18f5011fa8482cda2e41e",
        "da3ad1435f9d15846fb015f49e8c32fc75bc3a83014626a015440df7505365dbd5c8c324bf42fa34d45a922ec4a1fbe4",
        "499f7269862e521840cba5bd65c8d025c51e8d1d9d67674ab75ddc2d4fe6e8445b1895365ed87c8b5398378bd1e32a70",
        "975d91c4ff51e070478f07798a2ebc97a07da278f6f5048de4a9bcd11bad3bebca3c5afa0f300ee37d1abd71db26d83a",
        "3533911df644ed619cef10965e9e142818625f1c38afe3a020339c9ce8e4d20c8a75f869262d0ff761691240b93eefc3",
        "a48c18ae5acf6293336c8c048647e8a28682726eba1c6eb699332a465036431afd4ac5e71ebbfe5ed6ade659509d105e",
        "614807689413f4490621c6b020ddbea8f704a83f8c57c3f37f9d50400763c85cc8cb78465951c65ff8d6876e4d79d10a",
        "17f6f43fba20b28a8681a14b27f3bb0ec5a540e5b14e7c03ae2373cd29b3e446581c2782ca6fd7cd5b15db60643469a6",
        "9ac7539c44dfaea6b7771510863e8cf068ba3256d40a989d264d510545ec7e6f959efd673cc500d952be8d3145aa4898",
        "5e3c160f3192a42908245430ce133b6d960a047708f726a9c64b662ece9cae3d0e31db7f9be2337edc76a6628a5b7152",
        "1315c73d62cfb455912e4024b8c9779c6cc62ed62f273aaf02d10551a21ad26b4066d48fc22e6b5b28e9c22043a692e3",
        "04052be3379c04274d61349514d1d9c4ff00",
    );
    const LONG_HEX: &str = concat!(
        "eddd873b147e030070d95ce691cb88ec10a7e48744b6cbcc1e47299b1421ce0a9d3d32ce3e23199111b23a3b33193f47",
        "f63e72f6c8c87aff8bf7799ff7f97efe918fabae67225480575c32ef27b4997953d9c97e80ff8cefd7642c4faa8d3325",
        "c6ad3d0a4f067514c69bde90b7da72b36e7d94c0f4c4eafe638576c38fd7cadc0832c94c43c219f9da7f5aa5fccdfb76",
        "de61f66d3820fa8ea369e427e275b7d28d4d7dd39b7d5a19edc349d30941aeffdec39dc6ab62b716ef2f6cf4c7b4fc69",
        "696e874c1dbb6411f4d0b55483ea6b8fb4444ef18478bd05241373082c5f1476e431173f8ad2b09c5df6944a12442660",
        "27a2578ccca3b00cdcf4789199f9e971ebf76e659c13a5c4ec91c988b4a979b236e5c0758f7a1d31b2377e3082848a6c",
        "508df8449f3344a7d4b582121af4c278a2c1e88ac1ae68742de1b6fc1d71f47eff7244e52953cd1ce998ab1de31377d7",
        "eb113cdb1eda6ee4127bf91bf28713d30af5529142abb3de99a5bde794187e6e94460604b1a8f3d2410a13e29fe33bd0",
        "dfbdd6dc4dd6b6f1323850c8ed9f66b5fd585485fe0fd20263559cb1f3c3cc5cb7129b22c3400c9bf7aeaa6c8bd59b86",
        "80fd379217dc1d01bb8d03cdfe7bbe225c278619caaf12870b138763dd79c2f51918b5d6fbfff40d4add7e07bddd8f50",
        "1bd27eb373757767f7e47c06759e26b8941758262569aff39a551a53bef75bb5fbaddc3b5211d8aabe431faff9d44c8c",
        "96d888915d41145a39d6f5db8a1a323f8adf524a087a51f17df5bde9db60ca9d27c5457ff1793e25cc494e65d0ec8759",
        "765f110fea141b83843c7e4b219cc5628e2049c65359883f4d3c1d7cb19ee58e70910c7388907d82fe85b33b04e290ba",
        "ae2fc13dccc092c52eca8c2f53c42976f8ad2af8aac038d9c2ca3b6fcc0e6a425da1f4f4eefbe357ca7650bd3ea1e647",
        "79dd0596b4bf4d8d48b48893967e139ae6bfa688f7cf16b4b0fb3feea7b06f7d48c66b501fecf8cfdb4ea6a49ebc7b6b",
        "c3c0acd8bcacb93db05f1d6cc19c219dadf571721ca5de9650b2175a0ebfe22d8d46eecc13b6646d8bfb0c029f7338b5",
        "370fb2f141c99e28f5df76f0f6851ce4d4e815957ca53a59ae19382621ad6959216cd52ac928c475b7dc3cd5d06a847b",
        "260673beee2fb517a433bb256d1ff472a931fd65f453c6f0d300fb635f6ec1e7b1ecd154c9f9bbf5a46597d928aac4ea",
        "f83b8e7fcdc812ded69ea7b0d8bada77762893f33cffb227f83806c9c0674dd1f65d638f812463bc6a404683daa63429",
        "6e9314cd2df7b28b48cca3928a5cdc1d31df1db29fc25e1a730932c5741b7e3f5c3228fcf6d2082df79190d6497ed58d",
        "5b5030a34e2994330fd51467b6350dbd17207a598e1c57d737d72b446d1a26cf912ffc6e88feae31d0746cc42fde9212",
        "9a8c16aa30f3e47db6f0ab0f920947217ad91e0b324ea4435bfacf8ae73ced6017a6755eb85cf82766ef2cb83dbb6c8a",
        "5ec78b1a6159911293bb5c99e6ee196298748dc6d99128ab2ebeeabcc2c8b5cb1793635ca256cc7d4801fdba3f925a87",
        "70553729185abd0effabf85af5615ee3a9092f9b3bceb1a438fd7635edadf795457a9dd83609ff4d6824549d30812219",
        "9620220d07d4de31876ba9ef8c84be1fa95e2e95d45497b1968c5ec714c7d0f4203b3f085d6d8bf7f8ad2a7259243714",
        "e5f08cad15d13814d5fbe91bfbec365deda8ce078dcd7dd2bcea72d6f79c038585b6e319dd9f7636ddd5295ef5ef34aa",
        "7a25c158688907d7bc166eb69d9498685fe4cd12b3e649bbd63e48b792995112a6639bbff4a0a6c97b9ca49793fbd68f",
        "9daf415ad31d2831fdf8515bb638a248076e5c62f25a3ba9bb0a5aa67ebf60a903778c67ad654dd81d45b1dad0043d22",
        "63bbd048b9d78ad0742c7cdd949da53617fd60d651557d4f320b1729a33413e091d2f3c5447f9d497008ae7ba6bc6a92",
        "e6eb91b21e59b5fd8cf79eef4105e75fe29d9f02eeb3d6890beeb8e01f6639ba9dc1e2350717eeedd6d67ed8cd1f86a7",
        "ca4b85168aa612e486ea8bdfdf994ed929a4d16ecfb067e69d690a96f941326b0d72d769af4bbdc93154951d0cacfb3a",
        "32558fbd726eacd1c53231687344bc6abb6f23b561bca193d9606f69c1b4ab32e439119cf75938ce219086debd6ea649",
        "e1941b56a773fc036e9537c38509c0262fee6987a940c29b9807fc30acd6dd28d5610901b341aa14d8b6c5d0f3e119d3",
        "b3d31467989736c927be32b42341f971c12be8c600f13a799ba6a3c8b0e375fd8ccd1332f4ecbe23fbf983639a35b5d3",
        "c37d8b2eea568e1a787e2e41b6ceb921b90502596849167f60da51acbbb856c960807542f6f24d3f384eafdf9359ed6d",
        "77b69579178f88200a8e692720d48b7bc35ec7f307226a5b1f6e58183dff54774ec856e9ea16ae38b165c814c6bce6f8",
        "1be6bd55675ae493e02189aeafe8c171ded22390cc2226556828f55e28462af96bc92bbee833444686936c7b265b321d",
        "dd66c0476877a9e4400c6ed437e71a08f65bc9651bd8a50579ef182c46fb6dd8aff9f4d6477dbd49b08b697b123d1436",
        "44ea91fac1f6c84eeb9f0c5b73c8c33025131eff550689cf9b74dabb382e38abe13294fe5f14f7596747caac646c3bcc",
        "c635b7e085911647fca988adc0c68434da65dc147df530a993d9cfa72302369e7533fe2c7f98b7385fa869e4c07d91ef",
        "619c99083421e9393fc722d1cecbf2b2ff6598ecdc597f146954f661309f1db3a59a98223e98e163c3d8f30df71ff99d",
        "3dba5c2c7e7a36c7a19cb6685e3f9f07e5911bba3cc6217148798cb40229d533a7af1baa03cac7a217f84f32f09dbb93",
        "cc8fe1f4fa687233822ad35bfea45c3a34362a14ae5d82d42a21ed263fade4b54a8997fd16fe595e6ce56588df6118c9",
        "e1f9fb88bf84b83695545ae21f2885ae935e5e58c368923b2d87c64156de9047e2cf14da90b0e6245ca2a99965e5a364",
        "3a2f92cf1f5687254ca6e071b30ca9997729ef76f016e9d1be4f0ef911a7957efbe6a5b2ed805440d92a570755dad7fd",
        "aa2f39244e92cdc82729c97c7f5791d48f0356481c30f72a05522752aff3d39dee2e2660be52a99ff614460f67e1cc2b",
        "65fef20cbbe8db84fc54a056f39b8cef89cb1d897c7a56a31698fe4ac0c5a1a998ddad58ef96099c76ae2acf6e99b1ca",
        "a3a3cdda8bc729c4a05eed7e1d97e2398d44b527a3c525874dc24f6c3c3dcf166317f7adddf28fc27295ef08dcae5949",
        "eb15b9fe9f6bf2d373b8ecf72d2a9ee270430962c9ed545c2cd8db7607f4bf8eecfea56fc0ed64f24d3518673e792b92",
        "14cdbef3f488656de2b80e56338853cf4d181ce11def7a0017cff68893961ddb489b64c655213f8c92dce3ead59050a1",
        "44cff756a46d2dc9549263be7b27352a9c208665ad0ca223941fb362ff70097c30bfdf659ec4b35ce3cb972a55af0a27",
        "edce211f882fffebf24bf99790bba2ea8620fb47d833681a67ee5dbdb1648ab80a769650cf0561c49f3145b9a7863a27",
        "16e4d5728bd860b31505574c7e5e9c7813cdbc202ff1cd608e79304ce1ce658603e4a14dd5f44d54ac33a552a24faa43",
        "41d9fdae6155e3e5796f2504ae882e38c2e0683bb0b6d42c5c415634f3cb78e2dc0da4ac0fda7701aef6357f08214ef1",
        "cf1e53b342c718427b505eac7e899a62e1758039835a0627f5dc35128f2acec00db2ee02221659602483609f2d5a6017",
        "ec1c3d8fbfe1b13d87ccfa27d3274ef546969ebfdfe4fe77587cea2015865d984f2cf37cbbb0ee8b383e8847f9ae7c85",
        "dad822c71ad4e89271d38a5744cd39dca085e68eb0176fa3abf551d2938019d8646fbda5e89c4c59b5f3e8c643dde878",
        "d154630f4901d767cc5079c7f50dd131a3581aa8ecb8b1802fd73db28788bb6902fd0da964da5aa4a990309f59d8b492",
        "982c1dfbd564dbf629ee3a25be9f9ca7f5de2e3e98109f1d4f2bba7489cc922f132ba78f324bb926f4231202e63dcf18",
        "ac3e7fdc9cb3290de3e1a32918836805e14be9fce66a653a1ebf3a8b7f858f118b0ec70e4c066571403daa5ef75ff1b9",
        "929c870a1dd4793161bc05d7eb43a34bbedd883908f022a3eab2539ca666594b489847c9db527b7ae039ec312b37b10b",
        "b65125d26d9369f995ccc4dad0199330d5b7aafe98408a150d7abc5c9342acc8e592840b5613aaf628716d4aeac04786",
        "3f8d99cb42733c5670be9a55dd936e8a4cc9f005ad919806e4cc9b17ba4b7159a2c47ef4f9a2a0e5f727b97394d5a8ee",
        "ef6fba2c97e919242eceddcfafbbd44ae92461e64364f8462982f37feac76327859ccda43dcbd87a9676af793ff00100",
        "000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
        "00000000000000000000000000000000000000000000000000000000000000000000f82f7105ff39f8cfc17f0efe73f0",
        "9f83ff1cfce7e03f07ff39f8cfc17ffe3fff9ffb0200f07fef3f",
    );
    const MIXED_HEX: &str = concat!(
        "7c58d96e1b410c7bd757f8d75cc44d0a384e90ba403fbf3bab83a4340d12d87bcc215114a5f1f3f6f8fdf175f9f879f9",
        "bcff79fdf5b8d8f11797d7fbe7dbf5f27cbb5d9e3eeae5767f5ef15e9e5e1f2f97d7ebfbfbb546c5741fb456f1076b83",
        "67ed7afcffb83d6b5819f1f72e53e3f21c2ad6f9967eed1bc7506bd6f85dcce559bc667c1d46f93b718186db69d431ac",
        "362b9f160eeba56f718e3e3f8ec1cba7d3afe3b59bb5ee06cae7709f9ee884bdc7d20afd9a3f3159e3b06a0f4c0c3da7",
        "316ef236befc1907c843b6f6b582d6d8487304129758e874f4780eaeac276c168c0e84fda584adc1e52148d78ff94640",
        "710013783037a6177e1922a134c278bc511ef5e8c2b7b5a45ff998b508ed4a7129d388391b7eaec7b5ff48398ee0bc36",
        "b9e3559705462b14e52d905c0f60905300ae3031ba3ec0312020d6f76986b45719606a9b44b7f3df08fdd835c4c3bf38",
        "6ae9a7df65421285cf4b652aee9a14aac1015a3073a418012a81260234f14cc322e73652a9f96094118ac0f1dc18b65d",
        "7e886f9ee92b27ce75fbf6c630891b2682e23b001f09480353f293f21ae8d994020c405631df831f23072b6f2bc52b07",
        "9827c90f984e8661ef143f1d03b7c500e675622fc6ea2ab30e4a451af9c5f01307ff93646bf3e02df1db832ed9de23d9",
        "b8937e21328d1514c90a1c13fcf84f14b59c215c951d92969b1c97ad23797a714cab054c8419e6769745ba38bf555146",
        "46694342f0535a2298a2bc8301da9940578ce164bd2522c85c29b039979d12a582746b1ef5da574c40bf20b1a24a0e17",
        "00dfa60c26cf429086fa6172154b95c6de70001f0e988107bd54f79a17bd950861f546e04c729a3980a5494cb4e59bcd",
        "dea485c0c40226a99abdd794af2c573bb501fdd32254162d5e81450dd64193a2bd43121e304d8769197f848d5bf0165c",
        "5e7cb391bc38762ac60e394d8114d19260b462bdad011985845217a8f04f307419db24ec2e2a43cd2a8908614d77c844",
        "6b6eb4ec53585abde82d45f1327de766b7ce82485c6ac1f893d39356502240500406a3d6205aded8b80b531950d409a5",
        "f11c1f82d5da8a59824a2832d378b69e26e4a0a12d400f0aa9a37128e928ad7440d5f726a6f37ee61d45d457ddb65c65",
        "7b970b2dd4df1ea0b1e2a6c3d8b1dab4f6b2ed535140103dcb245d2ae2dc290111f11d6b652f789249cfd726ba9f0dd5",
        "fc95818d94f098a4502124bf28f00f29fbf6840e454d34c84066aaa9de51331d2e245aa37beb9998616f27282d14ac1a",
        "df7c51bf2ce66d4469fe3c8058c16efe4c8f76e9dbcfbaa825aa7c12c06a9fe58ccf0dc63cd9f202ff000000ffff00f4",
        "010bfe1966fb7f2f908295424b45799d1767e5b593808129caf3107a430f5d8ac7e8e3d6f0f33f73766456ca39484613",
        "0e610e924ac5fc940f35da28593ed79ec71237c12a24bad3cf85cd4d8c0173538df8f2f9dcfe3d38b13225ae7f5f3e19",
        "bbd492926a03088971dc92849ce71a976c242aa2a1a35d4d8ae289c40fe9aa337b278d000a0b41cb36623d27c2735115",
        "83dc4e45f12a740b713ba02260543224df02bfc561b17cd3f50e65ee541c3007aa18f599250e9aaa3e370080ca19ef24",
        "bf5dc298c76fd2d787d8a391ac5bd1a3bad1b85893c4e662cace4296a5b0f96bf4312c3094bd5a10c2b98fc821a74a22",
        "89fe2f3895c7716aebf7fd1c4a8f67305576954721112eb780a8c04a0b78b3bcf198f1f3828c53fc7babcaca0f3152ad",
        "ba239793c5e66402979ecfd1c24726a9c996983fb38da34f51e041574e0bd219fb30c8ced8b2142ae19254149f8cb922",
        "eaf0b9d67e427a9a4591fa7d5e97feabf096c0aeb2ed5767367ce6caf8be855d2a9fef6e3d22f0172fb48cf3974def9d",
        "724c19ecab0f46f16c551ead2755a192639ad0c047a51cfce741907052a4bd25584a69411b91f6005d15947383c926fb",
        "6cdaf585f444178346309dade5147f7c7a8948635beb82ccdfb3dfd664942ccf1d57f6739c76f9e2237b4d63aa164fdb",
        "b001500bc294008ccc27988c232bca464e076a4398b4d9000000ffff2b49cccc0100",
    );
    const EMPTY_HEX: &str = "0300";

    fn cases() -> Vec<(&'static str, Vec<u8>, Vec<u8>, u8)> {
        let a = lcg(7, 3000);
        let mut long = a.clone();
        long.extend(std::iter::repeat_n(b'x', 29000));
        long.extend_from_slice(&a);
        long.extend(std::iter::repeat_n(b'y', 1000));
        let mut mixed = text(3, 5000);
        mixed.extend(lcg(4, 500));
        mixed.extend_from_slice(b"tail");
        vec![
            ("stored", unhex(STORED_HEX), lcg(1, 1000), 0),
            (
                "fixed",
                unhex(FIXED_HEX),
                b"hello hello hello, deflate!".to_vec(),
                1,
            ),
            ("dynamic", unhex(DYNAMIC_HEX), text(2, 20000), 2),
            ("long", unhex(LONG_HEX), long, 2),
            ("mixed", unhex(MIXED_HEX), mixed, 2),
            ("empty", unhex(EMPTY_HEX), Vec::new(), 1),
        ]
    }

    fn run(data: &[u8], limit: u64) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let n = inflate(data, &mut out, limit)?;
        assert_eq!(n, out.len() as u64);
        Ok(out)
    }

    #[test]
    fn crc32_known_values() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
        // Piecewise updates (exercising both the 8-byte and the tail loops)
        // agree with one update.
        let data = lcg(9, 1000);
        for split in [0, 1, 7, 8, 9, 500, 999, 1000] {
            let mut c = Crc32::new();
            c.update(&data[..split]);
            c.update(&data[split..]);
            assert_eq!(c.value(), crc32(&data), "split at {split}");
        }
    }

    #[test]
    fn fixtures_inflate() {
        for (name, stream, expected, btype) in cases() {
            assert_eq!((stream[0] >> 1) & 3, btype, "{name}: first block type");
            let got = run(&stream, u64::MAX).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(got == expected, "{name}: wrong output");
            // The exact limit is fine, one byte less is not.
            let len = expected.len() as u64;
            assert!(run(&stream, len).is_ok(), "{name}");
            if len > 0 {
                assert!(run(&stream, len - 1).is_err(), "{name}: limit ignored");
            }
        }
    }

    /// A reader that hands out one byte per call.
    struct Trickle<'a>(&'a [u8]);

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            match (self.0.split_first(), buf.first_mut()) {
                (Some((&b, rest)), Some(slot)) => {
                    *slot = b;
                    self.0 = rest;
                    Ok(1)
                }
                _ => Ok(0),
            }
        }
    }

    #[test]
    fn byte_at_a_time_input() {
        for (name, stream, expected, _) in cases() {
            let mut out = Vec::new();
            inflate(Trickle(&stream), &mut out, u64::MAX).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(out == expected, "{name}: wrong output");
        }
    }

    #[test]
    fn output_larger_than_the_flush_threshold() {
        // 3 MiB of text compressed by Python would be a big fixture; instead
        // chain stored blocks of 60000 bytes each (BFINAL on the last).
        let data = lcg(11, 3 * 1024 * 1024 + 123);
        let mut stream = Vec::new();
        let chunks: Vec<&[u8]> = data.chunks(60000).collect();
        for (i, c) in chunks.iter().enumerate() {
            stream.push(u8::from(i + 1 == chunks.len()));
            let len = c.len() as u16;
            stream.extend_from_slice(&len.to_le_bytes());
            stream.extend_from_slice(&(!len).to_le_bytes());
            stream.extend_from_slice(c);
        }
        assert!(run(&stream, u64::MAX).is_ok_and(|out| out == data));
    }

    /// Writes `codes` (value, bit count) LSB first, deflate style.
    fn pack(codes: &[(u32, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut acc, mut n) = (0u64, 0u32);
        for &(v, bits) in codes {
            acc |= u64::from(v) << n;
            n += bits;
            while n >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                n -= 8;
            }
        }
        if n > 0 {
            out.push(acc as u8);
        }
        out
    }

    #[test]
    fn long_codes_take_the_slow_path() {
        // Lengths 1, 2, ..., 15, 15: a complete code with codes longer than
        // the fast table covers.
        let mut lengths: Vec<u8> = (1..=15).collect();
        lengths.push(15);
        let (h, fill) = Huffman::new(&lengths).expect("valid code");
        assert!(fill == Fill::Complete);
        // Canonical codes, reversed (deflate sends them MSB first).
        let mut codes = Vec::new();
        let mut code = 0u32;
        for (sym, &len) in lengths.iter().enumerate() {
            if sym > 0 && len > lengths[sym - 1] {
                code <<= 1;
            }
            let rev = code.reverse_bits() >> (32 - u32::from(len));
            codes.push((rev, u32::from(len)));
            code += 1;
        }
        let order: Vec<usize> = (0..16).chain((0..16).rev()).collect();
        let bits: Vec<(u32, u32)> = order.iter().map(|&s| codes[s]).collect();
        let packed = pack(&bits);
        let mut br = BitReader::new(&packed[..]);
        for &s in &order {
            assert_eq!(usize::from(h.decode(&mut br).expect("decodes")), s);
        }
        // With no input left, decoding is an error.
        assert!(h.decode(&mut BitReader::new(&[][..])).is_err());
        // A 15-bit code cut short is too.
        let cut = pack(&[codes[15]]);
        assert!(h.decode(&mut BitReader::new(&cut[..1])).is_err());
    }

    #[test]
    fn bad_codes_are_errors() {
        assert!(Huffman::new(&[1, 1, 1]).is_err(), "over-subscribed");
        assert!(Huffman::new(&[16]).is_err(), "too long");
        let (h, fill) = Huffman::new(&[2, 2, 2]).expect("incomplete is allowed here");
        assert!(fill == Fill::Incomplete);
        // The unused code 11 is an error, not a panic.
        let mut br = BitReader::new(&[0xffu8, 0xff][..]);
        assert!(h.decode(&mut br).is_err());
        let (empty, _) = Huffman::new(&[0, 0]).expect("no codes at all");
        assert!(empty.decode(&mut BitReader::new(&[0u8][..])).is_err());
    }

    fn err(data: &[u8]) -> String {
        match run(data, u64::MAX) {
            Ok(_) => String::from("no error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn hand_made_streams() {
        assert!(err(&[0b111]).contains("invalid block type"));
        // A stored block whose NLEN is not the complement of LEN.
        assert!(err(&[1, 2, 0, 0, 0, b'a', b'b']).contains("complement"));
        // A fixed block whose first code is a back-reference: 257 is
        // 0000001 (7 bits, sent MSB first), then distance code 0 (00000).
        let s = pack(&[(1, 1), (1, 2), (0b1000000, 7), (0, 5), (0, 7)]);
        assert!(err(&s).contains("before the start"));
        // Fixed-Huffman literal/length symbol 286 (11000110) is invalid.
        let s = pack(&[(1, 1), (1, 2), (0b01100011, 8)]);
        assert!(err(&s).contains("invalid length symbol"));
        // Literal 0 (00110000), then length 3 with distance symbol 30
        // (11110), which the fixed distance code does not even contain.
        let s = pack(&[
            (1, 1),
            (1, 2),
            (0b00001100, 8),
            (0b1000000, 7),
            (0b01111, 5),
        ]);
        assert!(err(&s).contains("invalid Huffman code"), "{}", err(&s));
        // A stored block promising more bytes than there are.
        assert!(err(&[1, 5, 0, 0xfa, 0xff, b'a']).contains("end of data"));
        assert!(err(&[]).contains("end of data"));
        // A dynamic block header asking for 287+ literal/length codes.
        let s = pack(&[(1, 1), (2, 2), (30, 5), (0, 5), (0, 4)]);
        assert!(err(&s).contains("too many"));
    }

    #[test]
    fn truncated_streams_are_errors() {
        for (name, stream, _, _) in cases() {
            for cut in 0..stream.len() {
                assert!(
                    run(&stream[..cut], u64::MAX).is_err(),
                    "{name} cut at {cut} of {}",
                    stream.len()
                );
            }
        }
    }

    #[test]
    fn corrupt_streams_do_not_panic() {
        for (_, stream, _, _) in cases() {
            // Flip every bit of the first 300 bytes, one at a time.
            for i in 0..stream.len().min(300) * 8 {
                let mut s = stream.clone();
                s[i / 8] ^= 1 << (i % 8);
                if let Ok(out) = run(&s, 1 << 20) {
                    assert!(out.len() <= 1 << 20);
                }
            }
        }
        for seed in 0..300 {
            let garbage = lcg(seed, (seed as usize * 7) % 2000);
            let _ = run(&garbage, 1 << 20);
        }
    }

    #[test]
    fn write_errors_are_reported() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let stream = unhex(DYNAMIC_HEX);
        assert!(matches!(
            inflate(&stream[..], &mut Full, u64::MAX),
            Err(InflateError::Write(_))
        ));
    }
}
