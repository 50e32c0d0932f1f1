//! `XLA_FLAGS`, honoured as JAX honours it: the flags of XLA's debug options are
//! read from the environment when compile options are made and sent with every
//! compile, and `--xla_force_host_platform_device_count` sets the CPU client's
//! device count.
//!
//! The plugin itself ignores `XLA_FLAGS` once it is given debug options, which this
//! crate always sends (XLA's defaults, then its own settings), so the crate reads
//! the variable itself. Precedence, weakest first:
//!
//! 1. XLA's defaults ([`XLA_DEBUG_DEFAULTS`](crate::XLA_DEBUG_DEFAULTS));
//! 2. the crate's defaults (NaN-propagating `maximum`/`minimum`);
//! 3. `XLA_FLAGS`;
//! 4. what the program sets: [`CompileOptions::fast_min_max`](crate::CompileOptions::fast_min_max),
//!    [`CompileOptions::dump_to`](crate::CompileOptions::dump_to) (or
//!    `XLACLIENT_DUMP_TO`), then fields set through
//!    [`CompileOptions::proto_mut`](crate::CompileOptions::proto_mut).
//!
//! The flags understood are the debug options this crate declares (see
//! [`FLAGS`]); any other flag is an error naming it, rather than a setting silently
//! dropped. It is checked before a client is made: the plugins themselves read
//! `XLA_FLAGS` when a client is created and abort the process on a flag they do
//! not know ("Unknown flag in XLA_FLAGS"), so a bad one must never reach them.
//! Syntax, as XLA reads it: flags separated by whitespace, `--name=value`, or
//! `--name` for `true`; booleans are `true`, `false`, `1` or `0`; list flags take
//! comma-separated values; `--xla_backend_extra_options` takes comma-separated
//! `KEY=VALUE` pairs (a key alone is an empty value), the backend's free-form
//! options, such as the CPU backend's `xla_cpu_small_while_loop_byte_threshold`
//! (while loops of a smaller footprint are compiled into one kernel; 1 kB by
//! default).

use crate::proto::DebugOptions;

/// The flags of `XLA_FLAGS` this crate passes on, by name.
pub const FLAGS: &[&str] = &[
    "xla_hlo_profile",
    "xla_disable_hlo_passes",
    "xla_enable_hlo_passes_only",
    "xla_disable_all_hlo_passes",
    "xla_backend_optimization_level",
    "xla_embed_ir_in_executable",
    "xla_allow_excess_precision",
    "xla_force_host_platform_device_count",
    "xla_llvm_disable_expensive_passes",
    "xla_cpu_multi_thread_eigen",
    "xla_cpu_enable_fast_math",
    "xla_cpu_enable_fast_min_max",
    "xla_cpu_fast_math_honor_nans",
    "xla_cpu_fast_math_honor_infs",
    "xla_cpu_fast_math_honor_division",
    "xla_cpu_fast_math_honor_functions",
    "xla_cpu_prefer_vector_width",
    "xla_cpu_max_isa",
    "xla_cpu_use_xnnpack",
    "xla_cpu_experimental_ynn_fusion_type",
    "xla_gpu_enable_fast_min_max",
    "xla_gpu_autotune_level",
    "xla_gpu_deterministic_ops",
    "xla_dump_to",
    "xla_dump_hlo_module_re",
    "xla_dump_hlo_pass_re",
    "xla_dump_hlo_as_text",
    "xla_dump_hlo_as_proto",
    "xla_dump_hlo_as_dot",
    "xla_dump_hlo_as_html",
    "xla_dump_hlo_snapshots",
    "xla_dump_include_timestamp",
    "xla_dump_max_hlo_modules",
    "xla_dump_disable_metadata",
    "xla_dump_large_constants",
    "xla_backend_extra_options",
];

/// Parses `XLA_FLAGS`-style text into debug options, or says which flag is wrong.
pub fn parse(text: &str) -> Result<DebugOptions, String> {
    let mut d = DebugOptions::default();
    for word in text.split_whitespace() {
        let Some(flag) = word.strip_prefix("--") else {
            return Err(format!("`{word}` is not a flag (flags start with --)"));
        };
        let (name, value) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (flag, None),
        };
        set(&mut d, name, value).map_err(|e| format!("--{name}: {e}"))?;
    }
    Ok(d)
}

fn boolean(v: Option<&str>) -> Result<Option<bool>, String> {
    match v {
        None | Some("true") | Some("1") => Ok(Some(true)),
        Some("false") | Some("0") => Ok(Some(false)),
        Some(other) => Err(format!("`{other}` is not true or false")),
    }
}

fn int(v: Option<&str>) -> Result<Option<i32>, String> {
    let v = v.ok_or("needs a value (--name=N)")?;
    v.parse()
        .map(Some)
        .map_err(|_| format!("`{v}` is not an integer"))
}

