//! Trees of arrays: `#[derive(Tree)]` on user structs and enums, flattening order,
//! leaf-type changes, rebuilds and their errors. No plugin needed.

use std::marker::PhantomData;

use xlaclient::{Builder, Leaf, Op, Shape, Tree, TreeError};

#[derive(Tree, Clone, Debug, PartialEq)]
struct Layer<T> {
    w: T,
    b: T,
}

#[derive(Tree, Clone, Debug, PartialEq)]
struct Params<T> {
    w1: T,
    b1: T,
    layers: Vec<Layer<T>>,
}

#[derive(Tree, Clone, Debug, PartialEq)]
struct State<T> {
    params: Params<T>,
    step: T,
    hist: Vec<T>,
    opt: Option<T>,
    pair: (T, [T; 2]),
}

/// Every leaf distinct, so the order can be read off the values.
fn state() -> State<f32> {
    State {
        params: Params {
            w1: 1.0,
            b1: 2.0,
            layers: vec![Layer { w: 3.0, b: 4.0 }, Layer { w: 5.0, b: 6.0 }],
        },
        step: 7.0,
        hist: vec![8.0, 9.0, 10.0],
        opt: Some(11.0),
        pair: (12.0, [13.0, 14.0]),
    }
}

#[test]
fn flatten_order_is_declaration_order_depth_first() {
    let s = state();
    // Written out by hand: params.w1, params.b1, layers[0].w, layers[0].b, layers[1].w,
    // layers[1].b, step, hist[0..3], opt, pair.0, pair.1[0], pair.1[1].
    let expected = [
        1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0,
    ];
    let leaves: Vec<f32> = s.leaves().into_iter().copied().collect();
    assert_eq!(leaves, expected);
    assert_eq!(s.num_leaves(), 14);
    assert_eq!(s.clone().into_leaves(), expected);

    let mut visited = Vec::new();
    s.visit(&mut |x| visited.push(*x));
    assert_eq!(visited, expected);

    // Without the optional leaf and with a shorter history, the rest keeps its order.
    let mut t = state();
    t.opt = None;
    t.hist.truncate(1);
    assert_eq!(
        t.into_leaves(),
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 12.0, 13.0, 14.0]
    );
}

#[test]
fn map_ref_changes_the_leaf_type_to_i64() {
    let s = state();
    let i: State<i64> = s.map_ref(|x| (*x as i64) * 100);
    let expected = State {
        params: Params {
            w1: 100i64,
            b1: 200,
            layers: vec![Layer { w: 300, b: 400 }, Layer { w: 500, b: 600 }],
        },
        step: 700,
        hist: vec![800, 900, 1000],
        opt: Some(1100),
        pair: (1200, [1300, 1400]),
    };
    assert_eq!(i, expected);
    // `map` consumes and gives the same result.
    assert_eq!(s.map(|x| (x as i64) * 100), expected);
}

#[test]
fn map_ref_changes_the_leaf_type_to_shape() {
    let spec: State<Shape> = state().map_ref(|x| Shape::of::<f32>(&[*x as i64]));
    assert_eq!(spec.params.layers[1].b, Shape::of::<f32>(&[6]));
    assert_eq!(spec.pair.1[0], Shape::of::<f32>(&[13]));
    let dims: Vec<i64> = spec.leaves().iter().map(|s| s.dims()[0]).collect();
    assert_eq!(dims, (1..=14).collect::<Vec<i64>>());
}

#[test]
fn rebuild_round_trips() {
    let s = state();
    let spec = s.map_ref(|_| Shape::of::<f32>(&[]));
    let flat = s.clone().into_leaves();
    assert_eq!(spec.rebuild(flat.clone()), Ok(s.clone()));
    assert_eq!(
        s.rebuild(flat.iter().map(|x| -x)).unwrap().pair.1,
        [-13.0, -14.0]
    );
}

#[test]
fn rebuild_with_too_few_or_too_many_leaves_is_an_error() {
    let spec = state();
    let short: Vec<i64> = (0..13).collect();
    assert_eq!(
        spec.rebuild(short),
        Err(TreeError::LeafCount {
            expected: 14,
            got: 13
        })
    );
    assert_eq!(
        spec.rebuild(Vec::<i64>::new()),
        Err(TreeError::LeafCount {
            expected: 14,
            got: 0
        })
    );
    let long: Vec<i64> = (0..20).collect();
    let err = spec.rebuild(long).unwrap_err();
    assert_eq!(
        err,
        TreeError::LeafCount {
            expected: 14,
            got: 20
        }
    );
    assert_eq!(
        err.to_string(),
        "tree rebuild: the structure has 14 leaves but 20 were given"
    );
}

#[test]
fn try_map_stops_at_the_first_error_in_flattening_order() {
    let mut calls = 0;
    let r: Result<State<i64>, String> = state().try_map(&mut |x| {
        calls += 1;
        if x > 4.5 {
            Err(format!("{x} too big"))
        } else {
            Ok(x as i64)
        }
    });
    assert_eq!(r, Err("5 too big".to_string()));
    assert_eq!(calls, 5);
}

