//! The JAX parity page (guide/16-jax-parity.md, issue 24) kept true: one row per
//! name of `../shared/jax-surface.tsv` (copied to `tests/data/jax_surface.tsv`,
//! and checked equal to it where a checkout has it beside it), each status one of `same`, `differs: why`,
//! `missing: issue`, `n/a: why`, and every Rust path the page names compiles: the
//! set of paths on the page must equal the set this file names in
//! [`compile_check`], which the compiler type-checks. The two `same` shares
//! (of uses and of names) are printed and may not fall below the floor.

#![allow(clippy::type_complexity, unused_imports)]

use std::collections::{BTreeMap, BTreeSet};

use xlaclient::*;

/// Each path the page names, as written there; with `=> expr`, an expression
/// that uses it (generic and trait items need their types), else the path itself
/// as a value.
macro_rules! paths {
    ($($($seg:ident)::+ $(=> $e:expr)?;)*) => {
        /// The paths, as the page spells them, with the segments each expression must use.
        fn named_paths() -> Vec<(String, String)> {
            vec![$((
                stringify!($($seg)::+).replace(' ', ""),
                paths!(@text $($seg)::+ $(, $e)?),
            )),*]
        }

        /// Never run: it exists to be compiled, so a path that is gone fails the build.
        #[allow(dead_code, unused_variables, clippy::redundant_closure)]
        fn compile_check() {
            $( paths!(@use $($seg)::+ $(, $e)?); )*
        }
    };
    (@text $($seg:ident)::+) => { stringify!($($seg)::+).replace(' ', "") };
    (@text $($seg:ident)::+, $e:expr) => { stringify!($e).to_string() };
    (@use $($seg:ident)::+) => { let _ = $($seg)::+; };
    (@use $($seg:ident)::+, $e:expr) => { let _ = $e; };
}

