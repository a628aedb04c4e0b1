//! The generated code. Every path is absolute through `::agent_core` (its hidden
//! `__private` module re-exports serde, schemars and serde_json).

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{FnArg, Item};

use crate::ast::{Kind, Output, Returns, ToolFn};
use crate::attr::{self, OutputArgs, ToolArgs};
use crate::json::{self, Site};

/// The macro's arguments and the item, or every error of both at once.
fn both<A>(args: syn::Result<A>, item: syn::Result<Item>) -> syn::Result<(A, Item)> {
    match (args, item) {
        (Ok(args), Ok(item)) => Ok((args, item)),
        (Err(mut a), Err(b)) => {
            a.combine(b);
            Err(a)
        }
        (Err(e), _) | (_, Err(e)) => Err(e),
    }
}

/// Expands `#[agent_output]`: the field checks first (so that their errors come
/// first), the struct with `Deserialize` and `JsonSchema` (see [`json::json_impls`]),
/// and `AgentOutput`.
pub(crate) fn agent_output(args: TokenStream, input: TokenStream) -> syn::Result<TokenStream> {
    let (args, item) = both(OutputArgs::parse(args), syn::parse2::<Item>(input))?;
    let output = Output::from_syn(args, item)?;
    let item = &output.item;
    let ident = &item.ident;
    let description = &output.description;
    let check = output.validate.as_ref().map(|path| {
        quote_spanned! {path.span()=>
            ::agent_core::__private::run_output_check(#path, &value)?;
        }
    });
    let partial = output.partial.as_ref().map(|path| {
        quote_spanned! {path.span()=>
            fn is_partial(&self) -> bool {
                ::agent_core::__private::run_partial_check(#path, self)
            }
        }
    });
    let checks = json::checks(
        Site::Output,
        Some(ident),
        item.fields
            .iter()
            .filter_map(|f| Some((f.ident.as_ref()?, &f.ty, f.attrs.as_slice()))),
    );
    let (derives, json_impls) = json::json_impls(item);
    Ok(quote! {
        #checks

        #derives
        #item

        #json_impls

        impl ::agent_core::AgentOutput for #ident {
            fn output_tool() -> ::core::option::Option<::agent_core::tool::ToolDefinition> {
                ::core::option::Option::Some(
                    ::agent_core::__private::output_tool::<Self>(#description),
                )
            }

            fn from_arguments(
                arguments: &::agent_core::__private::serde_json::Value,
            ) -> ::core::result::Result<Self, ::agent_core::schema::ValidationErrors> {
                static SCHEMA: ::agent_core::__private::ValidatorCell =
                    ::agent_core::__private::ValidatorCell::new();
                let value: Self =
                    ::agent_core::__private::output_from_arguments::<Self>(&SCHEMA, arguments)?;
                #check
                ::core::result::Result::Ok(value)
            }

            #partial
        }
    })
}

/// Expands `#[agent_type]`: the three derives on a struct or an enum.
pub(crate) fn agent_type(args: TokenStream, input: TokenStream) -> syn::Result<TokenStream> {
    let mut errors = crate::valid::Errors::default();
    if !args.is_empty() {
        errors.at(
            &args,
            "`#[agent_type]` takes no keys; write `#[agent_type]`",
        );
    }
    let item = syn::parse2::<Item>(input)?;
    match &item {
        Item::Struct(_) | Item::Enum(_) => {}
        Item::Union(u) => errors.span(
            u.union_token.span,
            "`#[agent_type]` goes on a struct or an enum; a union has no JSON form",
        ),
        other => errors.span(
            crate::ast::keyword_span(other),
            "`#[agent_type]` goes on a struct or an enum",
        ),
    }
    errors.finish()?;
    Ok(quote! {
        #[derive(
            ::agent_core::__private::serde::Serialize,
            ::agent_core::__private::serde::Deserialize,
            ::agent_core::__private::schemars::JsonSchema
        )]
        #[serde(crate = "::agent_core::__private::serde")]
        #[schemars(crate = "::agent_core::__private::schemars")]
        #item
    })
}

