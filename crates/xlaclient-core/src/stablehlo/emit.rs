//! Printing a verified [`Module`] as StableHLO: MLIR text in the `stablehlo`
//! dialect, with `func` for the entry (`@main`) and for the computations that
//! `call` instructions call. Every op is printed in MLIR's generic form
//! (`%3 = "stablehlo.add"(%1, %2) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>`),
//! so the printer is one function for every op; the op table's StableHLO column
//! ([`Opcode::stablehlo_name`]) names the op each opcode prints as.
//!
//! How the IR's computations become MLIR:
//!
//! - the entry is `func.func public @main`; its parameters are the function's
//!   arguments and a tuple result is returned as several results (one level, as
//!   PJRT untuples an HLO module's tuple result);
//! - the body of an op with a region (a reducer, a comparator, a loop's condition
//!   and body, a branch) is printed inline in the region, the region's arguments
//!   standing for the computation's parameters; a loop's tuple carry is passed as
//!   its elements (StableHLO's `while` is variadic) and rebuilt as a tuple in the
//!   regions; a conditional's branches read their operand from the enclosing
//!   function (StableHLO's `if` and `case` regions take no arguments);
//! - `call` is `func.call` of a private function printed once per callee;
//! - a value computed from constants alone reaches its users through a call of
//!   an identity function (`@xlaclient_fold_fence_N`, one per type) that keeps
//!   MLIR's folder off it and that XLA inlines before folding it the way it folds
//!   the HLO proto (see `body`);
//! - an instruction's sharding is its `mhlo.sharding` attribute (an entry
//!   parameter's on the argument, the root's on the results), in XLA's text form.

use std::collections::HashMap;
use std::fmt::Write;

use crate::error::{Error, Result};
use crate::ir::attrs::{
    BinaryOp, CollectiveAttrs, Precision, RngAlgorithm, Transpose as SolveTranspose, WindowDim,
};
use crate::ir::{CompId, Module, OpKind, Opcode, Signatures, Value, value_shape};
use crate::shape::{ElementType, Shape};

/// The module as StableHLO text. `m` must have passed [`verify`](crate::ir::verify).
/// `counts`, the program's replica and partition counts when known, are written
/// as the module's `mhlo.num_replicas` and `mhlo.num_partitions` and give the
/// group of an all-to-all over every replica.
pub(crate) fn module_to_stablehlo(m: &Module, counts: Option<(i64, i64)>) -> Result<String> {
    let mut e = Emitter {
        m,
        replicas: counts.map(|c| c.0),
        next: 0,
        funcs: HashMap::new(),
        pending: Vec::new(),
        fences: Vec::new(),
    };
    let mut body = String::new();
    e.main(&mut body)?;
    // Callees, each once (a callee may call others: a work list).
    let mut done = 0;
    while done < e.pending.len() {
        let c = e.pending[done];
        done += 1;
        e.private_func(&mut body, c)?;
    }
    for (k, t) in e.fences.iter().enumerate() {
        let _ = writeln!(
            body,
            "  func.func private @xlaclient_fold_fence_{k}(%arg0: {t}) -> {t} {{\n    \"func.return\"(%arg0) : ({t}) -> ()\n  }}"
        );
    }
    let name = module_name(&m.name);
    let attrs = match counts {
        Some((r, p)) => format!(
            " attributes {{mhlo.num_partitions = {p} : i32, mhlo.num_replicas = {r} : i32}}"
        ),
        None => String::new(),
    };
    Ok(format!("module @{name}{attrs} {{\n{body}}}\n"))
}

fn module_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    match s.chars().next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => s,
        _ => format!("m_{s}"),
    }
}

/// The error for an instruction StableHLO cannot say.
fn unsupported(op: Opcode, reason: impl Into<String>) -> Error {
    Error::Emit {
        op: op.name(),
        reason: reason.into(),
    }
}

/// The MLIR element type of `t`.
pub(crate) fn element_type(t: ElementType) -> &'static str {
    match t {
        ElementType::Pred => "i1",
        ElementType::S8 => "i8",
        ElementType::S16 => "i16",
        ElementType::S32 => "i32",
        ElementType::S64 => "i64",
        ElementType::U8 => "ui8",
        ElementType::U16 => "ui16",
        ElementType::U32 => "ui32",
        ElementType::U64 => "ui64",
        ElementType::F16 => "f16",
        ElementType::Bf16 => "bf16",
        ElementType::F32 => "f32",
        ElementType::F64 => "f64",
        ElementType::C64 => "complex<f32>",
        ElementType::C128 => "complex<f64>",
        ElementType::F8E5M2 => "f8E5M2",
        ElementType::F8E4M3FN => "f8E4M3FN",
    }
}

/// The MLIR type of `s`: `tensor<2x3xf32>`, `tuple<…>`, `!stablehlo.token`.
pub(crate) fn type_of(s: &Shape) -> String {
    match s {
        Shape::Array { ty, dims } => {
            let mut t = String::from("tensor<");
            for d in dims {
                let _ = write!(t, "{d}x");
            }
            t.push_str(element_type(*ty));
            t.push('>');
            t
        }
        Shape::Tuple(e) => {
            let parts: Vec<String> = e.iter().map(type_of).collect();
            format!("tuple<{}>", parts.join(", "))
        }
        Shape::Token => "!stablehlo.token".into(),
    }
}

fn i64_array(xs: &[i64]) -> String {
    if xs.is_empty() {
        "array<i64>".into()
    } else {
        let s: Vec<String> = xs.iter().map(i64::to_string).collect();
        format!("array<i64: {}>", s.join(", "))
    }
}

