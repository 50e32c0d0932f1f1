//! HLO text for people to read, in the style of XLA's own printer, printed from the
//! IR through the same walk as the lowering (same ids, names and order).

use std::collections::HashMap;
use std::fmt::Write;

use super::lower::{self, CompHeader, Lowered, Sink};
use super::{Module, OpText, Rules, TextCx};
use crate::shape::Shape;

/// A shape with its (default, row-major) layout, as XLA prints it.
pub(crate) fn shape_text(s: &Shape) -> String {
    match s {
        Shape::Array { dims, .. } if !dims.is_empty() => {
            let mm: Vec<String> = (0..dims.len()).rev().map(|d| d.to_string()).collect();
            format!("{s}{{{}}}", mm.join(","))
        }
        Shape::Tuple(elems) => {
            let parts: Vec<String> = elems.iter().map(shape_text).collect();
            format!("({})", parts.join(", "))
        }
        _ => s.to_string(),
    }
}

struct TextSink<'r> {
    rules: &'r dyn Rules,
    out: String,
    /// Names of the computations lowered so far (callees come first).
    comp_names: Vec<String>,
    /// Names of the current computation's instructions by id.
    names: HashMap<i64, String>,
}

impl<'a> Sink<'a> for TextSink<'_> {
    fn begin(&mut self, h: &CompHeader<'a>) {
        if h.is_entry {
            self.out.push_str("ENTRY ");
        }
        let params: Vec<String> = h
            .params
            .iter()
            .map(|(n, s)| format!("{n}: {}", shape_text(s)))
            .collect();
        let _ = writeln!(
            self.out,
            "%{} ({}) -> {} {{",
            h.name,
            params.join(", "),
            shape_text(h.result)
        );
    }

    fn instr(&mut self, _: &CompHeader<'a>, l: Lowered<'a>) {
        let root = if l.is_root { "ROOT " } else { "" };
        let operands: Vec<String> = l
            .operands
            .iter()
            .map(|(id, s)| format!("{} %{}", shape_text(s), self.name_of(*id)))
            .collect();
        let (opcode, args, attrs) = match l.instr {
            Some(ins) => {
                let names = &self.comp_names;
                let cx = TextCx {
                    shape: l.shape,
                    comp_name: &|c| names[c.0 as usize].clone(),
                };
                let mut text = OpText::default();
                self.rules.text(&ins.kind, &cx, &mut text);
                let args = text.args.unwrap_or_else(|| operands.join(", "));
                let mut attrs = text.attrs;
                if let Some(s) = &ins.sharding {
                    let _ = write!(attrs, ", sharding={s}");
                }
                let _ = write!(
                    attrs,
                    ", metadata={{source_file=\"{}\" source_line={}}}",
                    ins.loc.file(),
                    ins.loc.line()
                );
                (ins.kind.opcode().name(), args, attrs)
            }
            None => (
                "get-tuple-element",
                operands.join(", "),
                format!(", index={}", l.gte_index),
            ),
        };
        let _ = writeln!(
            self.out,
            "  {root}%{} = {} {opcode}({args}){attrs}",
            l.name,
            shape_text(l.shape)
        );
        self.names.insert(l.id, l.name);
    }

    fn end(&mut self, h: CompHeader<'a>, _: i64) {
        self.out.push_str("}\n\n");
        self.comp_names.push(h.name);
        self.names.clear();
    }
}

impl TextSink<'_> {
    fn name_of(&self, id: i64) -> &str {
        self.names.get(&id).map_or("?", String::as_str)
    }
}

/// The whole module as HLO text, each op's attributes printed by `rules`. `m` must
/// have passed [`verify`](super::verify).
pub(crate) fn module_to_text(m: &Module, rules: &dyn Rules) -> String {
    // What XLA compiles: complex sqrt/log/log1p as their real formulas.
    let m = &*super::complex_math::expand(m);
    let name = lower::lower_name(&m.name);
    let params: Vec<String> = m.parameter_shapes().iter().map(shape_text).collect();
    let aliases = if m.aliases.is_empty() {
        String::new()
    } else {
        let entries: Vec<String> = m
            .aliases
            .iter()
            .map(|a| {
                let idx: Vec<String> = a.output.iter().map(i64::to_string).collect();
                format!("{{{}}}: ({}, {{}}, may-alias)", idx.join(","), a.parameter)
            })
            .collect();
        format!(", input_output_alias={{ {} }}", entries.join(", "))
    };
    let mut sink = TextSink {
        rules,
        out: format!(
            "HloModule {name}{aliases}, entry_computation_layout={{({})->{}}}\n\n",
            params.join(", "),
            shape_text(&m.result_shape())
        ),
        comp_names: Vec::new(),
        names: HashMap::new(),
    };
    lower::walk(m, &mut sink);
    let mut out = sink.out;
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}
