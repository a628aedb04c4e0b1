//! The macros' models of the annotated items, parsed and checked.

use proc_macro2::Span;
use syn::ext::IdentExt;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{
    Attribute, Fields, FnArg, Ident, Item, ItemFn, ItemStruct, LitStr, Pat, Path, ReturnType,
    Token, Type,
};

use crate::attr::{self, OutputArgs, ToolArgs};
use crate::valid::{self, Errors, Place};

/// The description of `submit_output` when the struct has no doc comment.
const DEFAULT_OUTPUT_DESCRIPTION: &str =
    "Submit the final answer: call this once, with the complete result as the arguments.";

/// An `#[agent_output]` struct.
pub(crate) struct Output {
    /// The struct, as written.
    pub(crate) item: ItemStruct,
    /// The `submit_output` description.
    pub(crate) description: String,
    /// The `validate = path` fn.
    pub(crate) validate: Option<Path>,
    /// The `partial = path` fn.
    pub(crate) partial: Option<Path>,
}

/// The span of an item's leading keyword (`enum`, `fn`, ...), to point at the item
/// without underlining all of it.
pub(crate) fn keyword_span(item: &Item) -> Span {
    match item {
        Item::Struct(i) => i.struct_token.span,
        Item::Enum(i) => i.enum_token.span,
        Item::Union(i) => i.union_token.span,
        Item::Fn(i) => i.sig.fn_token.span,
        Item::Trait(i) => i.trait_token.span,
        Item::Impl(i) => i.impl_token.span,
        Item::Mod(i) => i.mod_token.span,
        Item::Const(i) => i.const_token.span,
        Item::Static(i) => i.static_token.span,
        Item::Type(i) => i.type_token.span,
        other => other.span(),
    }
}

impl Output {
    pub(crate) fn from_syn(args: OutputArgs, item: Item) -> syn::Result<Self> {
        let item = match item {
            Item::Struct(item) => item,
            Item::Enum(item) => {
                return Err(syn::Error::new(
                    item.enum_token.span,
                    "#[agent_output] needs a struct with named fields, not an enum: the `submit_output` arguments must be a JSON object (providers reject a `oneOf` root); put the enum in a field of a struct",
                ));
            }
            Item::Union(item) => {
                return Err(syn::Error::new(
                    item.union_token.span,
                    "#[agent_output] needs a struct with named fields, not a union: a union cannot be deserialized safely",
                ));
            }
            other => {
                return Err(syn::Error::new(
                    keyword_span(&other),
                    "#[agent_output] goes on a struct with named fields",
                ));
            }
        };
        let mut errors = Errors::default();
        match &item.fields {
            Fields::Named(_) => {}
            Fields::Unnamed(fields) => errors.at(
                fields,
                "#[agent_output] needs named fields, not a tuple struct: the model fills a JSON object by field name; name the fields",
            ),
            Fields::Unit => errors.at(
                &item.ident,
                format!(
                    "#[agent_output] needs a struct with named fields: unit struct `{}` gives the model nothing to submit; add fields in braces",
                    item.ident
                ),
            ),
        }
        for param in &item.generics.params {
            errors.at(
                param,
                "generic parameters are not supported on an #[agent_output] struct: its JSON Schema must be fixed; use concrete types",
            );
        }
        if let Some(clause) = &item.generics.where_clause {
            errors.at(
                clause,
                "a where clause is not supported on an #[agent_output] struct",
            );
        }
        check_derives(&item.attrs, &mut errors);
        for field in &item.fields {
            valid::owned_type(&field.ty, Place::OutputField, &mut errors);
        }
        let description = match &args.description {
            Some(lit) => non_empty(lit, &mut errors),
            None => {
                attr::doc_text(&item.attrs).unwrap_or_else(|| DEFAULT_OUTPUT_DESCRIPTION.to_owned())
            }
        };
        errors.finish()?;
        Ok(Self {
            item,
            description,
            validate: args.validate,
            partial: args.partial,
        })
    }
}

