//! What the passes over the IR need to know about each op and the IR does not
//! say: its shape rule, how its attributes are written to and read from an
//! `HloInstructionProto`, and how they print as HLO text. The IR does not know the
//! op families; the op library implements [`Rules`] once (its declarative op table,
//! `xlaclient_core::ops::Table`), and the verifier, the lowering, the printer and the
//! raise of foreign modules are handed it (as JAX's core is handed the rules that
//! `lax` registers).

use std::fmt::Write;

use super::{CompId, OpKind, Opcode, Signatures};
use crate::error::{ShapeError, ShapeErrorKind};
use crate::proto;
use crate::shape::Shape;

/// The per-op rules the passes over the IR dispatch to.
pub trait Rules {
    /// The shape rule of `kind` (the one source of truth: run by the builder for
    /// each new instruction and by the verifier for each instruction of a finished
    /// module), including the check of the operand count.
    fn infer(&self, kind: &OpKind, cx: &InferCx<'_>) -> Result<Shape, ShapeError>;

    /// Fills the attribute fields of `p` for `kind` (the opcode, id, shape and
    /// operands are the lowering's).
    fn lower(&self, kind: &OpKind, cx: &LowerCx<'_>, p: &mut proto::HloInstructionProto);

    /// The op of a proto instruction whose opcode is `op` (the inverse of
    /// [`lower`](Self::lower)), or why it cannot be read.
    fn raise(
        &self,
        op: Opcode,
        p: &proto::HloInstructionProto,
        cx: &RaiseCx<'_>,
    ) -> Result<OpKind, String>;

    /// The HLO text of `kind`'s attributes (and of its operand list where the op
    /// prints something else there: a parameter's number, a constant's literal).
    fn text(&self, kind: &OpKind, cx: &TextCx<'_>, out: &mut OpText);
}

/// What a shape rule sees.
pub struct InferCx<'a> {
    /// The operands' shapes.
    pub operands: &'a [&'a Shape],
    /// The result shape asked for, for ops whose attributes live in it (parameter,
    /// constant, reshape, broadcast, convert, iota, …): the builder passes the
    /// requested shape, the verifier the declared one. Other ops ignore it.
    pub target: Option<&'a Shape>,
    /// The signatures of the computations the op may call.
    pub sigs: &'a dyn Signatures,
}

impl InferCx<'_> {
    /// The parameter shapes and the result shape of computation `c`, if finished.
    pub fn signature(&self, c: CompId) -> Option<(Vec<Shape>, Shape)> {
        self.sigs.signature(c)
    }

    /// The target shape, or an error naming `op` that needs it.
    pub fn target(&self, op: &'static str) -> Result<&Shape, ShapeError> {
        self.target.ok_or_else(|| {
            ShapeError::new(
                op,
                self.operands,
                ShapeErrorKind::Attribute,
                "needs its result shape",
            )
        })
    }
}

/// What the lowering of an op's attributes sees.
pub struct LowerCx<'a> {
    /// The instruction's result shape.
    pub shape: &'a Shape,
    /// The operands' shapes.
    pub operands: &'a [&'a Shape],
    /// The proto id of a called computation.
    pub comp_id: &'a dyn Fn(CompId) -> i64,
}

/// What the raise of a proto instruction sees.
pub struct RaiseCx<'a> {
    /// The instruction's declared result shape.
    pub shape: &'a Shape,
    /// The operands' declared shapes.
    pub operands: &'a [&'a Shape],
    /// The position of the computation with a proto id, if it is defined before
    /// the instruction.
    pub comp: &'a dyn Fn(i64) -> Option<CompId>,
}

impl RaiseCx<'_> {
    /// The `N` computations `p` calls, each defined before it; any other number is
    /// an error.
    pub fn calls<const N: usize>(
        &self,
        p: &proto::HloInstructionProto,
    ) -> Result<[CompId; N], String> {
        let ids = &p.called_computation_ids;
        if ids.len() != N {
            return Err(format!(
                "`{}` calls {} computations, expected {N}",
                p.opcode,
                ids.len()
            ));
        }
        let mut out = [CompId(0); N];
        for (slot, id) in out.iter_mut().zip(ids) {
            *slot = self.callee(p, *id)?;
        }
        Ok(out)
    }

    /// Every computation `p` calls (at least one), each defined before it.
    pub fn calls_any(&self, p: &proto::HloInstructionProto) -> Result<Vec<CompId>, String> {
        if p.called_computation_ids.is_empty() {
            return Err(format!(
                "`{}` calls 0 computations, expected at least 1",
                p.opcode
            ));
        }
        p.called_computation_ids
            .iter()
            .map(|id| self.callee(p, *id))
            .collect()
    }

    fn callee(&self, p: &proto::HloInstructionProto, id: i64) -> Result<CompId, String> {
        (self.comp)(id).ok_or_else(|| {
            format!(
                "`{}` calls computation id {id}, which is not defined before it",
                p.opcode
            )
        })
    }

    /// The single dimension of `p`'s `dimensions` field.
    pub fn one_dimension(&self, p: &proto::HloInstructionProto) -> Result<i64, String> {
        match p.dimensions[..] {
            [d] => Ok(d),
            _ => Err(format!("`{}` needs exactly one dimension", p.opcode)),
        }
    }
}

/// What the printer of an op's attributes sees.
pub struct TextCx<'a> {
    /// The instruction's result shape.
    pub shape: &'a Shape,
    /// The printed name of a called computation (without the `%`).
    pub comp_name: &'a dyn Fn(CompId) -> String,
}

/// An instruction's HLO text as its op prints it.
#[derive(Default)]
pub struct OpText {
    /// What stands in the parentheses instead of the operands (a parameter's
    /// number, a constant's literal); `None`: the operands.
    pub args: Option<String>,
    /// The attributes, each as `, key=value`.
    pub attrs: String,
}

impl OpText {
    /// Appends `, key={1,2,3}`.
    pub fn list(&mut self, key: &str, v: &[i64]) {
        let parts: Vec<String> = v.iter().map(i64::to_string).collect();
        let _ = write!(self.attrs, ", {key}={{{}}}", parts.join(","));
    }

    /// Appends `, key=value`.
    pub fn attr(&mut self, key: &str, value: impl std::fmt::Display) {
        let _ = write!(self.attrs, ", {key}={value}");
    }

    /// Appends `, key=%name` for called computation `c`.
    pub fn callee(&mut self, cx: &TextCx<'_>, key: &str, c: CompId) {
        let _ = write!(self.attrs, ", {key}=%{}", (cx.comp_name)(c));
    }
}

/// The op of proto instruction `p` through `rules`: its opcode looked up in the
/// opcode table, its attributes read by the op's raise rule, and the number of
/// computations it calls checked against what the op calls.
pub fn raise_instruction(
    rules: &dyn Rules,
    p: &proto::HloInstructionProto,
    cx: &RaiseCx<'_>,
) -> Result<OpKind, String> {
    let op = Opcode::from_name(&p.opcode)
        .ok_or_else(|| format!("opcode `{}` has no shape rule in this crate", p.opcode))?;
    let kind = rules.raise(op, p, cx)?;
    let calls = kind.called().len();
    if calls != p.called_computation_ids.len() {
        return Err(format!(
            "`{}` calls {} computations, expected {calls}",
            p.opcode,
            p.called_computation_ids.len()
        ));
    }
    Ok(kind)
}
