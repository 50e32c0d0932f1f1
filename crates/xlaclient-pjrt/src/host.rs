//! [`AlignedHost`]: a host array aligned for uploads without a copy.
//!
//! A CPU plugin can use host memory itself as a buffer's memory (the C API's
//! `kImmutableZeroCopy`) when it is aligned as XLA's generated code wants (64 bytes
//! here) and laid out densely; the plugin may then read it until the buffer's
//! done-with-host-buffer event fires, which for a CPU plugin is when the buffer is
//! destroyed and no execution uses it any more. Borrowed slices cannot promise that,
//! so the array is *moved* into the buffer
//! ([`Client::buffer_from_aligned`](crate::Client::buffer_from_aligned)) and comes
//! back, unchanged and ready to fill again, from
//! [`Buffer::into_host`](crate::Buffer::into_host) once the plugin is done with it.

use std::alloc::Layout;
use std::fmt;
use std::marker::PhantomData;
use std::mem::ManuallyDrop;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, Weak};

use crate::error::{Error, Result};
use crate::shape::{ElementType, NativeType};

/// The alignment of [`AlignedHost`] arrays, in bytes: a cache line, and XLA's
/// alignment for CPU buffers (`cpu_function_runtime::Align()`), above the minimum
/// the CPU plugin asks of zero-copy host data.
pub const HOST_ALIGN: usize = 64;

/// A type of [`HOST_ALIGN`] alignment: its dangling pointer is the address of
/// empty arrays.
#[repr(C, align(64))]
struct Align([u8; HOST_ALIGN]);

/// Heap memory for `len` elements of `ty` (in `bytes >= len * size` bytes),
/// aligned to [`HOST_ALIGN`], owned: freed exactly once when dropped. The untyped
/// half of [`AlignedHost`], also what a [`Buffer`](crate::Buffer) holds while the
/// plugin may read it.
pub(crate) struct HostMemory {
    /// Aligned to `HOST_ALIGN`; dangling (never dereferenced for bytes, never
    /// freed) when `bytes == 0`.
    ptr: NonNull<u8>,
    /// Size of the allocation; 0 means nothing was allocated.
    bytes: usize,
    len: usize,
    ty: ElementType,
}

// SAFETY: `HostMemory` owns its allocation exclusively (no aliasing handle exists;
// `AlignedHost` hands out borrows tied to itself), and the element types it holds
// are plain `Send + Sync` values. Moving it to another thread moves the only owner.
unsafe impl Send for HostMemory {}
// SAFETY: see `Send`; through `&HostMemory` the memory is only read.
unsafe impl Sync for HostMemory {}

/// The error for an array of `len` values of `ty` that cannot be allocated.
fn too_large(ty: ElementType, len: usize, why: &str) -> Error {
    Error::HostLength {
        what: format!("an aligned host array of {ty}: {why}"),
        expected: 0,
        given: len,
    }
}

impl HostMemory {
    /// Zeroed memory of at least `bytes` bytes (exactly, rounded to nothing),
    /// typed as `len` values of `ty` (all-zero bytes are a valid value of every
    /// `NativeType`: 0, 0.0, `false`).
    fn alloc(bytes: usize, len: usize, ty: ElementType) -> Result<HostMemory> {
        if bytes == 0 {
            return Ok(HostMemory {
                // An aligned, non-null address that is never read or written for
                // bytes (no element, or zero-sized ones) nor freed.
                ptr: NonNull::<Align>::dangling().cast(),
                bytes: 0,
                len,
                ty,
            });
        }
        let layout = Layout::from_size_align(bytes, HOST_ALIGN)
            .map_err(|_| too_large(ty, len, "more bytes than fit in memory"))?;
        // SAFETY: `layout` has a non-zero size (checked above).
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(p).ok_or_else(|| too_large(ty, len, "the allocation failed"))?;
        Ok(HostMemory {
            ptr,
            bytes,
            len,
            ty,
        })
    }