/// Rejects a `#[derive]` of what `#[agent_output]` derives itself.
fn check_derives(attrs: &[Attribute], errors: &mut Errors) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("derive")) {
        let Ok(paths) = attr.parse_args_with(Punctuated::<Path, Token![,]>::parse_terminated)
        else {
            continue;
        };
        for path in paths {
            let Some(last) = path.segments.last() else {
                continue;
            };
            if last.ident == "Deserialize" || last.ident == "JsonSchema" {
                errors.at(
                    &path,
                    format!(
                        "#[agent_output] derives `{}` itself; remove it from this derive list",
                        last.ident
                    ),
                );
            }
        }
    }
}

fn non_empty(lit: &LitStr, errors: &mut Errors) -> String {
    let text = lit.value().trim().to_owned();
    if text.is_empty() {
        errors.at(lit, "the description is empty: the model needs one");
    }
    text
}

/// An injected or model-visible parameter of a `#[tool]` fn.
pub(crate) enum Kind {
    /// A JSON property of the arguments.
    Json {
        /// `#[serde(..)]` / `#[schemars(..)]` attributes to put on the property.
        attrs: Vec<Attribute>,
        /// From `params(name = "...")`.
        description: Option<LitStr>,
    },
    /// `State<T>`: application state of type `T`.
    State(Box<Type>),
    /// `ToolContext`: the call's context.
    Context,
}

/// One parameter of a `#[tool]` fn.
pub(crate) struct Param {
    pub(crate) ident: Ident,
    pub(crate) ty: Type,
    pub(crate) kind: Kind,
}

/// How a `#[tool]` fn returns.
pub(crate) enum Returns {
    /// A value (`()` included) that is serialized.
    Plain(Span),
    /// A `Result<T, E>`.
    Result(Span),
    /// A `ToolContent` (text and parts), or a `Result<ToolContent, E>` (`true`).
    Content(Span, bool),
}

/// A `#[tool]` fn.
pub(crate) struct ToolFn {
    /// The fn, with the parameters' `#[serde]`/`#[schemars]` attributes removed.
    pub(crate) item: ItemFn,
    /// The tool name.
    pub(crate) name: String,
    /// The tool description.
    pub(crate) description: String,
    pub(crate) params: Vec<Param>,
    pub(crate) returns: Returns,
    /// `#[tool(irreversible)]`.
    pub(crate) irreversible: bool,
    /// `#[tool(requires_approval)]`.
    pub(crate) requires_approval: bool,
    /// `#[tool(max_result_tokens = N)]`.
    pub(crate) max_result_tokens: Option<u32>,
}

impl ToolFn {
    pub(crate) fn from_syn(args: ToolArgs, item: Item) -> syn::Result<Self> {
        let mut item = match item {
            Item::Fn(item) => item,
            other => {
                return Err(syn::Error::new(
                    keyword_span(&other),
                    "#[tool] goes on an async fn",
                ));
            }
        };
        let mut errors = Errors::default();
        check_signature(&item, &mut errors);
        let mut params = parse_params(&mut item, &mut errors);
        attach_descriptions(&item.sig.ident, args.params, &mut params, &mut errors);
        let returns = parse_return(&item.sig.output, &mut errors);
        let irreversible = args.irreversible;
        let requires_approval = args.requires_approval;
        let max_result_tokens = args
            .max_result_tokens
            .as_ref()
            .and_then(|lit| lit.base10_parse::<u32>().ok());
        let name = match &args.name {
            Some(lit) => {
                let name = lit.value();
                valid::tool_name(&name, lit.span(), false, &mut errors);
                name
            }
            None => {
                let name = item.sig.ident.unraw().to_string();
                valid::tool_name(&name, item.sig.ident.span(), true, &mut errors);
                name
            }
        };
        let description = match &args.description {
            Some(lit) => non_empty(lit, &mut errors),
            None => attr::doc_text(&item.attrs).unwrap_or_else(|| {
                errors.at(
                    &item.sig.ident,
                    format!(
                        "tool `{name}` has no description: the model reads it to decide when to call the tool; add a doc comment (`/// ...`) or `#[tool(description = \"...\")]`"
                    ),
                );
                String::new()
            }),
        };
        errors.finish()?;
        Ok(Self {
            item,
            name,
            description,
            params,
            returns,
            irreversible,
            requires_approval,
            max_result_tokens,
        })
    }
}

