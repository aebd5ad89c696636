//! Parsing and checking `#[humus::client(...)]` and the trait it is on.
//! Nothing here generates code (see `expand.rs`); every mistake is recorded
//! in the [`Ctxt`] at the user's own token, and parsing goes on so that one
//! build shows them all.

use proc_macro2::{Span, TokenStream};
use syn::ext::IdentExt;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Attribute, Expr, Ident, Token, TraitItem, Visibility};

use crate::ctxt::Ctxt;

/// `tonic::Code`'s variants, as a classify table names them.
const CODES: [&str; 17] = [
    "Ok",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
];

/// `humus::retry::Verdict`'s variants.
const VERDICTS: [&str; 3] = ["Success", "Retry", "Stop"];

/// `humus::circuit::Outcome`'s variants.
const OUTCOMES: [&str; 3] = ["Success", "Failure", "Ignored"];

/// A whole `#[humus::client]` use, checked.
#[derive(Debug)]
pub(crate) struct Client {
    /// The generated service module, e.g. `crate::pb::ledger_humus`.
    pub(crate) service: syn::Path,
    /// The policy type's name.
    pub(crate) policy: Ident,
    /// The typed client type's name.
    pub(crate) client: Ident,
    /// The trait's attributes (its docs), kept on the generated alias.
    pub(crate) attrs: Vec<Attribute>,
    pub(crate) vis: Visibility,
    /// The trait's name: the alias's.
    pub(crate) ident: Ident,
    pub(crate) methods: Vec<Method>,
}

/// One `fn name();` of the trait, with what its `#[humus(...)]` declare.
#[derive(Debug)]
pub(crate) struct Method {
    /// The method, as the generated client names it.
    pub(crate) ident: Ident,
    pub(crate) never_retry: bool,
    pub(crate) table: Option<Vec<Rule>>,
    /// A classify function, checked against `ClassifyFn` by the compiler.
    pub(crate) classify_fn: Option<Expr>,
}

/// One classify entry: `Code => (Verdict, Outcome)`.
#[derive(Debug)]
pub(crate) struct Rule {
    pub(crate) code: Ident,
    pub(crate) retry: Ident,
    pub(crate) breaker: Ident,
}

/// A `service` path that names one of tonic's modules of a service
/// (`ledger_client`, `ledger_server`) where humus-build's module
/// (`ledger_humus`) belongs: the error, at the module's name, with the
/// module to name instead. rustc's own error there ("could not find
/// `__humus_client`") says nothing of the mix-up.
pub(crate) fn tonic_module(service: &syn::Path) -> Option<syn::Error> {
    let last = &service.segments.last()?.ident;
    let name = last.to_string();
    let name = name.strip_prefix("r#").unwrap_or(&name);
    let (stem, kind) = [("_client", "client"), ("_server", "server")]
        .into_iter()
        .find_map(|(suffix, kind)| Some((name.strip_suffix(suffix)?, kind)))?;
    if stem.is_empty() {
        return None;
    }
    Some(syn::Error::new_spanned(
        last,
        format!(
            "`{name}` is tonic's {kind} module of the service; `service` names the \
             module humus-build generates next to it: `{stem}_humus` (`{stem}_humus_` \
             when the package also has a message whose module is `{stem}_humus`)"
        ),
    ))
}

/// A `service` path that names a package's module (where the `.proto`'s
/// generated code is included) rather than one of its services' humus
/// modules (`modules`, such as `ledger_humus`): the error, at the path,
/// with the path to name instead.
pub(crate) fn package_module(service: &syn::Path, package: &str, modules: &[String]) -> syn::Error {
    let path = service
        .segments
        .iter()
        .map(|segment| segment.ident.to_string())
        .collect::<Vec<_>>()
        .join("::");
    let path = if service.leading_colon.is_some() {
        format!("::{path}")
    } else {
        path
    };
    let package = if package.is_empty() {
        "the package-less `.proto`".to_owned()
    } else {
        format!("the package `{package}`")
    };
    let named: Vec<String> = modules.iter().map(|m| format!("`{path}::{m}`")).collect();
    let instead = match named.as_slice() {
        [one] => format!("the service's module: {one}"),
        many => format!("one of its services' modules: {}", many.join(", ")),
    };
    syn::Error::new_spanned(
        service,
        format!(
            "`{path}` is the module of {package}, where its generated code is included; \
             `service` names {instead}"
        ),
    )
}

