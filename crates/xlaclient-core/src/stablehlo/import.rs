//! Importing StableHLO text into the IR: each operation of the syntax tree
//! ([`super::parse`]) is built through the crate's own ops (the same shape rules
//! and verifier as a program written here), functions are inlined at their calls,
//! and regions become the builder's bodies (loops, branches, reduce combiners,
//! comparators), whose uses of outer values are captured as usual.
//!
//! After each op, the result shapes the crate's rules give are compared with the
//! types the text declares: a difference is an error naming the op and its line,
//! as is an unknown op, an attribute the importer does not read where it changes
//! what is computed, or a value used before it is defined.
//!
//! What is read as something else, on purpose: `stablehlo.optimization_barrier`
//! and the sharding custom calls (`@Sharding`, `@SPMDFullToShardShape`,
//! `@SPMDShardToFullShape`) are the identity (on one device they compute
//! nothing); operand precisions of a convolution are not kept (the IR's
//! convolution has none); module, argument and result attributes (`mhlo.*`,
//! `jax.*`, `sdy.*`) are ignored.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::Location;

use super::parse::{self, Attr, GroupItem, Item, Module, Operation, Region, Type, ValueRef};
use crate::builder::{Builder, Computation, Op};
use crate::error::{Error, Result};
use crate::ir::OpKind;
use crate::ir::attrs::{
    BinaryOp, BitwiseOp, BitwiseUnary, Comparison, ConvAttrs, ConvDims, DotAttrs, DotDims,
    GatherDims, PadDim, Precision, RngAlgorithm, ScatterDims, SliceAttrs, UnaryOp, WindowDim,
};
use crate::shape::{ElementType, Shape};

/// How deeply function calls and regions may nest together (a recursive module
/// is an error, not a stack overflow; JAX's modules nest a few levels).
const MAX_CALL_DEPTH: usize = 24;

/// A StableHLO module brought into the IR: its entry function as a
/// [`Computation`] (argument checks, HLO text, fingerprint, compiling as for a
/// module built here), and its syntax tree, which
/// [`Builder::call_imported`] builds again inside another program.
#[derive(Clone, Debug)]
pub struct ImportedModule {
    module: Module,
    entry: String,
    params: Vec<Shape>,
    results: Vec<Shape>,
    computation: Computation,
}

impl ImportedModule {
    /// The entry function as a finished module: one result is the array itself,
    /// several are a tuple (as JAX's outputs).
    pub fn computation(&self) -> &Computation {
        &self.computation
    }

    /// The shapes of the entry function's arguments.
    pub fn parameter_shapes(&self) -> &[Shape] {
        &self.params
    }

    /// The shapes of its results.
    pub fn result_shapes(&self) -> &[Shape] {
        &self.results
    }

    /// The name of the entry function (`main`).
    pub fn entry(&self) -> &str {
        &self.entry
    }
}

/// Imports the StableHLO text `text` (a `module` of `func.func`s as JAX prints it)
/// into the IR. The entry is `@main`, else the module's first function.
///
/// ```
/// let text = r#"
/// func.func public @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
///   %0 = stablehlo.multiply %a, %b : tensor<2xf32>
///   %1 = stablehlo.tanh %0 : tensor<2xf32>
///   return %1 : tensor<2xf32>
/// }"#;
/// let m = xlaclient_core::stablehlo::import(text)?;
/// assert_eq!(m.parameter_shapes().len(), 2);
/// assert!(m.computation().to_hlo_text().contains("tanh"));
/// # Ok::<(), xlaclient_core::Error>(())
/// ```
pub fn import(text: &str) -> Result<ImportedModule> {
    let module = parse::parse(text).map_err(|e| Error::StableHlo {
        line: e.pos.line,
        col: e.pos.col,
        op: "syntax".into(),
        reason: e.message,
    })?;
    let entry = module
        .func("main")
        .or_else(|| module.funcs.first())
        .ok_or_else(|| Error::StableHlo {
            line: 1,
            col: 1,
            op: "module".into(),
            reason: "the module has no function".into(),
        })?;
    let at = |reason: String| Error::StableHlo {
        line: entry.pos.line,
        col: entry.pos.col,
        op: format!("func.func @{}", entry.name),
        reason,
    };
    let params = entry
        .args
        .iter()
        .map(|(_, t)| shape_of(t))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(at)?;
    let results = entry
        .results
        .iter()
        .map(shape_of)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(at)?;
    let b = Builder::new(module.name.as_deref().unwrap_or("stablehlo"));
    let args: Vec<Op> = params
        .iter()
        .zip(&entry.args)
        .enumerate()
        .map(|(i, (s, (n, _)))| b.parameter(i, s.clone(), n))
        .collect();
    let outs = Importer::new(&module).call(&b, &entry.name, &args, entry.pos, "module")?;
    let computation = if outs.len() == 1 {
        b.build(&outs[0])?
    } else {
        let refs: Vec<&Op> = outs.iter().collect();
        b.build_tuple(&refs)?
    };
    let entry = entry.name.clone();
    Ok(ImportedModule {
        module,
        entry,
        params,
        results,
        computation,
    })
}

impl Builder {
    /// Builds the imported module's entry function here, on `args` (one per
    /// argument, of the declared shapes), and returns its results: the module's
    /// ops become ordinary ops of this program, which can be differentiated,
    /// batched and composed with the rest.
    ///
    /// ```
    /// use xlaclient_core::{Builder, Shape};
    /// let m = xlaclient_core::stablehlo::import(
    ///     "func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
    ///        %0 = stablehlo.sine %x : tensor<3xf32>
    ///        return %0 : tensor<3xf32>
    ///      }",
    /// )?;
    /// let b = Builder::new("outer");
    /// let x = b.parameter(0, Shape::of::<f32>(&[3]), "x");
    /// let y = b.call_imported(&m, &[&x])?;
    /// let dx = b.grad(&y[0].sum(&[0], false), &x); // cos(x)
    /// let c = b.build(&dx)?;
    /// # Ok::<(), xlaclient_core::Error>(())
    /// ```
    pub fn call_imported(&self, module: &ImportedModule, args: &[&Op]) -> Result<Vec<Op>> {
        let args: Vec<Op> = args.iter().map(|a| (*a).clone()).collect();
        let f = module
            .module
            .func(&module.entry)
            .expect("the entry was found at import");
        Importer::new(&module.module).call(self, &module.entry, &args, f.pos, "call_imported")
    }
}

/// Values by name, in nested scopes (a region sees its enclosing ones; a
/// function sees only its own).
struct Scope<'p> {
    vars: HashMap<String, Vec<Op>>,
    parent: Option<&'p Scope<'p>>,
}

impl<'p> Scope<'p> {
    fn new(parent: Option<&'p Scope<'p>>) -> Self {
        Scope {
            vars: HashMap::new(),
            parent,
        }
    }

    fn get(&self, name: &str) -> Option<&Vec<Op>> {
        match self.vars.get(name) {
            Some(v) => Some(v),
            None => self.parent.and_then(|p| p.get(name)),
        }
    }
}

struct Importer<'m> {
    module: &'m Module,
    depth: Cell<usize>,
    /// The first error raised inside a body closure (which must return ops).
    pending: RefCell<Option<Error>>,
}

fn err_at(op: &Operation, reason: impl Into<String>) -> Error {
    Error::StableHlo {
        line: op.pos.line,
        col: op.pos.col,
        op: op.name.clone(),
        reason: reason.into(),
    }
}

type R<T> = std::result::Result<T, Error>;

/// A `case` branch as the builder's `switch` takes it.
type Branch<'a> = Box<dyn FnOnce(Vec<Op>) -> Vec<Op> + 'a>;

fn here() -> &'static Location<'static> {
    Location::caller()
}

impl<'m> Importer<'m> {
    fn new(module: &'m Module) -> Self {
        Importer {
            module,
            depth: Cell::new(0),
            pending: RefCell::new(None),
        }
    }

