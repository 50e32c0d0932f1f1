//! The op library's half of the op table. Every op is declared once, by one line
//! of `src/op_table.rs` (its doc, `Opcode` variant, XLA's name, arity, `OpKind`
//! variant, family file and rule slots); the IR generates [`Opcode`] and
//! [`OpKind::opcode`] from the first half of each line, and this module generates,
//! from the family and the rule slots, everything that dispatches on the op: the
//! [`Rules`] the IR's passes are handed (shape rule, lowering, raise, HLO text),
//! the gradient dispatch of reverse mode, the [`gradient`] classification the
//! guide's op table is checked against and [`family`]. The matches it generates
//! have no catch-all arm, so a rule that is not in its family file does not
//! compile.
//!
//! The rule slots of a line read
//!
//! ```text
//! family { shape: f, lower: f | -, raise: f, text: f | -, grad: G, jvp: G, batch: G }
//! ```
//!
//! - `family`: the file `src/ops/<family>.rs`, where every `f` of the line lives;
//! - `shape`: `fn(&OpKind, &InferCx) -> Result<Shape, ShapeError>`, the op's shape
//!   rule (the operand count is checked before, from the line's arity);
//! - `lower`: `fn(&OpKind, &LowerCx, &mut HloInstructionProto)`, writes the
//!   attributes; `-` for an op without any;
//! - `raise`: `fn(&HloInstructionProto, &RaiseCx) -> Result<OpKind, String>`, reads
//!   them back;
//! - `text`: `fn(&OpKind, &TextCx, &mut OpText)`, prints them; `-` for none;
//! - `grad`: `rule(f)` (a rule for every form), `partial(f, "forms")` (a rule for
//!   the forms named, [`Error::NoGradient`](crate::Error::NoGradient) for the
//!   others), `none` (no gradient flows: integer, predicate or constant results)
//!   or `missing`; `f` is `fn(&Node) -> Grads` (see [`crate::autodiff`]);
//! - `jvp`: the tangent rule of forward mode, in the same four forms as `grad`;
//!   `f` is `fn(&JvpNode) -> Tangents` (see [`crate::forward`]);
//! - `batch`: the batching rule of `vmap`, in the same forms (`none`: the op takes
//!   no operands, so it is never batched); `f` is `fn(&BatchNode) -> Batched` (see
//!   [`crate::batching`]).
//!
//! Adding an op (`reverse`, say):
//!
//! 1. one line at the end of `src/op_table.rs`:
//!    ```text
//!    /// Reverses the order along axes.
//!    Reverse = "reverse", Fixed(1), kind: Reverse, slicing { shape: shape_reverse, lower: lower_reverse, raise: raise_reverse, text: text_reverse, grad: rule(vjp_reverse), jvp: rule(jvp_reverse), batch: rule(batch_reverse) };
//!    ```
//!    If its attributes are a new kind, the `OpKind` variant the line's `kind`
//!    names (and its attribute type, in [`crate::ir::attrs`]); an op that joins a
//!    group (`kind: Unary(UnaryOp::Erf)`) gets its member in that group instead;
//! 2. one block in its family file (`ops/slicing.rs`): `infer_reverse`, the
//!    functions the line names, the builder method (`Op::reverse`), `vjp_reverse`
//!    and the unit tests;
//! 3. one arm in the fuzzer's generator (`tests/common/fuzz.rs`, `Gen::step`) and
//!    one in `tests/ir.rs`'s `example` (both matches have no catch-all, so neither
//!    compiles without it);
//! 4. one row in the guide's op table (`guide/14-ops.md`; `tests/guide_ops.rs`
//!    fails without it).

use crate::autodiff::{Grads, Node};
use crate::error::ShapeError;
use crate::ir::{InferCx, LowerCx, OpKind, OpText, Opcode, RaiseCx, Rules, TextCx};
use crate::op_table::for_each_op;
use crate::proto;
use crate::shape::Shape;

/// The op library's rules, as the IR's passes take them ([`crate::ir::verify`],
/// the lowering, the printer, the raise of foreign modules): generated from the op
/// table.
#[derive(Clone, Copy, Debug, Default)]
pub struct Table;