fn string(v: Option<&str>) -> Result<Option<String>, String> {
    v.map(|s| Some(s.to_string()))
        .ok_or_else(|| "needs a value (--name=VALUE)".to_string())
}

fn list(v: Option<&str>) -> Result<Vec<String>, String> {
    let v = v.ok_or("needs a value (--name=A,B)")?;
    Ok(v.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect())
}

fn set(d: &mut DebugOptions, name: &str, v: Option<&str>) -> Result<(), String> {
    match name {
        "xla_hlo_profile" => d.xla_hlo_profile = boolean(v)?,
        "xla_disable_hlo_passes" => d.xla_disable_hlo_passes = list(v)?,
        "xla_enable_hlo_passes_only" => d.xla_enable_hlo_passes_only = list(v)?,
        "xla_disable_all_hlo_passes" => d.xla_disable_all_hlo_passes = boolean(v)?,
        "xla_backend_optimization_level" => d.xla_backend_optimization_level = int(v)?,
        "xla_embed_ir_in_executable" => d.xla_embed_ir_in_executable = boolean(v)?,
        "xla_allow_excess_precision" => d.xla_allow_excess_precision = boolean(v)?,
        "xla_force_host_platform_device_count" => d.xla_force_host_platform_device_count = int(v)?,
        "xla_llvm_disable_expensive_passes" => d.xla_llvm_disable_expensive_passes = boolean(v)?,
        "xla_cpu_multi_thread_eigen" => d.xla_cpu_multi_thread_eigen = boolean(v)?,
        "xla_cpu_enable_fast_math" => d.xla_cpu_enable_fast_math = boolean(v)?,
        "xla_cpu_enable_fast_min_max" => d.xla_cpu_enable_fast_min_max = boolean(v)?,
        "xla_cpu_fast_math_honor_nans" => d.xla_cpu_fast_math_honor_nans = boolean(v)?,
        "xla_cpu_fast_math_honor_infs" => d.xla_cpu_fast_math_honor_infs = boolean(v)?,
        "xla_cpu_fast_math_honor_division" => d.xla_cpu_fast_math_honor_division = boolean(v)?,
        "xla_cpu_fast_math_honor_functions" => d.xla_cpu_fast_math_honor_functions = boolean(v)?,
        "xla_cpu_prefer_vector_width" => d.xla_cpu_prefer_vector_width = int(v)?,
        "xla_cpu_max_isa" => d.xla_cpu_max_isa = string(v)?,
        "xla_cpu_use_xnnpack" => d.xla_cpu_use_xnnpack = boolean(v)?,
        // The list replaces XLA's (see `CompileOptions::library_fusions`); XLA's
        // `+kind`/`-kind` edits are not read.
        "xla_cpu_experimental_ynn_fusion_type" => {
            d.xla_cpu_experimental_ynn_fusion_type = list(v)?
                .iter()
                .map(|t| {
                    crate::LibraryFusion::from_name(t)
                        .map(crate::LibraryFusion::number)
                        .ok_or_else(|| {
                            format!(
                                "`{t}` is not a library fusion (dot, eltwise, reduce, \
                                 individual_dot, individual_convolution)"
                            )
                        })
                })
                .collect::<Result<_, _>>()?;
        }
        "xla_gpu_enable_fast_min_max" => d.xla_gpu_enable_fast_min_max = boolean(v)?,
        "xla_gpu_autotune_level" => d.xla_gpu_autotune_level = int(v)?,
        "xla_gpu_deterministic_ops" => d.xla_gpu_deterministic_ops = boolean(v)?,
        "xla_dump_to" => d.xla_dump_to = string(v)?,
        "xla_dump_hlo_module_re" => d.xla_dump_hlo_module_re = string(v)?,
        "xla_dump_hlo_pass_re" => d.xla_dump_hlo_pass_re = string(v)?,
        "xla_dump_hlo_as_text" => d.xla_dump_hlo_as_text = boolean(v)?,
        "xla_dump_hlo_as_proto" => d.xla_dump_hlo_as_proto = boolean(v)?,
        "xla_dump_hlo_as_dot" => d.xla_dump_hlo_as_dot = boolean(v)?,
        "xla_dump_hlo_as_html" => d.xla_dump_hlo_as_html = boolean(v)?,
        "xla_dump_hlo_snapshots" => d.xla_dump_hlo_snapshots = boolean(v)?,
        "xla_dump_include_timestamp" => d.xla_dump_include_timestamp = boolean(v)?,
        "xla_dump_max_hlo_modules" => d.xla_dump_max_hlo_modules = int(v)?,
        "xla_dump_disable_metadata" => d.xla_dump_disable_metadata = boolean(v)?,
        "xla_dump_large_constants" => d.xla_dump_large_constants = boolean(v)?,
        "xla_backend_extra_options" => {
            // As XLA reads it: `key=value` pairs separated by commas, a key alone
            // meaning an empty value; later pairs replace earlier ones.
            let v = v.ok_or("needs a value (--name=KEY=VALUE,KEY2=VALUE2)")?;
            for pair in v.split(',').filter(|p| !p.is_empty()) {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                if key.is_empty() {
                    return Err(format!("`{pair}` has no key (give KEY=VALUE)"));
                }
                d.xla_backend_extra_options
                    .insert(key.to_string(), value.to_string());
            }
        }
        _ => {
            return Err(
                "not a flag this crate passes on to XLA (xlaclient_pjrt::xla_flags::FLAGS \
                 lists them; CompileOptions::proto_mut sets debug options from code)"
                    .into(),
            );
        }
    }
    // As XLA does: a dump directory without a format dumps text.
    if name == "xla_dump_to" && d.xla_dump_hlo_as_text.is_none() {
        d.xla_dump_hlo_as_text = Some(true);
    }
    Ok(())
}

