//! Host callbacks from compiled code: `jax.debug.callback` ([`Builder::debug_callback`])
//! and `jax.debug.print` ([`Builder::debug_print`]).
//!
//! A callback is a typed-FFI custom call (API version 4, with a side effect) to the
//! runtime's handler [`HOST_CALLBACK_TARGET`],
//! whose first operand is the `s64[]` id of a registered Rust closure and whose
//! other operands are the values; it has no results. The program keeps it although
//! no result depends on it (an instruction with a side effect is live, and so is a
//! loop or call whose body has one), and it runs each time it executes: every
//! iteration of a loop. Compiling a program with one registers the handler with the
//! client's plugin ([`Plugin::enable_host_callbacks`](xlaclient_pjrt::Plugin::enable_host_callbacks)),
//! or fails naming the plugin.
//!
//! The PJRT C API's own route for this (host `send`/`recv` with
//! `PJRT_ExecuteOptions::send_callbacks`, what JAX uses on TPU) is closed on the
//! CPU plugins: their compiler refuses the `send` and `recv` opcodes
//! (`tests/host_callbacks.rs`).
//!
//! Under `grad` the callback sees the primal values (it is not on the path from
//! the loss, so no gradient rule runs for it), as JAX's does. Under `vmap` it is
//! called once per example, in order, with that example's values (JAX's rule). Calls are not ordered with
//! respect to each other beyond their data dependences (JAX's `ordered=False`).

use std::fmt::Write as _;
use std::panic::Location;

use xlaclient_pjrt::{HOST_CALLBACK_TARGET, HostValue, register_host_callback};

use crate::builder::{Builder, Op};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::ir::OpKind;
use crate::ops::misc::CustomCallAttrs;
use crate::shape::{ElementType, Shape};

impl Builder {
    /// `jax.debug.callback(f, *values)`: runs `f` on the host with copies of
    /// `values` each time this point of the program executes (every iteration of a
    /// loop it is in). `f` runs on a thread of the plugin's; it should return
    /// quickly, and a panic in it becomes an error of the execution.
    ///
    /// ```
    /// # use std::sync::{Arc, Mutex};
    /// # use xlaclient_core::{Builder, Client, HostValue, Shape};
    /// let b = Builder::new("cb");
    /// let x = b.parameter(0, Shape::of::<f32>(&[2]), "x");
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let s = seen.clone();
    /// let y = b.fori_loop(0, 3, x, |_, x| {
    ///     b.debug_callback(&[&x], move |v: &[HostValue]| {
    ///         s.lock().unwrap().push(v[0].to_vec::<f32>().unwrap())
    ///     });
    ///     &x * 2.0
    /// });
    /// let client = Client::cpu()?;
    /// let exe = client.compile(&b.build(&y)?)?;
    /// exe.execute(&[&client.buffer_from_host(&[1.0f32, 3.0], &[2])?])?;
    /// assert_eq!(*seen.lock().unwrap(), vec![vec![1.0, 3.0], vec![2.0, 6.0], vec![4.0, 12.0]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[track_caller]
    pub fn debug_callback(&self, values: &[&Op], f: impl Fn(&[HostValue]) + Send + Sync + 'static) {
        let loc = Location::caller();
        self.debug_callback_at(values, f, loc);
    }

    /// `jax.debug.print(fmt, *values)`: prints `fmt` to standard output with each
    /// `{}` replaced by the next value and `{N}` by value `N` (`{{` and `}}` are
    /// braces), each time this point of the program executes. Scalars print as
    /// Rust prints them; arrays as nested `[…]` rows with values separated by
    /// spaces (numpy's layout, without its column alignment). A placeholder without
    /// a value, an unused value or an unmatched brace is a build error at this
    /// line.
    #[track_caller]
    pub fn debug_print(&self, fmt: &str, values: &[&Op]) {
        let loc = Location::caller();
        let pieces = match parse_format(fmt, values.len()) {
            Ok(p) => p,
            Err(why) => {
                let shapes: Vec<Shape> = values.iter().filter_map(|v| v.shape().ok()).collect();
                let refs: Vec<&Shape> = shapes.iter().collect();
                self.fail(
                    ShapeError::new(
                        "debug_print",
                        &refs,
                        ShapeErrorKind::Attribute,
                        format!("format {fmt:?}: {why}"),
                    ),
                    loc,
                );
                return;
            }
        };
        self.debug_callback_at(
            values,
            move |v: &[HostValue]| println!("{}", render(&pieces, v)),
            loc,
        );
    }