/// Expands `#[tool]`: the parameter checks first, the arguments struct (with
/// `Deserialize` and `JsonSchema` as for an output struct, see [`json::json_impls`]),
/// and `Tool`.
pub(crate) fn tool(args: TokenStream, input: TokenStream) -> syn::Result<TokenStream> {
    let (args, item) = both(ToolArgs::parse(args), syn::parse2::<Item>(input))?;
    let tool = ToolFn::from_syn(args, item)?;
    let item = &tool.item;
    let vis = &item.vis;
    let fn_ident = &item.sig.ident;
    let name = &tool.name;
    let description = &tool.description;

    let mut fields = Vec::new();
    let mut locals = Vec::new();
    let mut extracts = Vec::new();
    let mut states = Vec::new();
    let mut json_types = Vec::new();
    for (i, param) in tool.params.iter().enumerate() {
        let local = format_ident!("__param{}", i);
        let ident = &param.ident;
        let ty = &param.ty;
        let extract = match &param.kind {
            Kind::Json { attrs, description } => {
                json_types.push((ident, ty, &[][..]));
                let description = description
                    .as_ref()
                    .map(|text| quote!(#[schemars(description = #text)]));
                fields.push(quote! {
                    #(#attrs)*
                    #description
                    #ident: #ty
                });
                quote!(__arguments.#ident)
            }
            Kind::State(inner) => {
                states.push(inner);
                quote_spanned! {ty.span()=>
                    ::agent_core::__private::tool_state::<#inner>(&context)?
                }
            }
            Kind::Context => quote!(::core::clone::Clone::clone(&context)),
        };
        extracts.push(quote!(let #local: #ty = #extract;));
        locals.push(local);
    }
    let checks = json::checks(Site::Tool, None, json_types);
    let arguments: syn::ItemStruct = syn::parse_quote! {
        #[allow(non_camel_case_types, dead_code)]
        struct __ToolArguments {
            #(#fields),*
        }
    };
    let (derives, json_impls) = json::json_impls(&arguments);
    let convert = match tool.returns {
        Returns::Result(span) => quote_spanned! {span=>
            ::agent_core::__private::ToolReturn::into_tool_result(__returned)
        },
        Returns::Plain(span) => quote_spanned! {span=>
            ::agent_core::__private::ToolReturn::into_tool_result(
                ::agent_core::__private::Plain(__returned),
            )
        },
        Returns::Content(span, result) => {
            let returned = if result {
                quote_spanned! {span=> __returned }
            } else {
                quote_spanned! {span=> ::core::result::Result::<_, ::agent_core::ToolError>::Ok(__returned) }
            };
            quote_spanned! {span=>
                ::agent_core::__private::content_of(#returned)
            }
        }
    };
    // A fn returning parts answers `call_content` with them, and `call` with the text.
    let (call_body_convert, content_method) = match tool.returns {
        Returns::Content(..) => (
            quote! { #convert.map(|content| content.text) },
            quote! {
                fn call_content<'a>(
                    &'a self,
                    arguments: ::agent_core::__private::serde_json::Value,
                    context: ::agent_core::ToolContext,
                ) -> ::agent_core::tool::ContentFuture<'a> {
                    ::std::boxed::Box::pin(async move {
                        let __arguments: __ToolArguments =
                            ::agent_core::__private::tool_arguments(&arguments)?;
                        #(#extracts)*
                        let __returned = #fn_ident(#(#locals),*).await;
                        #convert
                    })
                }
            },
        ),
        _ => (quote! { #convert }, quote! {}),
    };
    let doc = format!(
        "The tool `{name}` made by `#[tool]` from the fn `{fn_ident}`: list it in `tools![..]`."
    );
    let irreversible = tool.irreversible;
    let requires_approval = tool.requires_approval;
    let max_result_tokens = match tool.max_result_tokens {
        Some(n) => quote! { ::std::option::Option::Some(#n) },
        None => quote! { ::std::option::Option::None },
    };
    Ok(quote! {
        #item

        #[doc = #doc]
        #[allow(non_camel_case_types)]
        #vis struct #fn_ident {}

        const _: () = {
            #checks

            #derives
            #arguments

            #json_impls

            impl ::agent_core::__private::ToolName for #fn_ident {
                const NAME: &'static str = #name;
                fn instance() -> Self {
                    #fn_ident {}
                }
            }

            impl ::agent_core::Tool for #fn_ident {
                fn definition(&self) -> ::agent_core::tool::ToolDefinition {
                    ::agent_core::tool::ToolDefinition::new(
                        #name,
                        #description,
                        ::agent_core::schema::parameters_for::<__ToolArguments>(),
                    )
                }

                fn call<'a>(
                    &'a self,
                    arguments: ::agent_core::__private::serde_json::Value,
                    context: ::agent_core::ToolContext,
                ) -> ::agent_core::tool::ToolFuture<'a> {
                    ::std::boxed::Box::pin(async move {
                        let __arguments: __ToolArguments =
                            ::agent_core::__private::tool_arguments(&arguments)?;
                        #(#extracts)*
                        let __returned = #fn_ident(#(#locals),*).await;
                        #call_body_convert
                    })
                }

                #content_method

                fn required_state(&self) -> ::std::vec::Vec<::agent_core::tool::StateRequirement> {
                    ::std::vec![#(::agent_core::tool::StateRequirement::of::<#states>()),*]
                }

                fn irreversible(&self) -> bool {
                    #irreversible
                }

                fn requires_approval(&self) -> bool {
                    #requires_approval
                }

                fn max_result_tokens(&self) -> ::std::option::Option<u32> {
                    #max_result_tokens
                }
            }
        };
    })
}

/// The error, plus the item as written minus the `#[serde]`/`#[schemars]` attributes
/// that only the derives would have accepted, so one mistake does not cascade into
/// "cannot find type" errors elsewhere.
pub(crate) fn with_fallback(error: syn::Error, input: TokenStream) -> TokenStream {
    let mut out = error.to_compile_error();
    match syn::parse2::<Item>(input.clone()) {
        Ok(mut item) => {
            strip_helper_attrs(&mut item);
            item.to_tokens(&mut out);
        }
        Err(_) => out.extend(input),
    }
    out
}

fn strip_helper_attrs(item: &mut Item) {
    let keep = |attrs: &mut Vec<syn::Attribute>| attrs.retain(|a| !attr::is_serde_or_schemars(a));
    match item {
        Item::Struct(s) => {
            keep(&mut s.attrs);
            drop_own_derives(&mut s.attrs);
            s.fields.iter_mut().for_each(|f| keep(&mut f.attrs));
        }
        Item::Enum(e) => {
            keep(&mut e.attrs);
            for variant in &mut e.variants {
                keep(&mut variant.attrs);
                variant.fields.iter_mut().for_each(|f| keep(&mut f.attrs));
            }
        }
        Item::Union(u) => {
            keep(&mut u.attrs);
            u.fields.named.iter_mut().for_each(|f| keep(&mut f.attrs));
        }
        Item::Fn(f) => {
            for input in &mut f.sig.inputs {
                if let FnArg::Typed(arg) = input {
                    keep(&mut arg.attrs);
                }
            }
        }
        _ => {}
    }
}

/// Removes `Serialize`, `Deserialize` and `JsonSchema` from `#[derive(..)]` lists (they are what
/// `#[agent_output]` derives, and the fallback item must not need serde or schemars).
fn drop_own_derives(attrs: &mut [syn::Attribute]) {
    use syn::punctuated::Punctuated;
    for attr in attrs.iter_mut().filter(|a| a.path().is_ident("derive")) {
        let Ok(paths) =
            attr.parse_args_with(Punctuated::<syn::Path, syn::Token![,]>::parse_terminated)
        else {
            continue;
        };
        let kept = paths.into_iter().filter(|p| {
            p.segments.last().is_none_or(|s| {
                s.ident != "Serialize" && s.ident != "Deserialize" && s.ident != "JsonSchema"
            })
        });
        *attr = syn::parse_quote!(#[derive(#(#kept),*)]);
    }
}
