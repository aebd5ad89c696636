//! The service generator: tonic's stubs, then a typed humus client module
//! per service (the layout is in the crate's docs).
//!
//! The typed client is generic over a policy type `P`: each method passes
//! `Client::<P>::METHOD`, an associated constant computed at compile time
//! by `humus::codegen::merge_named` from the `.proto`'s descriptor of the
//! method and `P`'s `Policy::CHANGES`. `ProtoPolicy` changes nothing;
//! `#[humus::client]` implements `Policy` for its own type. So every call
//! passes a `&'static Method` known at compile time: no lookup by string at
//! run time, whoever declared the policy. Per method, that constant and the
//! call are the only items (rustc type checks each one, thousands in a
//! googleapis-sized crate).

use std::collections::{HashMap, HashSet};

use proc_macro2::TokenStream;
use prost_build::{Method, Service, ServiceGenerator};
use quote::{format_ident, quote};

use crate::policy::{CODES, Policies, Policy};

/// Rust types prost may resolve a well-known wrapper to, used as they are.
const NON_PATH_TYPES: [&str; 8] = ["()", "bool", "i32", "i64", "u32", "u64", "f32", "f64"];

/// What the humus part of the generator needs.
#[derive(Debug)]
pub(crate) struct HumusOptions {
    pub(crate) policies: Policies,
    pub(crate) proto_path: String,
    pub(crate) disable_comments: HashSet<String>,
    /// Per package, the module names prost gives its top-level messages
    /// (`ledger_humus` for a message `LedgerHumus`), each with the
    /// message's name.
    pub(crate) message_modules: HashMap<String, HashMap<String, String>>,
}

impl HumusOptions {
    /// The humus module's name for service `service_name` of `package`:
    /// `<service>_humus`, or `<service>_humus_` when prost's module of a
    /// message of the package takes `<service>_humus` (then also that
    /// message's name). prost's snake-case names never end in `_` but for
    /// `self_`, `super_`, `crate_` and `extern_`, so the second cannot clash.
    pub(crate) fn module_name(
        &self,
        package: &str,
        service_name: &str,
    ) -> (String, Option<String>) {
        let name = module_name(service_name);
        match self
            .message_modules
            .get(package)
            .and_then(|modules| modules.get(&name))
        {
            Some(message) => (name + "_", Some(message.clone())),
            None => (name, None),
        }
    }
}

/// prost's service generator: tonic's (when client or server stubs are
/// on), then humus's.
pub(crate) struct Generator {
    pub(crate) tonic: Option<Box<dyn ServiceGenerator>>,
    pub(crate) humus: Option<HumusOptions>,
    /// The humus modules of the package being generated, so far.
    pub(crate) package_modules: Vec<String>,
}

impl ServiceGenerator for Generator {
    fn generate(&mut self, service: Service, buf: &mut String) {
        if let Some(humus) = &self.humus {
            self.package_modules
                .push(humus.module_name(&service.package, &service.name).0);
            let tokens = humus_module(&service, humus);
            let file = syn::parse2(tokens).expect("humus-build generates a valid Rust module");
            let humus_code = prettyplease::unparse(&file);
            if let Some(tonic) = &mut self.tonic {
                tonic.generate(service, buf);
            }
            buf.push_str(&humus_code);
        } else if let Some(tonic) = &mut self.tonic {
            tonic.generate(service, buf);
        }
    }

    fn finalize(&mut self, buf: &mut String) {
        if let Some(tonic) = &mut self.tonic {
            tonic.finalize(buf);
        }
    }

    fn finalize_package(&mut self, package: &str, buf: &mut String) {
        if let Some(tonic) = &mut self.tonic {
            tonic.finalize_package(package, buf);
        }
        let modules = std::mem::take(&mut self.package_modules);
        if !modules.is_empty() {
            let tokens = package_callback(package, &modules);
            let file = syn::parse2(tokens).expect("humus-build generates valid Rust items");
            buf.push_str(&prettyplease::unparse(&file));
        }
    }
}

/// `package.Service`, or `Service` without a package.
fn service_full_name(service: &Service) -> String {
    if service.package.is_empty() {
        service.proto_name.clone()
    } else {
        format!("{}.{}", service.package, service.proto_name)
    }
}