    fn debug_callback_at(
        &self,
        values: &[&Op],
        f: impl Fn(&[HostValue]) + Send + Sync + 'static,
        loc: &'static Location<'static>,
    ) -> Op {
        for v in values {
            match v.shape() {
                Err(_) => return (*v).clone(),
                Ok(Shape::Array { .. }) => {}
                Ok(_) => return self.fail_not_array(v, "debug_callback", loc),
            }
        }
        let id = register_host_callback(f);
        let id = self.on(loc).constant(id);
        let mut operands = vec![&id];
        operands.extend_from_slice(values);
        let attrs = CustomCallAttrs {
            target: HOST_CALLBACK_TARGET.to_string(),
            opaque: Vec::new(),
            api_version: 4,
            has_side_effect: true,
        };
        self.emit(
            OpKind::CustomCall(Box::new(attrs)),
            &operands,
            Some(Shape::Tuple(Vec::new())),
            loc,
        )
    }
}

/// The batching rule of a host callback (JAX's for `debug_callback`): one call per
/// example, in order, each with that example's values (unbatched values as they
/// are).
pub(crate) fn batch_host_callback(
    n: &crate::batching::BatchNode,
    a: &CustomCallAttrs,
) -> crate::batching::Batched {
    let loc = n.loc;
    let mut columns = Vec::with_capacity(n.operands.len());
    for o in n.operands {
        columns.push(if o.is_batched() {
            (o.front(n.size, loc)?, true)
        } else {
            (o.plain(n.b, loc), false)
        });
    }
    for k in 0..n.size {
        let ops: Vec<Op> = columns
            .iter()
            .map(|(op, batched)| {
                if *batched {
                    op.on(loc)
                        .slice_in_dim(k, k + 1, 1, 0)
                        .on(loc)
                        .squeeze(&[0])
                } else {
                    op.clone()
                }
            })
            .collect();
        let refs: Vec<&Op> = ops.iter().collect();
        let out = n.b.on(loc).custom_call(a, &refs, Shape::Tuple(Vec::new()));
        if let Some(e) = crate::batching::failure(&out) {
            return Err(e);
        }
    }
    Ok(vec![crate::batching::BVal::Tuple(Vec::new())])
}

/// A piece of a `debug_print` format: text, or the value at an index.
#[derive(Clone, Debug, PartialEq)]
enum Piece {
    Text(String),
    Value(usize),
}

/// Splits `fmt` into text and placeholders (`{}` the next value, `{N}` value `N`,
/// `{{`/`}}` braces); every value must be used.
fn parse_format(fmt: &str, n: usize) -> Result<Vec<Piece>, String> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut next = 0usize;
    let mut used = vec![false; n];
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '}' => return Err("a `}` without its `{` (write `}}` for a brace)".into()),
            '{' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some(ch) => inner.push(ch),
                        None => return Err("a `{` without its `}` (write `{{` for a brace)".into()),
                    }
                }
                let i = if inner.is_empty() {
                    next += 1;
                    next - 1
                } else {
                    inner.trim().parse::<usize>().map_err(|_| {
                        format!(
                            "placeholder `{{{inner}}}`: only `{{}}` and `{{N}}` (a value's \
                             position) are understood"
                        )
                    })?
                };
                if i >= n {
                    return Err(format!("placeholder {} has no value ({n} given)", i));
                }
                used[i] = true;
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Value(i));
            }
            c => text.push(c),
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        return Err(format!("value {i} is given but no placeholder prints it"));
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// The printed line: `pieces` with the values rendered.
fn render(pieces: &[Piece], values: &[HostValue]) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => s.push_str(t),
            Piece::Value(i) => match values.get(*i) {
                Some(v) => s.push_str(&format_value(v)),
                None => s.push_str("<missing>"),
            },
        }
    }
    s
}