    /// Zeroed memory for exactly `len` values of `T`.
    fn zeroed<T: NativeType>(len: usize) -> Result<HostMemory> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| too_large(T::TYPE, len, "more bytes than fit in memory"))?;
        HostMemory::alloc(bytes, len, T::TYPE)
    }

    /// The address of the first element.
    pub(crate) fn ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The element type.
    pub(crate) fn element_type(&self) -> ElementType {
        self.ty
    }

    /// Writes `values` at the start of the memory and types it as them.
    ///
    /// The caller guarantees `values` fit (`bytes >= size_of_val(values)`).
    fn fill<T: NativeType>(&mut self, values: &[T]) {
        let n = std::mem::size_of_val(values);
        debug_assert!(n <= self.bytes);
        if n > 0 {
            // SAFETY: `self` owns at least `n` writable bytes (the caller's
            // guarantee, `n > 0` so they are allocated), which cannot overlap the
            // borrowed `values`; the bytes of `NativeType` values are plain data.
            unsafe {
                std::ptr::copy_nonoverlapping(values.as_ptr().cast::<u8>(), self.ptr.as_ptr(), n)
            };
        }
        self.len = values.len();
        self.ty = T::TYPE;
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        if self.bytes == 0 {
            return;
        }
        // SAFETY: allocated in `alloc` with exactly this size and alignment (which
        // formed a valid layout then), freed once.
        unsafe {
            std::alloc::dealloc(
                self.ptr.as_ptr(),
                Layout::from_size_align_unchecked(self.bytes, HOST_ALIGN),
            )
        };
    }
}

/// Uploads of at most this many bytes go through the client's pool of aligned
/// host memory without a copy by the plugin ([`HostPool`]); larger ones are copied
/// by the plugin during the call.
pub(crate) const POOLED_MAX: usize = 1 << 20;

/// Free blocks kept per size class.
const POOL_PER_CLASS: usize = 16;

/// A client's free list of aligned host blocks, by power-of-two size class (64
/// bytes to [`POOLED_MAX`]): where `Client::buffer_from_host` copies small uploads
/// so that the plugin can use them without a copy and allocation of its own. A
/// block is lent to one buffer at a time and comes back when the plugin says it
/// is done with it.
#[derive(Default)]
pub(crate) struct HostPool {
    classes: Mutex<Vec<Vec<HostMemory>>>,
}

/// The size class of `bytes` (index into `classes`) and its block size.
fn class_of(bytes: usize) -> (usize, usize) {
    let size = bytes.max(HOST_ALIGN).next_power_of_two();
    (
        (size.trailing_zeros() - HOST_ALIGN.trailing_zeros()) as usize,
        size,
    )
}

impl HostPool {
    /// A block holding a copy of `values`, from the pool or new; `None` for
    /// uploads above [`POOLED_MAX`] bytes (or when no memory can be had).
    pub(crate) fn copy_of<T: NativeType>(self: &Arc<Self>, values: &[T]) -> Option<Pooled> {
        let bytes = std::mem::size_of_val(values);
        if bytes == 0 || bytes > POOLED_MAX {
            return None;
        }
        let (class, size) = class_of(bytes);
        let reused = self
            .classes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(class)
            .and_then(Vec::pop);
        let mut mem = match reused {
            Some(m) => m,
            None => HostMemory::alloc(size, 0, T::TYPE).ok()?,
        };
        mem.fill(values);
        Some(Pooled {
            mem: ManuallyDrop::new(mem),
            pool: Arc::downgrade(self),
        })
    }

    /// Takes `mem` back (or frees it when its class is full).
    fn give_back(&self, mem: HostMemory) {
        let (class, size) = class_of(mem.bytes);
        if size != mem.bytes || mem.bytes > POOLED_MAX {
            return;
        }
        let mut classes = self.classes.lock().unwrap_or_else(|p| p.into_inner());
        if classes.len() <= class {
            classes.resize_with(class + 1, Vec::new);
        }
        if classes[class].len() < POOL_PER_CLASS {
            classes[class].push(mem);
        }
    }
}