/// What the generated service module tells the attribute about the
/// service, through its callback macro.
#[derive(Debug)]
pub(crate) struct Service {
    /// `package.Service`.
    pub(crate) full_name: String,
    /// The typed client with the `.proto`'s policy, e.g. `LedgerProtoClient`.
    pub(crate) proto_client: String,
    pub(crate) methods: Vec<ServiceMethod>,
}

/// One RPC of the service.
#[derive(Debug)]
pub(crate) struct ServiceMethod {
    /// The Rust name, as the typed client's method (`charge`, `r#type`).
    pub(crate) rust: String,
    /// `package.Service/Method`, as the `.proto` spells them.
    pub(crate) path: String,
    /// Whether the `.proto` declares it `never_retry`.
    pub(crate) never_retry: bool,
    /// The first code the `.proto`'s classify table retries (`Aborted`),
    /// or empty.
    pub(crate) retries: String,
}

impl Parse for Service {
    /// `service = "..", client = "..", methods = [("charge", "Charge", true, "Aborted"), ..],`
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        fn key(input: ParseStream<'_>, name: &str) -> syn::Result<()> {
            let ident: Ident = input.parse()?;
            if ident != name {
                return Err(syn::Error::new(ident.span(), format!("expected `{name}`")));
            }
            input.parse::<Token![=]>()?;
            Ok(())
        }
        key(input, "service")?;
        let full_name = input.parse::<syn::LitStr>()?.value();
        input.parse::<Token![,]>()?;
        key(input, "client")?;
        let proto_client = input.parse::<syn::LitStr>()?.value();
        input.parse::<Token![,]>()?;
        key(input, "methods")?;
        let list;
        syn::bracketed!(list in input);
        let mut methods = Vec::new();
        while !list.is_empty() {
            let entry;
            syn::parenthesized!(entry in list);
            let rust = entry.parse::<syn::LitStr>()?.value();
            entry.parse::<Token![,]>()?;
            let proto = entry.parse::<syn::LitStr>()?.value();
            entry.parse::<Token![,]>()?;
            let never_retry = entry.parse::<syn::LitBool>()?.value;
            entry.parse::<Token![,]>()?;
            let retries = entry.parse::<syn::LitStr>()?.value();
            methods.push(ServiceMethod {
                rust,
                path: format!("{full_name}/{proto}"),
                never_retry,
                retries,
            });
            if !list.is_empty() {
                list.parse::<Token![,]>()?;
            }
        }
        input.parse::<Token![,]>()?;
        Ok(Service {
            full_name,
            proto_client,
            methods,
        })
    }
}

/// The `service = path` argument alone, when it is there and a path: where
/// the attribute finds the service's callback macro.
pub(crate) fn service_path(args: &TokenStream) -> Option<syn::Path> {
    let pairs = Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated
        .parse2(args.clone())
        .ok()?;
    let mut paths = pairs.iter().filter(|pair| pair.path.is_ident("service"));
    let first = paths.next()?;
    if paths.next().is_some() {
        return None;
    }
    match &first.value {
        syn::Expr::Path(path) => Some(path.path.clone()),
        _ => None,
    }
}

/// Parses the attribute's arguments and the trait, checking the methods
/// against `service` when the service module described it; `None` when
/// there is nothing to expand (no service path, or not a trait).
pub(crate) fn parse(
    cx: &Ctxt,
    args: TokenStream,
    item: TokenStream,
    service: Option<&Service>,
) -> Option<Client> {
    let args = parse_args(cx, args);
    let item = match syn::parse2::<syn::ItemTrait>(item) {
        Ok(item) => item,
        Err(error) => {
            cx.error(
                error.span(),
                "#[humus::client] goes on a trait: `pub trait Ledger { fn charge(); }`",
            );
            return None;
        }
    };
    check_trait_shape(cx, &item);

    let mut methods: Vec<Method> = Vec::new();
    for trait_item in &item.items {
        let TraitItem::Fn(function) = trait_item else {
            let example = service
                .and_then(|service| service.methods.first())
                .map_or_else(|| "charge".to_owned(), |method| method.rust.clone());
            cx.error_spanned_by(
                trait_item,
                format!(
                    "only methods go in a #[humus::client] trait, each `fn name();` after an RPC \
                     of the service (`fn {example}();`)"
                ),
            );
            continue;
        };
        check_fn_shape(cx, function);
        let ident = function.sig.ident.clone();
        if methods.iter().any(|m| m.ident == ident) {
            cx.error(ident.span(), format!("`{ident}` is declared twice"));
            continue;
        }
        let found = match service {
            Some(service) => match find_method(service, &ident) {
                Some(found) => Some(found),
                None => {
                    cx.error(ident.span(), not_a_method(service, &ident));
                    continue;
                }
            },
            None => None,
        };
        methods.push(parse_method(cx, ident, &function.attrs, found));
    }

    let (service_path, policy, client) = args?;
    let policy =
        policy.unwrap_or_else(|| Ident::new(&format!("{}Policy", item.ident), item.ident.span()));
    let client = client
        .unwrap_or_else(|| Ident::new(&format!("{}HumusClient", item.ident), item.ident.span()));
    Some(Client {
        service: service_path,
        policy,
        client,
        attrs: item.attrs,
        vis: item.vis,
        ident: item.ident,
        methods,
    })
}