fn list(xs: &[i64]) -> String {
    let s: Vec<String> = xs.iter().map(i64::to_string).collect();
    format!("[{}]", s.join(", "))
}

/// An `N×2` padding attribute (`dense<[[lo, hi], …]> : tensor<Nx2xi64>`).
fn padding(pairs: &[(i64, i64)]) -> String {
    if pairs.is_empty() {
        return "dense<> : tensor<0x2xi64>".into();
    }
    let rows: Vec<String> = pairs.iter().map(|(l, h)| format!("[{l}, {h}]")).collect();
    format!(
        "dense<[{}]> : tensor<{}x2xi64>",
        rows.join(", "),
        pairs.len()
    )
}

/// The elements of a literal (little-endian bytes, row-major) as a dense
/// attribute body: hex for every type but `pred`, whose elements are written out;
/// nothing for an empty array (`dense<>`).
fn dense(ty: ElementType, dims: &[i64], bytes: &[u8]) -> String {
    let n: i64 = dims.iter().product();
    if ty != ElementType::Pred && n > 0 {
        let mut s = String::with_capacity(bytes.len() * 2 + 4);
        s.push_str("\"0x");
        for b in bytes {
            let _ = write!(s, "{b:02X}");
        }
        s.push('"');
        return s;
    }
    fn nest(dims: &[i64], bytes: &[u8], pos: &mut usize, out: &mut String) {
        match dims.split_first() {
            None => {
                let b = bytes.get(*pos).copied().unwrap_or(0);
                *pos += 1;
                out.push_str(if b != 0 { "true" } else { "false" });
            }
            Some((d, rest)) => {
                out.push('[');
                for i in 0..*d {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    nest(rest, bytes, pos, out);
                }
                out.push(']');
            }
        }
    }
    if n == 0 {
        // An empty array of any shape (MLIR's own printing of one).
        return String::new();
    }
    let mut out = String::new();
    let mut pos = 0;
    nest(dims, bytes, &mut pos, &mut out);
    out
}

fn replica_groups(groups: &[Vec<i64>]) -> String {
    let width = groups.iter().map(Vec::len).max().unwrap_or(0);
    if groups.is_empty() || width == 0 {
        return "dense<> : tensor<0x0xi64>".into();
    }
    // Groups of unequal sizes are padded with -1 (StableHLO's convention).
    let rows: Vec<String> = groups
        .iter()
        .map(|g| {
            let mut r = g.clone();
            r.resize(width, -1);
            list(&r)
        })
        .collect();
    format!(
        "dense<[{}]> : tensor<{}x{}xi64>",
        rows.join(", "),
        groups.len(),
        width
    )
}

fn channel(id: Option<i64>) -> Option<String> {
    id.map(|h| format!("channel_handle = #stablehlo.channel_handle<handle = {h}, type = 1>"))
}

fn collective_attrs(a: &CollectiveAttrs, attrs: &mut Vec<String>) {
    attrs.push(format!(
        "replica_groups = {}",
        replica_groups(&a.replica_groups)
    ));
    attrs.extend(channel(a.channel_id));
    if a.use_global_device_ids {
        attrs.push("use_global_device_ids".into());
    }
}

fn precision(p: Precision) -> &'static str {
    match p {
        Precision::Default => "#stablehlo<precision DEFAULT>",
        Precision::High => "#stablehlo<precision HIGH>",
        Precision::Highest => "#stablehlo<precision HIGHEST>",
    }
}

fn window_attrs(op: Opcode, w: &[WindowDim], dilations: bool) -> Result<Vec<String>> {
    let get = |f: fn(&WindowDim) -> i64| w.iter().map(f).collect::<Vec<i64>>();
    let mut a = vec![
        format!("window_dimensions = {}", i64_array(&get(|d| d.size))),
        format!("window_strides = {}", i64_array(&get(|d| d.stride))),
    ];
    if dilations {
        a.push(format!(
            "base_dilations = {}",
            i64_array(&get(|d| d.base_dilation))
        ));
        a.push(format!(
            "window_dilations = {}",
            i64_array(&get(|d| d.window_dilation))
        ));
    } else if w
        .iter()
        .any(|d| d.base_dilation != 1 || d.window_dilation != 1)
    {
        return Err(unsupported(
            op,
            "StableHLO's select_and_scatter has no window or base dilation",
        ));
    }
    let pads: Vec<(i64, i64)> = w.iter().map(|d| (d.padding_low, d.padding_high)).collect();
    a.push(format!("padding = {}", padding(&pads)));
    Ok(a)
}

/// A region's text (without the parentheses around the op's region list).
type Region = String;

struct Emitter<'m> {
    m: &'m Module,
    /// The program's replica count, when known.
    replicas: Option<i64>,
    /// The next SSA number of the function being printed.
    next: usize,
    /// The private function of each computation that a `call` calls.
    funcs: HashMap<CompId, String>,
    /// Callees whose functions are still to be printed.
    pending: Vec<CompId>,
    /// The types of the identity functions that fence constants from MLIR's
    /// folder (`xlaclient_fold_fence_{index}`).
    fences: Vec<String>,
}

fn indent(out: &mut String, depth: usize) {
    for _ in 0..depth {
        out.push_str("  ");
    }
}

fn func_type(args: &[String], results: &[String]) -> String {
    let r = if results.len() == 1 && !results[0].starts_with('(') {
        results[0].clone()
    } else {
        format!("({})", results.join(", "))
    };
    format!("({}) -> {r}", args.join(", "))
}

impl<'m> Emitter<'m> {
    fn fresh(&mut self) -> String {
        let n = self.next;
        self.next += 1;
        format!("%{n}")
    }

