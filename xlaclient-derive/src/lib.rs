//! `#[derive(Tree)]` for [xlaclient](https://docs.rs/xlaclient): flattens a struct (or
//! enum) generic over its leaf type into its leaves, in a fixed order, and rebuilds it
//! with leaves of another type. Use it through `xlaclient::Tree`, which re-exports it
//! next to the trait of the same name (as serde does).

#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2, TokenTree};
use quote::{format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{
    Data, DeriveInput, Error, Fields, GenericParam, Generics, Ident, Member, Result, Type,
    WherePredicate, parse_quote,
};

/// Derives `xlaclient::tree::Tree<T>` for a struct or enum generic over its leaf type `T`.
///
/// ```text
/// #[derive(Tree)]
/// struct Params<T> {
///     w1: T,                    // a leaf
///     layers: Vec<Layer<T>>,    // any Tree<T>: Vec, [_; N], Option, tuples, derived types
///     #[tree(skip)]
///     name: String,             // metadata: cloned (or moved) into the rebuilt value
/// }
/// ```
///
/// Leaves are visited field by field in declaration order, depth first; an enum visits
/// the fields of its current variant (and records the variant in `Tree::structure`).
/// `Tree::visit_paths` names each leaf by the path of field names (tuple fields by
/// index, an enum's fields under the variant's name) that leads to it, `w1` or
/// `layers.0.w`.
/// Named-field, tuple and unit structs and all kinds of enum variants are supported.
///
/// Rules, each a compile error with its own message:
/// - at most one type parameter, the leaf type; it may have no bounds (the trait
///   rebuilds `Params<U>` for every leaf type `U`). Lifetimes and const parameters pass
///   through. A type with no type parameter is a leafless tree, usable at every leaf type.
/// - every field not marked `#[tree(skip)]` must itself be a `Tree<T>`;
/// - a `#[tree(skip)]` field's type must not mention the leaf type, and must be `Clone`
///   (`try_map_ref` clones it);
/// - unions are rejected; a type that implements `Drop` cannot be destructured, so
///   `try_map` does not compile for it.
///
/// Generated code names the trait through the crate that the deriving package
/// depends on: `::xlaclient::tree::Tree` where it depends on the facade `xlaclient`
/// (under whatever name), else `::xlaclient_core::tree::Tree` (the `nn` and `rl`
/// crates, and the core itself, which declares `extern crate self as
/// xlaclient_core`).
#[proc_macro_derive(Tree, attributes(tree))]
pub fn derive_tree(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    expand(&input)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// One field of a variant: how to name it, its type, and whether it is metadata.
struct FieldInfo {
    member: Member,
    ty: Type,
    skip: bool,
    binding: Ident,
}

/// One constructor: the struct itself, or one enum variant.
struct VariantInfo {
    path: TokenStream2,
    /// The variant's name as a leaf-path segment (`None` for a struct).
    segment: Option<String>,
    fields: Vec<FieldInfo>,
}

fn expand(input: &DeriveInput) -> Result<TokenStream2> {
    for attr in &input.attrs {
        if attr.path().is_ident("tree") {
            return Err(Error::new(
                attr.span(),
                "#[tree(...)] goes on fields (#[tree(skip)]), not on the type",
            ));
        }
    }
    let name = &input.ident;
    let leaf = leaf_param(&input.generics)?;

    let variants = match &input.data {
        Data::Struct(s) => vec![VariantInfo {
            path: quote!(#name),
            segment: None,
            fields: fields(&s.fields, leaf.as_ref())?,
        }],
        Data::Enum(e) => {
            let mut out = Vec::new();
            for v in &e.variants {
                if let Some(attr) = v.attrs.iter().find(|a| a.path().is_ident("tree")) {
                    return Err(Error::new(
                        attr.span(),
                        "#[tree(...)] goes on fields (#[tree(skip)]), not on variants",
                    ));
                }
                let ident = &v.ident;
                out.push(VariantInfo {
                    path: quote!(#name::#ident),
                    segment: Some(ident.unraw().to_string()),
                    fields: fields(&v.fields, leaf.as_ref())?,
                });
            }
            out
        }
        Data::Union(u) => {
            return Err(Error::new(
                u.union_token.span,
                "#[derive(Tree)] does not support unions: which field holds the leaves is not known",
            ));
        }
    };
    let is_enum = matches!(input.data, Data::Enum(_));

    let root = crate_root();
    let tree = quote!(#root::tree::Tree);
    let leaf_trait = quote!(#root::tree::Leaf);
    let u = Ident::new("__TreeU", Span::call_site());

    // Impl generics: the type's own, with `T: Leaf` (or a fresh `__TreeL: Leaf` for a
    // type with no leaf parameter).
    let mut impl_generics = input.generics.clone();
    let leaf_ty: Ident = match &leaf {
        Some(t) => {
            for p in impl_generics.type_params_mut() {
                if p.ident == *t {
                    p.bounds.push(parse_quote!(#leaf_trait));
                }
            }
            t.clone()
        }
        None => {
            let l = Ident::new("__TreeL", Span::call_site());
            impl_generics.params.push(parse_quote!(#l: #leaf_trait));
            l
        }
    };
    let (impl_generics, _, where_clause) = impl_generics.split_for_impl();
    let (_, ty_generics, _) = input.generics.split_for_impl();
    let with_args = with_args(&input.generics, leaf.as_ref(), &u);

    let mut visit_arms = Vec::new();
    let mut path_arms = Vec::new();
    let mut structure_arms = Vec::new();
    let mut map_ref_arms = Vec::new();
    let mut map_arms = Vec::new();
    for (index, v) in variants.iter().enumerate() {
        let path = &v.path;
        let all_pat: Vec<_> = v
            .fields
            .iter()
            .map(|f| {
                let (m, b) = (&f.member, &f.binding);
                quote!(#m: #b)
            })
            .collect();
        let tree_fields: Vec<_> = v.fields.iter().filter(|f| !f.skip).collect();
        let tree_pat: Vec<_> = tree_fields
            .iter()
            .map(|f| {
                let (m, b) = (&f.member, &f.binding);
                quote!(#m: #b)
            })
            .collect();

        let visits = tree_fields.iter().map(|f| {
            let (ty, b) = (&f.ty, &f.binding);
            quote_spanned!(ty.span()=> <#ty as #tree<#leaf_ty>>::visit(#b, __tree_f);)
        });
        visit_arms.push(quote!(#path { #(#tree_pat,)* .. } => { #(#visits)* }));

        // Each field under its name (an enum's under its variant's name first).
        let path_visits = tree_fields.iter().map(|f| {
            let (ty, b) = (&f.ty, &f.binding);
            let segment = match &f.member {
                Member::Named(id) => id.unraw().to_string(),
                Member::Unnamed(i) => i.index.to_string(),
            };
            quote_spanned!(ty.span()=> {
                let __tree_len = #root::tree::push_path(__tree_path, #segment);
                <#ty as #tree<#leaf_ty>>::visit_paths(#b, __tree_path, __tree_f);
                __tree_path.truncate(__tree_len);
            })
        });
        let (push_variant_name, pop_variant_name) = match &v.segment {
            Some(segment) => (
                quote!(let __tree_len0 = #root::tree::push_path(__tree_path, #segment);),
                quote!(__tree_path.truncate(__tree_len0);),
            ),
            None => (TokenStream2::new(), TokenStream2::new()),
        };
        path_arms.push(quote!(#path { #(#tree_pat,)* .. } => {
            #push_variant_name
            #(#path_visits)*
            #pop_variant_name
        }));

        let structures = tree_fields.iter().map(|f| {
            let (ty, b) = (&f.ty, &f.binding);
            quote_spanned!(ty.span()=> <#ty as #tree<#leaf_ty>>::structure(#b, __tree_out);)
        });
        let push_variant = is_enum.then(|| quote!(__tree_out.push(#index);));
        structure_arms
            .push(quote!(#path { #(#tree_pat,)* .. } => { #push_variant #(#structures)* }));

        let by_ref = v.fields.iter().map(|f| {
            let (m, ty, b) = (&f.member, &f.ty, &f.binding);
            if f.skip {
                quote_spanned!(ty.span()=> #m: ::core::clone::Clone::clone(#b))
            } else {
                quote_spanned!(ty.span()=> #m: <#ty as #tree<#leaf_ty>>::try_map_ref(#b, __tree_f)?)
            }
        });
        map_ref_arms.push(quote!(
            #path { #(#all_pat,)* } => ::core::result::Result::Ok(#path { #(#by_ref,)* })
        ));

        let by_value = v.fields.iter().map(|f| {
            let (m, ty, b) = (&f.member, &f.ty, &f.binding);
            if f.skip {
                quote!(#m: #b)
            } else {
                quote_spanned!(ty.span()=> #m: <#ty as #tree<#leaf_ty>>::try_map(#b, __tree_f)?)
            }
        });
        map_arms.push(quote!(
            #path { #(#all_pat,)* } => ::core::result::Result::Ok(#path { #(#by_value,)* })
        ));
    }
    // An empty enum has no value to look at: match on the place, not the reference.
    let scrutinee_ref = if variants.is_empty() {
        quote!(*self)
    } else {
        quote!(self)
    };

    Ok(quote! {
        #[automatically_derived]
        impl #impl_generics #tree<#leaf_ty> for #name #ty_generics #where_clause {
            type With<#u: #leaf_trait> = #name #with_args;

            fn visit<'__tree_a>(
                &'__tree_a self,
                __tree_f: &mut dyn ::core::ops::FnMut(&'__tree_a #leaf_ty),
            ) {
                match #scrutinee_ref { #(#visit_arms)* }
            }

            fn visit_paths<'__tree_a>(
                &'__tree_a self,
                __tree_path: &mut ::std::string::String,
                __tree_f: &mut dyn ::core::ops::FnMut(&str, &'__tree_a #leaf_ty),
            ) {
                match #scrutinee_ref { #(#path_arms)* }
            }

            fn try_map_ref<#u: #leaf_trait, __TreeE>(
                &self,
                __tree_f: &mut dyn ::core::ops::FnMut(&#leaf_ty) -> ::core::result::Result<#u, __TreeE>,
            ) -> ::core::result::Result<#name #with_args, __TreeE> {
                match #scrutinee_ref { #(#map_ref_arms,)* }
            }

            fn try_map<#u: #leaf_trait, __TreeE>(
                self,
                __tree_f: &mut dyn ::core::ops::FnMut(#leaf_ty) -> ::core::result::Result<#u, __TreeE>,
            ) -> ::core::result::Result<#name #with_args, __TreeE> {
                match self { #(#map_arms,)* }
            }

            fn structure(&self, __tree_out: &mut ::std::vec::Vec<usize>) {
                match #scrutinee_ref { #(#structure_arms)* }
            }
        }
    })
}

/// The leaf type parameter: `None` when the type has no type parameter, an error when
/// it has several or when the one it has carries bounds.
fn leaf_param(generics: &Generics) -> Result<Option<Ident>> {
    let params: Vec<_> = generics.type_params().collect();
    let leaf = match params.as_slice() {
        [] => return Ok(None),
        [one] => *one,
        [_, second, ..] => {
            let names: Vec<String> = params.iter().map(|p| format!("`{}`", p.ident)).collect();
            return Err(Error::new(
                second.ident.span(),
                format!(
                    "#[derive(Tree)] needs exactly one type parameter, the leaf type \
                     (as in `struct Params<T> {{ w: T }}`); found {}: {}",
                    params.len(),
                    names.join(", ")
                ),
            ));
        }
    };
    let t = &leaf.ident;
    let no_bounds = |span: Span| {
        Error::new(
            span,
            format!(
                "the leaf type parameter `{t}` cannot have bounds: Tree rebuilds this type \
                 with every leaf type (Shape, Op, Buffer, numbers)"
            ),
        )
    };
    if !leaf.bounds.is_empty() {
        return Err(no_bounds(leaf.bounds.span()));
    }
    if let Some(wc) = &generics.where_clause {
        for p in &wc.predicates {
            if matches!(p, WherePredicate::Type(_)) && mentions(quote!(#p), t) {
                return Err(no_bounds(p.span()));
            }
        }
    }
    Ok(Some(t.clone()))
}

/// The generic arguments of `Self::With<U>`: the type's own, with the leaf replaced by `u`.
fn with_args(generics: &Generics, leaf: Option<&Ident>, u: &Ident) -> TokenStream2 {
    if generics.params.is_empty() {
        return TokenStream2::new();
    }
    let args = generics.params.iter().map(|p| match p {
        GenericParam::Lifetime(l) => {
            let l = &l.lifetime;
            quote!(#l)
        }
        GenericParam::Type(t) if Some(&t.ident) == leaf => quote!(#u),
        GenericParam::Type(t) => {
            let t = &t.ident;
            quote!(#t)
        }
        GenericParam::Const(c) => {
            let c = &c.ident;
            quote!(#c)
        }
    });
    quote!(<#(#args),*>)
}

fn fields(fields: &Fields, leaf: Option<&Ident>) -> Result<Vec<FieldInfo>> {
    let mut out = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let mut skip = false;
        for attr in f.attrs.iter().filter(|a| a.path().is_ident("tree")) {
            attr.parse_nested_meta(|meta| {
                if meta.path.is_ident("skip") {
                    skip = true;
                    Ok(())
                } else {
                    Err(meta.error("unknown tree attribute; the only one is #[tree(skip)]"))
                }
            })?;
        }
        let ty = &f.ty;
        if let (true, Some(t)) = (skip, leaf) {
            if mentions(quote!(#ty), t) {
                return Err(Error::new(
                    f.ty.span(),
                    format!(
                        "a #[tree(skip)] field is carried unchanged into the rebuilt value, \
                         so its type cannot mention the leaf type `{t}`"
                    ),
                ));
            }
        }
        let member = match &f.ident {
            Some(id) => Member::Named(id.clone()),
            None => Member::Unnamed(syn::Index {
                index: i as u32,
                span: f.ty.span(),
            }),
        };
        out.push(FieldInfo {
            member,
            ty: f.ty.clone(),
            skip,
            binding: format_ident!("__tree_{}", i),
        });
    }
    Ok(out)
}

/// Whether `ident` occurs anywhere in `tokens` (so a type "mentions" the leaf type).
fn mentions(tokens: TokenStream2, ident: &Ident) -> bool {
    tokens.into_iter().any(|tt| match tt {
        TokenTree::Ident(i) => i == *ident,
        TokenTree::Group(g) => mentions(g.stream(), ident),
        _ => false,
    })
}

/// The path of the crate that holds the `tree` module, as the deriving package
/// names it in its `Cargo.toml` (found by `proc-macro-crate`).
fn crate_root() -> proc_macro2::TokenStream {
    use proc_macro_crate::{FoundCrate, crate_name};
    match crate_name("xlaclient") {
        // The facade's own tests and examples name it `xlaclient`.
        Ok(FoundCrate::Itself) => return quote!(::xlaclient),
        Ok(FoundCrate::Name(n)) => {
            let n = Ident::new(&n, Span::call_site());
            return quote!(::#n);
        }
        Err(_) => {}
    }
    match crate_name("xlaclient-core") {
        Ok(FoundCrate::Name(n)) => {
            let n = Ident::new(&n, Span::call_site());
            quote!(::#n)
        }
        // The core itself (and its doc tests): it declares `extern crate self as
        // xlaclient_core`, and its doc tests link it under that name.
        Ok(FoundCrate::Itself) => quote!(::xlaclient_core),
        Err(_) => quote!(::xlaclient),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error_of(input: DeriveInput) -> String {
        match expand(&input) {
            Ok(tokens) => panic!("expected an error, got {tokens}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn two_type_parameters_are_rejected() {
        let e = error_of(parse_quote!(
            struct P<A, B> {
                a: A,
                b: B,
            }
        ));
        assert_eq!(
            e,
            "#[derive(Tree)] needs exactly one type parameter, the leaf type \
             (as in `struct Params<T> { w: T }`); found 2: `A`, `B`"
        );
    }

    #[test]
    fn bounds_on_the_leaf_are_rejected() {
        let inline = error_of(parse_quote!(
            struct P<T: Clone> {
                a: T,
            }
        ));
        let in_where = error_of(parse_quote!(
            struct P<T>
            where
                Vec<T>: Clone,
            {
                a: T,
            }
        ));
        let expected = "the leaf type parameter `T` cannot have bounds: Tree rebuilds this \
                        type with every leaf type (Shape, Op, Buffer, numbers)";
        assert_eq!(inline, expected);
        assert_eq!(in_where, expected);
    }

    #[test]
    fn skip_field_mentioning_the_leaf_is_rejected() {
        let e = error_of(parse_quote!(
            struct P<T> {
                a: T,
                #[tree(skip)]
                cache: Vec<T>,
            }
        ));
        assert_eq!(
            e,
            "a #[tree(skip)] field is carried unchanged into the rebuilt value, so its \
             type cannot mention the leaf type `T`"
        );
    }

    #[test]
    fn unknown_attributes_and_unions_are_rejected() {
        let field = error_of(parse_quote!(
            struct P<T> {
                #[tree(flatten)]
                a: T,
            }
        ));
        assert_eq!(
            field,
            "unknown tree attribute; the only one is #[tree(skip)]"
        );
        let container = error_of(parse_quote!(
            #[tree(skip)]
            struct P<T> {
                a: T,
            }
        ));
        assert_eq!(
            container,
            "#[tree(...)] goes on fields (#[tree(skip)]), not on the type"
        );
        let union = error_of(parse_quote!(
            union U<T> {
                a: T,
            }
        ));
        assert!(union.contains("does not support unions"), "{union}");
    }

    #[test]
    fn expansion_names_the_trait_by_absolute_path_and_rebuilds_with_the_new_leaf() {
        let out = expand(&parse_quote!(
            struct P<'a, T, const N: usize> {
                a: [T; N],
                #[tree(skip)]
                name: &'a str,
            }
        ))
        .unwrap()
        .to_string();
        assert!(
            out.contains(":: xlaclient :: tree :: Tree < T > for P < 'a , T , N >"),
            "{out}"
        );
        assert!(
            out.contains(
                "type With < __TreeU : :: xlaclient :: tree :: Leaf > = P < 'a , __TreeU , N >"
            ),
            "{out}"
        );
        // The metadata field is cloned, not mapped.
        assert!(
            out.contains("name : :: core :: clone :: Clone :: clone (__tree_1)"),
            "{out}"
        );
        // Leaf paths name the field; the skipped field has none.
        assert!(
            out.contains(":: xlaclient :: tree :: push_path (__tree_path , \"a\")"),
            "{out}"
        );
        assert!(!out.contains("push_path (__tree_path , \"name\")"), "{out}");
    }

    #[test]
    fn a_type_without_parameters_is_a_tree_at_every_leaf_type() {
        let out = expand(&parse_quote!(
            struct Relu;
        ))
        .unwrap()
        .to_string();
        assert!(
            out.contains("impl < __TreeL : :: xlaclient :: tree :: Leaf > :: xlaclient :: tree :: Tree < __TreeL > for Relu"),
            "{out}"
        );
    }
}