    /// Builds function `name` on `args` (inlined) and returns its results.
    fn call(
        &self,
        b: &Builder,
        name: &str,
        args: &[Op],
        pos: parse::Pos,
        what: &str,
    ) -> R<Vec<Op>> {
        let at = |reason: String| Error::StableHlo {
            line: pos.line,
            col: pos.col,
            op: what.to_string(),
            reason,
        };
        let f = self
            .module
            .func(name)
            .ok_or_else(|| at(format!("no function `@{name}` in the module")))?;
        if f.args.len() != args.len() {
            return Err(at(format!(
                "`@{name}` takes {} arguments, given {}",
                f.args.len(),
                args.len()
            )));
        }
        for (i, ((n, t), a)) in f.args.iter().zip(args).enumerate() {
            let want = shape_of(t).map_err(&at)?;
            let got = a.shape()?;
            if got != want {
                return Err(at(format!(
                    "argument {i} (`%{n}`) of `@{name}` is declared {t}, given {got}"
                )));
            }
        }
        if self.depth.get() >= MAX_CALL_DEPTH {
            return Err(at(format!(
                "calls nested more than {MAX_CALL_DEPTH} deep (a recursive module?)"
            )));
        }
        self.depth.set(self.depth.get() + 1);
        let mut scope = Scope::new(None);
        for ((n, _), a) in f.args.iter().zip(args) {
            scope.vars.insert(n.clone(), vec![a.clone()]);
        }
        let r = self.block(b, &f.body.ops, &mut scope);
        self.depth.set(self.depth.get() - 1);
        let outs = r?;
        if outs.len() != f.results.len() {
            return Err(at(format!(
                "`@{name}` returns {} values, declared {}",
                outs.len(),
                f.results.len()
            )));
        }
        Ok(outs)
    }

    /// Builds the ops of a block; returns the values of its terminator.
    fn block(&self, b: &Builder, ops: &[Operation], scope: &mut Scope<'_>) -> R<Vec<Op>> {
        for op in ops {
            if matches!(
                op.name.as_str(),
                "return" | "func.return" | "stablehlo.return"
            ) {
                return self.operands(op, scope);
            }
            let outs = self.op(b, op, scope)?;
            if let Some(e) = self.pending.borrow_mut().take() {
                return Err(e);
            }
            for o in &outs {
                if o.is_poisoned() {
                    // The shape rule's message, without the location of the
                    // importer's own line: the MLIR line is the one that matters.
                    let reason = match o.shape().expect_err("a failed op") {
                        Error::Shape(mut e) => {
                            e.location = None;
                            e.to_string()
                        }
                        e => e.to_string(),
                    };
                    return Err(err_at(op, reason));
                }
            }
            let declared: usize = op.results.iter().map(|(_, k)| *k).sum();
            if declared != outs.len() {
                return Err(err_at(
                    op,
                    format!("has {} results, the text names {declared}", outs.len()),
                ));
            }
            if op.result_types.len() == outs.len() {
                for (i, (o, t)) in outs.iter().zip(&op.result_types).enumerate() {
                    let want = shape_of(t).map_err(|r| err_at(op, r))?;
                    let got = o.shape()?;
                    if got != want {
                        return Err(err_at(
                            op,
                            format!(
                                "result {i} is {got} by the crate's shape rule, the text declares {t}"
                            ),
                        ));
                    }
                }
            }
            let mut it = outs.into_iter();
            for (n, k) in &op.results {
                scope.vars.insert(n.clone(), it.by_ref().take(*k).collect());
            }
        }
        Err(Error::StableHlo {
            line: ops.last().map_or(0, |o| o.pos.line),
            col: ops.last().map_or(0, |o| o.pos.col),
            op: "region".into(),
            reason: "a block without a `return`".into(),
        })
    }

    /// Builds a region on `args` (named `names`) inside the body whose builder
    /// the args belong to; errors are kept in `pending` and poisoned ops returned.
    // The op and scope are for errors and outer values; the rest says what to build.
    #[allow(clippy::too_many_arguments)]
    fn region(
        &self,
        b: &Builder,
        op: &Operation,
        region: &Region,
        names: &[String],
        args: &[Op],
        want: usize,
        parent: &Scope<'_>,
    ) -> Vec<Op> {
        let body_b = args.first().map_or_else(|| b.clone(), |a| a.builder());
        let r = (|| {
            if self.depth.get() >= MAX_CALL_DEPTH {
                return Err(err_at(
                    op,
                    format!("regions and calls nested more than {MAX_CALL_DEPTH} deep"),
                ));
            }
            if names.len() != args.len() {
                return Err(err_at(
                    op,
                    format!(
                        "a region has {} arguments, the op passes {}",
                        names.len(),
                        args.len()
                    ),
                ));
            }
            let mut scope = Scope::new(Some(parent));
            for (n, a) in names.iter().zip(args) {
                scope.vars.insert(n.clone(), vec![a.clone()]);
            }
            self.depth.set(self.depth.get() + 1);
            let outs = self.block(&body_b, &region.ops, &mut scope);
            self.depth.set(self.depth.get() - 1);
            let outs = outs?;
            if outs.len() != want {
                return Err(err_at(
                    op,
                    format!("a region returns {} values, {want} expected", outs.len()),
                ));
            }
            Ok(outs)
        })();
        match r {
            Ok(v) => v,
            Err(e) => {
                let msg = e.to_string();
                self.pending.borrow_mut().get_or_insert(e);
                vec![body_b.error(msg); want.max(1)]
            }
        }
    }

    fn lookup(&self, op: &Operation, scope: &Scope<'_>, v: &ValueRef) -> R<Op> {
        let vals = scope.get(&v.name).ok_or_else(|| Error::StableHlo {
            line: v.pos.line,
            col: v.pos.col,
            op: op.name.clone(),
            reason: format!("`%{}` is not defined here", v.name),
        })?;
        let i = match v.index {
            Some(i) => i as usize,
            None if vals.len() == 1 => 0,
            None => {
                return Err(err_at(
                    op,
                    format!(
                        "`%{}` names {} values: use `%{}#i`",
                        v.name,
                        vals.len(),
                        v.name
                    ),
                ));
            }
        };
        vals.get(i).cloned().ok_or_else(|| {
            err_at(
                op,
                format!("`%{}` has {} values, no #{i}", v.name, vals.len()),
            )
        })
    }

    /// The operands: the generic form's, else the pretty form's `%values`.
    fn operands(&self, op: &Operation, scope: &Scope<'_>) -> R<Vec<Op>> {
        let refs: Vec<&ValueRef> = if !op.operands.is_empty() {
            op.operands.iter().collect()
        } else if op.items.iter().any(|i| matches!(i, Item::Value(_))) {
            op.items
                .iter()
                .filter_map(|i| match i {
                    Item::Value(v) => Some(v),
                    _ => None,
                })
                .collect()
        } else {
            // `stablehlo.convolution(%a, %b) …`: the operands in parentheses.
            op.items
                .iter()
                .filter_map(|i| match i {
                    Item::Group(g) => Some(g),
                    _ => None,
                })
                .flatten()
                .filter_map(|g| match g {
                    GroupItem::Value(v) => Some(v),
                    _ => None,
                })
                .collect()
        };
        refs.into_iter()
            .map(|v| self.lookup(op, scope, v))
            .collect()
    }

    /// The values of the op's first parenthesised group (`func.call @f(%a, %b)`,
    /// `stablehlo.custom_call @t(%a)`), each a `%value` (else `what` is the
    /// error), or [`operands`](Self::operands) when it has none.
    fn group_operands(&self, op: &Operation, scope: &Scope<'_>, what: &str) -> R<Vec<Op>> {
        match op.items.iter().find_map(|i| match i {
            Item::Group(g) => Some(g),
            _ => None,
        }) {
            Some(g) => g
                .iter()
                .map(|gi| match gi {
                    GroupItem::Value(v) => self.lookup(op, scope, v),
                    _ => Err(err_at(op, what)),
                })
                .collect(),
            None => self.operands(op, scope),
        }
    }

    fn n_operands(&self, op: &Operation, scope: &Scope<'_>, n: usize) -> R<Vec<Op>> {
        let v = self.operands(op, scope)?;
        if v.len() != n {
            return Err(err_at(op, format!("takes {n} operands, given {}", v.len())));
        }
        Ok(v)
    }

