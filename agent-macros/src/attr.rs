//! The macros' own arguments (`#[tool(name = "..")]`) and doc comments.

use proc_macro2::TokenStream;
use syn::ext::IdentExt;
use syn::parse::Parser;
use syn::{Attribute, Expr, Ident, Lit, LitStr, Meta, Path};

/// The keys one macro accepts; rejects unknown and repeated keys, listing the valid ones.
struct Keys {
    macro_name: &'static str,
    valid: &'static [&'static str],
    seen: Vec<String>,
}

impl Keys {
    fn new(macro_name: &'static str, valid: &'static [&'static str]) -> Self {
        Self {
            macro_name,
            valid,
            seen: Vec::new(),
        }
    }

    fn listing(&self) -> String {
        self.valid
            .iter()
            .map(|k| format!("`{k}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The key named by `path`, once.
    fn claim(&mut self, path: &Path) -> syn::Result<String> {
        let Some(ident) = path.get_ident() else {
            return Err(syn::Error::new_spanned(
                path,
                format!(
                    "expected a key of {}; valid keys: {}",
                    self.macro_name,
                    self.listing()
                ),
            ));
        };
        let key = ident.unraw().to_string();
        if !self.valid.contains(&key.as_str()) {
            return Err(syn::Error::new_spanned(
                path,
                format!(
                    "unknown key `{key}` in {}; valid keys: {}",
                    self.macro_name,
                    self.listing()
                ),
            ));
        }
        if self.seen.contains(&key) {
            return Err(syn::Error::new_spanned(
                path,
                format!(
                    "duplicate key `{key}` in {}: each key may appear once (valid keys: {})",
                    self.macro_name,
                    self.listing()
                ),
            ));
        }
        self.seen.push(key.clone());
        Ok(key)
    }
}

/// The arguments of `#[agent_output(..)]`.
#[derive(Default)]
pub(crate) struct OutputArgs {
    /// `description = "..."`: overrides the doc comment.
    pub(crate) description: Option<LitStr>,
    /// `validate = path`: a `fn(&Self) -> Result<(), impl Display>`.
    pub(crate) validate: Option<Path>,
    /// `partial = path`: a `fn(&Self) -> bool`, true for a partial answer.
    pub(crate) partial: Option<Path>,
}

impl OutputArgs {
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let mut args = Self::default();
        let mut keys = Keys::new("#[agent_output]", &["description", "validate", "partial"]);
        let parser = syn::meta::parser(|meta| {
            match keys.claim(&meta.path)?.as_str() {
                "description" => args.description = Some(meta.value()?.parse()?),
                "partial" => args.partial = Some(meta.value()?.parse()?),
                _ => args.validate = Some(meta.value()?.parse()?),
            }
            Ok(())
        });
        parser.parse2(tokens)?;
        Ok(args)
    }
}

/// The arguments of `#[tool(..)]`.
#[derive(Default)]
pub(crate) struct ToolArgs {
    /// `name = "..."`: overrides the fn's name.
    pub(crate) name: Option<LitStr>,
    /// `description = "..."`: overrides the doc comment.
    pub(crate) description: Option<LitStr>,
    /// `params(arg = "...", ..)`: parameter descriptions, by parameter name.
    pub(crate) params: Vec<(Ident, LitStr)>,
    /// `irreversible`: a successful call cannot be taken back.
    pub(crate) irreversible: bool,
    /// `requires_approval`: every call waits for a person's approval.
    pub(crate) requires_approval: bool,
    /// `max_result_tokens = N`: the longest result the model is shown, in tokens.
    pub(crate) max_result_tokens: Option<syn::LitInt>,
}

impl ToolArgs {
    pub(crate) fn parse(tokens: TokenStream) -> syn::Result<Self> {
        let mut args = Self::default();
        let mut keys = Keys::new(
            "#[tool]",
            &[
                "name",
                "description",
                "params",
                "irreversible",
                "requires_approval",
                "max_result_tokens",
            ],
        );
        let parser = syn::meta::parser(|meta| {
            match keys.claim(&meta.path)?.as_str() {
                "name" => args.name = Some(meta.value()?.parse()?),
                "description" => args.description = Some(meta.value()?.parse()?),
                "irreversible" => {
                    if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                        return Err(
                            meta.error("`irreversible` is a flag: write `#[tool(irreversible)]`")
                        );
                    }
                    args.irreversible = true;
                }
                "requires_approval" => {
                    if !meta.input.is_empty() && !meta.input.peek(syn::Token![,]) {
                        return Err(meta.error(
                            "`requires_approval` is a flag: write `#[tool(requires_approval)]`",
                        ));
                    }
                    args.requires_approval = true;
                }
                "max_result_tokens" => {
                    let lit: syn::LitInt = meta.value()?.parse().map_err(|e| {
                        syn::Error::new(
                            e.span(),
                            "`max_result_tokens` takes a whole number of tokens: \
                             `#[tool(max_result_tokens = 2000)]`",
                        )
                    })?;
                    match lit.base10_parse::<u32>() {
                        Ok(0) => {
                            return Err(syn::Error::new(
                                lit.span(),
                                "`max_result_tokens` must be at least 1: a result of no \
                                 tokens tells the model nothing",
                            ));
                        }
                        Ok(_) => args.max_result_tokens = Some(lit),
                        Err(_) => {
                            return Err(syn::Error::new(
                                lit.span(),
                                "`max_result_tokens` takes a whole number of tokens from 1 to \
                                 4294967295, without a suffix",
                            ));
                        }
                    }
                }
                _ => meta.parse_nested_meta(|param| {
                    let ident = param.path.require_ident()?.clone();
                    if args
                        .params
                        .iter()
                        .any(|(seen, _)| seen.unraw() == ident.unraw())
                    {
                        return Err(syn::Error::new(
                            ident.span(),
                            format!(
                                "parameter `{}` is described twice in `params(..)`",
                                ident.unraw()
                            ),
                        ));
                    }
                    let text: LitStr = param.value()?.parse()?;
                    args.params.push((ident, text));
                    Ok(())
                })?,
            }
            Ok(())
        });
        parser.parse2(tokens)?;
        Ok(args)
    }
}

/// The text of the `///` doc comments in `attrs`: one leading space per line removed,
/// lines joined with `\n`, trimmed; `None` when there is none.
pub(crate) fn doc_text(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter_map(|attr| match &attr.meta {
            Meta::NameValue(nv) if nv.path.is_ident("doc") => match &nv.value {
                Expr::Lit(expr) => match &expr.lit {
                    Lit::Str(s) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .flat_map(|chunk| {
            chunk
                .lines()
                .map(|line| line.strip_prefix(' ').unwrap_or(line).trim_end().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// Whether `attr` is a `#[serde(..)]` or `#[schemars(..)]` attribute.
pub(crate) fn is_serde_or_schemars(attr: &Attribute) -> bool {
    attr.path().is_ident("serde") || attr.path().is_ident("schemars")
}