/// The `RPC` of `service` the trait's `fn ident();` names, if any.
fn find_method<'a>(service: &'a Service, ident: &Ident) -> Option<&'a ServiceMethod> {
    let name = ident.unraw().to_string();
    service
        .methods
        .iter()
        .find(|method| method.rust.trim_start_matches("r#") == name)
}

/// "`refnud` is not a method of `ledger.v1.Ledger`; ..." with the service's
/// methods and the nearest one.
fn not_a_method(service: &Service, ident: &Ident) -> String {
    let given = ident.unraw().to_string();
    let names: Vec<&str> = service
        .methods
        .iter()
        .map(|method| method.rust.trim_start_matches("r#"))
        .collect();
    let mut message = format!("`{given}` is not a method of `{}`", service.full_name);
    if names.is_empty() {
        message.push_str("; the service has no methods");
        return message;
    }
    let listed = names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect::<Vec<_>>()
        .join(", ");
    message.push_str(&format!("; its methods are {listed}"));
    if let Some(nearest) = nearest(&given, &names) {
        message.push_str(&format!(". Did you mean `{nearest}`?"));
    }
    message
}

/// The name in `known` nearest to `given`, if one is near enough to be a
/// misspelling (an edit distance of at most a third of its length).
pub(crate) fn nearest<'a>(given: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|name| (distance(given, name), *name))
        .filter(|(d, name)| *d <= name.len().max(given.len()).div_ceil(3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name)
}

/// The optimal string alignment distance (Levenshtein with transpositions).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut rows = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in rows.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in rows[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (rows[i - 1][j] + 1)
                .min(rows[i][j - 1] + 1)
                .min(rows[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(rows[i - 2][j - 2] + 1);
            }
            rows[i][j] = best;
        }
    }
    rows[a.len()][b.len()]
}

/// The arguments: `service = path::to::ledger_humus`, an optional
/// `policy = Name` and an optional `client = Name`.
type Args = (syn::Path, Option<Ident>, Option<Ident>);

/// `service = path::to::ledger_humus` and optional `policy = Name`,
/// `client = Name`.
fn parse_args(cx: &Ctxt, args: TokenStream) -> Option<Args> {
    let pairs = match Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated.parse2(args) {
        Ok(pairs) => pairs,
        Err(error) => {
            cx.syn_error(error);
            return None;
        }
    };
    let mut service: Option<syn::Path> = None;
    let mut service_given = false;
    let mut policy: Option<Ident> = None;
    let mut client: Option<Ident> = None;
    for pair in &pairs {
        let key = pair
            .path
            .get_ident()
            .map(Ident::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "service" => {
                service_given = true;
                let syn::Expr::Path(path) = &pair.value else {
                    cx.error_spanned_by(
                        &pair.value,
                        "`service` is the path of the generated module, e.g. `crate::pb::ledger_humus`",
                    );
                    continue;
                };
                if service.is_some() {
                    cx.error_spanned_by(&pair.path, "`service` is given twice");
                } else {
                    service = Some(path.path.clone());
                }
            }
            "policy" => {
                let ident = match &pair.value {
                    syn::Expr::Path(path) => path.path.get_ident().cloned(),
                    _ => None,
                };
                let Some(ident) = ident else {
                    cx.error_spanned_by(
                        &pair.value,
                        "`policy` names the generated policy type, e.g. `policy = LedgerPolicy`",
                    );
                    continue;
                };
                if policy.is_some() {
                    cx.error_spanned_by(&pair.path, "`policy` is given twice");
                } else {
                    policy = Some(ident);
                }
            }
            "client" => {
                let ident = match &pair.value {
                    syn::Expr::Path(path) => path.path.get_ident().cloned(),
                    _ => None,
                };
                let Some(ident) = ident else {
                    cx.error_spanned_by(
                        &pair.value,
                        "`client` names the generated client type, e.g. `client = LedgerHumusClient`",
                    );
                    continue;
                };
                if client.is_some() {
                    cx.error_spanned_by(&pair.path, "`client` is given twice");
                } else {
                    client = Some(ident);
                }
            }
            _ => cx.error_spanned_by(
                &pair.path,
                "unknown argument; expected `service = path::to::<service>_humus` and optionally `policy = Name`, `client = Name`",
            ),
        }
    }
    match service {
        Some(service) => Some((service, policy, client)),
        None if service_given => None,
        None => {
            cx.error(
                Span::call_site(),
                "#[humus::client] needs the generated service module: `#[humus::client(service = crate::pb::ledger_humus)]`",
            );
            None
        }
    }
}