fn check_signature(item: &ItemFn, errors: &mut Errors) {
    let sig = &item.sig;
    if let Some(token) = &sig.constness {
        errors.at(token, "#[tool] does not support a `const fn`");
    }
    if sig.asyncness.is_none() {
        errors.at(
            sig.fn_token,
            format!(
                "#[tool] needs an async fn: write `async fn {}`; tools run inside the agent's async loop",
                sig.ident
            ),
        );
    }
    if let syn::Safety::Unsafe(token) = &sig.safety {
        errors.at(token, "#[tool] does not support an `unsafe fn`");
    }
    if let Some(abi) = &sig.abi {
        errors.at(abi, "#[tool] does not support an `extern` fn");
    }
    for param in &sig.generics.params {
        errors.at(
            param,
            "#[tool] fns cannot be generic: the model needs one concrete JSON Schema for the arguments; use concrete types",
        );
    }
    if let Some(clause) = &sig.generics.where_clause {
        errors.at(clause, "#[tool] fns cannot have a where clause");
    }
    if let Some(variadic) = &sig.variadic {
        errors.at(variadic, "#[tool] fns cannot be variadic");
    }
}

fn parse_params(item: &mut ItemFn, errors: &mut Errors) -> Vec<Param> {
    let mut params: Vec<Param> = Vec::new();
    for input in &mut item.sig.inputs {
        let arg = match input {
            FnArg::Receiver(receiver) => {
                errors.at(
                    &*receiver,
                    "`self` is not supported: #[tool] goes on a free async fn, not a method; pass shared state as a `State<T>` parameter instead",
                );
                continue;
            }
            FnArg::Typed(arg) => arg,
        };
        let mut forwarded = Vec::new();
        let mut kept = Vec::new();
        for attr in std::mem::take(&mut arg.attrs) {
            if attr::is_serde_or_schemars(&attr) {
                forwarded.push(attr);
            } else {
                kept.push(attr);
            }
        }
        arg.attrs = kept;
        let ident = match &*arg.pat {
            Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => pat.ident.clone(),
            other => {
                errors.at(
                    other,
                    "a #[tool] parameter must be a plain name (it becomes the JSON property name); bind a name and destructure it in the body",
                );
                continue;
            }
        };
        let ty = (*arg.ty).clone();
        let kind = if valid::is_plain_path(&ty, "ToolContext") {
            if let Some(first) = params.iter().find(|p| matches!(p.kind, Kind::Context)) {
                errors.at(
                    &ty,
                    format!(
                        "only one `ToolContext` parameter is allowed: `{}` already receives the call's context",
                        first.ident
                    ),
                );
            }
            Kind::Context
        } else {
            match valid::single_type_arg(&ty, "State") {
                Some(inner) => Kind::State(Box::new(inner.clone())),
                None => {
                    valid::owned_type(&ty, Place::ToolParam, errors);
                    Kind::Json {
                        attrs: Vec::new(),
                        description: None,
                    }
                }
            }
        };
        match kind {
            Kind::Json { description, .. } => params.push(Param {
                ident,
                ty,
                kind: Kind::Json {
                    attrs: forwarded,
                    description,
                },
            }),
            injected => {
                for attr in &forwarded {
                    errors.at(
                        attr,
                        format!(
                            "`{ident}` is injected by the runner, not sent by the model: `#[serde]`/`#[schemars]` apply only to JSON parameters"
                        ),
                    );
                }
                params.push(Param {
                    ident,
                    ty,
                    kind: injected,
                });
            }
        }
    }
    params
}

