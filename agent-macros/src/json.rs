//! The derives of a struct the model's JSON is read into (an `#[agent_output]` struct,
//! a tool's arguments) and the checks of its field types, written so that a field type
//! without a JSON form gives one error, ours, on that type (see the crate docs,
//! "One mistake, one error").

use proc_macro2::{Ident, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, Field, ItemStruct, LitStr, Meta, Type};

/// Where the checked types appear.
#[derive(Clone, Copy)]
pub(crate) enum Site {
    /// Fields of an `#[agent_output]` struct.
    Output,
    /// JSON parameters of a `#[tool]` fn.
    Tool,
}

/// The check of each type, in an item of its own that the compiler checks before the
/// derives' code: `Probe::<T>` picks a verdict on `T` and the verdict's method fails,
/// with our message and on the type as written, unless `T` is usable. Each type comes
/// with the name of its field or parameter: the call is spanned on the type when it is
/// one token, else on that name (a span cannot cover several tokens on stable Rust,
/// and rustc's "required by a bound introduced by this call" label would otherwise
/// split the type's underline).
pub(crate) fn checks<'a>(
    site: Site,
    types: impl IntoIterator<Item = (&'a Ident, &'a Type)>,
) -> TokenStream {
    let calls = types.into_iter().map(|(name, ty)| {
        let span = if ty.to_token_stream().into_iter().count() == 1 {
            ty.span()
        } else {
            name.span()
        };
        match site {
            Site::Output => quote_spanned! {span=>
                (&&&&::agent_core::__private::Probe::<#ty>::new())
                    .verdict()
                    .output_field::<#ty>();
            },
            Site::Tool => quote_spanned! {span=>
                (&&&&&::agent_core::__private::Probe::<#ty>::new())
                    .verdict()
                    .tool_param::<#ty>();
            },
        }
    });
    quote! {
        const _: () = {
            #[allow(dead_code, unused_imports, clippy::all, clippy::pedantic)]
            fn __agent_checks() {
                use ::agent_core::__private::{
                    ViaDeserialize as _, ViaInjected as _, ViaJsonForm as _, ViaJsonSchema as _,
                    ViaNeither as _,
                };
                #(#calls)*
            }
        };
    }
}

/// Whether the type names the struct itself (`Vec<Node>` in `Node`, `Box<Self>`): such
/// a field gets no check and no bound, which would make the compiler's proof of the
/// struct's own impls recurse.
pub(crate) fn names_struct(ty: &Type, ident: &Ident) -> bool {
    fn walk(tokens: TokenStream, ident: &Ident) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Ident(i) => i == *ident || i == "Self",
            TokenTree::Group(g) => walk(g.stream(), ident),
            _ => false,
        })
    }
    walk(ty.to_token_stream(), ident)
}

/// Whether a `#[serde(..)]`/`#[schemars(..)]` attribute sets `key` at its top level
/// (`rename` in `#[serde(rename = "x")]`, not in `rename_all`), and whether bare
/// (`default`, not `default = "path"`).
fn sets_key(attr: &Attribute, key: &str) -> Option<bool> {
    let Meta::List(list) = &attr.meta else {
        return None;
    };
    let trees: Vec<TokenTree> = list.tokens.clone().into_iter().collect();
    let mut at_start = true;
    for (i, tree) in trees.iter().enumerate() {
        match tree {
            TokenTree::Ident(ident) if at_start && ident == key => {
                let bare = !matches!(trees.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '=')
                    && !matches!(trees.get(i + 1), Some(TokenTree::Group(_)));
                return Some(bare);
            }
            TokenTree::Punct(p) if p.as_char() == ',' => at_start = true,
            _ => at_start = false,
        }
    }
    None
}

fn serde_or_schemars(attr: &Attribute) -> bool {
    crate::attr::is_serde_or_schemars(attr)
}

/// Whether the attributes set `key` in a `#[serde]` or `#[schemars]` attribute; `Some(bare)`.
fn any_sets(attrs: &[Attribute], key: &str) -> Option<bool> {
    attrs
        .iter()
        .filter(|a| serde_or_schemars(a))
        .find_map(|a| sets_key(a, key))
}

/// The attributes schemars reads (and `cfg`), to copy onto the schema struct.
fn schema_attrs(attrs: &[Attribute]) -> Vec<&Attribute> {
    const READ: &[&str] = &[
        "doc",
        "serde",
        "schemars",
        "validate",
        "garde",
        "deprecated",
        "cfg",
    ];
    attrs
        .iter()
        .filter(|attr| {
            let path = attr.path();
            if READ.iter().any(|name| path.is_ident(name)) {
                return true;
            }
            // `cfg_attr(pred, attrs..)` only when every attribute it adds is one of those.
            path.is_ident("cfg_attr")
                && attr
                    .parse_args_with(
                        syn::punctuated::Punctuated::<Meta, syn::Token![,]>::parse_terminated,
                    )
                    .is_ok_and(|metas| {
                        metas.len() > 1
                            && metas
                                .iter()
                                .skip(1)
                                .all(|m| READ.iter().any(|name| m.path().is_ident(name)))
                    })
        })
        .collect()
}

/// The fields whose types get bounds (all but those naming the struct).
fn bounded(item: &ItemStruct) -> impl Iterator<Item = &Field> {
    item.fields
        .iter()
        .filter(move |f| !names_struct(&f.ty, &item.ident))
}