    fn op(&self, b: &Builder, op: &Operation, scope: &mut Scope<'_>) -> R<Vec<Op>> {
        check_attrs(op)?;
        let loc = here();
        let name = op.name.as_str();
        let short = name.strip_prefix("stablehlo.").unwrap_or(name);
        let one = |o: Op| Ok(vec![o]);
        let result_shape = |i: usize| -> R<Shape> {
            let t = op
                .result_types
                .get(i)
                .ok_or_else(|| err_at(op, format!("result {i} has no declared type")))?;
            shape_of(t).map_err(|r| err_at(op, r))
        };
        if name.starts_with("stablehlo.") {
            if let Some(kind) = elementwise(short) {
                let xs = self.operands(op, scope)?;
                let refs: Vec<&Op> = xs.iter().collect();
                return one(b.emit(kind, &refs, None, loc));
            }
        }
        match name {
            "func.call" | "call" => {
                let callee = op
                    .items
                    .iter()
                    .find_map(|i| match i {
                        Item::Sym(s) => Some(s.clone()),
                        _ => None,
                    })
                    .or_else(|| match op.attr("callee") {
                        Some(Attr::Sym(s)) => Some(s.clone()),
                        _ => None,
                    })
                    .ok_or_else(|| err_at(op, "no callee `@name`"))?;
                let args = self.group_operands(op, scope, "a call's arguments are `%values`")?;
                return self.call(b, &callee, &args, op.pos, name);
            }
            "chlo.top_k" => {
                let (x, k) = group_value_and_key(self, op, scope, "k")?;
                let (v, i) = x.top_k(k);
                return Ok(vec![v, i]);
            }
            "chlo.erf_inv" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                if x.element_type()? != ElementType::F32 {
                    return Err(err_at(op, "is imported for f32 only"));
                }
                return one(crate::ops::sampling::erf_inv_f32(&x, loc));
            }
            "chlo.erf" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                return one(b.emit(OpKind::Unary(UnaryOp::Erf), &[&x], None, loc));
            }
            _ => {}
        }
        if !name.starts_with("stablehlo.") {
            return Err(err_at(op, "is not an op the importer knows"));
        }
        match short {
            "constant" => {
                let shape = result_shape(0)?;
                let body = op
                    .items
                    .iter()
                    .find_map(|i| match i {
                        Item::Attr(Attr::Dense(d, _)) => Some(d),
                        _ => None,
                    })
                    .or_else(|| match op.attr("value") {
                        Some(Attr::Dense(d, _)) => Some(d),
                        _ => None,
                    })
                    .ok_or_else(|| err_at(op, "expects a `dense<…>` value"))?;
                one(constant(b, &shape, body).map_err(|r| err_at(op, r))?)
            }
            "compare" => {
                let xs = self.n_operands(op, scope, 2)?;
                let mut dir = None;
                let mut ty = None;
                for i in &op.items {
                    if let Item::Ident(s) = i {
                        if dir.is_none() {
                            dir = Some(s.clone());
                        } else {
                            ty = Some(s.clone());
                        }
                    }
                }
                let dir = dir
                    .or_else(|| op.attr("comparison_direction").and_then(enum_of))
                    .ok_or_else(|| err_at(op, "no comparison direction"))?;
                let ty = ty.or_else(|| op.attr("compare_type").and_then(enum_of));
                let d = match dir.as_str() {
                    "EQ" => Comparison::Eq,
                    "NE" => Comparison::Ne,
                    "LT" => Comparison::Lt,
                    "LE" => Comparison::Le,
                    "GT" => Comparison::Gt,
                    "GE" => Comparison::Ge,
                    d => return Err(err_at(op, format!("unknown comparison direction `{d}`"))),
                };
                let (l, r) = if ty.as_deref() == Some("TOTALORDER") {
                    (total_order_key(&xs[0], loc)?, total_order_key(&xs[1], loc)?)
                } else {
                    (xs[0].clone(), xs[1].clone())
                };
                one(b.emit(OpKind::Compare(d), &[&l, &r], None, loc))
            }
            "select" => {
                let xs = self.n_operands(op, scope, 3)?;
                one(b.emit(OpKind::Select, &[&xs[0], &xs[1], &xs[2]], None, loc))
            }
            "clamp" => {
                let xs = self.n_operands(op, scope, 3)?;
                one(b.emit(OpKind::Clamp, &[&xs[0], &xs[1], &xs[2]], None, loc))
            }
            "broadcast_in_dim" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let dims = ints_of(op, &["dims", "broadcast_dimensions"])?;
                // StableHLO stretches size-1 operand axes (HLO's broadcast does
                // not): the builder's broadcast_in_dim reshapes them away first.
                let s = result_shape(0)?;
                one(x.broadcast_in_dim(s.dims(), &dims))
            }
            "reshape" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                one(b.emit(OpKind::Reshape, &[&x], Some(result_shape(0)?), loc))
            }
            "convert" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let ty = elem_of(&result_shape(0)?, op)?;
                one(x.convert(ty))
            }
            "bitcast_convert" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let ty = elem_of(&result_shape(0)?, op)?;
                one(b.emit(OpKind::BitcastConvert, &[&x], Some(Shape::scalar(ty)), loc))
            }
            "transpose" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let perm = ints_of(op, &["dims", "permutation"])?;
                one(b.emit(OpKind::Transpose { perm: perm.into() }, &[&x], None, loc))
            }
            "reverse" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let axes = ints_of(op, &["dims", "dimensions"])?;
                one(b.emit(OpKind::Reverse { axes: axes.into() }, &[&x], None, loc))
            }
            "iota" => {
                let s = result_shape(0)?;
                let d = int_of(op, &["dim", "iota_dimension"])?;
                one(b.emit(OpKind::Iota { dimension: d }, &[], Some(s), loc))
            }
            "slice" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let attrs = match op.items.iter().find_map(|i| match i {
                    Item::Attr(Attr::List(l)) => Some(l),
                    _ => None,
                }) {
                    Some(ranges) => {
                        let mut a = SliceAttrs {
                            start: vec![],
                            limit: vec![],
                            strides: vec![],
                        };
                        for r in ranges {
                            match r {
                                Attr::Range(v) if v.len() == 2 || v.len() == 3 => {
                                    a.start.push(v[0]);
                                    a.limit.push(v[1]);
                                    a.strides.push(v.get(2).copied().unwrap_or(1));
                                }
                                _ => return Err(err_at(op, "a slice range is `lo:hi[:step]`")),
                            }
                        }
                        a
                    }
                    None => SliceAttrs {
                        start: ints_of(op, &["start_indices"])?,
                        limit: ints_of(op, &["limit_indices"])?,
                        strides: ints_of(op, &["strides"])?,
                    },
                };
                one(b.emit(OpKind::Slice(Box::new(attrs)), &[&x], None, loc))
            }
            "dynamic_slice" => {
                let xs = self.operands(op, scope)?;
                let sizes = ints_of(op, &["sizes", "slice_sizes"])?;
                let refs: Vec<&Op> = xs.iter().collect();
                one(b.emit(
                    OpKind::DynamicSlice {
                        sizes: sizes.into(),
                    },
                    &refs,
                    None,
                    loc,
                ))
            }
            "dynamic_update_slice" => {
                let xs = self.operands(op, scope)?;
                let refs: Vec<&Op> = xs.iter().collect();
                one(b.emit(OpKind::DynamicUpdateSlice, &refs, None, loc))
            }
            "concatenate" => {
                let xs = self.operands(op, scope)?;
                let d = int_of(op, &["dim", "dimension"])?;
                let refs: Vec<&Op> = xs.iter().collect();
                one(b.emit(OpKind::Concatenate { dimension: d }, &refs, None, loc))
            }
            "pad" => {
                let xs = self.n_operands(op, scope, 2)?;
                let lo = ints_of(op, &["low", "edge_padding_low"])?;
                let hi = ints_of(op, &["high", "edge_padding_high"])?;
                let interior = ints_of(op, &["interior", "interior_padding"])?;
                if lo.len() != hi.len() || lo.len() != interior.len() {
                    return Err(err_at(op, "low, high and interior differ in length"));
                }
                let cfg: Vec<PadDim> = (0..lo.len())
                    .map(|i| PadDim {
                        lo: lo[i],
                        hi: hi[i],
                        interior: interior[i],
                    })
                    .collect();
                one(b.emit(OpKind::Pad(cfg.into()), &[&xs[0], &xs[1]], None, loc))
            }
            "dot_general" | "dot" => {
                let xs = self.n_operands(op, scope, 2)?;
                let dims = if short == "dot" {
                    DotDims::contract(xs[0].rank()? as i64 - 1, 0)
                } else {
                    dot_dims(op)?
                };
                let precision = precisions(op)?;
                let ty = elem_of(&result_shape(0)?, op)?;
                one(b.emit(
                    OpKind::Dot(Box::new(DotAttrs { dims, precision })),
                    &[&xs[0], &xs[1]],
                    Some(Shape::scalar(ty)),
                    loc,
                ))
            }
            "convolution" => {
                let xs = self.n_operands(op, scope, 2)?;
                let attrs = conv_attrs(op, xs[0].rank()?, &xs[1].dims()?)?;
                one(b.emit(
                    OpKind::Convolution(Box::new(attrs)),
                    &[&xs[0], &xs[1]],
                    None,
                    loc,
                ))
            }
            "gather" => {
                let xs = self.n_operands(op, scope, 2)?;
                let d = hash_dict(op, "dimension_numbers")?;
                let dims = GatherDims {
                    offset_dims: dict_ints(d, "offset_dims"),
                    collapsed_slice_dims: dict_ints(d, "collapsed_slice_dims"),
                    start_index_map: dict_ints(d, "start_index_map"),
                    index_vector_dim: dict_int(d, "index_vector_dim"),
                    operand_batching_dims: dict_ints(d, "operand_batching_dims"),
                    start_indices_batching_dims: dict_ints(d, "start_indices_batching_dims"),
                };
                let sizes = ints_of(op, &["slice_sizes"])?;
                let sorted = bool_of(op, "indices_are_sorted");
                one(xs[0].gather(&xs[1], &dims, &sizes, sorted))
            }
            "scatter" => {
                let xs = self.operands(op, scope)?;
                if xs.len() < 3 || xs.len() % 2 == 0 {
                    return Err(err_at(op, "takes n inputs, the indices and n updates"));
                }
                let n = (xs.len() - 1) / 2;
                let d = hash_dict(op, "scatter_dimension_numbers")?;
                let dims = ScatterDims {
                    update_window_dims: dict_ints(d, "update_window_dims"),
                    inserted_window_dims: dict_ints(d, "inserted_window_dims"),
                    scatter_dims_to_operand_dims: dict_ints(d, "scatter_dims_to_operand_dims"),
                    index_vector_dim: dict_int(d, "index_vector_dim"),
                    input_batching_dims: dict_ints(d, "input_batching_dims"),
                    scatter_indices_batching_dims: dict_ints(d, "scatter_indices_batching_dims"),
                };
                let region = single_region(op)?;
                let inputs: Vec<&Op> = xs[..n].iter().collect();
                let updates: Vec<&Op> = xs[n + 1..].iter().collect();
                let names = arg_names(region);
                Ok(b.scatter(
                    &inputs,
                    &xs[n],
                    &updates,
                    &dims,
                    bool_of(op, "indices_are_sorted"),
                    bool_of(op, "unique_indices"),
                    |olds, news| {
                        let args: Vec<Op> = olds.iter().chain(news).cloned().collect();
                        self.region(b, op, region, &names, &args, n, scope)
                    },
                ))
            }
            "reduce" => self.reduce(b, op, scope),
            "reduce_window" => {
                let xs = self.operands(op, scope)?;
                if xs.is_empty() || xs.len() % 2 != 0 {
                    return Err(err_at(op, "takes n inputs then n initial values"));
                }
                let n = xs.len() / 2;
                let rank = xs[0].rank()?;
                let size = ints_of(op, &["window_dimensions"])?;
                let get = |k: &str, d: i64| -> R<Vec<i64>> {
                    match op.attr(k) {
                        Some(_) => ints_of(op, &[k]),
                        None => Ok(vec![d; rank]),
                    }
                };
                let strides = get("window_strides", 1)?;
                let based = get("base_dilations", 1)?;
                let wind = get("window_dilations", 1)?;
                let pad = match op.attr("padding") {
                    Some(a) => pairs(a).ok_or_else(|| err_at(op, "padding is [[lo, hi], …]"))?,
                    None => vec![(0, 0); rank],
                };
                if [
                    size.len(),
                    strides.len(),
                    based.len(),
                    wind.len(),
                    pad.len(),
                ]
                .iter()
                .any(|l| *l != rank)
                {
                    return Err(err_at(
                        op,
                        format!("window attributes must have {rank} entries"),
                    ));
                }
                let window: Vec<WindowDim> = (0..rank)
                    .map(|i| WindowDim {
                        size: size[i],
                        stride: strides[i],
                        padding_low: pad[i].0,
                        padding_high: pad[i].1,
                        window_dilation: wind[i],
                        base_dilation: based[i],
                    })
                    .collect();
                let region = single_region(op)?;
                let names = arg_names(region);
                let inputs: Vec<&Op> = xs[..n].iter().collect();
                let inits: Vec<&Op> = xs[n..].iter().collect();
                Ok(b.reduce_window_many(&inputs, &inits, &window, |acc, x| {
                    let args: Vec<Op> = acc.iter().chain(x).cloned().collect();
                    self.region(b, op, region, &names, &args, n, scope)
                }))
            }
            "sort" => {
                let xs = self.operands(op, scope)?;
                let dim = match op.attr("dimension") {
                    Some(_) => int_of(op, &["dimension"])?,
                    None => -1,
                };
                let stable = bool_of(op, "is_stable");
                let region = single_region(op)?;
                let names = arg_names(region);
                let refs: Vec<&Op> = xs.iter().collect();
                Ok(b.sort(&refs, dim, stable, |l, r| {
                    let args: Vec<Op> = l
                        .iter()
                        .zip(r)
                        .flat_map(|(a, c)| [a.clone(), c.clone()])
                        .collect();
                    self.region(b, op, region, &names, &args, 1, scope)
                        .remove(0)
                }))
            }
            "while" => {
                let (init, names_c, names_b) = if op.operands.is_empty() {
                    let mut init = Vec::new();
                    let mut names = Vec::new();
                    for i in &op.items {
                        if let Item::Group(g) = i {
                            for gi in g {
                                match gi {
                                    GroupItem::Bind(n, v) => {
                                        names.push(n.clone());
                                        init.push(self.lookup(op, scope, v)?);
                                    }
                                    _ => return Err(err_at(op, "carried values are `%x = %init`")),
                                }
                            }
                        }
                    }
                    (init, names.clone(), names)
                } else {
                    let init = self.operands(op, scope)?;
                    let [c, d] = two_regions(op)?;
                    (init, arg_names(c), arg_names(d))
                };
                let [cr, br] = two_regions(op)?;
                let n = init.len();
                let scope_ref: &Scope<'_> = scope;
                let out = b.while_loop(
                    init,
                    |c: &Vec<Op>| self.region(b, op, cr, &names_c, c, 1, scope_ref).remove(0),
                    |c: Vec<Op>| self.region(b, op, br, &names_b, &c, n, scope_ref),
                );
                Ok(out)
            }
            "case" | "if" => {
                let x = self.n_operands(op, scope, 1)?.remove(0);
                let nb = op.regions.len();
                if nb == 0 {
                    return Err(err_at(op, "has no branches"));
                }
                let want = op.result_types.len();
                let index = if short == "case" {
                    // StableHLO runs the last branch for an index out of range
                    // (negative too); the builder's switch clamps as JAX does, so
                    // an out-of-range index is made the last one first.
                    let last =
                        b.scalar_of(ElementType::U32, crate::Scalar::Int(nb as i64 - 1), loc);
                    let u = x.convert(ElementType::U32);
                    let m = b.emit(OpKind::Binary(BinaryOp::Minimum), &[&u, &last], None, loc);
                    m.convert(ElementType::S32)
                } else {
                    x
                };
                let scope_ref: &Scope<'_> = scope;
                let mut branches: Vec<Branch<'_>> = Vec::new();
                // Each branch gets the index as a parameter, only so that its ops
                // are built with the branch's own builder (inside the branch, run
                // only when taken); outer values they use are captured.
                for r in &op.regions {
                    branches.push(Box::new(move |x: Vec<Op>| {
                        let inner = x.first().map_or_else(|| b.clone(), Op::builder);
                        self.region(&inner, op, r, &[], &[], want, scope_ref)
                    }));
                }
                let first = branches.remove(0);
                let out: Vec<Op> = b.switch(&index, vec![index.clone()], first, branches);
                Ok(out)
            }
            "rng_bit_generator" => {
                let s = self.n_operands(op, scope, 1)?.remove(0);
                let alg = op
                    .attr("algorithm")
                    .or_else(|| op.attr("rng_algorithm"))
                    .and_then(enum_of)
                    .unwrap_or_else(|| "DEFAULT".into());
                let alg = match alg.as_str() {
                    "DEFAULT" => RngAlgorithm::Default,
                    "THREE_FRY" => RngAlgorithm::ThreeFry,
                    "PHILOX" => RngAlgorithm::Philox,
                    a => return Err(err_at(op, format!("unknown algorithm `{a}`"))),
                };
                let bits = result_shape(1)?;
                let (st, v) = s.rng_bit_generator(alg, elem_of(&bits, op)?, bits.dims());
                Ok(vec![st, v])
            }
            "optimization_barrier" => self.operands(op, scope),
            "custom_call" => {
                let target = op
                    .items
                    .iter()
                    .find_map(|i| match i {
                        Item::Sym(s) => Some(s.clone()),
                        _ => None,
                    })
                    .or_else(|| match op.attr("call_target_name") {
                        Some(Attr::Str(s)) => Some(s.clone()),
                        _ => None,
                    })
                    .unwrap_or_default();
                let xs = self.group_operands(op, scope, "operands are `%values`")?;
                match target.as_str() {
                    "Sharding" | "SPMDFullToShardShape" | "SPMDShardToFullShape"
                        if xs.len() == 1 =>
                    {
                        Ok(xs)
                    }
                    t => Err(err_at(
                        op,
                        format!("custom call target `{t}` is not one the importer runs"),
                    )),
                }
            }
            _ => Err(err_at(op, "is not an op the importer knows")),
        }
    }

    fn reduce(&self, b: &Builder, op: &Operation, scope: &Scope<'_>) -> R<Vec<Op>> {
        let (inputs, inits) = if op.operands.is_empty() {
            let mut xs = Vec::new();
            let mut inits = Vec::new();
            for i in &op.items {
                if let Item::Group(g) = i {
                    for gi in g {
                        match gi {
                            GroupItem::Init(x, c) => {
                                xs.push(self.lookup(op, scope, x)?);
                                inits.push(self.lookup(op, scope, c)?);
                            }
                            _ => return Err(err_at(op, "inputs are `(%x init: %c)`")),
                        }
                    }
                }
            }
            (xs, inits)
        } else {
            let mut xs = self.operands(op, scope)?;
            if xs.len() % 2 != 0 {
                return Err(err_at(op, "takes n inputs then n initial values"));
            }
            let inits = xs.split_off(xs.len() / 2);
            (xs, inits)
        };
        let n = inputs.len();
        if n == 0 {
            return Err(err_at(op, "has no inputs"));
        }
        let axes = ints_of(op, &["dimensions"])?;
        let xr: Vec<&Op> = inputs.iter().collect();
        let ir: Vec<&Op> = inits.iter().collect();
        // `applies stablehlo.add`: the combiner is that op.
        let applied = op
            .items
            .iter()
            .position(|i| i == &Item::Ident("applies".into()));
        if let Some(p) = applied {
            let kind = match op.items.get(p + 1) {
                Some(Item::Ident(f)) => f
                    .strip_prefix("stablehlo.")
                    .and_then(elementwise)
                    .ok_or_else(|| err_at(op, format!("cannot apply `{f}`")))?,
                _ => return Err(err_at(op, "`applies` names no op")),
            };
            let loc = here();
            return Ok(b.reduce_many(&xr, &ir, &axes, |acc, x| {
                acc.iter()
                    .zip(x)
                    .map(|(a, e)| a.builder().emit(kind.clone(), &[a, e], None, loc))
                    .collect()
            }));
        }
        let region = single_region(op)?;
        let names: Vec<String> = if !op.reducer_args.is_empty() {
            // `reducer(%a0: t, %b0: t) (%a1: t, %b1: t)`: accumulators then elements.
            let firsts = op.reducer_args.iter().filter_map(|p| p.first());
            let seconds = op.reducer_args.iter().filter_map(|p| p.get(1));
            firsts.chain(seconds).map(|(n, _)| n.clone()).collect()
        } else {
            arg_names(region)
        };
        Ok(b.reduce_many(&xr, &ir, &axes, |acc, x| {
            let args: Vec<Op> = acc.iter().chain(x).cloned().collect();
            self.region(b, op, region, &names, &args, n, scope)
        }))
    }
}