paths! {
    Op::dirichlet;
    Op::rademacher;
    Op::ball => |k: &Op| k.ball(2, 2.0f32, &[1], ElementType::F32);
    Op::beta => |k: &Op| k.beta(1.0f32, 1.0f32, &[1], ElementType::F32);
    Op::binomial => |k: &Op| k.binomial(3.0f32, 0.5f32, &[1], ElementType::F32);
    Op::cauchy;
    Op::chisquare => |k: &Op| k.chisquare(1.0f32, &[1], ElementType::F32);
    Op::double_sided_maxwell => |k: &Op| k.double_sided_maxwell(0.0f32, 1.0f32, &[1], ElementType::F32);
    Op::exponential;
    Op::f_sample => |k: &Op| k.f_sample(1.0f32, 1.0f32, &[1], ElementType::F32);
    Op::gamma => |k: &Op| k.gamma(1.0f32, &[1], ElementType::F32);
    Op::generalized_normal => |k: &Op| k.generalized_normal(2.0f32, &[1], ElementType::F32);
    Op::geometric => |k: &Op| k.geometric(0.5f32, &[1], ElementType::S32);
    Op::laplace;
    Op::loggamma => |k: &Op| k.loggamma(1.0f32, &[1], ElementType::F32);
    Op::logistic_sample;
    Op::lognormal => |k: &Op| k.lognormal(1.0f32, &[1], ElementType::F32);
    Op::maxwell;
    Op::multinomial => |k: &Op, p: &Op| k.multinomial(3.0f32, p, &[1], ElementType::F32);
    Op::multivariate_normal;
    Op::orthogonal;
    Op::pareto => |k: &Op| k.pareto(1.0f32, &[1], ElementType::F32);
    Op::poisson => |k: &Op| k.poisson(1.0f32, &[1], ElementType::S32);
    Op::rayleigh => |k: &Op| k.rayleigh(1.0f32, &[1], ElementType::F32);
    Op::student_t => |k: &Op| k.student_t(1.0f32, &[1], ElementType::F32);
    Op::triangular => |k: &Op| k.triangular(0.0f32, 0.5f32, 1.0f32, &[1], ElementType::F32);
    Op::wald => |k: &Op| k.wald(1.0f32, &[1], ElementType::F32);
    Op::weibull_min => |k: &Op| k.weibull_min(1.0f32, 1.0f32, &[1], ElementType::F32);
    Builder::constant => Builder::constant::<f32>;
    Builder::constant_vec => Builder::constant_vec::<f32>;
    Builder::constant_array => Builder::constant_array::<f32>;
    Builder::stack;
    ElementType::S32;
    Op::convert;
    Tree::map => |t: Vec<Op>| <Vec<Op> as Tree<Op>>::map(t, |l: Op| l);
    Tree::map_ref => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::map_ref(t, |l: &Op| l.clone());
    Tree::zip_map => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::zip_map(t, t, |l: &Op, _: &Op| l.clone());
    ElementType::F32;
    Builder::zeros;
    Builder::where_;
    Op::random_split;
    Builder::select;
    Builder::vmap => |b: &Builder, v: &Vmap, x: Op| Builder::vmap(b, v, x, |_, x: Op| x);
    Builder::arange;
    Op::sum;
    Builder::cond => |b: &Builder, p: &Op, x: Op| Builder::cond(b, p, x, |x: Op| x, |x: Op| x);
    Op::stop_gradient;
    Builder::prng_key;
    Builder::rbg_key;
    Op::and;
    Op::reshape;
    Op::max;
    Builder::ones;
    Builder::scan => |b: &Builder, c: Op, x: Op| Builder::scan(b, c, x, |c: Op, x: Op| (c, x));
    Builder::scan_with => |b: &Builder, c: Op, x: Op, o: &ScanOptions| Builder::scan_with(b, c, x, o, |c: Op, x: Op| (c, x));
    Op::clip => |x: &Op| Op::clip(x, 0.0, 1.0);
    Op::clamp;
    Op::sqrt;
    Op::zeros_like;
    ClientExt::jit => |c: &Client, s: &Shape| ClientExt::jit(c, "f", s, |_, x: Op| x).is_ok();
    ClientExt::jit_donating => |c: &Client, s: &Shape| ClientExt::jit_donating(c, "f", s, |_, x: Op| x).is_ok();
    Op::mean;
    Tree::leaves => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::leaves(t).len();
    Tree::into_leaves => |t: Vec<Op>| <Vec<Op> as Tree<Op>>::into_leaves(t);
    Op::abs;
    Op::min;
    Builder::concatenate;
    Op::expand_dims;
    Op::square;
    Op::uniform => |k: &Op| Op::uniform(k, &[2], ElementType::F32, 0.0, 1.0);
    Op::ones_like;
    Op::any;
    Op::randint => |k: &Op| Op::randint(k, &[2], 0, 5);
    Op::amax;
    Op::choice => |k: &Op| Op::choice(k, 5, &[2], true, None);
    Op::or;
    Tree::leaf_paths => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::leaf_paths(t);
    Op::broadcast_to;
    Op::all;
    Builder::full;
    Op::full_like;
    Op::repeat;
    Op::exp;
    Tree::structure => |t: &Vec<Op>, out: &mut Vec<usize>| <Vec<Op> as Tree<Op>>::structure(t, out);
    Op::cos;
    Op::matmul;
    Op::matmul_with;
    Op::shape;
    Precision => Precision::Highest;
    Op::bernoulli => |k: &Op| Op::bernoulli(k, 0.5, &[2]);
    Tree::rebuild => |t: &Vec<Op>, l: Vec<Op>| <Vec<Op> as Tree<Op>>::rebuild(t, l).is_ok();
    Op::squeeze;
    Builder::while_loop => |b: &Builder, x: Op| Builder::while_loop(b, x, |x: &Op| x.clone(), |x: Op| x);
    Op::one_hot;
    Op::reverse;
    Builder::switch => |b: &Builder, i: &Op, x: Op| Builder::switch(b, i, x, Box::new(|x: Op| x), vec![]);
    Op::normal;
    Op::log;
    Op::linalg_norm;
    NormOrd => NormOrd::Fro;
    Op::sin;
    Op::rsqrt;
    Tree::same_structure => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::same_structure(t, t);
    Op::dot;
    Op::relu;
    nn::layers::relu;
    sharding::PartitionSpec => None::<sharding::PartitionSpec>;
    sharding::P => None::<sharding::P>;
    Op::roll;
    Op::divmod;
    Op::dot_general;
    Op::dot_general_with;
    Op::split;
    Op::sign;
    Op::permutation;
    Op::shuffle;
    Tree => { fn is_tree<T: Tree<Op>>() {} is_tree::<Vec<Op>> };
    Op::take;
    Op::take_with;
    ElementType::Pred;
    Builder::einsum;
    Builder::einsum_many;
    Builder::vectorize => |b: &Builder, x: &Op| Builder::vectorize(b, "", &[x], |_, v: Vec<Op>| v[0].clone());
    Op::not;
    Op::amin;
    ElementType::S16;
    ElementType::U8;
    Op::softmax;
    nn::layers::softmax;
    Op::logistic;
    nn::layers::sigmoid;
    Builder::value_and_grad => |b: &Builder, p: Op| Builder::value_and_grad(b, p, |p: Op| (p, ()));
    Op::transpose;
    Op::t;
    Op::tanh;
    Op::equal => |x: &Op| Op::equal(x, 0.0);
    Op::compare;
    Builder::fori_loop => |b: &Builder, x: Op| Builder::fori_loop(b, 0, 1, x, |_, x: Op| x);
    Builder::debug_callback => |b: &Builder, x: Op| Builder::debug_callback(b, &[&x], |_| {});
    Builder::debug_print => |b: &Builder, x: Op| Builder::debug_print(b, "{}", &[&x]);
    Op::dynamic_slice;
    Op::dynamic_update_slice;
    tree::keystr;
    Tree::leaves_with_path => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::leaves_with_path(t).len();
    Tree::map_with_path => |t: &Vec<Op>| <Vec<Op> as Tree<Op>>::map_with_path(t, |_, l: &Op| l.clone());
    Op::argmax;
    Op::pad;
    Op::pad_mode;
    PadMode => PadMode::Wrap;
    Op::moveaxis;
    Op::array_equal;
    Op::isnan;
    Op::pmean_axis => |x: &Op| Op::pmean_axis(x, "i");
    Vmap::axis_name;
    pjrt::Device => None::<pjrt::Device>;
    Op::pow;
    Op::tile;
    sharding::Mesh => None::<sharding::Mesh>;
    ElementType::U32;
    Op::var;
    Op::var_ddof;
    Builder::grad => |b: &Builder, l: &Op, p: &Op| Builder::grad(b, l, p);
    Op::take_along_axis;
    Op::take_along_axis_with;
    Op::floor;
    Op::argmin;
    Shape => Shape::of::<f32>;
    Op::count_nonzero;
    Builder::linspace;
    Op::isin;
    ElementType::S8;
    Op::cumsum;
    Op::isinf;
    Op::conv_general_dilated;
    Op::log_softmax;
    nn::layers::log_softmax;
    Op::categorical;
    Op::categorical_with;
    Op::gumbel;
    Op::truncated_normal => |k: &Op| Op::truncated_normal(k, -1.0, 1.0, &[2]);
    Op::sort_ascending;
    Builder::sort => |b: &Builder, x: &[&Op]| Builder::sort(b, x, 0, true, |l: &[Op], _: &[Op]| l[0].clone());
    Builder::eye;
    Op::vdot;
    ConvDims => None::<ConvDims>;
    Op::psum_axis => |x: &Op| Op::psum_axis(x, "i");
    Op::reduce_window => |x: &Op, w: &[WindowDim]| Op::reduce_window(x, x, w, |a: &Op, _: &Op| a.clone());
    Builder::reduce_window_many => |b: &Builder, x: &[&Op], w: &[WindowDim]| Builder::reduce_window_many(b, x, x, w, |a: &[Op], _: &[Op]| a.to_vec());
    Op::random_bits;
    Builder::jvp_fn => |b: &Builder, p: Op, t: Op| Builder::jvp_fn(b, p, t, |p: Op| p);
    Builder::vjp;
    Op::tril;
    Op::argsort;
    Op::unique;
    Op::conv_transpose;
    ConvTransposePadding => ConvTransposePadding::Same;
    Op::ge => |x: &Op| Op::ge(x, 0.0);
    ElementType::S64;
    Op::is_finite;
    Op::nan_to_num;
    Op::swapaxes;
    Op::atan2;
    Op::real;
    ElementType::F8E4M3FN;
    ElementType::F8E5M2;
    float8::F8E4M3FN;
    float8::F8E5M2;
    Builder::checkpoint => |b: &Builder, x: &Op| b.checkpoint("f", &[x], |_, a| a.to_vec());
    Op::imag;
    Op::logaddexp;
    Op::outer;
    Op::unravel_index;
    Op::add;
    Op::log_sigmoid;
    Builder::custom_vjp => |b: &Builder, a: &[&Op]| Builder::custom_vjp(b, "f", a, |_, x: &[Op]| x.to_vec(), |_, _, c: &[Op]| c.to_vec());
    ScanOptions::policy;
    Op::checkpoint_name;
    Op::ceil;
    Op::diag;
    Op::lt => |x: &Op| Op::lt(x, 0.0);
    Op::log1p;
    Op::top_k;
}

