//! Generating the code of a checked `#[humus::client]` (see `attr.rs`).
//!
//! `#[humus::client(service = S)] pub trait Ledger { ... }` first becomes
//! `S::__humus_client! { args = { .. }, item = { .. } }`: the service
//! module's callback macro, which calls `humus::codegen::client_expand!`
//! with the service's name, its methods and those the `.proto` declares
//! `never_retry`. So a method the service lacks and a table that retries
//! a `never_retry` method are errors of this macro at the user's token,
//! and the expansion is:
//!
//! ```text
//! pub type LedgerHumusClient = S::Client<LedgerPolicy>;
//! pub enum LedgerPolicy {}
//! impl S::Policy for LedgerPolicy {
//!     const CHANGES: Changes = &[
//!         ("charge", Override { never_retry: true, .. }),   // user's span
//!     ];
//! }
//! ```
//!
//! A classify function is bound to a `ClassifyFn` at the user's
//! expression, so a wrong signature fails there.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::parse::ParseStream;
use syn::spanned::Spanned;

use crate::attr::{Client, Method, Service};

/// The input of `client_expand!`: what the service module says of the
/// service, then `args = { .. }, item = { .. }` from the attribute.
pub(crate) fn callback_input(
    input: ParseStream<'_>,
) -> syn::Result<(Service, TokenStream, TokenStream)> {
    fn group(input: ParseStream<'_>, name: &str) -> syn::Result<TokenStream> {
        let ident: syn::Ident = input.parse()?;
        if ident != name {
            return Err(syn::Error::new(ident.span(), format!("expected `{name}`")));
        }
        input.parse::<syn::Token![=]>()?;
        let content;
        syn::braced!(content in input);
        content.parse()
    }
    let service: Service = input.parse()?;
    let args = group(input, "args")?;
    input.parse::<syn::Token![,]>()?;
    let item = group(input, "item")?;
    Ok((service, args, item))
}

/// What a package's module's callback macro passes when `service` names
/// the package's module: `package = "ledger.v1", modules =
/// ["ledger_humus"], args = { .. }, item = { .. }`: the package, its
/// services' modules, and the attribute's arguments.
pub(crate) fn package_input(
    input: ParseStream<'_>,
) -> syn::Result<(String, Vec<String>, TokenStream)> {
    fn key(input: ParseStream<'_>, name: &str) -> syn::Result<()> {
        let ident: syn::Ident = input.parse()?;
        if ident != name {
            return Err(syn::Error::new(ident.span(), format!("expected `{name}`")));
        }
        input.parse::<syn::Token![=]>()?;
        Ok(())
    }
    key(input, "package")?;
    let package = input.parse::<syn::LitStr>()?.value();
    input.parse::<syn::Token![,]>()?;
    key(input, "modules")?;
    let content;
    syn::bracketed!(content in input);
    let modules =
        syn::punctuated::Punctuated::<syn::LitStr, syn::Token![,]>::parse_terminated(&content)?
            .iter()
            .map(syn::LitStr::value)
            .collect();
    input.parse::<syn::Token![,]>()?;
    key(input, "args")?;
    let args;
    syn::braced!(args in input);
    let args: TokenStream = args.parse()?;
    // The trait is not expanded: the error is the path's.
    let _rest: TokenStream = input.parse()?;
    Ok((package, modules, args))
}

pub(crate) fn expand(client: &Client, service: Option<&Service>) -> TokenStream {
    let Client {
        service: path,
        policy,
        client,
        attrs,
        vis,
        ident,
        methods,
    } = client;
    let service_span = path.span();
    let policy_trait = quote_spanned!(service_span=> #path::Policy);
    let client_type = quote_spanned!(service_span=> #path::Client);
    let items = methods.iter().map(method_item);
    let proto_client = service
        .map(|service| format!(", as `{}` has the `.proto`'s", service.proto_client))
        .unwrap_or_default();
    let alias_doc = format!(
        " A typed client with the policy of the `.proto`, changed as \
         [`{policy}`] declares (`#[humus::client]` on `{ident}`){proto_client}."
    );
    let policy_doc =
        format!(" The per-method policy changes `#[humus::client]` declares for [`{client}`].");
    let separator = (!attrs.is_empty()).then(|| quote!(#[doc = ""]));
    quote! {
        #(#attrs)*
        #separator
        #[doc = #alias_doc]
        #vis type #client = #client_type<#policy>;

        #[doc = #policy_doc]
        #[derive(Clone, Copy, Debug)]
        #vis enum #policy {}

        impl #policy_trait for #policy {
            const CHANGES: ::humus::codegen::Changes = &[#(#items),*];
        }
    }
}

/// One entry of `CHANGES`: the method's Rust name (without `r#`, as the
/// generated descriptors look it up) and its `Override`.
fn method_item(method: &Method) -> TokenStream {
    let ident = &method.ident;
    let span = ident.span();
    let key = syn::ext::IdentExt::unraw(ident).to_string();
    let never_retry = method.never_retry;
    let table = match &method.table {
        Some(rules) => {
            let rules = rules.iter().map(|rule| {
                let (code, retry, breaker) = (&rule.code, &rule.retry, &rule.breaker);
                quote_spanned! {code.span()=>
                    ::humus::codegen::CodeRule {
                        code: ::humus::codegen::Code::#code,
                        retry: ::humus::codegen::Verdict::#retry,
                        breaker: ::humus::codegen::Outcome::#breaker,
                    }
                }
            });
            quote!(::core::option::Option::Some(&[#(#rules),*]))
        }
        None => quote!(::core::option::Option::None),
    };
    let classify = match &method.classify_fn {
        Some(function) => {
            let ty = quote_spanned!(function.span()=> ::humus::codegen::ClassifyFn);
            quote! {
                ::core::option::Option::Some({
                    let classify: #ty = #function;
                    classify
                })
            }
        }
        None => quote!(::core::option::Option::None),
    };
    let conflict = format!(
        "#[humus::client]: the classify table of `{ident}` retries a code, but its .proto \
         declares it never_retry (it is never sent twice); use `Stop` for that code"
    );
    quote_spanned! {span=>
        (#key, ::humus::codegen::Override {
            never_retry: #never_retry,
            table: #table,
            classify: #classify,
            conflict: #conflict,
        })
    }
}
