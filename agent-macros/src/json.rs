//! The derives of a struct the model's JSON is read into (an `#[agent_output]` struct,
//! a tool's arguments) and the checks of its field types, written so that a field type
//! without a JSON form gives one error, ours, on that type (see the crate docs,
//! "One mistake, one error").

use proc_macro2::{Ident, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Attribute, ItemStruct, Meta, Type};

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
/// split the type's underline). `owner` is the struct whose fields these are; a check
/// keeps its field's `#[cfg]`.
pub(crate) fn checks<'a>(
    site: Site,
    owner: Option<&Ident>,
    types: impl IntoIterator<Item = (&'a Ident, &'a Type, &'a [Attribute])>,
) -> TokenStream {
    let calls = types.into_iter().map(|(name, ty, attrs)| {
        let cfgs = attrs.iter().filter(|a| a.path().is_ident("cfg"));
        let span = if ty.to_token_stream().into_iter().count() == 1 {
            ty.span()
        } else {
            name.span()
        };
        // `Self` in a field type names the struct; the check is outside its impls.
        let ty = match owner {
            Some(owner) => replace_self(ty, owner),
            None => ty.to_token_stream(),
        };
        match site {
            Site::Output => quote_spanned! {span=>
                #(#cfgs)*
                (&&&&::agent_core::__private::Probe::<#ty>::new())
                    .verdict()
                    .output_field::<#ty>();
            },
            Site::Tool => quote_spanned! {span=>
                #(#cfgs)*
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

/// The attributes serde and schemars read (and `cfg`), to put on the copy.
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

/// Container keys whose meaning the copy would change: `from`/`try_from` (the copy has
/// no `From` impl), `remote`, `bound`, and `default = "path"` (the path returns the
/// struct, not the copy); attributes naming `Self` are another such case. A struct
/// that uses one derives on itself, as plain derives would (a bad field type then also
/// fails inside the derived code, after the check).
const KEEPS_PLAIN_DERIVES: &[&str] = &["from", "try_from", "remote", "bound"];

fn plain_derives_only(item: &ItemStruct) -> bool {
    KEEPS_PLAIN_DERIVES
        .iter()
        .any(|key| any_sets(&item.attrs, key).is_some())
        || any_sets(&item.attrs, "default") == Some(false)
        || item
            .attrs
            .iter()
            .chain(item.fields.iter().flat_map(|f| &f.attrs))
            .any(names_self)
}

/// Whether a serde, schemars, validate or garde attribute names `Self`
/// (`#[schemars(extend("examples" = [Self::EXAMPLE]))]`): in the copy, `Self` would be
/// the copy.
fn names_self(attr: &Attribute) -> bool {
    fn walk(tokens: TokenStream) -> bool {
        tokens.into_iter().any(|tree| match tree {
            TokenTree::Ident(i) => i == "Self",
            TokenTree::Group(g) => walk(g.stream()),
            TokenTree::Literal(lit) => syn::parse2::<syn::LitStr>(lit.into_token_stream())
                .is_ok_and(|s| {
                    s.value()
                        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                        .any(|word| word == "Self")
                }),
            TokenTree::Punct(_) => false,
        })
    }
    let path = attr.path();
    let read = ["serde", "schemars", "validate", "garde"];
    read.iter().any(|name| path.is_ident(name))
        && matches!(&attr.meta, Meta::List(list) if walk(list.tokens.clone()))
}

/// `Deserialize` and `JsonSchema` for a struct the model's JSON is read into: the
/// attributes to put on the struct, and the items to put after it.
///
/// Both are derived on a copy of the struct (same attributes and fields, the same
/// schema name and id, the same serde name) that is generic over an unused marker, so
/// that serde's and schemars' `bound` attributes apply: the copy's impls require each
/// field type to have `Deserialize` and `JsonSchema` instead of failing to compile
/// without them. The struct's own impls are unconditional and hand over to the copy
/// through the dispatch probe (`CopyReady`), moving the fields across. So a field type
/// without a JSON form fails only its field check, and a struct that contains itself or
/// another such struct (`Vec<Node>` in `Node`) does not make the compiler's proof of
/// these impls recurse.
pub(crate) fn json_impls(item: &ItemStruct) -> (TokenStream, TokenStream) {
    let serde = quote!(::agent_core::__private::serde);
    let schemars = quote!(::agent_core::__private::schemars);
    if plain_derives_only(item) {
        let attrs = quote! {
            #[derive(#serde::Deserialize, #schemars::JsonSchema)]
            #[serde(crate = "::agent_core::__private::serde")]
            #[schemars(crate = "::agent_core::__private::schemars")]
        };
        return (attrs, TokenStream::new());
    }
    // The struct keeps its attributes; `SchemaAttrs` accepts those only the derives read.
    let attrs = quote! {
        #[derive(::agent_core::__private::SchemaAttrs)]
    };
    let ident = &item.ident;
    let copy = format_ident!("__AgentCopy");
    let marker = format_ident!("__agent_marker");
    let types: Vec<TokenStream> = item
        .fields
        .iter()
        .map(|f| replace_self(&f.ty, ident))
        .collect();
    // A bound cannot carry a `cfg`: a field under one gets none (it is then checked
    // by the derives alone).
    let bounded: Vec<&TokenStream> = item
        .fields
        .iter()
        .zip(&types)
        .filter(|(f, _)| !f.attrs.iter().any(|a| a.path().is_ident("cfg")))
        .map(|(_, ty)| ty)
        .collect();
    let de_bounds: Vec<String> = bounded
        .iter()
        .map(|ty| format!("{ty}: ::agent_core::__private::serde::Deserialize<'de>"))
        .collect();
    let schema_bounds: Vec<String> = bounded
        .iter()
        .map(|ty| format!("for<'__a> {ty}: ::agent_core::__private::schemars::JsonSchema"))
        .collect();
    let bound_attrs = (!bounded.is_empty()).then(|| {
        let de = de_bounds.join(", ");
        let schema = schema_bounds.join(", ");
        quote! {
            #[serde(bound(deserialize = #de))]
            #[schemars(bound = #schema)]
        }
    });
    // The copy answers to the struct's name (serde's messages, schemars' definitions);
    // schemars takes a `#[schemars(rename)]` of the user's over it.
    let serde_rename = item
        .attrs
        .iter()
        .filter(|a| a.path().is_ident("serde"))
        .find_map(|a| sets_key(a, "rename"));
    let rename = serde_rename.is_none().then(|| {
        let name = syn::ext::IdentExt::unraw(ident).to_string();
        quote!(#[serde(rename = #name)])
    });
    // serde's "expected struct Name" names the Rust struct, whatever its `rename`.
    let expecting = any_sets(&item.attrs, "expecting").is_none().then(|| {
        let text = format!("struct {ident}");
        quote!(#[serde(expecting = #text)])
    });
    let container_attrs = schema_attrs(&item.attrs);
    let fields = item.fields.iter().zip(&types).map(|(f, ty)| {
        let attrs = schema_attrs(&f.attrs);
        let name = &f.ident;
        quote!(#(#attrs)* #name: #ty,)
    });
    let moves = |from: &Ident| {
        let moves = item.fields.iter().map(|f| {
            let cfgs = f.attrs.iter().filter(|a| a.path().is_ident("cfg"));
            let name = &f.ident;
            quote!(#(#cfgs)* #name: #from.#name,)
        });
        quote!(#(#moves)*)
    };
    let from_copy = moves(&format_ident!("__copy"));
    // A bare container `default` makes serde and schemars call the copy's `default()`.
    let default = (any_sets(&item.attrs, "default") == Some(true)).then(|| {
        let from_value = moves(&format_ident!("__value"));
        quote! {
            #[allow(deprecated)]
            impl<__M> ::core::default::Default for #copy<__M> {
                fn default() -> Self {
                    let __value = <#ident as ::core::default::Default>::default();
                    Self {
                        #from_value
                        #marker: ::core::marker::PhantomData,
                    }
                }
            }
        }
    });
    let probe = quote!((&::agent_core::__private::Probe::<#copy<()>>::new()));
    let impls = quote! {
        const _: () = {
            #[derive(#serde::Deserialize, #schemars::JsonSchema)]
            #[serde(crate = "::agent_core::__private::serde")]
            #[schemars(crate = "::agent_core::__private::schemars")]
            #rename
            #expecting
            #(#container_attrs)*
            #bound_attrs
            #[allow(dead_code, deprecated, non_camel_case_types)]
            struct #copy<__M> {
                #(#fields)*
                #[serde(skip)]
                #marker: ::core::marker::PhantomData<__M>,
            }

            #default

            #[allow(unused_imports)]
            use ::agent_core::__private::{CopyNotReady as _, CopyReady as _};

            #[allow(deprecated)]
            impl<'de> #serde::Deserialize<'de> for #ident {
                fn deserialize<__D>(
                    deserializer: __D,
                ) -> ::core::result::Result<Self, <__D as #serde::Deserializer<'de>>::Error>
                where
                    __D: #serde::Deserializer<'de>,
                {
                    let __copy: #copy<()> = #probe.deserialize_copy(deserializer)?;
                    ::core::result::Result::Ok(Self { #from_copy })
                }
            }

            impl #schemars::JsonSchema for #ident {
                fn schema_name() -> ::std::borrow::Cow<'static, str> {
                    #probe.schema_name()
                }

                fn schema_id() -> ::std::borrow::Cow<'static, str> {
                    #probe.schema_id()
                }

                fn inline_schema() -> bool {
                    #probe.inline_schema()
                }

                fn json_schema(generator: &mut #schemars::SchemaGenerator) -> #schemars::Schema {
                    #probe.json_schema(generator)
                }
            }
        };
    };
    (attrs, impls)
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
