//! Collects every error of one attribute, so a single build reports all of
//! its mistakes (serde_derive's `Ctxt`).

use std::cell::RefCell;
use std::fmt::Display;

use proc_macro2::{Span, TokenStream};

/// The errors found so far.
#[derive(Debug, Default)]
pub(crate) struct Ctxt {
    errors: RefCell<Vec<syn::Error>>,
}

impl Ctxt {
    /// Records an error at `span`.
    pub(crate) fn error(&self, span: Span, message: impl Display) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new(span, message));
    }

    /// Records an error spanning `tokens`.
    pub(crate) fn error_spanned_by(&self, tokens: impl quote::ToTokens, message: impl Display) {
        self.errors
            .borrow_mut()
            .push(syn::Error::new_spanned(tokens, message));
    }

    /// Records a parse error as it is.
    pub(crate) fn syn_error(&self, error: syn::Error) {
        self.errors.borrow_mut().push(error);
    }

    /// Every error recorded, as `compile_error!` invocations.
    pub(crate) fn into_compile_errors(self) -> TokenStream {
        self.errors
            .into_inner()
            .into_iter()
            .map(|error| error.to_compile_error())
            .collect()
    }
}