const PAGE: &str = include_str!("../guide/16-jax-parity.md");
const SURFACE: &str = include_str!("data/jax_surface.tsv");

/// The floors: the shares (in tenths of a percent) when the page was last updated.
const FLOOR_USES_PERMILLE: u64 = 983;
const FLOOR_NAMES_PERMILLE: u64 = 980;

/// (JAX name, Rust cell, status cell) for each table row.
fn rows() -> Vec<(String, String, String)> {
    PAGE.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim().trim_matches('|').split(" | ").collect();
            assert_eq!(cells.len(), 3, "a row needs three cells: {l}");
            let name = cells[0].trim();
            assert!(
                name.starts_with('`') && name.ends_with('`') && name.matches('`').count() == 2,
                "first cell is the backticked JAX name: {l}"
            );
            (
                name.trim_matches('`').to_string(),
                cells[1].trim().to_string(),
                cells[2].trim().to_string(),
            )
        })
        .collect()
}

fn surface() -> BTreeMap<String, u64> {
    SURFACE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[1].parse().expect("a use count"))
        })
        .collect()
}

/// The backticked Rust paths of a second cell.
fn cell_paths(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .filter(|p| {
            p.split("::")
                .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        })
        .map(str::to_string)
        .collect()
}

/// The committed copy is the shared list, where a checkout has it beside it.
#[test]
fn the_copy_of_the_surface_list_is_current() {
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/jax-surface.tsv");
    if let Ok(text) = std::fs::read_to_string(&shared) {
        assert_eq!(
            text, SURFACE,
            "tests/data/jax_surface.tsv differs from ../shared/jax-surface.tsv: copy it over"
        );
    }
}