/// The module name tonic would use, with `_humus` instead of `_client`.
pub(crate) fn module_name(service_name: &str) -> String {
    naive_snake(service_name) + "_humus"
}

/// A service's name in snake case as tonic makes its module names.
pub(crate) fn naive_snake(service_name: &str) -> String {
    let mut name = String::new();
    let mut chars = service_name.chars().peekable();
    while let Some(c) = chars.next() {
        name.push(c.to_ascii_lowercase());
        if chars.peek().is_some_and(|next| next.is_uppercase()) {
            name.push('_');
        }
    }
    name
}

/// The static's name: the Rust method name in upper case.
fn static_name(method: &Method) -> String {
    method.name.trim_start_matches("r#").to_ascii_uppercase()
}

/// The request or response type as seen from inside the humus module.
fn rust_type(resolved: &str, proto_path: &str) -> TokenStream {
    let text = if NON_PATH_TYPES.contains(&resolved)
        || resolved.starts_with("::")
        || resolved.starts_with("crate::")
    {
        resolved.to_owned()
    } else {
        format!("{proto_path}::{resolved}")
    };
    text.parse()
        .expect("prost resolves message types to valid Rust paths")
}

/// `#[doc = "..."]` lines for proto comments, made safe for rustdoc: URLs
/// in angle brackets, square and angle brackets escaped unless they already
/// are.
fn doc_comments(lines: &[String]) -> TokenStream {
    let docs = lines.iter().map(|line| {
        let mut text = sanitize(line);
        if !text.is_empty() && (!text.starts_with(' ') || text.starts_with("  ")) {
            text.insert(0, ' ');
        }
        quote!(#[doc = #text])
    });
    quote!(#(#docs)*)
}

fn sanitize(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while !rest.is_empty() {
        let url = ["https://", "http://"]
            .iter()
            .filter_map(|scheme| rest.find(scheme))
            .min();
        let (plain, tail) = match url {
            Some(start) => rest.split_at(start),
            None => (rest, ""),
        };
        // `<https://...>` is already an autolink: keep its brackets.
        let autolink = plain.ends_with('<');
        let plain = if autolink {
            &plain[..plain.len() - 1]
        } else {
            plain
        };
        let mut escaped = out.ends_with('\\');
        for c in plain.chars() {
            // prost may have escaped some already (its `cleanup-markdown`).
            if matches!(c, '[' | ']' | '<' | '>') && !escaped {
                out.push('\\');
            }
            escaped = c == '\\' && !escaped;
            out.push(c);
        }
        if tail.is_empty() {
            break;
        }
        let end = tail
            .find(|c: char| c.is_whitespace() || c == ')' || c == '>')
            .unwrap_or(tail.len());
        let (link, mut after) = tail.split_at(end);
        if autolink {
            after = after.strip_prefix('>').unwrap_or(after);
        }
        out.push('<');
        out.push_str(link);
        out.push('>');
        rest = after;
    }
    out
}

/// The `MethodPolicy` expression for a checked policy.
fn policy_tokens(policy: &Policy) -> TokenStream {
    let never_retry = policy.never_retry;
    let rules = policy.table.iter().map(|rule| {
        let code = format_ident!("{}", CODES[rule.code].1);
        let retry = format_ident!("{}", rule.retry.variant());
        let breaker = format_ident!("{}", rule.breaker.variant());
        quote! {
            ::humus::codegen::CodeRule {
                code: ::humus::codegen::Code::#code,
                retry: ::humus::codegen::Verdict::#retry,
                breaker: ::humus::codegen::Outcome::#breaker,
            }
        }
    });
    quote! {
        ::humus::codegen::MethodPolicy {
            never_retry: #never_retry,
            table: &[#(#rules),*],
            classify: ::core::option::Option::None,
        }
    }
}

fn kind_of(method: &Method) -> (&'static str, &'static str) {
    match (method.client_streaming, method.server_streaming) {
        (false, false) => ("Unary", "unary"),
        (false, true) => ("ServerStreaming", "server-streaming"),
        (true, false) => ("ClientStreaming", "client-streaming"),
        (true, true) => ("Streaming", "bidirectional-streaming"),
    }
}

/// The Rust names tonic-prost-build and prost give the RPCs of `service`
/// clash with the fixed names of the typed client: an inherent `new`,
/// `client` or `into_client` is left out when an RPC takes its name (the
/// `From` and `AsRef` impls stay).
fn taken_by_rpcs(service: &Service) -> HashSet<&str> {
    service
        .methods
        .iter()
        .map(|method| method.name.trim_start_matches("r#"))
        .collect()
}

/// The name of the `#[macro_export]` macro `#[humus::client]` calls back:
/// unique per service in a crate (the full name, made an identifier, and
/// its hash, so `a.b_c.D` and `a_b.c.D` differ).
fn callback_macro_name(full_service: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5; // FNV-1a
    for byte in full_service.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!(
        "__humus_client_{}_{hash:08x}",
        full_service.replace('.', "_")
    )
}

/// What `#[humus::client(service = <the package's module>)]` calls: the
/// package's module holds its services' humus modules, and the attribute's
/// error names them (rather than rustc's "cannot find `__humus_client`").
fn package_callback(package: &str, modules: &[String]) -> TokenStream {
    let callback = format_ident!(
        "{}",
        callback_macro_name(&format!("{package}.")).replacen(
            "__humus_client_",
            "__humus_package_",
            1
        )
    );
    quote! {
        // `#[humus::client(service = this module)]` names the package's
        // module, not a service's: this macro makes its error say which.
        #[doc(hidden)]
        #[macro_export]
        macro_rules! #callback {
            ($($input:tt)*) => {
                ::humus::codegen::client_expand! {
                    package = #package,
                    modules = [#(#modules),*],
                    $($input)*
                }
            };
        }

        // Unused in a binary crate that names no module in the attribute.
        #[doc(hidden)]
        #[allow(unused_imports)]
        pub use #callback as __humus_client;
    }
}

/// The humus module of one service.
fn humus_module(service: &Service, options: &HumusOptions) -> TokenStream {
    let full_service = service_full_name(service);
    let (module_text, renamed) = options.module_name(&service.package, &service.name);
    let module = format_ident!("{}", module_text);
    let alias = format_ident!("{}ProtoClient", service.name);
    let service_docs = if options.disable_comments.contains(&full_service) {
        TokenStream::new()
    } else {
        doc_comments(&service.comments.leading)
    };
    let taken = taken_by_rpcs(service);
    // The Rust names `Policy::CHANGES` uses, as `check_changes` reads them
    // and its error lists them: one literal per service.
    let method_names = service
        .methods
        .iter()
        .map(|method| format!("`{}`", method.name.trim_start_matches("r#")))
        .collect::<Vec<_>>()
        .join(", ");

    let mut calls = Vec::new();
    let mut descriptors = Vec::new();
    let mut descriptor_list = Vec::new();
    let mut callback_methods = Vec::new();
    for method in &service.methods {
        let full_name = format!("/{full_service}/{}", method.proto_name);
        let point = format!("grpc:{full_service}/{}", method.proto_name);
        let (kind, kind_text) = kind_of(method);
        let kind = format_ident!("{}", kind);
        let declared = options
            .policies
            .get(&(full_service.clone(), method.proto_name.clone()));
        let policy_source = if declared.is_some() {
            "declared by its `humus.v1.policy` option"
        } else {
            "the client's defaults (no `humus.v1.policy` option)"
        };
        let proto_never_retry = declared.is_some_and(|policy| policy.never_retry);
        // The first code the `.proto`'s table retries (tonic's variant
        // name), or "": `never_retry` given alone in `#[humus::client]`
        // would contradict it.
        let proto_retries = declared
            .and_then(|policy| {
                policy
                    .table
                    .iter()
                    .find(|rule| rule.retry == crate::policy::Verdict::Retry)
            })
            .map_or("", |rule| crate::policy::CODES[rule.code].1);
        // No option: the shared `MethodPolicy::DEFAULT`, less for rustc to
        // check per method than a literal (a googleapis-sized crate has
        // thousands).
        let policy = match declared {
            Some(policy) => policy_tokens(policy),
            None => quote!(::humus::codegen::MethodPolicy::DEFAULT),
        };
        let static_ident = format_ident!("{}", static_name(method));
        let ident: syn::Ident =
            syn::parse_str(&method.name).expect("prost makes method names valid identifiers");
        let rust_name = &method.name;
        let key = rust_name.trim_start_matches("r#");
        let proto_name = &method.proto_name;
        callback_methods
            .push(quote!((#rust_name, #proto_name, #proto_never_retry, #proto_retries)));
        // One item per method besides its call: the descriptor, the
        // `.proto`'s with `P`'s changes merged in at compile time (each
        // item is type checked, so a googleapis-sized crate checks
        // thousands; see BENCHMARKS.md).
        let descriptor_doc = format!(
            " The descriptor `{full_name}` is called with: {kind_text}, fault point \
             `{point}`, policy {policy_source}, with the changes `P` lists for `{key}` \
             ([`Policy::CHANGES`])."
        );
        descriptors.push(quote! {
            #[doc = #descriptor_doc]
            pub const #static_ident: &'static ::humus::codegen::Method =
                &::humus::codegen::merge_named(
                    &::humus::codegen::Method {
                        full_name: #full_name,
                        point: #point,
                        kind: ::humus::codegen::RpcKind::#kind,
                        policy: #policy,
                    },
                    #key,
                    <P as Policy>::CHANGES,
                );
        });
        descriptor_list.push(quote!(Client::<Self>::#static_ident));

        let method_docs = if options
            .disable_comments
            .contains(&format!("{full_service}.{}", method.proto_name))
        {
            TokenStream::new()
        } else {
            doc_comments(&method.comments.leading)
        };
        let call_doc = format!(
            " Calls `{full_name}` ({kind_text}) with the descriptor [`Self::{static_ident}`]."
        );
        let deprecated = method
            .options
            .deprecated
            .unwrap_or(false)
            .then(|| quote!(#[deprecated]));
        let request = rust_type(&method.input_type, &options.proto_path);
        let response = rust_type(&method.output_type, &options.proto_path);
        let errors_doc = if method.server_streaming {
            " The status of the last attempt to open the stream."
        } else {
            " The status of the call's last attempt."
        };
        // Plain `fn`s returning the humus client's future, not `async fn`s:
        // the call's deadline and context are read when the method is
        // called, not when its future is first polled. Through
        // `humus::codegen`'s call functions, which box the future in the
        // named `Call`: no opaque type for rustc to check per method (see
        // there).
        let descriptor = quote!(Self::#static_ident);
        let (parameter, call, output) = match (method.client_streaming, method.server_streaming) {
            (false, false) => (
                quote!(impl ::humus::codegen::IntoRequest<#request>),
                quote!(unary),
                quote!(#response),
            ),
            (false, true) => (
                quote!(impl ::humus::codegen::IntoRequest<#request>),
                quote!(server_streaming),
                quote!(::humus::codegen::Streaming<#response>),
            ),
            (true, false) => (
                quote!(impl ::humus::codegen::IntoStreamingRequest<Message = #request>),
                quote!(client_streaming),
                quote!(#response),
            ),
            (true, true) => (
                quote!(impl ::humus::codegen::IntoStreamingRequest<Message = #request>),
                quote!(streaming),
                quote!(::humus::codegen::Streaming<#response>),
            ),
        };
        let signature_and_body = quote! {
            (&self, request: #parameter) -> ::humus::codegen::Call<'_, #output> {
                ::humus::codegen::#call(&self.client, #descriptor, request)
            }
        };
        let separator = (!method_docs.is_empty()).then(|| quote!(#[doc = ""]));
        calls.push(quote! {
            #method_docs
            #separator
            #[doc = #call_doc]
            #[doc = ""]
            #[doc = " # Errors"]
            #[doc = ""]
            #[doc = #errors_doc]
            #deprecated
            pub fn #ident #signature_and_body
        });
    }

    let mut module_doc =
        format!(" The typed humus client of `{full_service}` and its method descriptors.");
    if let Some(taken_by) = renamed {
        module_doc.push_str(&format!(
            " Named `{module_text}` because prost's module of message `{taken_by}` takes the \
             name without the trailing `_`."
        ));
    }
    let policy_doc = format!(
        " What a typed client of `{full_service}` changes in its methods' policies \
         ([`Policy::CHANGES`]), nothing by default (the `.proto`'s policy). \
         `#[humus::client]` implements it to declare changes in Rust."
    );
    let descriptors_doc = format!(
        " The descriptors of `{full_service}`'s methods under a policy type: each \
         method's `.proto` descriptor with the type's changes, merged at compile time. \
         Implemented for every [`Policy`], and only there."
    );
    let proto_policy_doc = format!(" The policy `{full_service}`'s `.proto` declares.");
    let client_doc = format!(
        " A typed client of `{full_service}` over a humus client: one method per RPC, \
         each calling with its descriptor from `P`."
    );
    let alias_doc = format!(
        " The typed humus client of `{full_service}` with the `.proto`'s policy only. \
         `#[humus::client(service = this module)] trait {name}` makes `{name}HumusClient`, \
         with the policy the trait changes.",
        name = service.name
    );
    let separator = (!service_docs.is_empty()).then(|| quote!(#[doc = ""]));

    let constructor = (!taken.contains("new")).then(|| {
        quote! {
            /// A typed client that calls through `client` (also `From`).
            pub fn new(client: ::humus::codegen::Client) -> Self {
                let () = <P as Descriptors>::CHECK_CHANGES;
                Client { client, policy: ::core::marker::PhantomData }
            }
        }
    });
    let client_accessor = (!taken.contains("client")).then(|| {
        quote! {
            /// The humus client calls go through (also `AsRef`).
            pub fn client(&self) -> &::humus::codegen::Client {
                &self.client
            }
        }
    });
    let into_client = (!taken.contains("into_client")).then(|| {
        quote! {
            /// The humus client calls go through (also `From`).
            pub fn into_client(self) -> ::humus::codegen::Client {
                self.client
            }
        }
    });

    let methods_list = (!service
        .methods
        .iter()
        .any(|method| static_name(method) == "METHODS"))
    .then(|| {
        quote! {
            /// Every method's descriptor with `P`'s changes, in `.proto`
            /// order ([`Descriptors::METHODS`]). Evaluating it checks `P`'s
            /// changes against the `.proto` at compile time.
            pub const METHODS: &'static [&'static ::humus::codegen::Method] =
                <P as Descriptors>::METHODS;
        }
    });
    let callback = format_ident!("{}", callback_macro_name(&full_service));
    let client_name = alias.to_string();
    quote! {
        #[doc = #module_doc]
        // An RPC's name is the `.proto`'s, not a Rust convention's
        // (`IntoClient`, `New`). A binary crate that uses some of the
        // generated items and not others gets no warning for them, as with
        // tonic's modules.
        #[allow(
            clippy::wrong_self_convention,
            clippy::new_ret_no_self,
            dead_code,
            unused_imports
        )]
        pub mod #module {
            #[doc = #policy_doc]
            pub trait Policy: ::core::marker::Sized + 'static {
                /// The methods whose policy this type changes, each by its
                /// Rust name (`r#` left out) with the change, merged into
                /// the `.proto`'s policy at compile time; none by default.
                /// Each must be one of the service's methods, named once:
                /// `Descriptors::CHECK_CHANGES` says when that is checked.
                const CHANGES: ::humus::codegen::Changes = &[];
            }

            #[doc = #descriptors_doc]
            pub trait Descriptors: Policy {
                /// Every method's descriptor with the policy type's changes, in
                /// `.proto` order (as `Client::<P>::METHODS`, unless an RPC
                /// named `Methods` takes that name). Evaluating it checks the
                /// changes against the `.proto` at compile time.
                const METHODS: &'static [&'static ::humus::codegen::Method] = {
                    let () = <Self as Descriptors>::CHECK_CHANGES;
                    &[#(#descriptor_list),*]
                };

                /// A compile error, naming the service and listing its
                /// methods, when `Policy::CHANGES` names a method it lacks
                /// or one twice; evaluated once per policy type by
                /// `Client::<P>::new`, `From` and `METHODS` (so at `cargo
                /// build`, not `cargo check`; one descriptor alone does not).
                const CHECK_CHANGES: () =
                    ::humus::codegen::check_changes(#full_service, #method_names, <Self as Policy>::CHANGES);
            }

            impl<P: Policy> Descriptors for P {}

            #[doc = #proto_policy_doc]
            #[derive(Clone, Copy, Debug)]
            pub enum ProtoPolicy {}

            impl Policy for ProtoPolicy {}

            #service_docs
            #separator
            #[doc = #client_doc]
            pub struct Client<P: Policy = ProtoPolicy> {
                client: ::humus::codegen::Client,
                policy: ::core::marker::PhantomData<fn() -> P>,
            }

            #[doc = #alias_doc]
            pub type #alias = Client<ProtoPolicy>;

            impl<P: Policy> Client<P> {
                #constructor
                #client_accessor
                #into_client

                #methods_list

                #(#descriptors)*

                #(#calls)*
            }

            impl<P: Policy> ::core::convert::From<::humus::codegen::Client> for Client<P> {
                fn from(client: ::humus::codegen::Client) -> Self {
                    let () = <P as Descriptors>::CHECK_CHANGES;
                    Client { client, policy: ::core::marker::PhantomData }
                }
            }

            impl<P: Policy> ::core::convert::From<Client<P>> for ::humus::codegen::Client {
                fn from(client: Client<P>) -> Self {
                    client.client
                }
            }

            impl<P: Policy> ::core::convert::AsRef<::humus::codegen::Client> for Client<P> {
                fn as_ref(&self) -> &::humus::codegen::Client {
                    &self.client
                }
            }

            impl<P: Policy> ::core::clone::Clone for Client<P> {
                fn clone(&self) -> Self {
                    Client { client: ::core::clone::Clone::clone(&self.client), policy: ::core::marker::PhantomData }
                }
            }

            impl<P: Policy> ::core::fmt::Debug for Client<P> {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    f.debug_struct(::core::any::type_name::<Self>())
                        .field("client", &self.client)
                        .finish()
                }
            }

            // `#[humus::client(service = this module)]` expands through this
            // macro, which hands it the service's methods and the `.proto`'s
            // never_retry ones, so its errors point at the user's tokens.
            #[doc(hidden)]
            #[macro_export]
            macro_rules! #callback {
                ($($input:tt)*) => {
                    ::humus::codegen::client_expand! {
                        service = #full_service,
                        client = #client_name,
                        methods = [#(#callback_methods),*],
                        $($input)*
                    }
                };
            }

            #[doc(hidden)]
            pub use #callback as __humus_client;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_follow_tonic() {
        assert_eq!(module_name("Ledger"), "ledger_humus");
        assert_eq!(module_name("TestService"), "test_service_humus");
        assert_eq!(
            module_name("XdsUpdateHealthService"),
            "xds_update_health_service_humus"
        );
    }

    #[test]
    fn comments_are_made_safe_for_rustdoc() {
        assert_eq!(sanitize("see [the spec]"), "see \\[the spec\\]");
        assert_eq!(
            sanitize("at https://grpc.io/docs, or (http://a.b/c)"),
            "at <https://grpc.io/docs,> or (<http://a.b/c>)"
        );
        assert_eq!(sanitize("already <https://x.y>."), "already <https://x.y>.");
        assert_eq!(
            sanitize("<package>.<service>[.<method>]"),
            "\\<package\\>.\\<service\\>\\[.\\<method\\>\\]"
        );
        assert_eq!(sanitize("kept \\[as is\\]"), "kept \\[as is\\]");
    }

    #[test]
    fn types_resolve_from_inside_the_module() {
        assert_eq!(rust_type("Ping", "super").to_string(), "super :: Ping");
        assert_eq!(rust_type("()", "super").to_string(), "()");
        assert_eq!(
            rust_type("::prost_types::Any", "super").to_string(),
            ":: prost_types :: Any"
        );
    }
}