fn attach_descriptions(
    fn_ident: &Ident,
    described: Vec<(Ident, LitStr)>,
    params: &mut [Param],
    errors: &mut Errors,
) {
    let json_names: Vec<String> = params
        .iter()
        .filter(|p| matches!(p.kind, Kind::Json { .. }))
        .map(|p| format!("`{}`", p.ident.unraw()))
        .collect();
    for (ident, text) in described {
        let name = ident.unraw();
        let Some(param) = params.iter_mut().find(|p| p.ident.unraw() == name) else {
            let known = if json_names.is_empty() {
                format!("`{fn_ident}` has no JSON parameters")
            } else {
                format!("its parameters are {}", json_names.join(", "))
            };
            errors.at(
                &ident,
                format!("no parameter named `{name}` in `{fn_ident}`: {known}"),
            );
            continue;
        };
        match &mut param.kind {
            Kind::Json { description, .. } => {
                let value = text.value();
                if value.trim().is_empty() {
                    errors.at(&text, "the description is empty: the model needs one");
                }
                *description = Some(text);
            }
            _ => errors.at(
                &ident,
                format!(
                    "`{name}` is injected by the runner, not sent by the model: it takes no description"
                ),
            ),
        }
    }
}

fn parse_return(output: &ReturnType, errors: &mut Errors) -> Returns {
    let ReturnType::Type(_, ty) = output else {
        return Returns::Plain(Span::call_site());
    };
    match &**ty {
        Type::Reference(r) => {
            let hint = match &*r.elem {
                Type::Path(p) if p.path.is_ident("str") => "String".to_owned(),
                other => valid::show(other),
            };
            errors.at(
                ty,
                format!(
                    "unsupported return type `{}`: a tool's result must be owned; return `{hint}`",
                    valid::show(ty)
                ),
            );
        }
        Type::ImplTrait(_) | Type::TraitObject(_) | Type::FnPtr(_) | Type::Ptr(_) | Type::Infer(_)
        | Type::Never(_) => errors.at(
            ty,
            format!(
                "unsupported return type `{}`: return a concrete type that implements `Serialize`, or `Result<T, E>` with `T: Serialize` and `E: Display`",
                valid::show(ty)
            ),
        ),
        _ => {}
    }
    let span = valid::type_span(ty);
    let is_result = matches!(&**ty, Type::Path(p)
        if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Result"));
    // The value's type: `T` of a `Result<T, E>`, else the type itself.
    let value = if is_result {
        first_type_argument(ty)
    } else {
        Some(&**ty)
    };
    match value.and_then(last_ident).as_deref() {
        Some("ToolContent") => return Returns::Content(span, is_result),
        Some(part @ ("Part" | "Input" | "Bytes")) => {
            let shown = value.map_or_else(String::new, valid::show);
            errors.at(
                value.map_or(&**ty, |v| v),
                format!(
                    "unsupported return type `{shown}`: a `{part}` would reach the model as \
                     JSON text; return a `ToolContent` (`ToolContent::text(..).part(..)`) to \
                     give it an image, a document or audio"
                ),
            );
        }
        _ => {}
    }
    if is_result {
        Returns::Result(span)
    } else {
        Returns::Plain(span)
    }
}

/// The first type argument of a path type (`T` of `Result<T, E>`).
fn first_type_argument(ty: &Type) -> Option<&Type> {
    let Type::Path(p) = ty else { return None };
    let syn::PathArguments::AngleBracketed(args) = &p.path.segments.last()?.arguments else {
        return None;
    };
    args.args.iter().find_map(|a| match a {
        syn::GenericArgument::Type(t) => Some(t),
        _ => None,
    })
}

/// The last segment's name of a path type (`Part` of `agent_core::content::Part`;
/// `Vec` of `Vec<Part>` is `Vec`, so the element is looked at too).
fn last_ident(ty: &Type) -> Option<String> {
    let Type::Path(p) = ty else { return None };
    let last = p.path.segments.last()?;
    if last.ident == "Vec" {
        return first_type_argument(ty).and_then(last_ident);
    }
    Some(last.ident.to_string())
}