#[test]
fn zip_map_pairs_params_with_grads() {
    let params = state().params;
    let grads = params.map_ref(|x| x * 10.0);
    let stepped = params.zip_map(&grads, |p, g| p - 0.5 * g).unwrap();
    assert_eq!(
        stepped.into_leaves(),
        [-4.0, -8.0, -12.0, -16.0, -20.0, -24.0]
    );

    let mut short = grads.clone();
    short.layers.pop();
    assert_eq!(
        params.zip_map(&short, |p, g| p + g),
        Err(TreeError::Structure {
            expected: vec![2],
            got: vec![1]
        })
    );
    assert!(!params.same_structure(&short));
}

/// Metadata rides along; a tuple struct and a unit struct are trees too.
#[derive(Tree, Clone, Debug, PartialEq)]
struct Named<T> {
    #[tree(skip)]
    name: String,
    weight: T,
    #[tree(skip)]
    sizes: Vec<usize>,
    act: Relu,
    scale: Scaled<T>,
}

#[derive(Tree, Clone, Debug, PartialEq)]
struct Relu;

#[derive(Tree, Clone, Debug, PartialEq)]
struct Scaled<T>(T, #[tree(skip)] u8, Vec<T>);

#[test]
fn skip_fields_are_carried_and_tuple_and_unit_structs_work() {
    let n = Named {
        name: "dense".to_string(),
        weight: 1.5f32,
        sizes: vec![3, 4],
        act: Relu,
        scale: Scaled(2.5, 7, vec![3.5]),
    };
    assert_eq!(n.leaves(), [&1.5, &2.5, &3.5]);
    let doubled = n.map_ref(|x| (x * 2.0) as i64);
    assert_eq!(
        doubled,
        Named {
            name: "dense".to_string(),
            weight: 3i64,
            sizes: vec![3, 4],
            act: Relu,
            scale: Scaled(5, 7, vec![7]),
        }
    );
    assert_eq!(
        n.rebuild([0i32, 1, 2]).unwrap().scale,
        Scaled(1, 7, vec![2])
    );
    // A unit struct is a leafless tree at every leaf type.
    assert_eq!(<Relu as Tree<f64>>::num_leaves(&Relu), 0);
}

#[derive(Tree, Clone, Debug, PartialEq)]
enum Act<T> {
    Identity,
    Scale(T),
    Affine { a: T, b: Vec<T> },
}

#[test]
fn enums_flatten_the_current_variant_and_record_it() {
    let acts = vec![
        Act::Affine {
            a: 1.0f32,
            b: vec![2.0, 3.0],
        },
        Act::Identity,
        Act::Scale(4.0),
    ];
    assert_eq!(acts.clone().into_leaves(), [1.0, 2.0, 3.0, 4.0]);
    let mut s = Vec::new();
    acts.structure(&mut s);
    // Vec length 3; Affine (variant 2) with b of length 2; Identity (0); Scale (1).
    assert_eq!(s, [3, 2, 2, 0, 1]);
    assert_eq!(
        acts.rebuild([10i64, 20, 30, 40]).unwrap(),
        vec![
            Act::Affine {
                a: 10,
                b: vec![20, 30]
            },
            Act::Identity,
            Act::Scale(40),
        ]
    );
    let other = vec![Act::Scale(1i64), Act::Identity, Act::Scale(2)];
    assert!(matches!(
        acts.zip_map(&other, |x, y| *x as i64 + y),
        Err(TreeError::Structure { .. })
    ));
}

/// Const parameters, lifetimes and PhantomData pass through.
#[derive(Tree, Debug, PartialEq)]
struct Fixed<'a, T, const N: usize> {
    rows: [T; N],
    #[tree(skip)]
    label: &'a str,
    _leaf: PhantomData<T>,
}

#[test]
fn const_generics_lifetimes_and_phantom_data() {
    let f = Fixed {
        rows: [1u32, 2, 3],
        label: "rows",
        _leaf: PhantomData,
    };
    let g: Fixed<'_, bool, 3> = f.map_ref(|x| x % 2 == 1);
    assert_eq!(g.rows, [true, false, true]);
    assert_eq!(g.label, "rows");
}

/// Generic code over any tree of f32.
fn sum<P: Tree<f32>>(p: &P) -> f32 {
    p.leaves().into_iter().sum()
}

#[test]
fn generic_functions_over_trees() {
    assert_eq!(sum(&state()), (1..=14).sum::<i32>() as f32);
    assert_eq!(sum(&(1.0f32, vec![2.0f32], ())), 3.0);
}

/// What `jit` will do: flatten a spec of shapes into parameters, rebuild traced values.
#[test]
fn a_shape_spec_becomes_traced_parameters_in_flattening_order() {
    let spec = Params {
        w1: Shape::of::<f32>(&[2, 3]),
        b1: Shape::of::<f32>(&[3]),
        layers: vec![Layer {
            w: Shape::of::<f32>(&[3, 3]),
            b: Shape::of::<f32>(&[3]),
        }],
    };
    let b = Builder::new("spec");
    let mut number = 0;
    let ops: Params<Op> = spec.map_ref(|shape| {
        let op = b.parameter(number, shape.clone(), &format!("p{number}"));
        number += 1;
        op
    });
    assert_eq!(number, 4);
    let traced: Vec<Option<Shape>> = ops.leaves().iter().map(|op| op.shape().ok()).collect();
    let expected: Vec<Option<Shape>> = spec.into_leaves().into_iter().map(Some).collect();
    assert_eq!(traced, expected);
}

