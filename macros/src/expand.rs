//! Generating the code of a checked `#[humus::client]` (see `attr.rs`).
//!
//! For `#[humus::client(service = S)] pub trait Ledger { ... }`:
//!
//! ```text
//! pub type Ledger = S::Client<LedgerPolicy>;
//! pub enum LedgerPolicy {}
//! impl S::Policy for LedgerPolicy {
//!     const charge: Override = Override { never_retry: true, .. };   // user's span
//! }
//! const _: &[&Method] = S::Client::<LedgerPolicy>::METHODS;          // checks now
//! ```
//!
//! Each associated constant carries the user's method ident and span, so a
//! method the service lacks fails with "not a member of trait" right on
//! the user's token; a classify function is bound to a `ClassifyFn` at the
//! user's expression, so a wrong signature fails there; evaluating
//! `METHODS` runs `humus::codegen::merge`, which fails the build when a
//! table retries a method the `.proto` declares `never_retry`.

use proc_macro2::{Group, Span, TokenStream, TokenTree};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::attr::{Client, Method};

pub(crate) fn expand(client: &Client) -> TokenStream {
    let Client {
        service,
        policy,
        attrs,
        vis,
        ident,
        methods,
    } = client;
    let service_span = service.span();
    let policy_trait = quote_spanned!(service_span=> #service::Policy);
    let client_type = quote_spanned!(service_span=> #service::Client);
    let items = methods.iter().map(method_item);
    let alias_doc = format!(
        " A typed client with the policy of the `.proto`, changed as \
         [`{policy}`] declares (`#[humus::client]`)."
    );
    let policy_doc =
        format!(" The per-method policy changes `#[humus::client]` declares for [`{ident}`].");
    let separator = (!attrs.is_empty()).then(|| quote!(#[doc = ""]));
    // Evaluating a method's descriptor now checks its table against the
    // `.proto`. Only a table entry that retries can conflict, so each method
    // with one gets a check of its own descriptor alone, spanned at its own
    // first `Retry`: a conflict then points at the method that has it.
    let checks = methods.iter().filter_map(|method| {
        let rule = method
            .table
            .as_ref()?
            .iter()
            .find(|rule| rule.retry == "Retry")?;
        let span = rule.retry.span();
        let service = respan(service.to_token_stream(), span);
        let descriptor = format_ident!(
            "{}",
            method
                .ident
                .to_string()
                .trim_start_matches("r#")
                .to_ascii_uppercase(),
            span = span
        );
        Some(quote_spanned! {span=>
            const _: &::humus::codegen::Method = #service::Client::<#policy>::#descriptor;
        })
    });
    quote! {
        #(#attrs)*
        #separator
        #[doc = #alias_doc]
        #vis type #ident = #client_type<#policy>;

        #[doc = #policy_doc]
        #[derive(Clone, Copy, Debug)]
        #vis enum #policy {}

        impl #policy_trait for #policy {
            #(#items)*
        }

        #(#checks)*
    }
}

/// `tokens` with every token at `span`.
fn respan(tokens: TokenStream, span: Span) -> TokenStream {
    tokens
        .into_iter()
        .map(|mut token| {
            if let TokenTree::Group(group) = &token {
                let mut inner = Group::new(group.delimiter(), respan(group.stream(), span));
                inner.set_span(span);
                token = TokenTree::Group(inner);
            } else {
                token.set_span(span);
            }
            token
        })
        .collect()
}

fn method_item(method: &Method) -> TokenStream {
    let ident = &method.ident;
    let span = ident.span();
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
        const #ident: ::humus::codegen::Override = ::humus::codegen::Override {
            never_retry: #never_retry,
            table: #table,
            classify: #classify,
            conflict: #conflict,
        };
    }
}