fn check_trait_shape(cx: &Ctxt, item: &syn::ItemTrait) {
    if let Some(unsafety) = &item.unsafety {
        cx.error_spanned_by(unsafety, "a #[humus::client] trait cannot be unsafe");
    }
    if let Some(auto) = &item.auto_token {
        cx.error_spanned_by(auto, "a #[humus::client] trait cannot be auto");
    }
    if !item.generics.params.is_empty() || item.generics.where_clause.is_some() {
        cx.error_spanned_by(&item.generics, "a #[humus::client] trait takes no generics");
    }
    if !item.supertraits.is_empty() {
        cx.error_spanned_by(
            &item.supertraits,
            "a #[humus::client] trait has no supertraits",
        );
    }
    for attr in &item.attrs {
        if attr.path().is_ident("humus") {
            cx.error_spanned_by(attr, "#[humus(...)] goes on the trait's methods");
        }
    }
}

fn check_fn_shape(cx: &Ctxt, function: &syn::TraitItemFn) {
    let sig = &function.sig;
    let ident = &sig.ident;
    let expected = format!("declare the method as `fn {ident}();`");
    if let Some(token) = &sig.constness {
        cx.error_spanned_by(token, &expected);
    }
    if let Some(token) = &sig.asyncness {
        cx.error_spanned_by(token, &expected);
    }
    if let Some(token) = &sig.unsafety {
        cx.error_spanned_by(token, &expected);
    }
    if let Some(abi) = &sig.abi {
        cx.error_spanned_by(abi, &expected);
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        cx.error_spanned_by(&sig.generics, &expected);
    }
    if !sig.inputs.is_empty() || sig.variadic.is_some() {
        cx.error_spanned_by(&sig.inputs, &expected);
    }
    if let syn::ReturnType::Type(..) = &sig.output {
        cx.error_spanned_by(&sig.output, &expected);
    }
    if let Some(body) = &function.default {
        cx.error_spanned_by(body, &expected);
    }
}

/// One option inside `#[humus(...)]`.
enum Opt {
    NeverRetry(Ident),
    Classify(Ident, Vec<RawRule>),
    ClassifyFn(Ident, Expr),
}

/// A classify entry as written, before its names are checked.
struct RawRule {
    code: Ident,
    retry: Ident,
    breaker: Ident,
}

impl Parse for RawRule {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let path = syn::Path::parse_mod_style(input)?;
        let code = match path.get_ident() {
            Some(code) => code.clone(),
            None => {
                let written = quote::quote!(#path).to_string().replace(' ', "");
                let name = path
                    .segments
                    .last()
                    .map(|s| s.ident.to_string())
                    .unwrap_or_default();
                return Err(syn::Error::new_spanned(
                    &path,
                    format!("write a status code by its name alone: `{name}`, not `{written}`"),
                ));
            }
        };
        input.parse::<Token![=>]>()?;
        if !input.peek(syn::token::Paren) {
            return Err(
                input.error("expected `(Verdict, Outcome)` after `=>`, e.g. `(Retry, Success)`")
            );
        }
        let content;
        syn::parenthesized!(content in input);
        let retry: Ident = content.parse()?;
        content.parse::<Token![,]>()?;
        let breaker: Ident = content.parse()?;
        content.parse::<Option<Token![,]>>()?;
        if !content.is_empty() {
            return Err(content.error("expected `(Verdict, Outcome)`, e.g. `(Retry, Success)`"));
        }
        Ok(RawRule {
            code,
            retry,
            breaker,
        })
    }
}