#[test]
fn buffers_ops_and_shapes_are_leaves() {
    fn leaf<T: Leaf + Tree<T>>() {}
    leaf::<xlaclient::Buffer>();
    leaf::<Op>();
    leaf::<Shape>();
    leaf::<bool>();
    leaf::<f64>();
    leaf::<i32>();
    leaf::<u64>();
}

/// A recursive tree: children of the same type.
#[derive(Tree, Debug, PartialEq)]
struct Node<T> {
    value: T,
    children: Vec<Node<T>>,
}

#[test]
fn recursive_trees_flatten_depth_first() {
    let leaf = |v: i32| Node {
        value: v,
        children: Vec::new(),
    };
    let root = Node {
        value: 1,
        children: vec![
            Node {
                value: 2,
                children: vec![leaf(3), leaf(4)],
            },
            leaf(5),
        ],
    };
    assert_eq!(root.leaves(), [&1, &2, &3, &4, &5]);
    let mut s = Vec::new();
    root.structure(&mut s);
    // Child counts in pre-order: root 2, node 2 has 2, leaves 3 and 4 have 0, 5 has 0.
    assert_eq!(s, [2, 2, 0, 0, 0]);
    let negated = root.map(|v| -i64::from(v));
    assert_eq!(negated.children[0].children[1].value, -4);
}

/// A hand-written tree that does not override `visit_paths`: its leaves are numbered.
struct Pair<T> {
    a: T,
    b: T,
}

impl<T: Leaf> Tree<T> for Pair<T> {
    type With<U: Leaf> = Pair<U>;
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a T)) {
        f(&self.a);
        f(&self.b);
    }
    fn try_map_ref<U: Leaf, E>(&self, f: &mut dyn FnMut(&T) -> Result<U, E>) -> Result<Pair<U>, E> {
        Ok(Pair {
            a: f(&self.a)?,
            b: f(&self.b)?,
        })
    }
    fn try_map<U: Leaf, E>(self, f: &mut dyn FnMut(T) -> Result<U, E>) -> Result<Pair<U>, E> {
        Ok(Pair {
            a: f(self.a)?,
            b: f(self.b)?,
        })
    }
    fn structure(&self, _out: &mut Vec<usize>) {}
}

#[derive(Tree)]
struct Mixed<T> {
    named: Named<T>,
    acts: Vec<Act<T>>,
    pair: Pair<T>,
    r#type: T,
}

#[test]
fn leaf_paths_name_fields_indices_and_variants() {
    assert_eq!(
        state().leaf_paths(),
        [
            "params.w1",
            "params.b1",
            "params.layers.0.w",
            "params.layers.0.b",
            "params.layers.1.w",
            "params.layers.1.b",
            "step",
            "hist.0",
            "hist.1",
            "hist.2",
            "opt",
            "pair.0",
            "pair.1.0",
            "pair.1.1",
        ]
    );
    let m = Mixed {
        named: Named {
            name: "dense".to_string(),
            weight: 1.0f32,
            sizes: vec![],
            act: Relu,
            scale: Scaled(2.0, 7, vec![3.0, 4.0]),
        },
        acts: vec![
            Act::Affine {
                a: 5.0,
                b: vec![6.0],
            },
            Act::Identity,
            Act::Scale(7.0),
        ],
        pair: Pair { a: 8.0, b: 9.0 },
        r#type: 10.0,
    };
    let paths = m.leaf_paths();
    assert_eq!(
        paths,
        [
            // Skipped fields and the leafless unit struct add nothing; tuple fields
            // go by index.
            "named.weight",
            "named.scale.0",
            "named.scale.2.0",
            "named.scale.2.1",
            // Enum fields sit under the variant's name.
            "acts.0.Affine.a",
            "acts.0.Affine.b.0",
            "acts.2.Scale.0",
            // The default for hand-written impls: leaves numbered.
            "pair.0",
            "pair.1",
            // A raw identifier without its `r#`.
            "type",
        ]
    );
    // Paths and leaves come in the same order, and `path` is restored afterwards.
    let mut pairs = Vec::new();
    let mut prefix = String::from("root");
    m.visit_paths(&mut prefix, &mut |p, x| pairs.push((p.to_string(), *x)));
    assert_eq!(prefix, "root");
    assert_eq!(pairs.len(), m.num_leaves());
    assert_eq!(pairs[0], ("root.named.weight".to_string(), 1.0));
    assert_eq!(pairs[9], ("root.type".to_string(), 10.0));
    let leaves: Vec<f32> = pairs.iter().map(|(_, x)| *x).collect();
    assert_eq!(leaves, m.into_leaves());
    // A bare leaf's path is empty.
    assert_eq!(1.0f32.leaf_paths(), [""]);
}