/// Adds `#[serde(bound(deserialize = "T: Deserialize<'de>"))]` to each field (but those
/// naming the struct, or with a `bound` of their own): the derived `Deserialize` then
/// applies only when every field type has one, instead of failing to compile.
pub(crate) fn add_deserialize_bounds(item: &mut ItemStruct) {
    let ident = item.ident.clone();
    for field in &mut item.fields {
        if names_struct(&field.ty, &ident) || any_sets(&field.attrs, "bound").is_some() {
            continue;
        }
        let ty = &field.ty;
        let bound = LitStr::new(
            &format!(
                "{}: ::agent_core::__private::serde::Deserialize<'de>",
                ty.to_token_stream()
            ),
            ty.span(),
        );
        field
            .attrs
            .push(syn::parse_quote!(#[serde(bound(deserialize = #bound))]));
    }
}

/// The derives for the struct itself: `Deserialize`, and `SchemaAttrs`, which accepts
/// the `#[schemars]`, `#[validate]` and `#[garde]` attributes schemars reads.
pub(crate) fn derives() -> TokenStream {
    quote! {
        #[derive(
            ::agent_core::__private::serde::Deserialize,
            ::agent_core::__private::SchemaAttrs
        )]
        #[serde(crate = "::agent_core::__private::serde")]
    }
}

/// `JsonSchema` for the struct: derived on a copy of it (same attributes and fields,
/// the same schema name and id) whose where clause requires `JsonSchema` of each field
/// type, and implemented for the struct by delegating to the copy under the same where
/// clause. The derive on the struct itself cannot take such a where clause (schemars
/// ignores `bound` on a struct without generics), and without it a field type lacking
/// `JsonSchema` fails inside the derived code a second time.
pub(crate) fn schema_impl(item: &ItemStruct) -> TokenStream {
    let ident = &item.ident;
    let shadow = format_ident!("__AgentSchema");
    let schemars = quote!(::agent_core::__private::schemars);
    let bounds: Vec<TokenStream> = bounded(item)
        .map(|f| {
            let ty = &f.ty;
            quote!(for<'__a> #ty: #schemars::JsonSchema)
        })
        .collect();
    let where_clause = if bounds.is_empty() {
        TokenStream::new()
    } else {
        quote!(where #(#bounds),*)
    };
    let rename = any_sets(&item.attrs, "rename").is_none().then(|| {
        let name = syn::ext::IdentExt::unraw(ident).to_string();
        quote!(#[schemars(rename = #name)])
    });
    let container_attrs = schema_attrs(&item.attrs);
    let fields: Vec<TokenStream> = item
        .fields
        .iter()
        .map(|f| {
            let attrs = schema_attrs(&f.attrs);
            let name = &f.ident;
            let ty = replace_self(&f.ty, ident);
            quote!(#(#attrs)* #name: #ty,)
        })
        .collect();
    // A bare container `#[serde(default)]` makes schemars call `Self::default()`.
    let default = (any_sets(&item.attrs, "default") == Some(true)).then(|| {
        let inits = item.fields.iter().map(|f| {
            let cfgs = f.attrs.iter().filter(|a| a.path().is_ident("cfg"));
            let name = &f.ident;
            quote!(#(#cfgs)* #name: __value.#name,)
        });
        quote! {
            #[allow(deprecated)]
            impl ::core::default::Default for #shadow #where_clause {
                fn default() -> Self {
                    let __value = <#ident as ::core::default::Default>::default();
                    Self { #(#inits)* }
                }
            }
        }
    });
    quote! {
        const _: () = {
            #[derive(#schemars::JsonSchema)]
            #[schemars(crate = "::agent_core::__private::schemars")]
            #rename
            #(#container_attrs)*
            #[allow(dead_code, deprecated, non_camel_case_types)]
            struct #shadow #where_clause {
                #(#fields)*
            }

            #default

            #[allow(deprecated)]
            impl #schemars::JsonSchema for #ident #where_clause {
                fn schema_name() -> ::std::borrow::Cow<'static, str> {
                    <#shadow as #schemars::JsonSchema>::schema_name()
                }

                fn schema_id() -> ::std::borrow::Cow<'static, str> {
                    <#shadow as #schemars::JsonSchema>::schema_id()
                }

                fn inline_schema() -> bool {
                    <#shadow as #schemars::JsonSchema>::inline_schema()
                }

                fn json_schema(
                    generator: &mut #schemars::SchemaGenerator,
                ) -> #schemars::Schema {
                    <#shadow as #schemars::JsonSchema>::json_schema(generator)
                }
            }
        };
    }
}

/// The type with `Self` replaced by the struct's name (in the copy, `Self` would name
/// the copy).
fn replace_self(ty: &Type, ident: &Ident) -> TokenStream {
    fn walk(tokens: TokenStream, ident: &Ident) -> TokenStream {
        tokens
            .into_iter()
            .map(|tree| match tree {
                TokenTree::Ident(i) if i == "Self" => {
                    let mut named = ident.clone();
                    named.set_span(i.span());
                    TokenTree::Ident(named)
                }
                TokenTree::Group(g) => {
                    let mut group = proc_macro2::Group::new(g.delimiter(), walk(g.stream(), ident));
                    group.set_span(g.span());
                    TokenTree::Group(group)
                }
                other => other,
            })
            .collect()
    }
    walk(ty.to_token_stream(), ident)
}
