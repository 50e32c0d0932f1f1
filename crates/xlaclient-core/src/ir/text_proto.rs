//! HLO text for people to read, in the style of XLA's own printer.

use std::collections::HashMap;
use std::fmt::Write;

use crate::proto;
use crate::shape::{ElementType, Shape};

fn shape_text(s: Option<&proto::ShapeProto>) -> String {
    let Some(s) = s else { return "?".into() };
    if s.element_type == proto::PrimitiveType::Tuple as i32 {
        let parts: Vec<String> = s.tuple_shapes.iter().map(|t| shape_text(Some(t))).collect();
        return format!("({})", parts.join(", "));
    }
    let base = match Shape::from_proto(s) {
        Some(sh) => sh.to_string(),
        None => format!("type{}{:?}", s.element_type, s.dimensions),
    };
    match &s.layout {
        Some(l) if !s.dimensions.is_empty() => {
            let mm: Vec<String> = l.minor_to_major.iter().map(i64::to_string).collect();
            format!("{base}{{{}}}", mm.join(","))
        }
        _ => base,
    }
}

fn list(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("{{{}}}", parts.join(","))
}

fn literal_text(i: &proto::HloInstructionProto) -> String {
    let Some(l) = &i.literal else {
        return String::new();
    };
    let ty = l
        .shape
        .as_ref()
        .and_then(|s| ElementType::from_primitive_type(s.element_type));
    let vals: Vec<String> = match ty {
        Some(ElementType::Pred) => l.preds.iter().map(|b| b.to_string()).collect(),
        Some(ElementType::S32) => l.s32s.iter().map(|v| v.to_string()).collect(),
        Some(ElementType::S64) => l.s64s.iter().map(|v| v.to_string()).collect(),
        Some(ElementType::U32) => l.u32s.iter().map(|v| v.to_string()).collect(),
        Some(ElementType::U64) => l.u64s.iter().map(|v| v.to_string()).collect(),
        Some(ElementType::U8) => l.u8s.iter().map(|v| v.to_string()).collect(),
        Some(ElementType::S8) => l.s8s.iter().map(|v| (*v as i8).to_string()).collect(),
        Some(ElementType::F32) => l.f32s.iter().map(|v| format!("{v:?}")).collect(),
        Some(ElementType::F64) => l.f64s.iter().map(|v| format!("{v:?}")).collect(),
        Some(ElementType::F16) => l
            .f16s
            .chunks_exact(2)
            .map(|c| format!("{:?}", half::f16::from_le_bytes([c[0], c[1]]).to_f32()))
            .collect(),
        Some(ElementType::Bf16) => l
            .bf16s
            .chunks_exact(2)
            .map(|c| format!("{:?}", half::bf16::from_le_bytes([c[0], c[1]]).to_f32()))
            .collect(),
        _ => vec!["...".into()],
    };
    const MAX: usize = 8;
    if vals.len() == 1 {
        vals[0].clone()
    } else if vals.len() <= MAX {
        format!("{{{}}}", vals.join(", "))
    } else {
        format!("{{{}, ...}}", vals[..MAX].join(", "))
    }
}

/// The whole module as HLO text.
pub fn module_to_text(m: &proto::HloModuleProto) -> String {
    let mut out = String::new();
    let _ = write!(out, "HloModule {}", m.name);
    if let Some(p) = &m.host_program_shape {
        let params: Vec<String> = p.parameters.iter().map(|s| shape_text(Some(s))).collect();
        let _ = write!(
            out,
            ", entry_computation_layout={{({})->{}}}",
            params.join(", "),
            shape_text(p.result.as_ref())
        );
    }
    out.push_str("\n\n");
    let comp_names: HashMap<i64, &str> = m
        .computations
        .iter()
        .map(|c| (c.id, c.name.as_str()))
        .collect();
    for c in &m.computations {
        let by_id: HashMap<i64, &proto::HloInstructionProto> =
            c.instructions.iter().map(|i| (i.id, i)).collect();
        if c.id == m.entry_computation_id {
            out.push_str("ENTRY ");
        }
        let params: Vec<String> = c
            .instructions
            .iter()
            .filter(|i| i.opcode == "parameter")
            .map(|i| format!("{}: {}", i.name, shape_text(i.shape.as_ref())))
            .collect();
        let result = c
            .program_shape
            .as_ref()
            .map(|p| shape_text(p.result.as_ref()))
            .unwrap_or_else(|| "?".into());
        let _ = writeln!(out, "%{} ({}) -> {} {{", c.name, params.join(", "), result);
        for i in &c.instructions {
            let root = if i.id == c.root_id { "ROOT " } else { "" };
            let operands: Vec<String> = i
                .operand_ids
                .iter()
                .map(|o| match by_id.get(o) {
                    Some(x) => format!("{} %{}", shape_text(x.shape.as_ref()), x.name),
                    None => format!("%<{o}>"),
                })
                .collect();
            let mut args = operands.join(", ");
            match i.opcode.as_str() {
                "parameter" => args = i.parameter_number.to_string(),
                "constant" => args = literal_text(i),
                _ => {}
            }
            let mut attrs = String::new();
            if !i.dimensions.is_empty()
                || matches!(i.opcode.as_str(), "broadcast" | "transpose" | "reduce")
            {
                let _ = write!(attrs, ", dimensions={}", list(&i.dimensions));
            }
            if i.opcode == "get-tuple-element" {
                let _ = write!(attrs, ", index={}", i.tuple_index);
            }
            if let Some(d) = &i.dot_dimension_numbers {
                if !d.lhs_batch_dimensions.is_empty() {
                    let _ = write!(
                        attrs,
                        ", lhs_batch_dims={}, rhs_batch_dims={}",
                        list(&d.lhs_batch_dimensions),
                        list(&d.rhs_batch_dimensions)
                    );
                }
                let _ = write!(
                    attrs,
                    ", lhs_contracting_dims={}, rhs_contracting_dims={}",
                    list(&d.lhs_contracting_dimensions),
                    list(&d.rhs_contracting_dimensions)
                );
            }
            if let Some(pc) = &i.precision_config {
                if pc.operand_precision.iter().any(|p| *p != 0) {
                    let names: Vec<String> = pc
                        .operand_precision
                        .iter()
                        .map(|p| match proto::precision_config::Precision::try_from(*p) {
                            Ok(x) => x.as_str_name().to_ascii_lowercase(),
                            Err(_) => p.to_string(),
                        })
                        .collect();
                    let _ = write!(attrs, ", operand_precision={{{}}}", names.join(","));
                }
            }
            if !i.comparison_direction.is_empty() {
                let _ = write!(attrs, ", direction={}", i.comparison_direction);
            }
            for cc in &i.called_computation_ids {
                let key = if i.opcode == "reduce" {
                    "to_apply"
                } else {
                    "calls"
                };
                let _ = write!(
                    attrs,
                    ", {key}=%{}",
                    comp_names.get(cc).copied().unwrap_or("?")
                );
            }
            if let Some(md) = &i.metadata {
                if !md.source_file.is_empty() {
                    let _ = write!(
                        attrs,
                        ", metadata={{source_file=\"{}\" source_line={}}}",
                        md.source_file, md.source_line
                    );
                }
            }
            let _ = writeln!(
                out,
                "  {root}%{} = {} {}({args}){attrs}",
                i.name,
                shape_text(i.shape.as_ref()),
                i.opcode
            );
        }
        out.push_str("}\n\n");
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}
