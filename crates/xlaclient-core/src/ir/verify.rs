//! The verifier of finished modules: re-runs the same shape rules the builder ran
//! ([`Rules::infer`]) on every instruction, and checks the structure (operands defined
//! before use, called computations defined before their callers, parameters
//! numbered without gaps, roots present, entry parameters that XLA accepts).

use super::op::OpKind;
use super::{InferCx, Module, Rules, value_shape};
use crate::error::{Error, Result};
use crate::shape::Shape;

fn bad(comp: &str, reason: String) -> Error {
    Error::InvalidModule {
        reason: format!("computation `{comp}`: {reason}"),
    }
}

/// Checks `m` with the op rules `rules`; the first problem found is an
/// [`Error::InvalidModule`] (or the shape rule's [`Error::Shape`], with the
/// instruction's source location).
pub fn verify(m: &Module, rules: &dyn Rules) -> Result<()> {
    if m.entry.0 as usize >= m.comps.len() {
        return Err(Error::InvalidModule {
            reason: format!("entry computation {} is not in the module", m.entry.0),
        });
    }
    for (ci, c) in m.comps.iter().enumerate() {
        // Every reference into the shape table first: the checks below read shapes.
        if let Some(i) = c
            .instrs
            .iter()
            .position(|i| i.shape.0 as usize >= m.shapes.len())
        {
            return Err(bad(&c.name, format!("instruction {i} has no shape")));
        }
        for (n, p) in c.params.iter().enumerate() {
            let Some(p) = p else {
                return Err(bad(
                    &c.name,
                    format!(
                        "parameters must be numbered 0..{} without gaps; {n} is missing",
                        c.params.len()
                    ),
                ));
            };
            match c.instrs.get(*p as usize).map(|i| &i.kind) {
                Some(OpKind::Parameter { number, .. }) if *number as usize == n => {}
                _ => return Err(bad(&c.name, format!("parameter {n} is not a parameter"))),
            }
        }
        let root = c
            .root
            .ok_or_else(|| bad(&c.name, "has no root".to_string()))?;
        if value_shape(c, &m.shapes, root).is_none() {
            return Err(bad(&c.name, format!("root {root:?} does not exist")));
        }
        let mut n_params = 0;
        for (i, ins) in c.instrs.iter().enumerate() {
            let mut shapes: Vec<&Shape> = Vec::with_capacity(ins.operands.len());
            for v in &ins.operands {
                if v.instr as usize >= i {
                    return Err(bad(
                        &c.name,
                        format!("instruction {i} uses {v:?}, which is not defined before it"),
                    ));
                }
                shapes.push(value_shape(c, &m.shapes, *v).ok_or_else(|| {
                    bad(
                        &c.name,
                        format!("instruction {i} uses {v:?}, which does not exist"),
                    )
                })?);
            }
            for callee in ins.kind.called() {
                if callee.0 as usize >= ci {
                    return Err(bad(
                        &c.name,
                        format!(
                            "instruction {i} calls computation {} defined after it",
                            callee.0
                        ),
                    ));
                }
            }
            if let OpKind::Parameter { number, .. } = ins.kind {
                n_params += 1;
                if c.params.get(number as usize) != Some(&Some(i as u32)) {
                    return Err(bad(
                        &c.name,
                        format!("parameter {number} is declared twice"),
                    ));
                }
            }
            let declared = m.shapes.get(ins.shape);
            if let Some(s) = &ins.sharding {
                s.check(declared).map_err(|e| {
                    bad(
                        &c.name,
                        format!(
                            "instruction {i} (`{}`): sharding: {e}",
                            ins.kind.opcode().name()
                        ),
                    )
                })?;
            }
            let cx = InferCx {
                operands: &shapes,
                target: Some(declared),
                sigs: m,
            };
            let inferred = rules.infer(&ins.kind, &cx).map_err(|mut e| {
                e.location = Some(ins.loc);
                Error::Shape(e)
            })?;
            if &inferred != declared {
                return Err(bad(
                    &c.name,
                    format!(
                        "instruction {i} (`{}`) is declared {declared} but its rule gives {inferred}",
                        ins.kind.opcode().name()
                    ),
                ));
            }
        }
        if n_params != c.params.len() {
            return Err(bad(&c.name, "a parameter is declared twice".to_string()));
        }
    }
    // XLA aborts the process on an entry parameter that is not an array.
    let entry = m.entry_comp();
    let params = m.parameter_shapes();
    let mut used: Vec<&[i64]> = Vec::new();
    for a in &m.aliases {
        let out = m.output_shape(&a.output);
        let param = params.get(a.parameter as usize);
        match (out, param) {
            (Some(o), Some(p)) if &o == p && o.is_array() => {}
            (o, p) => {
                return Err(bad(
                    &entry.name,
                    format!(
                        "output {:?} ({}) cannot alias parameter {} ({}): both must exist and be arrays of one shape",
                        a.output,
                        o.map_or("none".into(), |s| s.to_string()),
                        a.parameter,
                        p.map_or("none".into(), |s| s.to_string()),
                    ),
                ));
            }
        }
        if used.contains(&a.output.as_slice()) {
            return Err(bad(
                &entry.name,
                format!("output {:?} is aliased twice", a.output),
            ));
        }
        used.push(&a.output);
    }
    for p in entry.param_instrs() {
        let s = m.shapes.get(entry.instrs[p as usize].shape);
        if !s.is_array() {
            return Err(bad(
                &entry.name,
                format!("entry parameters must be arrays, parameter {p} is {s}"),
            ));
        }
    }
    Ok(())
}