/// A block of a [`HostPool`], lent to a buffer: goes back to the pool when
/// dropped (or is freed, when the pool is gone).
pub(crate) struct Pooled {
    mem: ManuallyDrop<HostMemory>,
    pool: Weak<HostPool>,
}

impl Pooled {
    /// The memory.
    pub(crate) fn memory(&self) -> &HostMemory {
        &self.mem
    }

    /// The memory, kept out of the pool for good.
    pub(crate) fn into_memory(self) -> HostMemory {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped (so `mem` is taken once and not given
        // back), and its `pool` is dropped in place below, once.
        unsafe {
            std::ptr::drop_in_place(&mut this.pool);
            ManuallyDrop::take(&mut this.mem)
        }
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        // SAFETY: taken once, in the destructor; never used again.
        let mem = unsafe { ManuallyDrop::take(&mut self.mem) };
        if let Some(pool) = self.pool.upgrade() {
            pool.give_back(mem);
        }
    }
}

/// Host memory a buffer holds while the plugin may use it as the buffer's own.
pub(crate) enum Lent {
    /// An [`AlignedHost`] moved in by `Client::buffer_from_aligned`.
    Array(HostMemory),
    /// A block of the client's pool holding a copy (`Client::buffer_from_host`).
    Pooled(Pooled),
}

impl Lent {
    /// The memory lent.
    pub(crate) fn memory(&self) -> &HostMemory {
        match self {
            Lent::Array(m) => m,
            Lent::Pooled(p) => p.memory(),
        }
    }

    /// The memory, owned (a pooled block leaves its pool).
    pub(crate) fn into_memory(self) -> HostMemory {
        match self {
            Lent::Array(m) => m,
            Lent::Pooled(p) => p.into_memory(),
        }
    }
}

/// A host array of `T` on the heap, aligned to [`HOST_ALIGN`] (64) bytes: the host
/// side of uploads without a copy, filled in place and reused.
///
/// [`Client::buffer_from_aligned`](crate::Client::buffer_from_aligned) moves it into
/// a buffer (the plugin may use its memory as the buffer's, without copying it);
/// [`Buffer::into_host`](crate::Buffer::into_host) gives it back once the plugin no
/// longer reads it. While the buffer holds it nothing else can reach it, so the
/// plugin never sees it change or go away:
///
/// ```
/// use xlaclient_pjrt::{AlignedHost, Client, CompileOptions};
/// let client = Client::cpu()?;
/// let neg = "func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
///   %y = stablehlo.negate %x : tensor<4xf32>
///   return %y : tensor<4xf32>
/// }";
/// let exe = client.compile_mlir(neg.as_bytes(), &CompileOptions::new())?;
/// let mut obs = AlignedHost::<f32>::new(4)?;
/// let mut q = [0f32; 4];
/// for step in 0..3 {
///     obs.fill(step as f32);                              // host work, in place
///     let input = client.buffer_from_aligned(obs, &[4])?; // no copy on the CPU
///     exe.execute(&[&input])?[0].copy_to_host(&mut q)?;
///     obs = input.into_host()?;                           // the same memory, back
///     assert_eq!(q, [-(step as f32); 4]);
/// }
/// # Ok::<(), xlaclient_pjrt::Error>(())
/// ```
pub struct AlignedHost<T: NativeType> {
    mem: HostMemory,
    _t: PhantomData<T>,
}

impl<T: NativeType> AlignedHost<T> {
    /// `len` zeros (`false` for `bool`).
    ///
    /// # Errors
    /// [`Error::HostLength`] when `len` values do not fit in memory (the size
    /// overflows, or the allocation fails).
    pub fn new(len: usize) -> Result<Self> {
        Ok(AlignedHost {
            mem: HostMemory::zeroed::<T>(len)?,
            _t: PhantomData,
        })
    }