/// Refuses an attribute the importer does not read for the op (it may change what
/// is computed); attributes of the `mhlo.`, `jax.`, `sdy.` and `xla.` namespaces
/// (shardings, frontend attributes) say nothing about what is computed and are
/// ignored.
fn check_attrs(op: &Operation) -> R<()> {
    let short = op.name.strip_prefix("stablehlo.").unwrap_or(&op.name);
    let known: &[&str] = match short {
        "constant" => &["value"],
        "compare" => &["comparison_direction", "compare_type"],
        "broadcast_in_dim" => &["dims", "broadcast_dimensions"],
        "transpose" => &["dims", "permutation"],
        "reverse" => &["dims", "dimensions"],
        "iota" => &["dim", "iota_dimension"],
        "slice" => &["start_indices", "limit_indices", "strides"],
        "dynamic_slice" => &["sizes", "slice_sizes"],
        "concatenate" => &["dim", "dimension"],
        "pad" => &[
            "low",
            "high",
            "interior",
            "edge_padding_low",
            "edge_padding_high",
            "interior_padding",
        ],
        "dot_general" => &[
            "batching_dims",
            "contracting_dims",
            "precision",
            "precision_config",
            "dot_dimension_numbers",
        ],
        "dot" => &["precision", "precision_config"],
        "convolution" => &[
            "dim_numbers",
            "window",
            "dimension_numbers",
            "window_strides",
            "padding",
            "lhs_dilation",
            "rhs_dilation",
            "window_reversal",
            "feature_group_count",
            "batch_group_count",
            "precision_config",
        ],
        "gather" => &["dimension_numbers", "slice_sizes", "indices_are_sorted"],
        "scatter" => &[
            "scatter_dimension_numbers",
            "indices_are_sorted",
            "unique_indices",
        ],
        "reduce" => &["dimensions"],
        "reduce_window" => &[
            "window_dimensions",
            "window_strides",
            "base_dilations",
            "window_dilations",
            "padding",
        ],
        "sort" => &["dimension", "is_stable"],
        "rng_bit_generator" => &["algorithm", "rng_algorithm"],
        "custom_call" => &[
            "call_target_name",
            "api_version",
            "backend_config",
            "has_side_effect",
        ],
        "func.call" | "call" => &["callee"],
        "chlo.top_k" => &["k"],
        _ => &[],
    };
    let keys = op
        .attrs
        .iter()
        .map(|(k, _)| k)
        .chain(op.items.iter().filter_map(|i| match i {
            Item::KeyVal(k, _) => Some(k),
            _ => None,
        }));
    for k in keys {
        let ignored = ["mhlo.", "jax.", "sdy.", "xla."]
            .iter()
            .any(|p| k.starts_with(p));
        if !ignored && !known.contains(&k.as_str()) {
            return Err(err_at(
                op,
                format!("attribute `{k}` is not one the importer reads for this op"),
            ));
        }
    }
    Ok(())
}

