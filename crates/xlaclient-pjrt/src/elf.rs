//! A plugin file is checked before `dlopen` sees it: a truncated shared object
//! makes the loader map segments past the end of the file, and the first touch of
//! such a page kills the process with `SIGBUS` (inside `dlopen`, before any error
//! can be returned). Parsing uses the `object` crate (ELF header and program
//! header structs, bounds-checked reads); the rules are ours.

use std::io::Read;
use std::path::Path;

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};

/// Bytes read up front: the ELF header and, in every plugin we know, the program
/// header table (at offset 64, a few hundred bytes).
const PREFIX: u64 = 64 * 1024;
/// The most bytes of program headers accepted (65,535 entries of 56 bytes is the
/// format's own bound; anything near it is not a plugin).
const MAX_PHDR_BYTES: u64 = 4 * 1024 * 1024;

/// The `e_machine` of this build's target, if the check knows it.
fn this_machine() -> Option<(u16, &'static str)> {
    if cfg!(target_arch = "x86_64") {
        Some((elf::EM_X86_64, "x86-64"))
    } else if cfg!(target_arch = "aarch64") {
        Some((elf::EM_AARCH64, "AArch64"))
    } else if cfg!(target_arch = "powerpc64") {
        Some((elf::EM_PPC64, "PowerPC64"))
    } else if cfg!(target_arch = "riscv64") {
        Some((elf::EM_RISCV, "RISC-V"))
    } else if cfg!(target_arch = "s390x") {
        Some((elf::EM_S390, "s390x"))
    } else {
        None
    }
}

/// Checks that `path` is a complete 64-bit ELF shared object for this machine's
/// architecture and byte order: the header parses, the program header table and
/// every loadable segment's file range lie inside the file. Returns what is wrong,
/// in words.
///
/// The file may still change between this check and the load; a plugin file is not
/// expected to be rewritten while a process loads it.
pub(crate) fn check_shared_object(path: &Path) -> Result<(), String> {
    let mut f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let len = f.metadata().map_err(|e| e.to_string())?.len();
    let mut data = Vec::with_capacity(PREFIX.min(len) as usize);
    (&mut f)
        .take(PREFIX)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() < 4 || &data[..4] != b"\x7fELF" {
        return Err("not an ELF file (no \\x7fELF magic at the start)".into());
    }
    if data.len() < 64 {
        return Err(format!(
            "truncated: the file has {len} bytes, less than a 64-bit ELF header"
        ));
    }
    // e_ident[EI_CLASS] and e_ident[EI_DATA].
    if data[4] != elf::ELFCLASS64 {
        return Err("not a 64-bit ELF file (this process is 64-bit)".into());
    }
    let little = data[5] == elf::ELFDATA2LSB;
    if little != cfg!(target_endian = "little") {
        return Err("ELF byte order differs from this machine's".into());
    }
    let header = elf::FileHeader64::<object::Endianness>::parse(&*data)
        .map_err(|e| format!("bad ELF header: {e}"))?;
    let endian = header
        .endian()
        .map_err(|e| format!("bad ELF header: {e}"))?;
    if header.e_type(endian) != elf::ET_DYN {
        return Err(format!(
            "not a shared object (ELF type {}, a shared object is {})",
            header.e_type(endian),
            elf::ET_DYN
        ));
    }
    let machine = header.e_machine(endian);
    if let Some((want, name)) = this_machine() {
        if machine != want {
            return Err(format!(
                "built for another architecture (ELF machine {machine}; this machine is {name}, {want})"
            ));
        }
    }
    let phoff = header.e_phoff(endian);
    let phnum = u64::from(header.e_phnum(endian));
    let phentsize = u64::from(header.e_phentsize(endian));
    if phnum == 0 {
        return Err("no program headers: nothing to load".into());
    }
    if phentsize != std::mem::size_of::<elf::ProgramHeader64<object::Endianness>>() as u64 {
        return Err(format!("program header size {phentsize} is not 56"));
    }
    let ph_end = phoff
        .checked_add(phnum * phentsize)
        .filter(|e| *e <= MAX_PHDR_BYTES.max(PREFIX))
        .ok_or_else(|| format!("program header table at offset {phoff} is out of range"))?;
    if ph_end > len {
        return Err(format!(
            "truncated: the program header table ends at byte {ph_end}, the file has {len}"
        ));
    }
    if ph_end > data.len() as u64 {
        (&mut f)
            .take(ph_end - data.len() as u64)
            .read_to_end(&mut data)
            .map_err(|e| e.to_string())?;
    }
    // Parsed again over the whole table (the first parse borrowed the prefix).
    let header = elf::FileHeader64::<object::Endianness>::parse(&*data)
        .map_err(|e| format!("bad ELF header: {e}"))?;
    let phdrs = header
        .program_headers(endian, &*data)
        .map_err(|e| format!("bad program headers: {e}"))?;
    let mut loads = 0;
    for (i, ph) in phdrs.iter().enumerate() {
        let (off, size) = (ph.p_offset(endian), ph.p_filesz(endian));
        let end = off
            .checked_add(size)
            .ok_or_else(|| format!("segment {i}: file range overflows"))?;
        if ph.p_type(endian) == elf::PT_LOAD {
            loads += 1;
        }
        // Every segment the loader reads from the file (loadable ones are mapped;
        // the dynamic section, notes and the interpreter name are read).
        if end > len {
            return Err(format!(
                "truncated: segment {i} (type {:#x}) covers bytes {off}..{end}, the file has {len}",
                ph.p_type(endian)
            ));
        }
    }
    if loads == 0 {
        return Err("no loadable segment".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libc_passes_and_its_truncations_fail() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let libc = maps
            .lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .unwrap()
            .to_string();
        check_shared_object(Path::new(&libc)).unwrap();
        let data = std::fs::read(&libc).unwrap();
        let dir = tempfile::tempdir().unwrap();
        for cut in [0, 3, 40, 64, 100, 4096, data.len() / 2] {
            let p = dir.path().join(format!("cut{cut}.so"));
            std::fs::write(&p, &data[..cut]).unwrap();
            let e = check_shared_object(&p).unwrap_err();
            assert!(
                e.contains("truncated") || e.contains("not an ELF") || e.contains("program"),
                "cut {cut}: {e}"
            );
        }
    }
}