    /// A copy of `values`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn from_slice(values: &[T]) -> Result<Self> {
        let mut a = Self::new(values.len())?;
        a.copy_from_slice(values);
        Ok(a)
    }

    /// The memory as a typed array; the memory back when it holds another element
    /// type or more than `len` values' bytes are not there.
    pub(crate) fn from_memory(mem: HostMemory) -> std::result::Result<Self, HostMemory> {
        let fits = mem
            .len
            .checked_mul(std::mem::size_of::<T>())
            .is_some_and(|n| n <= mem.bytes);
        if mem.ty == T::TYPE && fits {
            Ok(AlignedHost {
                mem,
                _t: PhantomData,
            })
        } else {
            Err(mem)
        }
    }

    /// The untyped memory (moved into a buffer).
    pub(crate) fn into_memory(self) -> HostMemory {
        self.mem
    }

    /// The values.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `ptr` is aligned to 64 bytes (a multiple of `T`'s alignment) and,
        // for `len > 0`, points to `len * size_of::<T>()` bytes owned by `self`,
        // initialised (zeroed or written through `&mut [T]`, so every value is a
        // valid `T`); for no bytes it is a non-null aligned dangling pointer, valid
        // for an empty slice (or zero-sized values). Borrowed from `self`.
        unsafe { std::slice::from_raw_parts(self.mem.ptr.as_ptr().cast::<T>(), self.mem.len) }
    }

    /// The values, to fill in place.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; `&mut self` makes the borrow exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.mem.ptr.as_ptr().cast::<T>(), self.mem.len) }
    }
}

impl<T: NativeType> Deref for AlignedHost<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: NativeType> DerefMut for AlignedHost<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: NativeType> AsRef<[T]> for AlignedHost<T> {
    fn as_ref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: NativeType> AsMut<[T]> for AlignedHost<T> {
    fn as_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: NativeType> fmt::Debug for AlignedHost<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedHost")
            .field("element_type", &T::TYPE)
            .field("values", &self.as_slice())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        for n in [0usize, 1, 3, 17, 1000] {
            let mut a = AlignedHost::<f32>::new(n).unwrap();
            assert_eq!(a.as_ptr() as usize % HOST_ALIGN, 0);
            assert_eq!(a.len(), n);
            assert!(a.iter().all(|v| *v == 0.0));
            for (i, v) in a.iter_mut().enumerate() {
                *v = i as f32;
            }
            assert!(a.iter().enumerate().all(|(i, v)| *v == i as f32));
        }
        let b = AlignedHost::<bool>::new(5).unwrap();
        assert_eq!(&b[..], &[false; 5]);
        let h = AlignedHost::<half::bf16>::from_slice(&[half::bf16::ONE; 3]).unwrap();
        assert_eq!(h.as_ptr() as usize % HOST_ALIGN, 0);
        assert_eq!(&h[..], &[half::bf16::ONE; 3]);
    }

    #[test]
    fn too_large_is_an_error() {
        assert!(matches!(
            AlignedHost::<f64>::new(usize::MAX / 4),
            Err(Error::HostLength { .. })
        ));
        assert!(matches!(
            AlignedHost::<u8>::new(isize::MAX as usize),
            Err(Error::HostLength { .. })
        ));
    }

    #[test]
    fn typed_only_as_its_own_element_type() {
        let a = AlignedHost::<i32>::from_slice(&[1, 2, 3]).unwrap();
        let m = a.into_memory();
        let Err(m) = AlignedHost::<f32>::from_memory(m) else {
            panic!("an i32 array taken as f32");
        };
        let Ok(a) = AlignedHost::<i32>::from_memory(m) else {
            panic!("an i32 array refused as i32");
        };
        assert_eq!(&a[..], &[1, 2, 3]);
    }
}