fn group_value_and_key(
    im: &Importer<'_>,
    op: &Operation,
    scope: &Scope<'_>,
    key: &str,
) -> R<(Op, i64)> {
    let mut x = None;
    let mut k = None;
    for i in &op.items {
        if let Item::Group(g) = i {
            for gi in g {
                match gi {
                    GroupItem::Value(v) => x = Some(im.lookup(op, scope, v)?),
                    GroupItem::KeyVal(kk, Attr::Int(v)) if kk == key => k = Some(*v),
                    _ => {}
                }
            }
        }
    }
    let k = k
        .or_else(|| match op.attr(key) {
            Some(Attr::Int(v)) => Some(*v),
            _ => None,
        })
        .ok_or_else(|| err_at(op, format!("no `{key}`")))?;
    let x = match x {
        Some(x) => x,
        None => im.n_operands(op, scope, 1)?.remove(0),
    };
    Ok((x, k))
}

fn single_region(op: &Operation) -> R<&Region> {
    match op.regions.as_slice() {
        [r] => Ok(r),
        rs => Err(err_at(op, format!("expects one region, has {}", rs.len()))),
    }
}

fn two_regions(op: &Operation) -> R<[&Region; 2]> {
    match op.regions.as_slice() {
        [a, b] => Ok([a, b]),
        rs => Err(err_at(
            op,
            format!("expects two regions (cond, body), has {}", rs.len()),
        )),
    }
}