impl Parse for Opt {
    fn parse(input: ParseStream<'_>) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        match name.to_string().as_str() {
            "never_retry" if input.peek(Token![=]) || input.peek(syn::token::Paren) => {
                Err(syn::Error::new(
                    name.span(),
                    "`never_retry` takes no value: write `never_retry` alone (leave it out for a method that may be retried)",
                ))
            }
            "never_retry" => Ok(Opt::NeverRetry(name)),
            "classify" => {
                let content;
                syn::parenthesized!(content in input);
                let rules = Punctuated::<RawRule, Token![,]>::parse_terminated(&content)
                    .inspect_err(|_| skip_rest(&content))?;
                Ok(Opt::Classify(name, rules.into_iter().collect()))
            }
            "classify_fn" => {
                input.parse::<Token![=]>()?;
                Ok(Opt::ClassifyFn(name, input.parse()?))
            }
            _ => Err(syn::Error::new(
                name.span(),
                "unknown option; expected `never_retry`, `classify(Code => (Verdict, Outcome), ...)` or `classify_fn = path::to::function`",
            )),
        }
    }
}

/// Consumes what is left of `input`, after an error already reported, so
/// that syn does not add its own "unexpected token" for it.
fn skip_rest(input: ParseStream<'_>) {
    let _ = input.step(|cursor| {
        let mut rest = *cursor;
        while let Some((_, next)) = rest.token_tree() {
            rest = next;
        }
        Ok(((), rest))
    });
}

/// The options of one `#[humus(...)]`, each option that does not parse
/// reported and skipped up to the next comma, so that one build reports
/// every mistake of the attribute, not only the first.
fn parse_opts(cx: &Ctxt, input: ParseStream<'_>) -> Vec<Opt> {
    let mut opts = Vec::new();
    while !input.is_empty() {
        match input.parse::<Opt>() {
            Ok(opt) => opts.push(opt),
            Err(error) => {
                cx.syn_error(error);
                // Skip what is left of this option: its tokens up to the
                // next comma at this level (a group is one token).
                let _ = input.step(|cursor| {
                    let mut rest = *cursor;
                    while let Some((tree, next)) = rest.token_tree() {
                        if matches!(&tree, proc_macro2::TokenTree::Punct(p) if p.as_char() == ',') {
                            return Ok(((), rest));
                        }
                        rest = next;
                    }
                    Ok(((), rest))
                });
            }
        }
        if input.is_empty() {
            break;
        }
        if let Err(error) = input.parse::<Token![,]>() {
            cx.syn_error(error);
            break;
        }
    }
    opts
}

fn parse_method(
    cx: &Ctxt,
    ident: Ident,
    attrs: &[Attribute],
    found: Option<&ServiceMethod>,
) -> Method {
    let mut never_retry: Option<Ident> = None;
    let mut classify: Option<(Ident, Vec<RawRule>)> = None;
    let mut classify_fn: Option<Expr> = None;
    for attr in attrs {
        if attr.path().is_ident("doc") {
            continue;
        }
        if !attr.path().is_ident("humus") {
            cx.error_spanned_by(
                attr,
                "only #[humus(...)] and doc comments go on a #[humus::client] method",
            );
            continue;
        }
        let opts = match attr.parse_args_with(|input: ParseStream<'_>| Ok(parse_opts(cx, input))) {
            Ok(opts) => opts,
            Err(error) => {
                cx.syn_error(error);
                continue;
            }
        };
        for opt in opts {
            match opt {
                Opt::NeverRetry(name) => {
                    if never_retry.is_some() {
                        cx.error(name.span(), "`never_retry` is given twice");
                    } else {
                        never_retry = Some(name);
                    }
                }
                Opt::Classify(name, rules) => {
                    if classify.is_some() {
                        cx.error(
                            name.span(),
                            "`classify` is given twice; put every entry in one table",
                        );
                    } else {
                        classify = Some((name, rules));
                    }
                }
                Opt::ClassifyFn(name, function) => {
                    if classify_fn.is_some() {
                        cx.error(name.span(), "`classify_fn` is given twice");
                    } else {
                        classify_fn = Some(function);
                    }
                }
            }
        }
    }

    // `never_retry` alone keeps the `.proto`'s table: one that retries a
    // code contradicts it.
    if let (Some(name), None, Some(found)) = (&never_retry, &classify, found)
        && !found.retries.is_empty()
    {
        let code = &found.retries;
        cx.error(
            name.span(),
            format!(
                "`{ident}` retries `{code}` in its .proto's classify table ({}), so it cannot be `never_retry` with that table; give it a table here that does not retry (`classify({code} => (Stop, ..))`), or drop `never_retry`",
                found.path
            ),
        );
    }
    let table =
        classify.map(|(_, rules)| check_table(cx, &ident, never_retry.is_some(), found, rules));
    Method {
        ident,
        never_retry: never_retry.is_some(),
        table,
        classify_fn,
    }
}