/// `XLA_FLAGS` of the environment, parsed (empty when unset).
pub fn from_env() -> Result<DebugOptions, String> {
    parse(&std::env::var("XLA_FLAGS").unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_fusions_parse_by_name() {
        let d = parse("--xla_cpu_experimental_ynn_fusion_type=dot,REDUCE").unwrap();
        assert_eq!(d.xla_cpu_experimental_ynn_fusion_type, vec![1, 3]);
        let e = parse("--xla_cpu_experimental_ynn_fusion_type=dot,+eltwise").unwrap_err();
        assert!(e.contains("`+eltwise` is not a library fusion"), "{e}");
    }

    #[test]
    fn flags_parse_as_xla_writes_them() {
        let d = parse(
            "--xla_dump_to=/tmp/d --xla_cpu_enable_fast_math=false \
             --xla_backend_optimization_level=1 --xla_cpu_multi_thread_eigen=0 \
             --xla_disable_hlo_passes=a,b --xla_hlo_profile",
        )
        .unwrap();
        assert_eq!(d.xla_dump_to.as_deref(), Some("/tmp/d"));
        assert_eq!(d.xla_dump_hlo_as_text, Some(true));
        assert_eq!(d.xla_cpu_enable_fast_math, Some(false));
        assert_eq!(d.xla_backend_optimization_level, Some(1));
        assert_eq!(d.xla_cpu_multi_thread_eigen, Some(false));
        assert_eq!(d.xla_disable_hlo_passes, vec!["a", "b"]);
        assert_eq!(d.xla_hlo_profile, Some(true));
        assert_eq!(parse("").unwrap(), DebugOptions::default());
        let d = parse(
            "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=65536,flag_only",
        )
        .unwrap();
        assert_eq!(d.xla_backend_extra_options.len(), 2);
        assert_eq!(
            d.xla_backend_extra_options["xla_cpu_small_while_loop_byte_threshold"],
            "65536"
        );
        assert_eq!(d.xla_backend_extra_options["flag_only"], "");
        // Every flag of the list is one `set` knows.
        for f in FLAGS {
            let text = [
                "xla_disable_hlo_passes",
                "xla_enable_hlo_passes_only",
                "xla_dump_to",
                "xla_dump_hlo_module_re",
                "xla_dump_hlo_pass_re",
                "xla_cpu_max_isa",
                "xla_backend_extra_options",
            ];
            let numbers = [
                "xla_backend_optimization_level",
                "xla_force_host_platform_device_count",
                "xla_cpu_prefer_vector_width",
                "xla_gpu_autotune_level",
                "xla_dump_max_hlo_modules",
            ];
            let value = if text.contains(f) {
                "x"
            } else if *f == "xla_cpu_experimental_ynn_fusion_type" {
                "dot"
            } else if numbers.contains(f) {
                "1"
            } else {
                "true"
            };
            parse(&format!("--{f}={value}")).unwrap_or_else(|e| panic!("{f}: {e}"));
        }
    }

    #[test]
    fn bad_flags_are_named() {
        let e = parse("--xla_not_a_flag=1").unwrap_err();
        assert!(e.contains("--xla_not_a_flag"), "{e}");
        let e = parse("--xla_backend_optimization_level=high").unwrap_err();
        assert!(e.contains("not an integer"), "{e}");
        let e = parse("--xla_cpu_enable_fast_math=maybe").unwrap_err();
        assert!(e.contains("not true or false"), "{e}");
        assert!(parse("xla_dump_to=/x").is_err());
        let e = parse("--xla_backend_extra_options==1").unwrap_err();
        assert!(e.contains("no key"), "{e}");
        assert!(parse("--xla_backend_extra_options").is_err());
        // Forms XLA's own parser refuses (and aborts on) are refused here.
        assert!(parse("--noxla_hlo_profile").is_err());
        assert!(parse("-xla_hlo_profile=true").is_err());
    }
}