fn arg_names(r: &Region) -> Vec<String> {
    r.args.iter().map(|(n, _)| n.clone()).collect()
}

/// The element-wise op `name` (without the `stablehlo.` prefix).
fn elementwise(name: &str) -> Option<OpKind> {
    use BinaryOp as B;
    use UnaryOp as U;
    Some(match name {
        "abs" => OpKind::Unary(U::Abs),
        "cbrt" => OpKind::Unary(U::Cbrt),
        "ceil" => OpKind::Unary(U::Ceil),
        "cosine" => OpKind::Unary(U::Cosine),
        "exponential" => OpKind::Unary(U::Exponential),
        "exponential_minus_one" => OpKind::Unary(U::ExponentialMinusOne),
        "floor" => OpKind::Unary(U::Floor),
        "log" => OpKind::Unary(U::Log),
        "log_plus_one" => OpKind::Unary(U::LogPlusOne),
        "logistic" => OpKind::Unary(U::Logistic),
        "negate" => OpKind::Unary(U::Negate),
        "round_nearest_afz" => OpKind::Unary(U::RoundNearestAfz),
        "round_nearest_even" => OpKind::Unary(U::RoundNearestEven),
        "rsqrt" => OpKind::Unary(U::Rsqrt),
        "sign" => OpKind::Unary(U::Sign),
        "sine" => OpKind::Unary(U::Sine),
        "sqrt" => OpKind::Unary(U::Sqrt),
        "tan" => OpKind::Unary(U::Tan),
        "tanh" => OpKind::Unary(U::Tanh),
        "is_finite" => OpKind::Unary(U::IsFinite),
        "real" => OpKind::Unary(U::Real),
        "imag" => OpKind::Unary(U::Imag),
        "not" => OpKind::BitwiseUnary(BitwiseUnary::Not),
        "popcnt" => OpKind::BitwiseUnary(BitwiseUnary::Popcnt),
        "count_leading_zeros" => OpKind::BitwiseUnary(BitwiseUnary::CountLeadingZeros),
        "add" => OpKind::Binary(B::Add),
        "subtract" => OpKind::Binary(B::Subtract),
        "multiply" => OpKind::Binary(B::Multiply),
        "divide" => OpKind::Binary(B::Divide),
        "maximum" => OpKind::Binary(B::Maximum),
        "minimum" => OpKind::Binary(B::Minimum),
        "power" => OpKind::Binary(B::Power),
        "remainder" => OpKind::Binary(B::Remainder),
        "atan2" => OpKind::Binary(B::Atan2),
        "complex" => OpKind::Binary(B::Complex),
        "and" => OpKind::Bitwise(BitwiseOp::And),
        "or" => OpKind::Bitwise(BitwiseOp::Or),
        "xor" => OpKind::Bitwise(BitwiseOp::Xor),
        "shift_left" => OpKind::Bitwise(BitwiseOp::ShiftLeft),
        "shift_right_arithmetic" => OpKind::Bitwise(BitwiseOp::ShiftRightArithmetic),
        "shift_right_logical" => OpKind::Bitwise(BitwiseOp::ShiftRightLogical),
        _ => return None,
    })
}

/// The key under which floats compare in StableHLO's `TOTALORDER`
/// (-NaN < -inf < … < -0 < +0 < … < inf < NaN): the bits as a signed integer,
/// with the magnitude bits flipped for negative values. Integers are their own key.
fn total_order_key(x: &Op, loc: &'static Location<'static>) -> R<Op> {
    let ty = x.element_type()?;
    let int = match ty {
        ElementType::F32 => ElementType::S32,
        ElementType::F64 => ElementType::S64,
        ElementType::F16 | ElementType::Bf16 => ElementType::S16,
        _ => return Ok(x.clone()),
    };
    let b = x.builder();
    let bits = 8 * ty.byte_size() as i64;
    let i = b.emit(OpKind::BitcastConvert, &[x], Some(Shape::scalar(int)), loc);
    let dims = x.dims()?;
    let c = |v: i64| {
        let s = b.scalar_of(int, crate::Scalar::Int(v), loc);
        b.emit(
            OpKind::Broadcast { dims: [].into() },
            &[&s],
            Some(Shape::array(int, &dims)),
            loc,
        )
    };
    let sign = b.emit(
        OpKind::Bitwise(BitwiseOp::ShiftRightArithmetic),
        &[&i, &c(bits - 1)],
        None,
        loc,
    );
    let mask = b.emit(
        OpKind::Bitwise(BitwiseOp::ShiftRightLogical),
        &[&sign, &c(1)],
        None,
        loc,
    );
    Ok(b.emit(OpKind::Bitwise(BitwiseOp::Xor), &[&i, &mask], None, loc))
}

/// The element type `MLIR spelling`.
fn element_type(s: &str) -> Option<ElementType> {
    use ElementType::*;
    Some(match s {
        "i1" => Pred,
        "i8" => S8,
        "i16" => S16,
        "i32" => S32,
        "i64" => S64,
        "ui8" => U8,
        "ui16" => U16,
        "ui32" => U32,
        "ui64" => U64,
        "f16" => F16,
        "bf16" => Bf16,
        "f32" => F32,
        "f64" => F64,
        "complex<f32>" => C64,
        "complex<f64>" => C128,
        "f8E5M2" => F8E5M2,
        "f8E4M3FN" => F8E4M3FN,
        _ => return None,
    })
}

/// The shape of a tensor type.
fn shape_of(t: &Type) -> std::result::Result<Shape, String> {
    match t {
        Type::Tensor { dims, elem } => {
            let ty = element_type(elem)
                .ok_or_else(|| format!("element type `{elem}` is not supported"))?;
            Ok(Shape::array(ty, dims))
        }
        Type::Other(s) => Err(format!("type `{s}` is not supported (tensors only)")),
    }
}

fn elem_of(s: &Shape, op: &Operation) -> R<ElementType> {
    s.element_type()
        .ok_or_else(|| err_at(op, format!("{s} is not an array")))
}

