//! flax.linen's parameter keys: which key each parameter's initialiser gets from
//! `module.init(key, x)` (`init(rngs={"params": key})`), so that a network ported
//! from flax starts from flax's values given the same seed.
//!
//! flax never splits the key it is given. Each scope keeps its path of module
//! names (`("Dense_0",)`, `("MLP_0", "Dense_1")`; the module `init` is called on
//! is the root, path `()`) and counts the keys it hands out per stream; a
//! parameter's key is the root key with the path and that count folded in
//! (`flax/core/scope.py`: `LazyRng`, `Scope.make_rng`, `_fold_in_static`):
//!
//! ```text
//! key = jax.random.fold_in(root, u32(first 4 bytes, big-endian, of SHA-1(path ++ count)))
//! ```
//!
//! where each name enters the hash as UTF-8 and each count as its minimal
//! big-endian bytes (Python's `int.to_bytes`; `0` is no bytes), with no
//! separators (flax's default, `flax_fix_rng_separator=False`). Every
//! `self.param` of a module draws the next count of the `"params"` stream,
//! starting at 1: `nn.Dense`'s kernel has count 1 and its bias count 2, whatever
//! the bias's initialiser is.
//!
//! [`param_key`] is that key for a parameter given its module path and its
//! position among the module's parameters (counting from 0: a Dense's kernel is 0,
//! its bias 1); [`fold_in_static`] folds any such static data in (another stream,
//! `make_rng("dropout")`, has its own root key and counts). Checked against keys
//! and `ActorCritic(2).init(PRNGKey(0), zeros(4))` parameters recorded from flax
//! 0.12.8 (`scripts/record_flax_init.py`, `tests/nn.rs`).
//!
//! ```
//! use xlaclient_core::Builder;
//! use xlaclient_nn::{Linear, flax_param_key, init};
//!
//! // PureJaxRL's PPO: ActorCritic's first layer,
//! // nn.Dense(64, kernel_init=orthogonal(np.sqrt(2)), bias_init=constant(0.0)).
//! let b = Builder::new("ppo_init");
//! let root = b.prng_key(0); // network.init(jax.random.PRNGKey(0), obs)
//! let kernel = init::orthogonal(2f64.sqrt()).init(&flax_param_key(&root, &["Dense_0"], 0), &[4, 64]);
//! // The same, as a layer: Linear::init_flax draws the kernel and bias keys.
//! let dense = Linear::new(4, 64).with_init(init::orthogonal(2f64.sqrt()), init::zeros());
//! let p = dense.init_flax(&root, &["Dense_0"]);
//! assert_eq!((kernel.dims()?, p.w.dims()?), (vec![4, 64], vec![4, 64]));
//! # Ok::<(), xlaclient_nn::Error>(())
//! ```

use crate::Op;

/// One item of static data flax folds into a key (flax's `PRNGFoldable`): a
/// module name or a count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Foldable<'a> {
    /// A scope's name, hashed as UTF-8.
    Name(&'a str),
    /// A count, hashed as its minimal big-endian bytes (none for 0).
    Count(u64),
}

impl<'a> From<&'a str> for Foldable<'a> {
    fn from(s: &'a str) -> Self {
        Foldable::Name(s)
    }
}

impl From<u64> for Foldable<'_> {
    fn from(n: u64) -> Self {
        Foldable::Count(n)
    }
}

/// The `u32` flax folds into a key for `data` (`_fold_in_static`'s hash): the
/// first 4 bytes, big-endian, of the SHA-1 of the items' bytes one after the
/// other.
///
/// ```
/// use xlaclient_nn::flax::{Foldable, static_hash};
/// // hashlib.sha1(b"Dense_0" + b"\x01").digest()[:4]
/// assert_eq!(static_hash(&[Foldable::Name("Dense_0"), Foldable::Count(1)]), 2998342421);
/// ```
pub fn static_hash(data: &[Foldable<'_>]) -> u32 {
    let mut bytes = Vec::new();
    for d in data {
        match d {
            Foldable::Name(s) => bytes.extend_from_slice(s.as_bytes()),
            Foldable::Count(n) => {
                let be = n.to_be_bytes();
                let skip = be.iter().take_while(|b| **b == 0).count();
                bytes.extend_from_slice(&be[skip..]);
            }
        }
    }
    let h = sha1(&bytes);
    u32::from_be_bytes([h[0], h[1], h[2], h[3]])
}

/// flax's `_fold_in_static(key, data)`: `key` itself when `data` is empty, else
/// `jax.random.fold_in(key, static_hash(data))`.
#[track_caller]
pub fn fold_in_static(key: &Op, data: &[Foldable<'_>]) -> Op {
    if data.is_empty() {
        return key.clone();
    }
    key.fold_in(static_hash(data))
}

/// The key flax.linen gives a parameter: `root` is the key passed to
/// `module.init` (the `"params"` stream), `module_path` the names of the modules
/// from the root down to the parameter's own (`&[]` for the root module's
/// parameters, `&["Dense_0"]` for the first auto-named `nn.Dense` in a compact
/// module), `index` the parameter's position among its module's `self.param`
/// calls, from 0 (kernel 0, bias 1). flax folds in the path and `index + 1`.
#[track_caller]
pub fn param_key(root: &Op, module_path: &[&str], index: u32) -> Op {
    let mut data: Vec<Foldable<'_>> = module_path.iter().map(|s| Foldable::Name(s)).collect();
    data.push(Foldable::Count(u64::from(index) + 1));
    fold_in_static(root, &data)
}

/// SHA-1 (FIPS 180-4) of `data`: the hash flax uses (a fixed function, so it is
/// written here rather than taken from a dependency).
fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (i, x) in h.iter().enumerate() {
        out[4 * i..4 * i + 4].copy_from_slice(&x.to_be_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    /// FIPS 180's examples, and messages around the padding boundary
    /// (`hashlib.sha1` for the values).
    #[test]
    fn sha1_known_answers() {
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(&sha1(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(
            hex(&sha1(&[b'a'; 55])),
            "c1c8bbdc22796e28c0e15163d20899b65621d65a"
        );
        assert_eq!(
            hex(&sha1(&[b'a'; 64])),
            "0098ba824b5c16427bd7a1122a5a442a25ec644d"
        );
        assert_eq!(
            hex(&sha1(&[b'a'; 1000])),
            "291e9a6c66994949b57ba5e650361e98fc36b1ba"
        );
    }

    #[test]
    fn counts_hash_as_minimal_big_endian_bytes() {
        // Python: int.to_bytes((x.bit_length() + 7) // 8, "big").
        let h = |n: u64| static_hash(&[Foldable::Count(n)]);
        assert_eq!(h(0), u32::from_be_bytes(sha1(b"")[..4].try_into().unwrap()));
        assert_eq!(
            h(1),
            u32::from_be_bytes(sha1(&[1])[..4].try_into().unwrap())
        );
        assert_eq!(
            h(300),
            u32::from_be_bytes(sha1(&[1, 44])[..4].try_into().unwrap())
        );
    }
}