#[test]
fn every_surface_name_has_exactly_one_row() {
    let names = surface();
    assert_eq!(names.len(), 205, "jax-surface.tsv lists 205 names");
    let mut seen = BTreeMap::new();
    for (name, _, _) in rows() {
        *seen.entry(name).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "names with more than one row: {twice:?}");
    let page: BTreeSet<&String> = seen.keys().collect();
    let tsv: BTreeSet<&String> = names.keys().collect();
    assert_eq!(
        tsv.difference(&page).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "TSV names without a row"
    );
    assert_eq!(
        page.difference(&tsv).collect::<Vec<_>>(),
        Vec::<&&String>::new(),
        "rows for names not in the TSV"
    );
}

#[test]
fn statuses_have_the_four_forms() {
    for (name, rust, status) in rows() {
        let ok = status == "same"
            || ["differs: ", "missing: ", "n/a: "]
                .iter()
                .any(|p| status.starts_with(p) && status.len() > p.len() + 2);
        assert!(
            ok,
            "{name}: status `{status}` is not same / differs: why / missing: issue / n/a: why"
        );
        if status.starts_with("missing: ") {
            assert!(
                status.contains("issue"),
                "{name}: a missing row names its issue"
            );
        }
        if status == "same" {
            assert!(
                !cell_paths(&rust).is_empty(),
                "{name}: a `same` row names its Rust path"
            );
        }
    }
}

#[test]
fn every_path_on_the_page_compiles() {
    let page: BTreeSet<String> = rows().iter().flat_map(|(_, r, _)| cell_paths(r)).collect();
    let named = named_paths();
    let checked: BTreeSet<String> = named.iter().map(|(p, _)| p.clone()).collect();
    assert_eq!(
        page.difference(&checked).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "paths on the page that compile_check does not name"
    );
    assert_eq!(
        checked.difference(&page).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "paths compile_check names that the page does not"
    );
    // Each expression standing in for a path uses every segment of it.
    for (path, expr) in &named {
        let e = expr.replace(' ', "");
        for seg in path.split("::") {
            assert!(
                e.contains(seg),
                "`{path}`: its check `{expr}` does not use `{seg}`"
            );
        }
    }
}

#[test]
fn shares_do_not_fall() {
    let names = surface();
    let status: BTreeMap<String, String> = rows().into_iter().map(|(n, _, s)| (n, s)).collect();
    let total: u64 = names.values().sum();
    let same: Vec<&String> = names.keys().filter(|n| status[*n] == "same").collect();
    let uses: u64 = same.iter().map(|n| names[*n]).sum();
    let per_uses = uses * 1000 / total;
    let per_names = same.len() as u64 * 1000 / names.len() as u64;
    println!(
        "same share of uses: {uses}/{total} = {:.1}%; of names: {}/{} = {:.1}%",
        100.0 * uses as f64 / total as f64,
        same.len(),
        names.len(),
        100.0 * same.len() as f64 / names.len() as f64
    );
    assert!(
        per_uses >= FLOOR_USES_PERMILLE,
        "same share of uses fell to {per_uses}‰"
    );
    assert!(
        per_names >= FLOOR_NAMES_PERMILLE,
        "same share of names fell to {per_names}‰"
    );
}
