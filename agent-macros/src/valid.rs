//! The checks: each mistake becomes a `syn::Error` spanned on the token at fault.

use std::fmt::Display;

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{GenericArgument, Lifetime, PathArguments, Type};

/// Collects every error of one expansion, so the user sees them all at once.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, error: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(error),
            None => self.0 = Some(error),
        }
    }

    pub(crate) fn at(&mut self, tokens: impl ToTokens, message: impl Display) {
        self.push(syn::Error::new_spanned(tokens, message));
    }

    pub(crate) fn span(&mut self, span: Span, message: impl Display) {
        self.push(syn::Error::new(span, message));
    }

    pub(crate) fn finish(self) -> syn::Result<()> {
        self.0.map_or(Ok(()), Err)
    }
}

/// Where a type appears, for the messages.
#[derive(Clone, Copy)]
pub(crate) enum Place {
    /// A field of an `#[agent_output]` struct.
    OutputField,
    /// A parameter of a `#[tool]` fn.
    ToolParam,
}

impl Place {
    fn owner(self) -> &'static str {
        match self {
            Place::OutputField => "an output field is deserialized from the model's JSON",
            Place::ToolParam => "a tool parameter is deserialized from the model's JSON",
        }
    }
}

/// Renders a type compactly: `Vec<String>`, not `Vec < String >`.
pub(crate) fn show(tokens: &impl ToTokens) -> String {
    let text = tokens.to_token_stream().to_string();
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        let skip = c == ' '
            && (matches!(next, Some('<' | '>' | ',' | ':' | ']' | ')'))
                || matches!(out.chars().last(), Some('<' | '&' | ':' | '[' | '(')));
        if !skip {
            out.push(c);
        }
    }
    out
}

/// The owned type to suggest instead of the reference `&elem`.
fn owned_suggestion(elem: &Type) -> String {
    match elem {
        Type::Path(p) if p.qself.is_none() && p.path.is_ident("str") => "String".to_owned(),
        Type::Path(p) if p.qself.is_none() && p.path.is_ident("Path") => "PathBuf".to_owned(),
        Type::Slice(s) => format!("Vec<{}>", show(&s.elem)),
        other => show(other),
    }
}

/// Checks that a type owns its data and has a schema every provider accepts: no
/// references, no non-`'static` lifetimes, no tuples, no `impl Trait`, trait objects,
/// fn pointers or raw pointers.
pub(crate) fn owned_type(ty: &Type, place: Place, errors: &mut Errors) {
    struct Check<'e> {
        place: Place,
        errors: &'e mut Errors,
    }
    impl<'ast> Visit<'ast> for Check<'_> {
        fn visit_type(&mut self, ty: &'ast Type) {
            let owner = self.place.owner();
            match ty {
                Type::Reference(r) => {
                    let suggestion = owned_suggestion(&r.elem);
                    self.errors.at(
                        ty,
                        format!(
                            "reference types are not supported here: {owner} and must own its data; use `{suggestion}` instead of `{}`",
                            show(ty)
                        ),
                    );
                }
                Type::Tuple(t) if !t.elems.is_empty() => self.errors.at(
                    ty,
                    format!(
                        "tuple types are not supported: their schema (`prefixItems`) is rejected by OpenAI strict mode and Gemini; use a struct with named fields instead of `{}`",
                        show(ty)
                    ),
                ),
                Type::ImplTrait(_) => self.errors.at(
                    ty,
                    format!("`impl Trait` is not supported here: {owner} and needs a concrete type"),
                ),
                Type::TraitObject(_) | Type::FnPtr(_) | Type::Ptr(_) | Type::Never(_) | Type::Infer(_) => {
                    self.errors.at(
                        ty,
                        format!("`{}` is not supported here: {owner} and needs a concrete, owned type with a JSON Schema", show(ty)),
                    );
                }
                _ => syn::visit::visit_type(self, ty),
            }
        }

        fn visit_lifetime(&mut self, lifetime: &'ast Lifetime) {
            if lifetime.ident != "static" {
                self.errors.at(
                    lifetime,
                    format!(
                        "lifetime `{}` is not supported here: {} and must own its data; use owned types (`String`, `Vec<T>`)",
                        show(lifetime),
                        self.place.owner()
                    ),
                );
            }
        }
    }
    Check { place, errors }.visit_type(ty);
}

/// The single generic type argument of the last path segment, when that segment is
/// `name` with exactly one type argument (`State<Db>` gives `Db`).
pub(crate) fn single_type_arg<'t>(ty: &'t Type, name: &str) -> Option<&'t Type> {
    let Type::Path(path) = ty else {
        return None;
    };
    if path.qself.is_some() {
        return None;
    }
    let last = path.path.segments.last()?;
    if last.ident != name {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let mut types = args.args.iter().filter_map(|a| match a {
        GenericArgument::Type(t) => Some(t),
        _ => None,
    });
    match (types.next(), types.next()) {
        (Some(t), None) if args.args.len() == 1 => Some(t),
        _ => None,
    }
}

/// Whether the last path segment of `ty` is `name` with no generic arguments.
pub(crate) fn is_plain_path(ty: &Type, name: &str) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == name && s.arguments.is_none()),
        _ => false,
    }
}

/// Names the runner reserves (see `agent_core::SUBMIT_OUTPUT` and
/// `agent_core::ESCALATE_TO_HUMAN`).
const RESERVED: &[(&str, &str)] = &[
    ("submit_output", "the runner's output tool"),
    ("escalate_to_human", "the runner's built-in escalation tool"),
];

/// Providers' longest tool name (OpenAI: `^[A-Za-z0-9_-]{1,64}$`).
const MAX_NAME: usize = 64;

/// Checks a tool name against `^[A-Za-z0-9_-]{1,64}$` and the reserved names.
pub(crate) fn tool_name(name: &str, span: Span, from_fn: bool, errors: &mut Errors) {
    let fix = if from_fn {
        "; rename the fn or set a name with `#[tool(name = \"...\")]`"
    } else {
        ""
    };
    if name.is_empty() {
        errors.span(
            span,
            "the tool name is empty: it must match ^[A-Za-z0-9_-]{1,64}$",
        );
    } else if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
    {
        errors.span(
            span,
            format!("invalid tool name `{name}`: `{bad}` is not allowed; a name must match ^[A-Za-z0-9_-]{{1,64}}${fix}"),
        );
    } else if name.len() > MAX_NAME {
        errors.span(
            span,
            format!(
                "tool name `{name}` is {} characters long; providers accept at most {MAX_NAME} (^[A-Za-z0-9_-]{{1,64}}$){fix}",
                name.len()
            ),
        );
    } else if let Some((_, what)) = RESERVED.iter().find(|(r, _)| *r == name) {
        errors.span(
            span,
            format!(
                "tool name `{name}` is reserved for {what}{}",
                if from_fn {
                    fix
                } else {
                    "; choose another name"
                }
            ),
        );
    }
}

/// The span of a whole type, for `quote_spanned!`.
pub(crate) fn type_span(ty: &Type) -> Span {
    ty.span()
}