/// A keyword attribute: `DEFAULT`, or `#stablehlo<precision DEFAULT>`.
fn enum_of(a: &Attr) -> Option<String> {
    match a {
        Attr::Ident(s) => Some(s.clone()),
        Attr::Hash(_, inner) => match inner.as_ref() {
            Attr::List(l) => match l.last() {
                Some(Attr::Ident(s)) => Some(s.clone()),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// Integers of a list, `array<i64: …>` or `dense<[…]>` attribute.
fn ints(a: &Attr) -> Option<Vec<i64>> {
    match a {
        Attr::List(l) => l
            .iter()
            .map(|x| match x {
                Attr::Int(v) => Some(*v),
                _ => None,
            })
            .collect(),
        Attr::Array(v) => Some(v.clone()),
        Attr::Dense(body, _) => dense_ints(body),
        _ => None,
    }
}

fn dense_ints(body: &str) -> Option<Vec<i64>> {
    body.split([',', '[', ']'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>().ok())
        .collect()
}

/// `[[lo, hi], …]` or `dense<[[lo, hi], …]>`.
fn pairs(a: &Attr) -> Option<Vec<(i64, i64)>> {
    match a {
        Attr::List(l) => l
            .iter()
            .map(|p| match ints(p)?.as_slice() {
                [lo, hi] => Some((*lo, *hi)),
                _ => None,
            })
            .collect(),
        Attr::Dense(body, _) => {
            let v = dense_ints(body)?;
            if v.len() % 2 != 0 {
                return None;
            }
            Some(v.chunks(2).map(|c| (c[0], c[1])).collect())
        }
        _ => None,
    }
}

fn ints_of(op: &Operation, keys: &[&str]) -> R<Vec<i64>> {
    for k in keys {
        if let Some(a) = op.attr(k) {
            return ints(a).ok_or_else(|| err_at(op, format!("`{k}` is not a list of integers")));
        }
    }
    Err(err_at(op, format!("lacks `{}`", keys.join("` or `"))))
}

fn int_of(op: &Operation, keys: &[&str]) -> R<i64> {
    for k in keys {
        match op.attr(k) {
            Some(Attr::Int(v)) => return Ok(*v),
            Some(_) => return Err(err_at(op, format!("`{k}` is not an integer"))),
            None => {}
        }
    }
    Err(err_at(op, format!("lacks `{}`", keys.join("` or `"))))
}

fn bool_of(op: &Operation, key: &str) -> bool {
    matches!(op.attr(key), Some(Attr::Bool(true)) | Some(Attr::Unit))
}

fn hash_dict<'a>(op: &'a Operation, key: &str) -> R<&'a [(String, Attr)]> {
    match op.attr(key) {
        Some(Attr::Hash(_, inner)) => match inner.as_ref() {
            Attr::Dict(d) => Ok(d),
            Attr::List(l) if l.is_empty() => Ok(&[]),
            _ => Err(err_at(op, format!("`{key}` is not `#…<k = v, …>`"))),
        },
        _ => Err(err_at(op, format!("lacks `{key}`"))),
    }
}

fn dict_ints(d: &[(String, Attr)], key: &str) -> Vec<i64> {
    d.iter()
        .find(|(k, _)| k == key)
        .and_then(|(_, v)| ints(v))
        .unwrap_or_default()
}

fn dict_int(d: &[(String, Attr)], key: &str) -> i64 {
    match d.iter().find(|(k, _)| k == key) {
        Some((_, Attr::Int(v))) => *v,
        _ => 0,
    }
}

fn dot_dims(op: &Operation) -> R<DotDims> {
    let pair = |k: &str| -> R<(Vec<i64>, Vec<i64>)> {
        match op.attr(k) {
            None => Ok((vec![], vec![])),
            Some(Attr::Seq(p)) if p.len() == 2 => Ok((
                ints(&p[0]).ok_or_else(|| err_at(op, format!("bad `{k}`")))?,
                ints(&p[1]).ok_or_else(|| err_at(op, format!("bad `{k}`")))?,
            )),
            Some(_) => Err(err_at(op, format!("`{k}` is `[…] x […]`"))),
        }
    };
    if let Ok(d) = hash_dict(op, "dot_dimension_numbers") {
        return Ok(DotDims {
            lhs_batch: dict_ints(d, "lhs_batching_dimensions"),
            rhs_batch: dict_ints(d, "rhs_batching_dimensions"),
            lhs_contracting: dict_ints(d, "lhs_contracting_dimensions"),
            rhs_contracting: dict_ints(d, "rhs_contracting_dimensions"),
        });
    }
    let (lb, rb) = pair("batching_dims")?;
    let (lc, rc) = pair("contracting_dims")?;
    Ok(DotDims {
        lhs_contracting: lc,
        rhs_contracting: rc,
        lhs_batch: lb,
        rhs_batch: rb,
    })
}

fn precisions(op: &Operation) -> R<[Precision; 2]> {
    let list = match op.attr("precision").or_else(|| op.attr("precision_config")) {
        None => return Ok([Precision::Default; 2]),
        Some(Attr::List(l)) => l,
        Some(_) => return Err(err_at(op, "precision is a list")),
    };
    let mut out = [Precision::Default; 2];
    for (i, a) in list.iter().enumerate().take(2) {
        out[i] = match enum_of(a).as_deref() {
            Some("DEFAULT") => Precision::Default,
            Some("HIGH") => Precision::High,
            Some("HIGHEST") => Precision::Highest,
            p => return Err(err_at(op, format!("unknown precision {p:?}"))),
        };
    }
    Ok(out)
}

fn conv_attrs(op: &Operation, rank: usize, kernel: &[i64]) -> R<ConvAttrs> {
    let bad = |what: &str| err_at(op, format!("convolution: {what}"));
    let dn = match op.attr("dim_numbers") {
        Some(a) => a.clone(),
        None => match op.attr("dimension_numbers") {
            Some(Attr::Hash(_, inner)) => match inner.as_ref() {
                Attr::List(l) if l.len() == 1 => l[0].clone(),
                _ => return Err(bad("bad `dimension_numbers`")),
            },
            _ => return Err(bad("lacks `dim_numbers`")),
        },
    };
    let Attr::Seq(parts) = dn else {
        return Err(bad("`dim_numbers` is `[…]x[…]->[…]`"));
    };
    if parts.len() != 3 {
        return Err(bad("`dim_numbers` has three parts"));
    }
    let n = rank.saturating_sub(2);
    // Each part: which axis is batch/feature (b, f or i, o) and which the spatial ones.
    let read = |a: &Attr, x: &str, y: &str| -> R<(i64, i64, Vec<i64>)> {
        let Attr::List(l) = a else {
            return Err(bad("a layout is `[…]`"));
        };
        let (mut p, mut q, mut s) = (None, None, vec![None; n]);
        for (axis, e) in l.iter().enumerate() {
            match e {
                Attr::Ident(c) if c == x => p = Some(axis as i64),
                Attr::Ident(c) if c == y => q = Some(axis as i64),
                Attr::Int(k) if (*k as usize) < n && *k >= 0 => s[*k as usize] = Some(axis as i64),
                _ => return Err(bad("unknown layout letter")),
            }
        }
        let s: Option<Vec<i64>> = s.into_iter().collect();
        match (p, q, s) {
            (Some(p), Some(q), Some(s)) if l.len() == rank => Ok((p, q, s)),
            _ => Err(bad("incomplete layout")),
        }
    };
    let (ib, if_, isp) = read(&parts[0], "b", "f")?;
    let (ki, ko, ksp) = read(&parts[1], "i", "o")?;
    let (ob, of, osp) = read(&parts[2], "b", "f")?;
    let win = match op.attr("window") {
        Some(Attr::Dict(d)) => d.clone(),
        _ => vec![],
    };
    let w = |keys: &[&str], d: i64| -> R<Vec<i64>> {
        for k in keys {
            if let Some(a) = win
                .iter()
                .find(|(kk, _)| kk == k)
                .map(|(_, v)| v)
                .or(op.attr(k))
            {
                return ints(a).ok_or_else(|| bad(&format!("bad `{k}`")));
            }
        }
        Ok(vec![d; n])
    };
    let stride = w(&["stride", "window_strides"], 1)?;
    let lhs = w(&["lhs_dilate", "lhs_dilation"], 1)?;
    let rhs = w(&["rhs_dilate", "rhs_dilation"], 1)?;
    let pad = match win
        .iter()
        .find(|(k, _)| k == "pad")
        .map(|(_, v)| v)
        .or(op.attr("padding"))
    {
        Some(a) => pairs(a).ok_or_else(|| bad("bad `pad`"))?,
        None => vec![(0, 0); n],
    };
    if let Some(r) = win
        .iter()
        .find(|(k, _)| k == "reverse")
        .map(|(_, v)| v)
        .or(op.attr("window_reversal"))
    {
        let flipped = match r {
            Attr::List(l) => l.iter().any(|x| x == &Attr::Bool(true)),
            Attr::Array(v) => v.iter().any(|x| *x != 0),
            _ => true,
        };
        if flipped {
            return Err(bad("window reversal is not supported"));
        }
    }
    if [stride.len(), lhs.len(), rhs.len(), pad.len()]
        .iter()
        .any(|l| *l != n)
    {
        return Err(bad(&format!("window attributes must have {n} entries")));
    }
    let group = |k: &str| match op.attr(k) {
        Some(Attr::Int(v)) => *v,
        _ => 1,
    };
    Ok(ConvAttrs {
        window: (0..n)
            .map(|i| WindowDim {
                size: kernel.get(ksp[i] as usize).copied().unwrap_or(0),
                stride: stride[i],
                padding_low: pad[i].0,
                padding_high: pad[i].1,
                window_dilation: rhs[i],
                base_dilation: lhs[i],
            })
            .collect(),
        dims: ConvDims {
            input_batch: ib,
            input_feature: if_,
            input_spatial: isp,
            kernel_input_feature: ki,
            kernel_output_feature: ko,
            kernel_spatial: ksp,
            output_batch: ob,
            output_feature: of,
            output_spatial: osp,
        },
        feature_group_count: group("feature_group_count"),
        batch_group_count: group("batch_group_count"),
    })
}

/// One element of a `dense<…>` literal.
#[derive(Clone, Copy, Debug)]
enum Lit {
    Int(i128),
    Float(f64),
    /// `0x…`: the element's bits.
    Bits(u64),
}

/// A constant of `shape` from the inside of `dense<…>`: a hex string of the
/// raw little-endian bytes, a splat (one element, broadcast), or every element
/// (nested lists, row-major).
fn constant(b: &Builder, shape: &Shape, body: &str) -> std::result::Result<Op, String> {
    let loc = here();
    let ty = shape
        .element_type()
        .ok_or_else(|| format!("{shape} is not an array"))?;
    let n = shape
        .dims()
        .iter()
        .try_fold(1usize, |n, d| n.checked_mul(usize::try_from(*d).ok()?))
        .filter(|n| n.checked_mul(ty.byte_size()).is_some_and(|b| b <= 1 << 32))
        .ok_or_else(|| format!("constant of {shape} is too large"))?;
    let w = ty.byte_size();
    let body = body.trim();
    let emit = |bytes: Vec<u8>, s: Shape| b.emit(OpKind::Constant(bytes.into()), &[], Some(s), loc);
    let splat = |bytes: Vec<u8>| {
        let c = emit(bytes, Shape::scalar(ty));
        if shape.dims().is_empty() {
            c
        } else {
            b.emit(
                OpKind::Broadcast { dims: [].into() },
                &[&c],
                Some(shape.clone()),
                loc,
            )
        }
    };
    if let Some(hex) = body.strip_prefix("\"0x").and_then(|h| h.strip_suffix('"')) {
        if hex.len() % 2 != 0 {
            return Err("odd-length hex constant".into());
        }
        let bytes = (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16))
            .collect::<std::result::Result<Vec<u8>, _>>()
            .map_err(|_| "bad hex digit in a constant".to_string())?;
        if bytes.len() == w * n {
            return Ok(emit(bytes, shape.clone()));
        }
        if bytes.len() == w {
            return Ok(splat(bytes));
        }
        return Err(format!(
            "hex constant of {} bytes for {shape} ({} bytes)",
            bytes.len(),
            w * n
        ));
    }
    if body.contains('(') && !ty.is_complex() {
        return Err(format!("a complex element for {ty}"));
    }
    // A complex element `(re, im)` is its two parts, each in the real type.
    let (part, w_lit) = match ty {
        ElementType::C64 => (ElementType::F32, 4),
        ElementType::C128 => (ElementType::F64, 8),
        t => (t, w),
    };
    if ty.is_complex() && !body.contains('(') {
        return Err(format!("{ty} elements are written `(re, im)`"));
    }
    let lits = body
        .split([',', '[', ']', '(', ')'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| -> std::result::Result<Lit, String> {
            match s {
                "true" => return Ok(Lit::Int(1)),
                "false" => return Ok(Lit::Int(0)),
                "inf" | "+inf" => return Ok(Lit::Float(f64::INFINITY)),
                "-inf" => return Ok(Lit::Float(f64::NEG_INFINITY)),
                "nan" => return Ok(Lit::Float(f64::NAN)),
                _ => {}
            }
            if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
                return u64::from_str_radix(h, 16)
                    .map(Lit::Bits)
                    .map_err(|_| format!("bad element `{s}`"));
            }
            if let Ok(v) = s.parse::<i128>() {
                return Ok(Lit::Int(v));
            }
            s.parse::<f64>()
                .map(Lit::Float)
                .map_err(|_| format!("bad element `{s}`"))
        })
        .collect::<std::result::Result<Vec<Lit>, String>>()?;
    let mut bytes = Vec::with_capacity(lits.len() * w_lit);
    for l in &lits {
        element_bytes(part, *l, &mut bytes)?;
    }
    let per = w / w_lit;
    if lits.len() % per != 0 {
        return Err(format!(
            "a complex element without its two parts for {shape}"
        ));
    }
    match lits.len() / per {
        1 if n != 1 => Ok(splat(bytes)),
        k if k == n => Ok(emit(bytes, shape.clone())),
        k => Err(format!("{k} elements for {shape}")),
    }
}

fn element_bytes(ty: ElementType, l: Lit, out: &mut Vec<u8>) -> std::result::Result<(), String> {
    use ElementType::*;
    let w = ty.byte_size();
    match (ty, l) {
        (_, Lit::Bits(bits)) => {
            if w > 8 || (w < 8 && bits >> (8 * w) != 0) {
                return Err(format!("hex element 0x{bits:x} does not fit {ty}"));
            }
            out.extend_from_slice(&bits.to_le_bytes()[..w]);
        }
        (Pred, Lit::Int(v)) if v == 0 || v == 1 => out.push(v as u8),
        (S8 | S16 | S32 | S64 | U8 | U16 | U32 | U64, Lit::Int(v)) => {
            let signed = matches!(ty, S8 | S16 | S32 | S64);
            let bitsz = 8 * w as u32;
            let (lo, hi) = if signed {
                (-(1i128 << (bitsz - 1)), (1i128 << (bitsz - 1)) - 1)
            } else {
                (0, (1i128 << bitsz) - 1)
            };
            if v < lo || v > hi {
                return Err(format!("{v} does not fit {ty}"));
            }
            out.extend_from_slice(&v.to_le_bytes()[..w]);
        }
        (F16 | Bf16 | F32 | F64, Lit::Int(v)) => element_bytes(ty, Lit::Float(v as f64), out)?,
        (F32, Lit::Float(v)) => out.extend_from_slice(&(v as f32).to_le_bytes()),
        (F64, Lit::Float(v)) => out.extend_from_slice(&v.to_le_bytes()),
        (F16, Lit::Float(v)) => out.extend_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        (Bf16, Lit::Float(v)) => out.extend_from_slice(&half::bf16::from_f64(v).to_le_bytes()),
        (F8E5M2 | F8E4M3FN, Lit::Int(v)) => element_bytes(ty, Lit::Float(v as f64), out)?,
        (F8E5M2, Lit::Float(v)) => {
            out.extend_from_slice(&crate::float8::F8E5M2::from_f64(v).to_le_bytes())
        }
        (F8E4M3FN, Lit::Float(v)) => {
            out.extend_from_slice(&crate::float8::F8E4M3FN::from_f64(v).to_le_bytes())
        }
        (ty, l) => return Err(format!("element {l:?} is not supported for {ty}")),
    }
    Ok(())
}