/// What reverse mode does with an op (the README's gradient column is checked
/// against this).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gradient {
    /// A rule, tested against finite differences (`tests/grad*.rs`).
    Rule,
    /// A rule for some forms, an error naming the op for the others.
    Partial(&'static str),
    /// No gradient flows: the results are integers, predicates, bits or constants.
    None,
    /// No rule yet: asking is an error naming the op and the line.
    Missing,
}

/// The `lower` slot of an op without attributes.
fn no_attrs(_: &OpKind, _: &LowerCx<'_>, _: &mut proto::HloInstructionProto) {}

/// The `text` slot of an op without attributes.
fn no_text(_: &OpKind, _: &TextCx<'_>, _: &mut OpText) {}

/// A rule handed the kind of another op (the table dispatches on the kind's own
/// opcode, so this does not happen).
pub(crate) fn not_for(op: &'static str, kind: &OpKind) -> ShapeError {
    ShapeError::new(
        op,
        &[],
        crate::error::ShapeErrorKind::Attribute,
        format!("the rule of `{op}` was handed a `{}`", kind.opcode().name()),
    )
}

macro_rules! lower_slot {
    ($fam:ident, -) => {
        no_attrs
    };
    ($fam:ident, $f:ident) => {
        super::$fam::$f
    };
}

macro_rules! text_slot {
    ($fam:ident, -) => {
        no_text
    };
    ($fam:ident, $f:ident) => {
        super::$fam::$f
    };
}

macro_rules! grad_class {
    (rule($f:ident)) => {
        Gradient::Rule
    };
    (partial($f:ident, $forms:literal)) => {
        Gradient::Partial($forms)
    };
    (none) => {
        Gradient::None
    };
    (missing) => {
        Gradient::Missing
    };
}

macro_rules! grad_call {
    ($fam:ident, $n:ident, rule($f:ident)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, partial($f:ident, $forms:literal)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, none) => {
        Ok(vec![None; $n.operands.len()])
    };
    ($fam:ident, $n:ident, missing) => {
        Err("this op has no gradient rule yet".to_string())
    };
}

macro_rules! jvp_call {
    ($fam:ident, $n:ident, rule($f:ident)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, partial($f:ident, $forms:literal)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, none) => {
        Ok(vec![None; $n.results.len()])
    };
    ($fam:ident, $n:ident, missing) => {
        Err("this op has no tangent rule yet".to_string())
    };
}

macro_rules! batch_call {
    ($fam:ident, $n:ident, rule($f:ident)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, partial($f:ident, $forms:literal)) => {
        super::$fam::$f($n)
    };
    ($fam:ident, $n:ident, none) => {
        Err("the op takes no operands, so it is never batched".to_string())
    };
    ($fam:ident, $n:ident, missing) => {
        Err("this op has no batching rule yet".to_string())
    };
}

/// Generates the op library's dispatch from the op table (`src/op_table.rs`): the
/// family and the rule slots of each entry, resolved in the family files. The doc,
/// name, arity and kind are the IR's ([`Opcode`]); they are matched and dropped.
macro_rules! op_rules {
    ($(
        #[doc = $doc:literal]
        $op:ident = $name:literal, $arity:expr,
        kind: $kind:ident $(($($member:tt)*))?,
        stablehlo: $shlo:literal,
        $fam:ident {
            shape: $shape:ident,
            lower: $lower:tt,
            raise: $raise:ident,
            text: $text:tt,
            grad: $gk:ident $(($($ga:tt)*))?,
            jvp: $jk:ident $(($($ja:tt)*))?,
            batch: $bk:ident $(($($ba:tt)*))? $(,)?
        };
    )*) => {
        impl Rules for Table {
            fn infer(&self, kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError> {
                let op = kind.opcode();
                op.check_arity(cx.operands)?;
                match op {
                    $(Opcode::$op => super::$fam::$shape(kind, cx),)*
                }
            }

            fn lower(
                &self,
                kind: &OpKind,
                cx: &LowerCx<'_>,
                p: &mut proto::HloInstructionProto,
            ) {
                match kind.opcode() {
                    $(Opcode::$op => lower_slot!($fam, $lower)(kind, cx, p),)*
                }
            }

            fn raise(
                &self,
                op: Opcode,
                p: &proto::HloInstructionProto,
                cx: &RaiseCx<'_>,
            ) -> Result<OpKind, String> {
                match op {
                    $(Opcode::$op => super::$fam::$raise(p, cx),)*
                }
            }

            fn text(&self, kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText) {
                match kind.opcode() {
                    $(Opcode::$op => text_slot!($fam, $text)(kind, cx, out),)*
                }
            }
        }

        /// How reverse mode treats `op` (see [`Gradient`]).
        pub fn gradient(op: Opcode) -> Gradient {
            match op {
                $(Opcode::$op => grad_class!($gk $(($($ga)*))?),)*
            }
        }

        /// The gradient rule of `n`'s op: the cotangents of its operands, or why
        /// there are none.
        pub(crate) fn vjp(n: &Node) -> Grads {
            match n.kind.opcode() {
                $(Opcode::$op => grad_call!($fam, n, $gk $(($($ga)*))?),)*
            }
        }

        /// How forward mode (`jvp`) treats `op` (see [`Gradient`]: the same
        /// classes).
        pub fn tangent(op: Opcode) -> Gradient {
            match op {
                $(Opcode::$op => grad_class!($jk $(($($ja)*))?),)*
            }
        }

        /// How `vmap` treats `op` (see [`Gradient`]: the same classes; `None`: the
        /// op takes no operands, so it is never batched).
        pub fn batching(op: Opcode) -> Gradient {
            match op {
                $(Opcode::$op => grad_class!($bk $(($($ba)*))?),)*
            }
        }

        /// The tangent rule of `n`'s op: the tangents of its results.
        pub(crate) fn jvp(n: &crate::forward::JvpNode) -> crate::forward::Tangents {
            match n.kind.opcode() {
                $(Opcode::$op => jvp_call!($fam, n, $jk $(($($ja)*))?),)*
            }
        }

        /// The batching rule of `n`'s op.
        pub(crate) fn batch(n: &crate::batching::BatchNode) -> crate::batching::Batched {
            match n.kind.opcode() {
                $(Opcode::$op => batch_call!($fam, n, $bk $(($($ba)*))?),)*
            }
        }

        /// The family file of `op` (`src/ops/<family>.rs`).
        pub fn family(op: Opcode) -> &'static str {
            match op {
                $(Opcode::$op => stringify!($fam),)*
            }
        }
    };
}

for_each_op!(op_rules);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_has_a_family_file_and_a_gradient_class() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for op in Opcode::ALL {
            let f = root.join("src/ops").join(format!("{}.rs", family(*op)));
            assert!(f.exists(), "{op:?}: {}", f.display());
            let _ = gradient(*op);
        }
        assert_eq!(gradient(Opcode::Dot), Gradient::Rule);
        assert_eq!(gradient(Opcode::Compare), Gradient::None);
        assert!(matches!(gradient(Opcode::CustomCall), Gradient::Partial(_)));
        assert!(matches!(gradient(Opcode::Reduce), Gradient::Partial(_)));
    }

    #[test]
    fn the_dispatch_follows_the_kind() {
        // Each op's lowering and raise are inverse on an attribute-free op, and the
        // arity comes from the opcode table.
        let f = Shape::of::<f32>(&[2]);
        let cx = InferCx {
            operands: &[&f],
            target: None,
            sigs: &NoSigs,
        };
        let e = Table
            .infer(&OpKind::Binary(crate::BinaryOp::Add), &cx)
            .unwrap_err();
        assert_eq!(e.kind, crate::ShapeErrorKind::Arity, "{e}");
        let ok = Table
            .infer(&OpKind::Unary(crate::UnaryOp::Exponential), &cx)
            .unwrap();
        assert_eq!(ok, f);
    }

    struct NoSigs;
    impl crate::ir::Signatures for NoSigs {
        fn signature(&self, _: crate::ir::CompId) -> Option<(Vec<Shape>, Shape)> {
            None
        }
    }
}
