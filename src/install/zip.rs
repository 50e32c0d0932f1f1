//! Just enough of the zip format to pull one member out of a wheel: the
//! end-of-central-directory record, the central directory, local headers,
//! and the `stored` and `deflate` methods. No Zip64, no encryption. Every
//! offset and length read from the file is checked; bad input is a
//! [`ZipError`], never a panic.

use std::fmt;
use std::io::{self, Read, Seek, SeekFrom, Write};

use super::inflate::{Crc32, InflateError, inflate};

const EOCD_SIG: u32 = 0x0605_4b50;
const CENTRAL_SIG: u32 = 0x0201_4b50;
const LOCAL_SIG: u32 = 0x0403_4b50;
const EOCD_LEN: u64 = 22;
const CENTRAL_LEN: usize = 46;
const LOCAL_LEN: usize = 30;
/// The end record sits within the last 64 KiB (max comment) + 22 bytes.
const EOCD_SEARCH: u64 = 0xffff + EOCD_LEN;

/// What went wrong while reading the archive.
#[derive(Debug)]
pub(crate) enum ZipError {
    /// Reading the archive failed.
    Read(io::Error),
    /// Writing the extracted member failed.
    Write(io::Error),
    /// The archive is malformed, unsupported, or lacks the member.
    Format(String),
}

impl fmt::Display for ZipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZipError::Read(e) => write!(f, "reading the archive: {e}"),
            ZipError::Write(e) => write!(f, "writing the extracted file: {e}"),
            ZipError::Format(m) => f.write_str(m),
        }
    }
}

impl From<InflateError> for ZipError {
    fn from(e: InflateError) -> Self {
        match e {
            InflateError::Read(e) => ZipError::Read(e),
            InflateError::Write(e) => ZipError::Write(e),
            InflateError::Format(_) => ZipError::Format(e.to_string()),
        }
    }
}

type Result<T> = std::result::Result<T, ZipError>;

fn bad<T>(msg: impl Into<String>) -> Result<T> {
    Err(ZipError::Format(msg.into()))
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    match b.get(at..at + 2) {
        Some(s) => Ok(u16::from_le_bytes([s[0], s[1]])),
        None => bad("truncated zip record"),
    }
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    match b.get(at..at + 4) {
        Some(s) => Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]])),
        None => bad("truncated zip record"),
    }
}

/// Reads exactly `len` bytes at `offset`.
fn read_at<R: Read + Seek>(r: &mut R, offset: u64, len: usize) -> Result<Vec<u8>> {
    r.seek(SeekFrom::Start(offset)).map_err(ZipError::Read)?;
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ZipError::Format("zip record runs past the end of the file".into())
        } else {
            ZipError::Read(e)
        }
    })?;
    Ok(buf)
}

/// A member's central-directory entry, as far as extraction needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) name: String,
    pub(crate) method: u16,
    pub(crate) flags: u16,
    pub(crate) crc32: u32,
    pub(crate) compressed_size: u64,
    pub(crate) size: u64,
    pub(crate) local_offset: u64,
}

/// An opened archive: its central directory, parsed.
pub(crate) struct Archive<R> {
    reader: R,
    /// Where the central directory starts: member data must end before it.
    cd_offset: u64,
    entries: Vec<Entry>,
}