/// A value as text: a scalar as Rust prints it, an array as nested `[…]` rows.
pub fn format_value(v: &HostValue) -> String {
    let items = elements(v);
    if v.dims.is_empty() {
        return items.into_iter().next().unwrap_or_default();
    }
    let mut out = String::new();
    nest(&mut out, &v.dims, &items);
    out
}

fn nest(out: &mut String, dims: &[i64], items: &[String]) {
    out.push('[');
    if dims.len() == 1 {
        out.push_str(&items.join(" "));
    } else {
        let stride = items.len() / (dims[0].max(1) as usize);
        for k in 0..dims[0] as usize {
            if k > 0 {
                out.push(' ');
            }
            nest(out, &dims[1..], &items[k * stride..(k + 1) * stride]);
        }
    }
    out.push(']');
}

/// Each element as text.
fn elements(v: &HostValue) -> Vec<String> {
    fn all<T: xlaclient_pjrt::NativeType + std::fmt::Display>(v: &HostValue) -> Vec<String> {
        v.to_vec::<T>()
            .map(|x| x.iter().map(|e| e.to_string()).collect())
            .unwrap_or_default()
    }
    match v.ty {
        ElementType::Pred => all::<bool>(v),
        ElementType::S8 => all::<i8>(v),
        ElementType::S16 => all::<i16>(v),
        ElementType::S32 => all::<i32>(v),
        ElementType::S64 => all::<i64>(v),
        ElementType::U8 => all::<u8>(v),
        ElementType::U16 => all::<u16>(v),
        ElementType::U32 => all::<u32>(v),
        ElementType::U64 => all::<u64>(v),
        ElementType::F32 => all::<f32>(v),
        ElementType::F64 => all::<f64>(v),
        ElementType::F16 => all::<half::f16>(v),
        ElementType::Bf16 => all::<half::bf16>(v),
        ElementType::F8E5M2 => v
            .bytes
            .iter()
            .map(|b| crate::float8::F8E5M2(*b).to_f32().to_string())
            .collect(),
        ElementType::F8E4M3FN => v
            .bytes
            .iter()
            .map(|b| crate::float8::F8E4M3FN(*b).to_f32().to_string())
            .collect(),
        ElementType::C64 | ElementType::C128 => {
            // Complex values: pairs of floats, printed `re+imj` as numpy does.
            let w = if v.ty == ElementType::C64 { 4 } else { 8 };
            v.bytes
                .chunks_exact(2 * w)
                .map(|c| {
                    let (re, im) = if w == 4 {
                        let f = |b: &[u8]| f64::from(f32::from_le_bytes(b.try_into().unwrap()));
                        (f(&c[..4]), f(&c[4..]))
                    } else {
                        let f = |b: &[u8]| f64::from_le_bytes(b.try_into().unwrap());
                        (f(&c[..8]), f(&c[8..]))
                    };
                    let mut s = String::new();
                    let _ = write!(s, "{re}{}{}j", if im < 0.0 { "-" } else { "+" }, im.abs());
                    s
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_parse_as_jax_reads_them() {
        assert_eq!(
            parse_format("x={} y={{{1}}}", 2).unwrap(),
            vec![
                Piece::Text("x=".into()),
                Piece::Value(0),
                Piece::Text(" y={".into()),
                Piece::Value(1),
                Piece::Text("}".into()),
            ]
        );
        assert!(parse_format("x={}", 0).unwrap_err().contains("no value"));
        assert!(parse_format("x", 1).unwrap_err().contains("value 0"));
        assert!(
            parse_format("x={", 1)
                .unwrap_err()
                .contains("without its `}`")
        );
        assert!(
            parse_format("x={name}", 1)
                .unwrap_err()
                .contains("`{name}`")
        );
    }

    #[test]
    fn arrays_print_as_nested_rows() {
        let v = HostValue {
            ty: ElementType::S32,
            dims: vec![2, 3],
            bytes: [1i32, 2, 3, 4, 5, 6]
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect(),
        };
        assert_eq!(format_value(&v), "[[1 2 3] [4 5 6]]");
        let s = HostValue {
            ty: ElementType::F32,
            dims: vec![],
            bytes: 1.5f32.to_le_bytes().to_vec(),
        };
        assert_eq!(format_value(&s), "1.5");
    }
}