/// Checks the names and the consistency of a classify table, keeping the
/// entries that are right.
fn check_table(
    cx: &Ctxt,
    method: &Ident,
    never_retry: bool,
    found: Option<&ServiceMethod>,
    rules: Vec<RawRule>,
) -> Vec<Rule> {
    let mut table: Vec<Rule> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    for rule in rules {
        let code = rule.code.to_string();
        let mut ok = true;
        if !CODES.contains(&code.as_str()) {
            ok = false;
            cx.error(rule.code.span(), unknown("gRPC status code", &code, &CODES));
        } else if seen.contains(&code) {
            ok = false;
            cx.error(
                rule.code.span(),
                format!("`{code}` is listed twice in this classify table"),
            );
        } else {
            seen.push(code.clone());
        }
        let retry = rule.retry.to_string();
        if !VERDICTS.contains(&retry.as_str()) {
            ok = false;
            cx.error(
                rule.retry.span(),
                unknown("retry verdict", &retry, &VERDICTS),
            );
        } else if retry == "Retry" {
            if code == "Ok" {
                ok = false;
                cx.error(
                    rule.retry.span(),
                    "`Ok` cannot be retried: an attempt that succeeded is never sent again",
                );
            }
            if never_retry {
                ok = false;
                cx.error(
                    rule.retry.span(),
                    format!(
                        "`{method}` is `never_retry`, so no entry can retry it; use `Stop`, or drop `never_retry`"
                    ),
                );
            } else if let Some(found) = found.filter(|found| found.never_retry) {
                ok = false;
                cx.error(
                    rule.retry.span(),
                    format!(
                        "`{method}` is `never_retry` in its .proto (`{}` is never sent twice), so no entry can retry it; use `Stop`",
                        found.path
                    ),
                );
            }
        }
        let breaker = rule.breaker.to_string();
        if !OUTCOMES.contains(&breaker.as_str()) {
            ok = false;
            cx.error(
                rule.breaker.span(),
                unknown("breaker outcome", &breaker, &OUTCOMES),
            );
        } else if code == "Ok" && breaker == "Failure" {
            ok = false;
            cx.error(
                rule.breaker.span(),
                "`Ok` cannot count as a `Failure`: every successful call would count against the dependency and open its breaker; use `Success` (or `Ignored`)",
            );
        }
        if ok {
            table.push(Rule {
                code: rule.code,
                retry: rule.retry,
                breaker: rule.breaker,
            });
        }
    }
    table
}

/// "unknown X `y`; expected one of ..." with a suggestion when only the
/// spelling differs (`ABORTED` for `Aborted`) or the name is a near
/// misspelling (`Abortd`).
fn unknown(what: &str, given: &str, known: &[&str]) -> String {
    let squash = |s: &str| {
        s.chars()
            .filter(|c| *c != '_')
            .map(|c| c.to_ascii_lowercase())
            .collect::<String>()
    };
    let mut message = format!("unknown {what} `{given}`");
    if let Some(similar) = known.iter().find(|k| squash(k) == squash(given)) {
        message.push_str(&format!("; did you mean `{similar}`?"));
    } else if let Some(similar) = nearest(given, known) {
        message.push_str(&format!(
            "; did you mean `{similar}`? (one of {})",
            known.join(", ")
        ));
    } else {
        message.push_str(&format!("; expected one of {}", known.join(", ")));
    }
    message
}