impl<R: Read + Seek> Archive<R> {
    /// Reads the end record and the central directory.
    pub(crate) fn new(mut reader: R) -> Result<Self> {
        let file_len = reader.seek(SeekFrom::End(0)).map_err(ZipError::Read)?;
        if file_len < EOCD_LEN {
            return bad("not a zip file (too short)");
        }
        let tail_len = file_len.min(EOCD_SEARCH);
        let tail_start = file_len - tail_len;
        let tail = read_at(&mut reader, tail_start, tail_len as usize)?;
        // Search backwards for an end record whose comment reaches exactly to
        // the end of the file.
        let mut eocd = None;
        for i in (0..=tail.len() - EOCD_LEN as usize).rev() {
            if u32_at(&tail, i)? == EOCD_SIG {
                let comment_len = usize::from(u16_at(&tail, i + 20)?);
                if i + EOCD_LEN as usize + comment_len == tail.len() {
                    eocd = Some(i);
                    break;
                }
            }
        }
        let Some(e) = eocd else {
            return bad("not a zip file (no end-of-central-directory record)");
        };
        let disk = u16_at(&tail, e + 4)?;
        let cd_disk = u16_at(&tail, e + 6)?;
        let count_here = u16_at(&tail, e + 8)?;
        let count = u16_at(&tail, e + 10)?;
        let cd_size = u32_at(&tail, e + 12)?;
        let cd_offset = u32_at(&tail, e + 16)?;
        if count == 0xffff || cd_size == 0xffff_ffff || cd_offset == 0xffff_ffff {
            return bad("Zip64 archives are not supported");
        }
        if disk != 0 || cd_disk != 0 || count_here != count {
            return bad("multi-disk zip archives are not supported");
        }
        let eocd_pos = tail_start + e as u64;
        let (cd_offset, cd_size) = (u64::from(cd_offset), u64::from(cd_size));
        if cd_offset + cd_size > eocd_pos {
            return bad("central directory runs past the end record");
        }
        let cd = read_at(&mut reader, cd_offset, cd_size as usize)?;
        let mut entries = Vec::with_capacity(usize::from(count));
        let mut p = 0usize;
        for _ in 0..count {
            if u32_at(&cd, p)? != CENTRAL_SIG {
                return bad("bad central directory entry signature");
            }
            let flags = u16_at(&cd, p + 8)?;
            let method = u16_at(&cd, p + 10)?;
            let crc32 = u32_at(&cd, p + 16)?;
            let compressed_size = u32_at(&cd, p + 20)?;
            let size = u32_at(&cd, p + 24)?;
            let name_len = usize::from(u16_at(&cd, p + 28)?);
            let extra_len = usize::from(u16_at(&cd, p + 30)?);
            let comment_len = usize::from(u16_at(&cd, p + 32)?);
            let local_offset = u32_at(&cd, p + 42)?;
            let name_start = p + CENTRAL_LEN;
            let Some(name) = cd.get(name_start..name_start + name_len) else {
                return bad("truncated central directory entry");
            };
            let name = String::from_utf8_lossy(name).into_owned();
            if compressed_size == 0xffff_ffff || size == 0xffff_ffff || local_offset == 0xffff_ffff
            {
                return bad(format!("{name}: Zip64 entries are not supported"));
            }
            entries.push(Entry {
                name,
                method,
                flags,
                crc32,
                compressed_size: u64::from(compressed_size),
                size: u64::from(size),
                local_offset: u64::from(local_offset),
            });
            p = name_start + name_len + extra_len + comment_len;
        }
        if p > cd.len() {
            return bad("truncated central directory");
        }
        Ok(Archive {
            reader,
            cd_offset,
            entries,
        })
    }

    /// The members, in central-directory order.
    #[cfg(test)]
    pub(crate) fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Writes the member called `name` to `out`, checking its size and
    /// CRC-32 against the central directory. Returns the bytes written.
    pub(crate) fn extract<W: Write + ?Sized>(&mut self, name: &str, out: &mut W) -> Result<u64> {
        let Some(entry) = self.entries.iter().find(|e| e.name == name).cloned() else {
            return bad(format!("the archive has no member `{name}`"));
        };
        if entry.flags & 1 != 0 {
            return bad(format!("{name}: encrypted members are not supported"));
        }
        let local = read_at(&mut self.reader, entry.local_offset, LOCAL_LEN)?;
        if u32_at(&local, 0)? != LOCAL_SIG {
            return bad(format!("{name}: bad local header signature"));
        }
        // The local name and extra field may differ in length from the
        // central directory's.
        let name_len = u64::from(u16_at(&local, 26)?);
        let extra_len = u64::from(u16_at(&local, 28)?);
        let data_start = entry.local_offset + LOCAL_LEN as u64 + name_len + extra_len;
        if data_start + entry.compressed_size > self.cd_offset {
            return bad(format!(
                "{name}: member data runs into the central directory"
            ));
        }
        self.reader
            .seek(SeekFrom::Start(data_start))
            .map_err(ZipError::Read)?;
        let mut data = (&mut self.reader).take(entry.compressed_size);
        let mut sink = CrcWriter {
            inner: out,
            crc: Crc32::new(),
        };
        let written = match entry.method {
            0 => copy_stored(&mut data, &mut sink, entry.compressed_size)?,
            8 => inflate(&mut data, &mut sink, entry.size)?,
            m => return bad(format!("{name}: unsupported compression method {m}")),
        };
        if written != entry.size {
            return bad(format!(
                "{name}: extracted {written} bytes, the directory says {}",
                entry.size
            ));
        }
        let crc = sink.crc.value();
        if crc != entry.crc32 {
            return bad(format!(
                "{name}: CRC-32 mismatch (computed {crc:08x}, the directory says {:08x})",
                entry.crc32
            ));
        }
        Ok(written)
    }
}

