//! The persistent compilation cache on the real plugin: a program compiled by one
//! client loads from disk in the next; truncated, damaged, swapped, foreign and
//! garbage entries are detected, removed and compiled again; the size limit
//! evicts; clients on many threads share one directory.

use std::path::{Path, PathBuf};

use xlaclient::{
    Builder, CacheStats, Client, ClientOptions, CompileCache, Computation, Plugin, RuntimeError,
    Shape,
};

fn client_in(dir: &Path) -> Client {
    client_with(dir, ClientOptions::new())
}

fn client_with(dir: &Path, options: ClientOptions) -> Client {
    let plugin = Plugin::default_plugin().unwrap();
    Client::new(
        &plugin,
        &options.compile_cache(CompileCache::Dir(dir.to_path_buf())),
    )
    .unwrap()
}

/// `x * k + 1` on f32[3].
fn program(k: f32) -> Computation {
    let b = Builder::new("scale");
    let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    b.build(&(&x * f64::from(k) + 1.0)).unwrap()
}

/// Compiles `program(k)` with `c` and checks it computes `x * k + 1`.
fn compile_and_check(c: &Client, k: f32) {
    let exe = c.compile(program(k)).unwrap();
    let x = c.buffer_from_host(&[1.0f32, -2.0, 0.5], &[3]).unwrap();
    let out = exe.execute(&[&x]).unwrap()[0].to_vec::<f32>().unwrap();
    assert_eq!(out, vec![k + 1.0, -2.0 * k + 1.0, 0.5 * k + 1.0]);
    // Arguments are checked as for a fresh compile.
    let wrong = c.buffer_from_host(&[1i32, 2, 3], &[3]).unwrap();
    let e = exe.execute(&[&wrong]).unwrap_err();
    assert!(matches!(e, RuntimeError::ArgumentShape { .. }), "{e:?}");
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "xlaexe"));
    v.sort();
    v
}

fn stats(c: &Client) -> CacheStats {
    c.compile_cache_stats()
}

#[test]
fn a_second_client_loads_what_the_first_compiled() {
    let dir = tempfile::tempdir().unwrap();
    let first = client_in(dir.path());
    assert_eq!(first.compile_cache_dir(), Some(dir.path()));
    compile_and_check(&first, 2.0);
    let s = stats(&first);
    assert_eq!((s.hits, s.misses, s.stored), (0, 1, 1), "{s:?}");
    assert_eq!(entries(dir.path()).len(), 1);

    let second = client_in(dir.path());
    compile_and_check(&second, 2.0);
    let s = stats(&second);
    assert_eq!((s.hits, s.misses, s.rejected), (1, 0, 0), "{s:?}");
    // Another program, or other compile options, is another entry.
    compile_and_check(&second, 3.0);
    second
        .compile_with(
            program(2.0),
            &xlaclient::CompileOptions::new().fast_min_max(true),
        )
        .unwrap();
    assert_eq!(stats(&second).misses, 2);
    assert_eq!(entries(dir.path()).len(), 3);
    // Asking XLA for its dumps bypasses the cache: the compile happens and dumps.
    let dumps = tempfile::tempdir().unwrap();
    let before = stats(&second);
    second
        .compile_with(
            program(2.0),
            &xlaclient::CompileOptions::new().dump_to(dumps.path().to_string_lossy()),
        )
        .unwrap();
    assert_eq!(stats(&second), before);
    assert!(std::fs::read_dir(dumps.path()).unwrap().count() > 0);
}

#[test]
fn stablehlo_programs_are_cached_too() {
    let dir = tempfile::tempdir().unwrap();
    let code = b"func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = stablehlo.multiply %x, %x : tensor<2xf32>
  return %y : tensor<2xf32>
}";
    for (i, c) in [client_in(dir.path()), client_in(dir.path())]
        .iter()
        .enumerate()
    {
        let exe = c.compile_mlir(code, &Default::default()).unwrap();
        let x = c.buffer_from_host(&[3.0f32, -4.0], &[2]).unwrap();
        assert_eq!(
            exe.execute(&[&x]).unwrap()[0].to_vec::<f32>().unwrap(),
            vec![9.0, 16.0]
        );
        assert_eq!(exe.parameter_shapes(), Some(&[Shape::of::<f32>(&[2])][..]));
        assert_eq!(stats(c).hits, i as u64);
    }
}

/// Writes one good entry for `program(k)` and returns its path.
fn one_entry(dir: &Path, k: f32) -> PathBuf {
    compile_and_check(&client_in(dir), k);
    let e = entries(dir);
    assert_eq!(e.len(), 1);
    e[0].clone()
}