    /// Prints one generic op and gives the references of its results.
    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        out: &mut String,
        depth: usize,
        name: &str,
        operands: &[(String, Shape)],
        regions: &[Region],
        attrs: &[String],
        results: &[Shape],
    ) -> Vec<String> {
        indent(out, depth);
        let base = self.fresh();
        let refs: Vec<String> = match results.len() {
            0 => Vec::new(),
            1 => {
                let _ = write!(out, "{base} = ");
                vec![base.clone()]
            }
            n => {
                let _ = write!(out, "{base}:{n} = ");
                (0..n).map(|i| format!("{base}#{i}")).collect()
            }
        };
        let names: Vec<&str> = operands.iter().map(|(n, _)| n.as_str()).collect();
        let _ = write!(out, "\"{name}\"({})", names.join(", "));
        if !regions.is_empty() {
            out.push_str(" (");
            for (i, r) in regions.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(r);
            }
            out.push(')');
        }
        if !attrs.is_empty() {
            let _ = write!(out, " {{{}}}", attrs.join(", "));
        }
        let tys: Vec<String> = operands.iter().map(|(_, s)| type_of(s)).collect();
        let rtys: Vec<String> = results.iter().map(type_of).collect();
        let _ = writeln!(out, " : {}", func_type(&tys, &rtys));
        refs
    }

    fn gte(&mut self, out: &mut String, depth: usize, t: &(String, Shape), i: usize) -> String {
        let Shape::Tuple(e) = &t.1 else {
            unreachable!("gte of a tuple only")
        };
        let elem = e[i].clone();
        self.op(
            out,
            depth,
            "stablehlo.get_tuple_element",
            std::slice::from_ref(t),
            &[],
            &[format!("index = {i} : i32")],
            &[elem],
        )
        .remove(0)
    }

    fn tuple(&mut self, out: &mut String, depth: usize, elems: &[(String, Shape)]) -> String {
        let shape = Shape::Tuple(elems.iter().map(|(_, s)| s.clone()).collect());
        self.op(out, depth, "stablehlo.tuple", elems, &[], &[], &[shape])
            .remove(0)
    }

    /// The elements of a tuple value as values (gets of each element).
    fn untuple(
        &mut self,
        out: &mut String,
        depth: usize,
        t: &(String, Shape),
    ) -> Vec<(String, Shape)> {
        match &t.1 {
            Shape::Tuple(e) => {
                let e = e.clone();
                (0..e.len())
                    .map(|i| (self.gte(out, depth, t, i), e[i].clone()))
                    .collect()
            }
            _ => vec![t.clone()],
        }
    }

    /// Prints computation `c`'s instructions at `depth`, its parameters being
    /// `params`; gives its root value.
    fn body(
        &mut self,
        out: &mut String,
        depth: usize,
        ci: CompId,
        params: &[(String, Shape)],
    ) -> Result<(String, Shape)> {
        let m = self.m;
        let c = &m.comps[ci.0 as usize];
        let mut refs: Vec<Vec<String>> = vec![Vec::new(); c.instrs.len()];
        // Which instructions compute from constants alone (MLIR may fold them).
        let mut folds = vec![false; c.instrs.len()];
        // Each fenced value's fenced name (one call per value).
        let mut fenced: HashMap<(u32, u32), String> = HashMap::new();
        let val = |refs: &Vec<Vec<String>>, v: Value| -> (String, Shape) {
            (
                refs[v.instr as usize][v.result as usize].clone(),
                value_shape(c, &m.shapes, v)
                    .expect("a verified operand")
                    .clone(),
            )
        };
        for (i, ins) in c.instrs.iter().enumerate() {
            let mut operands: Vec<(String, Shape)> =
                ins.operands.iter().map(|v| val(&refs, *v)).collect();
            let shape = m.shapes.get(ins.shape).clone();
            folds[i] = match &ins.kind {
                OpKind::Constant(_) | OpKind::Iota { .. } => true,
                OpKind::Parameter { .. }
                | OpKind::ReplicaId
                | OpKind::PartitionId
                | OpKind::CustomCall(_)
                | OpKind::RngBitGenerator { .. }
                | OpKind::OptimizationBarrier => false,
                _ => ins.operands.iter().all(|v| folds[v.instr as usize]),
            };
            // Every operand computed from constants alone reaches its user through
            // a call of an identity function (`fold_fence`, once per value): MLIR
            // does not fold or rewrite through a call, and XLA inlines it before
            // its own constant folding, so XLA folds (or not) exactly as from the
            // HLO proto. MLIR's folder answers otherwise: transcendental
            // functions evaluated in double and rounded (logistic one ulp off
            // XLA's), an f8 NaN through `minimum` folded to a number (0.81), an
            // integer division by a constant zero evaluated while compiling
            // (SIGFPE in 0.81's compiler, where XLA defines the result); and its
            // rewrites of ops on constants (a `dynamic_update_slice` into zeros
            // as a `pad`) left XLA a graph that fused otherwise (one ulp in a
            // gradient). An optimization barrier would stop XLA's folding too,
            // and its run-time kernels answer otherwise again.
            let guard: Vec<usize> = match &ins.kind {
                OpKind::Tuple | OpKind::GetTupleElement { .. } => Vec::new(),
                _ => (0..operands.len())
                    .filter(|j| folds[ins.operands[*j].instr as usize])
                    .collect(),
            };
            if !guard.is_empty() {
                folds[i] = false;
            }
            for j in guard {
                let src = ins.operands[j];
                let key = (src.instr, src.result);
                let r = match fenced.get(&key) {
                    Some(r) => r.clone(),
                    None => {
                        let d = operands[j].clone();
                        let f = self.fold_fence(&d.1);
                        let r = self.op(
                            out,
                            depth,
                            "func.call",
                            std::slice::from_ref(&d),
                            &[],
                            &[format!("callee = @{f}")],
                            std::slice::from_ref(&d.1),
                        )[0]
                        .clone();
                        fenced.insert(key, r.clone());
                        r
                    }
                };
                operands[j].0 = r;
            }
            if let OpKind::Parameter { number, .. } = &ins.kind {
                refs[i] = vec![params[*number as usize].0.clone()];
                continue;
            }
            refs[i] = self
                .instr(out, depth, &ins.kind, &operands, &shape, ins)
                .map_err(|e| match e {
                    Error::Emit { op, reason } => Error::Emit {
                        op,
                        reason: format!("{reason} (built at {})", ins.loc),
                    },
                    e => e,
                })?;
        }
        let root = c.root.expect("a finished computation has a root");
        Ok(val(&refs, root))
    }

    /// A region whose arguments are `args`, printing `f`'s instructions and
    /// returning what it gives.
    fn region(
        &mut self,
        depth: usize,
        args: &[Shape],
        f: impl FnOnce(&mut Self, &mut String, &[(String, Shape)]) -> Result<Vec<(String, Shape)>>,
    ) -> Result<Region> {
        let mut out = String::from("{\n");
        let vals: Vec<(String, Shape)> = args.iter().map(|s| (self.fresh(), s.clone())).collect();
        if !vals.is_empty() {
            // (A region without arguments needs no label: `if` and `case`.)
            indent(&mut out, depth);
            let decl: Vec<String> = vals
                .iter()
                .map(|(n, s)| format!("{n}: {}", type_of(s)))
                .collect();
            let _ = writeln!(out, "^bb0({}):", decl.join(", "));
        }
        let rets = f(self, &mut out, &vals)?;
        indent(&mut out, depth + 1);
        let names: Vec<&str> = rets.iter().map(|(n, _)| n.as_str()).collect();
        let tys: Vec<String> = rets.iter().map(|(_, s)| type_of(s)).collect();
        let _ = writeln!(
            out,
            "\"stablehlo.return\"({}) : ({}) -> ()",
            names.join(", "),
            tys.join(", ")
        );
        indent(&mut out, depth);
        out.push('}');
        Ok(out)
    }

    /// A region computing body `c` on its arguments (the computation's parameter
    /// shapes), returning its result (a tuple result as its elements).
    fn body_region(&mut self, depth: usize, c: CompId) -> Result<Region> {
        let (params, _) = self
            .m
            .signature(c)
            .expect("a verified module's callees are finished");
        self.region(depth, &params, |e, out, args| {
            let r = e.body(out, depth + 1, c, args)?;
            Ok(e.untuple(out, depth + 1, &r))
        })
    }

    /// A region of a loop: its arguments are the carry's elements, rebuilt as the
    /// carry tuple for `c`; returns `c`'s result (a tuple: its elements).
    fn carry_region(&mut self, depth: usize, carry: &Shape, c: CompId) -> Result<Region> {
        let elems = match carry {
            Shape::Tuple(e) => e.clone(),
            s => vec![s.clone()],
        };
        let is_tuple = matches!(carry, Shape::Tuple(_));
        self.region(depth, &elems, |e, out, args| {
            let t = if is_tuple {
                (e.tuple(out, depth + 1, args), carry.clone())
            } else {
                args[0].clone()
            };
            let r = e.body(out, depth + 1, c, &[t])?;
            Ok(e.untuple(out, depth + 1, &r))
        })
    }

    /// Prints one instruction; gives the references of its results (one per
    /// result of a multi-result instruction).
    fn instr(
        &mut self,
        out: &mut String,
        depth: usize,
        kind: &OpKind,
        operands: &[(String, Shape)],
        shape: &Shape,
        ins: &crate::ir::Instr,
    ) -> Result<Vec<String>> {
        let op = kind.opcode();
        let name = op.stablehlo_name();
        let multi = kind.multi_result(operands.len());
        let results: Vec<Shape> = match shape {
            Shape::Tuple(e) if multi => e.clone(),
            s => vec![s.clone()],
        };
        let mut attrs: Vec<String> = Vec::new();
        if let Some(s) = &ins.sharding {
            attrs.push(format!("mhlo.sharding = \"{s}\""));
        }
        let mut regions: Vec<Region> = Vec::new();
        let in_ty = |i: usize| operands[i].1.element_type();
        let pred = shape.element_type() == Some(ElementType::Pred);
        match kind {
            // On `pred`, XLA's maximum and minimum are logical or and and; MLIR's
            // folders read an `i1` as signed (true = -1), so they are printed as
            // what they compute.
            OpKind::Binary(b @ (BinaryOp::Maximum | BinaryOp::Minimum)) if pred => {
                let name = if *b == BinaryOp::Maximum {
                    "stablehlo.or"
                } else {
                    "stablehlo.and"
                };
                return Ok(self.op(out, depth, name, operands, &[], &attrs, &results));
            }
            OpKind::Clamp if pred => {
                // min(max(x, lo), hi) = (x or lo) and hi, scalar bounds broadcast.
                let full = |e: &mut Self, out: &mut String, v: &(String, Shape)| {
                    if v.1 == *shape {
                        return v.clone();
                    }
                    let r = e.op(
                        out,
                        depth,
                        "stablehlo.broadcast_in_dim",
                        std::slice::from_ref(v),
                        &[],
                        &["broadcast_dimensions = array<i64>".to_string()],
                        std::slice::from_ref(shape),
                    );
                    (r[0].clone(), shape.clone())
                };
                let lo = full(self, out, &operands[0]);
                let hi = full(self, out, &operands[2]);
                let x = operands[1].clone();
                let or = self.op(
                    out,
                    depth,
                    "stablehlo.or",
                    &[x, lo],
                    &[],
                    &[],
                    std::slice::from_ref(shape),
                );
                let or = (or[0].clone(), shape.clone());
                return Ok(self.op(
                    out,
                    depth,
                    "stablehlo.and",
                    &[or, hi],
                    &[],
                    &attrs,
                    &results,
                ));
            }
            OpKind::Parameter { .. } => unreachable!("parameters are the function's arguments"),
            // A buffer left as allocated (`Builder::uninitialized`) is a kernel of
            // this runtime's: StableHLO, read by other programs too (JAX), gets
            // zeros, which mean the same (every element is written before it is
            // read).
            OpKind::CustomCall(a) if a.target == xlaclient_pjrt::UNINITIALIZED_TARGET => {
                let Shape::Array { ty, .. } = shape else {
                    return Err(unsupported(op, format!("an uninitialized {shape}")));
                };
                let scalar = Shape::scalar(*ty);
                let zero = vec![0u8; ty.byte_size()];
                let c = self.op(
                    out,
                    depth,
                    "stablehlo.constant",
                    &[],
                    &[],
                    &[format!(
                        "value = dense<{}> : {}",
                        dense(*ty, &[], &zero),
                        type_of(&scalar)
                    )],
                    std::slice::from_ref(&scalar),
                );
                return Ok(self.op(
                    out,
                    depth,
                    "stablehlo.broadcast_in_dim",
                    &[(c[0].clone(), scalar)],
                    &[],
                    &["broadcast_dimensions = array<i64>".to_string()],
                    &results,
                ));
            }
            OpKind::Constant(bytes) => {
                let Shape::Array { ty, dims } = shape else {
                    return Err(unsupported(op, format!("a constant of shape {shape}")));
                };
                attrs.push(format!(
                    "value = dense<{}> : {}",
                    dense(*ty, dims, bytes),
                    type_of(shape)
                ));
            }
            OpKind::Unary(_)
            | OpKind::Binary(_)
            | OpKind::Bitwise(_)
            | OpKind::BitwiseUnary(_)
            | OpKind::Select
            | OpKind::Clamp
            | OpKind::Reshape
            | OpKind::Convert
            | OpKind::BitcastConvert
            | OpKind::DynamicUpdateSlice
            | OpKind::ReplicaId
            | OpKind::PartitionId
            | OpKind::Tuple => {}
            OpKind::Compare(c) => {
                let t = in_ty(0).unwrap_or(ElementType::F32);
                attrs.push(format!(
                    "comparison_direction = #stablehlo<comparison_direction {}>",
                    c.hlo_name()
                ));
                attrs.push(format!(
                    "compare_type = #stablehlo<comparison_type {}>",
                    crate::ops::elementwise::comparison_type(t)
                ));
            }
            OpKind::Broadcast { dims } => {
                attrs.push(format!("broadcast_dimensions = {}", i64_array(dims)))
            }
            OpKind::Transpose { perm } => attrs.push(format!("permutation = {}", i64_array(perm))),
            OpKind::GetTupleElement { index } => attrs.push(format!("index = {index} : i32")),
            OpKind::Dot(d) => {
                let dd = &d.dims;
                let mut f = Vec::new();
                for (k, v) in [
                    ("lhs_batching_dimensions", &dd.lhs_batch),
                    ("rhs_batching_dimensions", &dd.rhs_batch),
                    ("lhs_contracting_dimensions", &dd.lhs_contracting),
                    ("rhs_contracting_dimensions", &dd.rhs_contracting),
                ] {
                    if !v.is_empty() {
                        f.push(format!("{k} = {}", list(v)));
                    }
                }
                attrs.push(format!(
                    "dot_dimension_numbers = #stablehlo.dot<{}>",
                    f.join(", ")
                ));
                attrs.push(format!(
                    "precision_config = [{}, {}]",
                    precision(d.precision[0]),
                    precision(d.precision[1])
                ));
            }
            OpKind::Reduce { axes, body } => {
                attrs.push(format!("dimensions = {}", i64_array(axes)));
                regions.push(self.body_region(depth + 1, *body)?);
            }
            OpKind::Call { body } => {
                let f = self.callee(*body);
                attrs.push(format!("callee = @{f}"));
                let rs = self.op(out, depth, "func.call", operands, &[], &attrs, &results);
                return Ok(rs);
            }
            OpKind::Iota { dimension } => attrs.push(format!("iota_dimension = {dimension} : i64")),
            OpKind::Slice(s) => {
                attrs.push(format!("start_indices = {}", i64_array(&s.start)));
                attrs.push(format!("limit_indices = {}", i64_array(&s.limit)));
                attrs.push(format!("strides = {}", i64_array(&s.strides)));
            }
            OpKind::DynamicSlice { sizes } => {
                attrs.push(format!("slice_sizes = {}", i64_array(sizes)))
            }
            OpKind::Concatenate { dimension } => {
                attrs.push(format!("dimension = {dimension} : i64"))
            }
            OpKind::Pad(p) => {
                let get = |f: fn(&crate::ir::attrs::PadDim) -> i64| {
                    i64_array(&p.iter().map(f).collect::<Vec<i64>>())
                };
                attrs.push(format!("edge_padding_low = {}", get(|d| d.lo)));
                attrs.push(format!("edge_padding_high = {}", get(|d| d.hi)));
                attrs.push(format!("interior_padding = {}", get(|d| d.interior)));
            }
            OpKind::Reverse { axes } => attrs.push(format!("dimensions = {}", i64_array(axes))),
            OpKind::Sort {
                dimension,
                stable,
                comparator,
            } => {
                attrs.push(format!("dimension = {dimension} : i64"));
                attrs.push(format!("is_stable = {stable}"));
                regions.push(self.body_region(depth + 1, *comparator)?);
            }
            OpKind::Gather(g) => {
                let d = &g.dims;
                let mut f = Vec::new();
                for (k, v) in [
                    ("offset_dims", &d.offset_dims),
                    ("collapsed_slice_dims", &d.collapsed_slice_dims),
                    ("operand_batching_dims", &d.operand_batching_dims),
                    (
                        "start_indices_batching_dims",
                        &d.start_indices_batching_dims,
                    ),
                    ("start_index_map", &d.start_index_map),
                ] {
                    if !v.is_empty() {
                        f.push(format!("{k} = {}", list(v)));
                    }
                }
                f.push(format!("index_vector_dim = {}", d.index_vector_dim));
                attrs.push(format!(
                    "dimension_numbers = #stablehlo.gather<{}>",
                    f.join(", ")
                ));
                attrs.push(format!("slice_sizes = {}", i64_array(&g.slice_sizes)));
                attrs.push(format!("indices_are_sorted = {}", g.indices_are_sorted));
            }
            OpKind::Scatter { attrs: a, body } => {
                let d = &a.dims;
                let mut f = Vec::new();
                for (k, v) in [
                    ("update_window_dims", &d.update_window_dims),
                    ("inserted_window_dims", &d.inserted_window_dims),
                    ("input_batching_dims", &d.input_batching_dims),
                    (
                        "scatter_indices_batching_dims",
                        &d.scatter_indices_batching_dims,
                    ),
                    (
                        "scatter_dims_to_operand_dims",
                        &d.scatter_dims_to_operand_dims,
                    ),
                ] {
                    if !v.is_empty() {
                        f.push(format!("{k} = {}", list(v)));
                    }
                }
                f.push(format!("index_vector_dim = {}", d.index_vector_dim));
                attrs.push(format!(
                    "scatter_dimension_numbers = #stablehlo.scatter<{}>",
                    f.join(", ")
                ));
                attrs.push(format!("indices_are_sorted = {}", a.indices_are_sorted));
                attrs.push(format!("unique_indices = {}", a.unique_indices));
                regions.push(self.body_region(depth + 1, *body)?);
            }
            OpKind::Convolution(c) => {
                let get = |f: fn(&WindowDim) -> i64| c.window.iter().map(f).collect::<Vec<i64>>();
                attrs.push(format!(
                    "window_strides = {}",
                    i64_array(&get(|d| d.stride))
                ));
                let pads: Vec<(i64, i64)> = c
                    .window
                    .iter()
                    .map(|d| (d.padding_low, d.padding_high))
                    .collect();
                attrs.push(format!("padding = {}", padding(&pads)));
                attrs.push(format!(
                    "lhs_dilation = {}",
                    i64_array(&get(|d| d.base_dilation))
                ));
                attrs.push(format!(
                    "rhs_dilation = {}",
                    i64_array(&get(|d| d.window_dilation))
                ));
                let d = &c.dims;
                attrs.push(format!(
                    "dimension_numbers = #stablehlo.conv<raw input_batch_dimension = {}, \
                     input_feature_dimension = {}, input_spatial_dimensions = {}, \
                     kernel_input_feature_dimension = {}, kernel_output_feature_dimension = {}, \
                     kernel_spatial_dimensions = {}, output_batch_dimension = {}, \
                     output_feature_dimension = {}, output_spatial_dimensions = {}>",
                    d.input_batch,
                    d.input_feature,
                    list(&d.input_spatial),
                    d.kernel_input_feature,
                    d.kernel_output_feature,
                    list(&d.kernel_spatial),
                    d.output_batch,
                    d.output_feature,
                    list(&d.output_spatial)
                ));
                attrs.push(format!(
                    "feature_group_count = {} : i64",
                    c.feature_group_count
                ));
                attrs.push(format!("batch_group_count = {} : i64", c.batch_group_count));
            }
            OpKind::Map { dims, body } => {
                attrs.push(format!("dimensions = {}", i64_array(dims)));
                regions.push(self.body_region(depth + 1, *body)?);
            }
            OpKind::OptimizationBarrier => {
                // HLO's barrier takes one (tuple) operand; StableHLO's is variadic.
                let parts = self.untuple(out, depth, &operands[0]);
                let tys: Vec<Shape> = parts.iter().map(|(_, s)| s.clone()).collect();
                let rs = self.op(out, depth, name, &parts, &[], &attrs, &tys);
                if matches!(operands[0].1, Shape::Tuple(_)) {
                    let elems: Vec<(String, Shape)> = rs.into_iter().zip(tys).collect();
                    return Ok(vec![self.tuple(out, depth, &elems)]);
                }
                return Ok(rs);
            }
            OpKind::While { cond, body } => {
                let carry = operands[0].1.clone();
                if !matches!(carry, Shape::Tuple(_)) {
                    return Err(unsupported(op, "a while loop whose carry is not a tuple"));
                }
                let parts = self.untuple(out, depth, &operands[0]);
                regions.push(self.carry_region(depth + 1, &carry, *cond)?);
                regions.push(self.carry_region(depth + 1, &carry, *body)?);
                return Ok(self.op(out, depth, name, &parts, &regions, &attrs, &results));
            }
            OpKind::Conditional { branches } => {
                let sel = &operands[0];
                let is_pred = sel.1.element_type() == Some(ElementType::Pred);
                for (k, b) in branches.iter().enumerate() {
                    let arg = operands[1 + k].clone();
                    let b = *b;
                    regions.push(self.region(depth + 1, &[], |e, o, _| {
                        let r = e.body(o, depth + 2, b, &[arg])?;
                        Ok(e.untuple(o, depth + 2, &r))
                    })?);
                }
                let name = if is_pred {
                    "stablehlo.if"
                } else {
                    "stablehlo.case"
                };
                return Ok(self.op(
                    out,
                    depth,
                    name,
                    std::slice::from_ref(sel),
                    &regions,
                    &attrs,
                    &results,
                ));
            }
            OpKind::SelectAndScatter {
                window,
                select,
                scatter,
            } => {
                attrs.extend(window_attrs(op, window, false)?);
                regions.push(self.body_region(depth + 1, *select)?);
                regions.push(self.body_region(depth + 1, *scatter)?);
            }
            OpKind::ReduceWindow { window, body } => {
                attrs.extend(window_attrs(op, window, true)?);
                regions.push(self.body_region(depth + 1, *body)?);
            }
            OpKind::CustomCall(a) => {
                attrs.push(format!(
                    "call_target_name = \"{}\"",
                    escape(a.target.as_bytes())
                ));
                if a.has_side_effect {
                    attrs.push("has_side_effect = true".into());
                }
                if a.api_version == 4 {
                    if !a.opaque.is_empty() {
                        return Err(unsupported(
                            op,
                            format!(
                                "custom call `{}`: a typed-FFI (api_version 4) backend config \
                                 given as opaque bytes (StableHLO wants a dictionary)",
                                a.target
                            ),
                        ));
                    }
                    attrs.push("backend_config = {}".into());
                } else {
                    attrs.push(format!("backend_config = \"{}\"", escape(&a.opaque)));
                }
                attrs.push(format!("api_version = {} : i32", a.api_version));
                // A tuple result is several results, tupled again for its users.
                if let Shape::Tuple(e) = shape {
                    let rs = self.op(out, depth, name, operands, &[], &attrs, e);
                    let elems: Vec<(String, Shape)> = rs.into_iter().zip(e.clone()).collect();
                    return Ok(vec![self.tuple(out, depth, &elems)]);
                }
            }
            OpKind::Cholesky { lower } => attrs.push(format!("lower = {lower}")),
            OpKind::TriangularSolve(o) => {
                attrs.push(format!("left_side = {}", o.left_side));
                attrs.push(format!("lower = {}", o.lower));
                attrs.push(format!("unit_diagonal = {}", o.unit_diagonal));
                let t = match o.transpose_a {
                    SolveTranspose::No => "NO_TRANSPOSE",
                    SolveTranspose::Transpose => "TRANSPOSE",
                    SolveTranspose::Adjoint => "ADJOINT",
                };
                attrs.push(format!("transpose_a = #stablehlo<transpose {t}>"));
            }
            OpKind::RngBitGenerator { algorithm } => {
                let a = match algorithm {
                    RngAlgorithm::Default => "DEFAULT",
                    RngAlgorithm::ThreeFry => "THREE_FRY",
                    RngAlgorithm::Philox => "PHILOX",
                };
                attrs.push(format!("rng_algorithm = #stablehlo<rng_algorithm {a}>"));
            }
            OpKind::AllReduce { attrs: a, body } => {
                collective_attrs(a, &mut attrs);
                regions.push(self.body_region(depth + 1, *body)?);
            }
            OpKind::AllGather {
                attrs: a,
                dimension,
            } => {
                attrs.push(format!("all_gather_dim = {dimension} : i64"));
                collective_attrs(a, &mut attrs);
            }
            OpKind::ReduceScatter {
                attrs: a,
                dimension,
                body,
            } => {
                attrs.push(format!("scatter_dimension = {dimension} : i64"));
                collective_attrs(a, &mut attrs);
                regions.push(self.body_region(depth + 1, *body)?);
            }
            OpKind::CollectivePermute(p) => {
                let rows: Vec<(i64, i64)> = p.pairs.clone();
                let body: Vec<String> = rows.iter().map(|(s, t)| format!("[{s}, {t}]")).collect();
                attrs.push(if rows.is_empty() {
                    "source_target_pairs = dense<> : tensor<0x2xi64>".into()
                } else {
                    format!(
                        "source_target_pairs = dense<[{}]> : tensor<{}x2xi64>",
                        body.join(", "),
                        rows.len()
                    )
                });
                attrs.extend(channel(p.channel_id));
            }
            OpKind::AllToAll {
                attrs: a,
                dimension,
            } => {
                let mut a = a.clone();
                if a.replica_groups.is_empty() {
                    // HLO's "every replica" is one group of them all.
                    let Some(r) = self.replicas else {
                        return Err(unsupported(
                            op,
                            "an all-to-all over every replica (no replica groups): StableHLO \
                             needs its split count; give the replica count \
                             (`to_stablehlo_with`)",
                        ));
                    };
                    a.replica_groups = vec![(0..r).collect()];
                }
                let n = a.replica_groups[0].len();
                attrs.push(format!("split_dimension = {dimension} : i64"));
                attrs.push(format!("concat_dimension = {dimension} : i64"));
                attrs.push(format!("split_count = {n} : i64"));
                collective_attrs(&a, &mut attrs);
            }
        }
        Ok(self.op(out, depth, name, operands, &regions, &attrs, &results))
    }

    /// The identity function of values of shape `s` that fences a constant from
    /// MLIR's folder (made the first time a type needs one).
    fn fold_fence(&mut self, s: &Shape) -> String {
        let t = type_of(s);
        let k = match self.fences.iter().position(|x| *x == t) {
            Some(k) => k,
            None => {
                self.fences.push(t);
                self.fences.len() - 1
            }
        };
        format!("xlaclient_fold_fence_{k}")
    }

    /// The private function of callee `c`, queued for printing the first time.
    fn callee(&mut self, c: CompId) -> String {
        if let Some(n) = self.funcs.get(&c) {
            return n.clone();
        }
        let n = format!("{}_{}", module_name(&self.m.comps[c.0 as usize].name), c.0);
        self.funcs.insert(c, n.clone());
        self.pending.push(c);
        n
    }

    fn private_func(&mut self, out: &mut String, c: CompId) -> Result<()> {
        self.next = 0;
        let (params, result) = self
            .m
            .signature(c)
            .expect("a verified module's callees are finished");
        let args: Vec<(String, Shape)> = params
            .iter()
            .enumerate()
            .map(|(i, s)| (format!("%arg{i}"), s.clone()))
            .collect();
        let decl: Vec<String> = args
            .iter()
            .map(|(n, s)| format!("{n}: {}", type_of(s)))
            .collect();
        let name = self.funcs[&c].clone();
        let _ = writeln!(
            out,
            "  func.func private @{name}({}) -> {} {{",
            decl.join(", "),
            type_of(&result)
        );
        let r = self.body(out, 2, c, &args)?;
        indent(out, 2);
        let _ = writeln!(out, "\"func.return\"({}) : ({}) -> ()", r.0, type_of(&r.1));
        out.push_str("  }\n");
        Ok(())
    }

    fn main(&mut self, out: &mut String) -> Result<()> {
        self.next = 0;
        let m = self.m;
        let c = m.entry_comp();
        let mut args = Vec::new();
        let mut decl = Vec::new();
        for (i, p) in c.param_instrs().enumerate() {
            let ins = &c.instrs[p as usize];
            let s = m.shapes.get(ins.shape).clone();
            let n = format!("%arg{i}");
            let mut d = format!("{n}: {}", type_of(&s));
            if let Some(sh) = &ins.sharding {
                let _ = write!(d, " {{mhlo.sharding = \"{sh}\"}}");
            }
            decl.push(d);
            args.push((n, s));
        }
        let mut text = String::new();
        let root = self.body(&mut text, 2, m.entry, &args)?;
        let root_instr = &c.instrs[c.root.expect("entry root").instr as usize];
        // A tuple result is returned as its elements (one level, as PJRT untuples
        // an HLO module's result).
        let rets = self.untuple(&mut text, 2, &root);
        let root_sharding = root_instr
            .sharding
            .as_deref()
            .filter(|_| !root_instr.kind.multi_result(root_instr.operands.len()));
        let rdecl: Vec<String> = rets
            .iter()
            .enumerate()
            .map(|(i, (_, s))| {
                let sh = match (root_sharding, &root.1) {
                    (Some(crate::ir::Sharding::Tuple(e)), Shape::Tuple(_)) => e.get(i).cloned(),
                    (Some(s), Shape::Tuple(_)) if !matches!(s, crate::ir::Sharding::Tuple(_)) => {
                        Some(s.clone())
                    }
                    (Some(s), _) => Some(s.clone()),
                    _ => None,
                };
                match sh {
                    Some(sh) => format!("{} {{mhlo.sharding = \"{sh}\"}}", type_of(s)),
                    None => type_of(s),
                }
            })
            .collect();
        let _ = writeln!(
            out,
            "  func.func public @main({}) -> ({}) {{",
            decl.join(", "),
            rdecl.join(", ")
        );
        out.push_str(&text);
        indent(out, 2);
        let names: Vec<&str> = rets.iter().map(|(n, _)| n.as_str()).collect();
        let tys: Vec<String> = rets.iter().map(|(_, s)| type_of(s)).collect();
        let _ = writeln!(
            out,
            "\"func.return\"({}) : ({}) -> ()",
            names.join(", "),
            tys.join(", ")
        );
        out.push_str("  }\n");
        Ok(())
    }
}