/// Copies a stored member, which must be exactly `len` bytes long.
fn copy_stored<R: Read, W: Write + ?Sized>(src: &mut R, out: &mut W, len: u64) -> Result<u64> {
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n.min(buf.len()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ZipError::Read(e)),
        };
        out.write_all(&buf[..n]).map_err(ZipError::Write)?;
        total += n as u64;
    }
    if total != len {
        return bad("stored member is truncated");
    }
    Ok(total)
}

/// Passes bytes through while computing their CRC-32.
struct CrcWriter<'a, W: ?Sized> {
    inner: &'a mut W,
    crc: Crc32,
}

impl<W: Write + ?Sized> Write for CrcWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc.update(&buf[..n.min(buf.len())]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::Cursor;

    use super::super::inflate::tests::{lcg, text, unhex};
    use super::*;

    // Made by Python's zipfile: "pkg/stored.txt" (stored, b"stored member\n"),
    // "pkg/lib.so" (deflated, text(5, 3000)), "pkg-1.0.dist-info/RECORD"
    // (deflated, empty), and the archive comment b"a comment".
    const ZIP_HEX: &str = concat!(
        "504b030414000000000000002150d35852ff0e0000000e0000000e000000706b672f73746f7265642e74787473746f72",
        "6564206d656d6265720a504b03041400000008000000215060f6812064020000b80b00000a000000706b672f6c69622e",
        "736f6d565b6ec43008fce714b95aaaa4bb95b20fb55ba9c76fcc7306afd44d131bc3000366db8fd7baacf76d91e5631f",
        "afc7f36a0b8fcfe5ef58f3f7baeefa3301592eebedb6da99e7f17bf9ba8f03b6e8aa5efbfde7f1bd6c6ac26554c3a97c",
        "4bbb2e354ce0297d77086ada9671772ceb8b59b5e750e9b624a4fd1b200cad26ef22f671da3360aa16e10879ea41d2a7",
        "9bd5f73c6f9fe9931fcb6f0fafb8b43d237685cdb4f8e14498de4526ecb8ea3b1fec43844f1083a90229c1d808f9405b",
        "0111031edb949f4c8da91a46a5dc677f81767e5a5d61189c42e08dffcbf8170bd25cc4e0dc1deb959b068837d0c799ce",
        "98a68accb0404911cae438728a24a5ea78e0c5cc90e31057db4d25b05340aabc8c111425483c859de9c8ec1f3ad2b640",
        "094770b932ce6d62c758c89a250728430e27df38eb8808ba46d5c3cc8a6a0643b2b20088012113a0fc6349ccce449268",
        "5b905a102c10c2da8ab55502f60769825e571db7ac165e10f758270ecf63c60c9d816801a954a1de0fd2a25b9caf83e9",
        "3ad7a1971ff70fa727d555a5e14d7b864e44f740860c8b0ddf85e40354d94e122647adbe276829481cae05ead580130b",
        "8bd9843e59901c1a090bd476c4b3a19a3337dd8d1452a9fc4d6e8012be4eb081807b8dd3532fe0d9018859d719153c76",
        "d746688a30604a9c1437a593a79b5aa5006bf0362f4058987dea607f6674b012a1e1018294779a547385c464b2207a32",
        "c14d36388f7a9481129d623c95f5d1253a4192e76d79700303ffdbccc25ccde0b4827c373f72a5a60ff3306a2d8b5cc1",
        "8688aaf10605f37893ea44d207b169b0e571337321397de06d0b57549b155a4553c8a21afe01504b0304140000000800",
        "0000215000000000020000000000000018000000706b672d312e302e646973742d696e666f2f5245434f52440300504b",
        "0102140314000000000000002150d35852ff0e0000000e0000000e0000000000000000000000800100000000706b672f",
        "73746f7265642e747874504b010214031400000008000000215060f6812064020000b80b00000a000000000000000000",
        "000080013a000000706b672f6c69622e736f504b01021403140000000800000021500000000002000000000000001800",
        "000000000000000000008001c6020000706b672d312e302e646973742d696e666f2f5245434f5244504b050600000000",
        "03000300ba000000fe02000009006120636f6d6d656e74",
    );

    pub(crate) fn fixture() -> Vec<u8> {
        unhex(ZIP_HEX)
    }

    fn extract_from(zip: &[u8], name: &str) -> Result<Vec<u8>> {
        let mut archive = Archive::new(Cursor::new(zip))?;
        let mut out = Vec::new();
        let n = archive.extract(name, &mut out)?;
        assert_eq!(n, out.len() as u64);
        Ok(out)
    }

    fn err(zip: &[u8], name: &str) -> String {
        match extract_from(zip, name) {
            Ok(_) => String::from("no error"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn reads_python_zip() {
        let zip = fixture();
        let archive = Archive::new(Cursor::new(&zip[..])).expect("valid zip");
        let names: Vec<&str> = archive.entries().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            names,
            ["pkg/stored.txt", "pkg/lib.so", "pkg-1.0.dist-info/RECORD"]
        );
        assert_eq!(archive.entries()[0].method, 0);
        assert_eq!(archive.entries()[1].method, 8);
        assert_eq!(archive.entries()[1].crc32, 0x2081_f660);
        assert_eq!(
            extract_from(&zip, "pkg/stored.txt").expect("stored"),
            b"stored member\n"
        );
        assert!(extract_from(&zip, "pkg/lib.so").is_ok_and(|d| d == text(5, 3000)));
        assert!(extract_from(&zip, "pkg-1.0.dist-info/RECORD").is_ok_and(|d| d.is_empty()));
        assert!(err(&zip, "pkg/missing.so").contains("no member `pkg/missing.so`"));
    }

    /// Byte offset of the end record in the fixture (it ends with a
    /// 9-byte comment).
    fn eocd(zip: &[u8]) -> usize {
        zip.len() - 22 - 9
    }

    /// Offset of the central directory entry for `name`.
    fn central(zip: &[u8], name: &str) -> usize {
        let e = eocd(zip);
        let mut p = u32_at(zip, e + 16).expect("cd offset") as usize;
        loop {
            let n = usize::from(u16_at(zip, p + 28).expect("name length"));
            if &zip[p + 46..p + 46 + n] == name.as_bytes() {
                return p;
            }
            let extra = usize::from(u16_at(zip, p + 30).expect("extra"));
            let comment = usize::from(u16_at(zip, p + 32).expect("comment"));
            p += 46 + n + extra + comment;
        }
    }

    #[test]
    fn detects_bad_crc_and_sizes() {
        let zip = fixture();
        let c = central(&zip, "pkg/lib.so");
        let mut bad_crc = zip.clone();
        bad_crc[c + 16] ^= 1;
        assert!(err(&bad_crc, "pkg/lib.so").contains("CRC-32 mismatch"));
        let mut bad_size = zip.clone();
        bad_size[c + 24] ^= 1;
        assert!(err(&bad_size, "pkg/lib.so").contains("pkg/lib.so"));
        let s = central(&zip, "pkg/stored.txt");
        let mut bad_crc = zip.clone();
        bad_crc[s + 16] ^= 0x80;
        assert!(err(&bad_crc, "pkg/stored.txt").contains("CRC-32 mismatch"));
        let mut bad_method = zip.clone();
        bad_method[c + 10] = 12;
        assert!(err(&bad_method, "pkg/lib.so").contains("compression method 12"));
        let mut encrypted = zip.clone();
        encrypted[c + 8] |= 1;
        assert!(err(&encrypted, "pkg/lib.so").contains("encrypted"));
    }

    #[test]
    fn zip64_is_an_error() {
        let zip = fixture();
        let e = eocd(&zip);
        let mut z = zip.clone();
        z[e + 16..e + 20].copy_from_slice(&[0xff; 4]);
        assert!(err(&z, "pkg/lib.so").contains("Zip64"));
        let c = central(&zip, "pkg/lib.so");
        let mut z = zip.clone();
        z[c + 24..c + 28].copy_from_slice(&[0xff; 4]);
        assert!(err(&z, "pkg/lib.so").contains("Zip64"));
    }

    /// Builds a one-member stored zip whose local header has a different
    /// extra field from its central directory entry.
    fn stored_zip(name: &str, data: &[u8], local_extra: &[u8], central_extra: &[u8]) -> Vec<u8> {
        let crc = {
            let mut c = Crc32::new();
            c.update(data);
            c.value()
        };
        let n = name.len() as u16;
        let size = data.len() as u32;
        let mut z = Vec::new();
        z.extend_from_slice(&LOCAL_SIG.to_le_bytes());
        z.extend_from_slice(&[20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        z.extend_from_slice(&crc.to_le_bytes());
        z.extend_from_slice(&size.to_le_bytes());
        z.extend_from_slice(&size.to_le_bytes());
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(local_extra.len() as u16).to_le_bytes());
        z.extend_from_slice(name.as_bytes());
        z.extend_from_slice(local_extra);
        z.extend_from_slice(data);
        let cd_start = z.len() as u32;
        z.extend_from_slice(&CENTRAL_SIG.to_le_bytes());
        z.extend_from_slice(&[20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        z.extend_from_slice(&crc.to_le_bytes());
        z.extend_from_slice(&size.to_le_bytes());
        z.extend_from_slice(&size.to_le_bytes());
        z.extend_from_slice(&n.to_le_bytes());
        z.extend_from_slice(&(central_extra.len() as u16).to_le_bytes());
        z.extend_from_slice(&[0; 10]); // comment length .. external attributes
        z.extend_from_slice(&0u32.to_le_bytes()); // local header offset
        z.extend_from_slice(name.as_bytes());
        z.extend_from_slice(central_extra);
        let cd_size = z.len() as u32 - cd_start;
        z.extend_from_slice(&EOCD_SIG.to_le_bytes());
        z.extend_from_slice(&[0, 0, 0, 0, 1, 0, 1, 0]);
        z.extend_from_slice(&cd_size.to_le_bytes());
        z.extend_from_slice(&cd_start.to_le_bytes());
        z.extend_from_slice(&[0, 0]);
        z
    }

    #[test]
    fn local_extra_field_may_differ() {
        let data = lcg(3, 777);
        let z = stored_zip("a/b.so", &data, &[1, 2, 3, 4, 5, 6, 7], &[]);
        assert!(extract_from(&z, "a/b.so").is_ok_and(|d| d == data));
        let z = stored_zip("a/b.so", &data, &[], &[9; 12]);
        assert!(extract_from(&z, "a/b.so").is_ok_and(|d| d == data));
        // A local extra field so long the data would overlap the directory.
        let mut z = stored_zip("a/b.so", &data, &[], &[]);
        z[28] = 0xff;
        assert!(err(&z, "a/b.so").contains("runs into the central directory"));
    }

    #[test]
    fn truncated_and_garbage_input_is_an_error() {
        let zip = fixture();
        for cut in 0..zip.len() {
            for name in ["pkg/lib.so", "pkg/stored.txt"] {
                assert!(
                    extract_from(&zip[..cut], name).is_err(),
                    "cut at {cut} of {}",
                    zip.len()
                );
            }
        }
        for seed in 0..200 {
            let mut g = lcg(seed, (seed as usize * 13) % 3000);
            // Plant an end-record signature in some of them.
            if seed % 2 == 0 && g.len() >= 22 {
                let at = g.len() - 22;
                g[at..at + 4].copy_from_slice(&EOCD_SIG.to_le_bytes());
                g[at + 20..].fill(0);
            }
            assert!(extract_from(&g, "pkg/lib.so").is_err());
        }
        // Damage each byte in turn: errors or (for bytes nobody checks,
        // such as dates) success, but never a panic.
        for i in 0..zip.len() {
            for x in [0x01, 0x80, 0xff] {
                let mut z = zip.clone();
                z[i] ^= x;
                for name in ["pkg/lib.so", "pkg/stored.txt"] {
                    if let Ok(d) = extract_from(&z, name) {
                        assert!(d.len() <= 3000);
                    }
                }
            }
        }
    }
}