/// A fresh client finds the entry bad: rejected, compiled, stored anew; the
/// entry after it is good (the next client hits).
fn rejected_then_repaired(dir: &Path, k: f32) {
    let c = client_in(dir);
    compile_and_check(&c, k);
    let s = stats(&c);
    assert_eq!(
        (s.hits, s.rejected, s.misses, s.stored),
        (0, 1, 1, 1),
        "{s:?}"
    );
    let again = client_in(dir);
    compile_and_check(&again, k);
    assert_eq!(stats(&again).hits, 1);
}

#[test]
fn truncated_and_damaged_entries_are_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = one_entry(dir.path(), 5.0);
    let good = std::fs::read(&path).unwrap();
    // Truncated (a process killed while writing in place would leave this; writes
    // are renames, so only damage on disk can).
    for cut in [0, 10, 40, 100, good.len() / 2, good.len() - 1] {
        std::fs::write(&path, &good[..cut]).unwrap();
        rejected_then_repaired(dir.path(), 5.0);
    }
    // Single flipped bits in the key, the guard's header and XLA's bytes.
    for at in [9, 45, 70, good.len() / 2, good.len() - 1] {
        let mut b = good.clone();
        b[at] ^= 0x10;
        std::fs::write(&path, &b).unwrap();
        rejected_then_repaired(dir.path(), 5.0);
    }
    // Garbage.
    std::fs::write(&path, b"not an executable at all").unwrap();
    rejected_then_repaired(dir.path(), 5.0);
}

#[test]
fn swapped_and_foreign_entries_are_compiled_again() {
    let dir = tempfile::tempdir().unwrap();
    let a = one_entry(dir.path(), 2.0);
    let a_bytes = std::fs::read(&a).unwrap();
    std::fs::remove_file(&a).unwrap();
    let b = one_entry(dir.path(), 7.0);
    // Program 2's entry under program 7's name: the key inside says otherwise.
    std::fs::write(&b, &a_bytes).unwrap();
    rejected_then_repaired(dir.path(), 7.0);

    // An entry written by another plugin identity (a client with two devices),
    // moved under this client's key: the guard refuses it.
    let other = tempfile::tempdir().unwrap();
    compile_and_check(
        &client_with(other.path(), ClientOptions::new().cpu_device_count(2)),
        7.0,
    );
    let foreign = std::fs::read(&entries(other.path())[0]).unwrap();
    let mine = std::fs::read(&b).unwrap();
    let mut moved = mine[..40].to_vec(); // this key
    moved.extend_from_slice(&foreign[40..]); // the other client's guarded bytes
    std::fs::write(&b, &moved).unwrap();
    rejected_then_repaired(dir.path(), 7.0);
}

#[test]
fn the_size_limit_evicts_the_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let size = {
        let p = one_entry(dir.path(), 1.0);
        std::fs::metadata(p).unwrap().len()
    };
    // Room for two entries of this size.
    let c = client_with(
        dir.path(),
        ClientOptions::new().compile_cache_limit(2 * size + size / 2),
    );
    for k in [2.0, 3.0, 4.0] {
        compile_and_check(&c, k);
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(entries(dir.path()).len(), 2);
    assert_eq!(stats(&c).evicted, 2);
    // The two newest stayed.
    let d = client_in(dir.path());
    compile_and_check(&d, 4.0);
    compile_and_check(&d, 3.0);
    assert_eq!(stats(&d).hits, 2);
}

#[test]
fn clients_on_many_threads_share_one_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::thread::scope(|s| {
        for t in 0..4 {
            let dir = dir.path();
            s.spawn(move || {
                let c = client_in(dir);
                for i in 0..3 {
                    compile_and_check(&c, ((t + i) % 3) as f32 + 1.0);
                }
                assert_eq!(stats(&c).rejected, 0);
            });
        }
    });
    assert_eq!(entries(dir.path()).len(), 3);
    // No partial file is left behind.
    let stray: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(".partial-"))
        .collect();
    assert!(stray.is_empty());
}

#[test]
fn an_unwritable_cache_never_fails_a_compile() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    // The "directory" is a file: nothing can be written under it.
    let c = client_in(&file);
    compile_and_check(&c, 2.0);
    let s = stats(&c);
    assert_eq!((s.misses, s.stored, s.write_errors), (1, 0, 1), "{s:?}");
    // Off: no directory, no counts.
    let plugin = Plugin::default_plugin().unwrap();
    let off = Client::new(
        &plugin,
        &ClientOptions::new().compile_cache(CompileCache::Off),
    )
    .unwrap();
    assert_eq!(off.compile_cache_dir(), None);
    compile_and_check(&off, 2.0);
    assert_eq!(stats(&off), CacheStats::default());
}