/// `bytes` as the inside of an MLIR string literal (printable ASCII as is, the
/// rest as `\XX`).
fn escape(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && b != b'"' && b != b'\\' {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\{b:02X}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_and_literals() {
        assert_eq!(
            type_of(&Shape::array(ElementType::F32, &[2, 3])),
            "tensor<2x3xf32>"
        );
        assert_eq!(type_of(&Shape::array(ElementType::U8, &[])), "tensor<ui8>");
        assert_eq!(
            type_of(&Shape::Tuple(vec![
                Shape::array(ElementType::Pred, &[1]),
                Shape::Token
            ])),
            "tuple<tensor<1xi1>, !stablehlo.token>"
        );
        assert_eq!(dense(ElementType::Pred, &[2], &[1, 0]), "[true, false]");
        assert_eq!(dense(ElementType::F32, &[0, 2], &[]), "");
        assert_eq!(
            dense(ElementType::F32, &[], &1f32.to_le_bytes()),
            "\"0x0000803F\""
        );
        assert_eq!(
            replica_groups(&[vec![0, 1, 2], vec![3]]),
            "dense<[[0, 1, 2], [3, -1, -1]]> : tensor<2x3xi64>"
        );
        assert_eq!(escape(b"a\"\x01"), "a\\22\\01");
    }
}
