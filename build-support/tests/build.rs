//! humus-build as a `build.rs` calls it, on `.proto` files written to a
//! temporary folder: what it generates, the options it passes through, and
//! every mistake in a `humus.v1.policy` annotation failing the build with
//! the file, line, service and method.

use std::fs;
use std::path::{Path, PathBuf};

/// A fresh folder holding `files`, with an empty `out` folder beside them.
fn workspace(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("humus-build-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("out")).unwrap();
    for (path, text) in files {
        let path = dir.join("proto").join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    dir
}

fn builder(dir: &Path) -> humus_build::Builder {
    humus_build::configure()
        .out_dir(dir.join("out"))
        .emit_rerun_if_changed(false)
}

/// Compiles `proto/<file>` of `dir`.
fn compile(dir: &Path, file: &str) -> Result<(), humus_build::Error> {
    builder(dir).compile_protos(&[dir.join("proto").join(file)], &[dir.join("proto")])
}

/// `error`'s text with the path of `workspace(name)`'s `proto` folder left
/// out: `ledger.proto:9: ...` (an error names the file as the build gave it,
/// here under that folder).
fn text_of(name: &str, error: &humus_build::Error) -> String {
    let proto = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("humus-build-{name}/proto/"));
    error.to_string().replace(&proto.display().to_string(), "")
}

/// Compiles one file named `ledger.proto` holding `text`; the error's text.
fn error_of(name: &str, text: &str) -> humus_build::Error {
    let dir = workspace(name, &[("ledger.proto", text)]);
    compile(&dir, "ledger.proto").expect_err("the build fails")
}

fn ledger(methods: &str) -> String {
    format!(
        r#"syntax = "proto3";
package ledger.v1;
import "humus/v1/options.proto";
message Req {{}}
message Resp {{}}
service Ledger {{
{methods}
}}
"#
    )
}

const GOOD: &str = r#"syntax = "proto3";
package ledger.v1;
import "humus/v1/options.proto";

// Moves money [between] accounts, see https://example.com/ledger.
service Ledger {
  // Moves money.
  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: "ABORTED" retry: "RETRY" breaker: "SUCCESS" }
      classify: { code: "Unavailable" retry: "retry" breaker: "failure" }
      classify: { code: "NOT_FOUND" retry: "SUCCESS" breaker: "IGNORED" }
    };
  }
  // Charges a card: never twice.
  rpc Charge(Req) returns (Resp) {
    option (humus.v1.policy).never_retry = true;
    option (humus.v1.policy).classify = { code: "ABORTED" retry: "STOP" breaker: "FAILURE" };
  }
  rpc Watch(Req) returns (stream Resp);
  rpc Upload(stream Req) returns (Resp);
  rpc Chat(stream Req) returns (stream Resp) {
    option deprecated = true;
  }
}
message Req {}
message Resp {}
"#;

#[test]
fn a_good_proto_generates_messages_stubs_and_the_humus_client() {
    let dir = workspace("good", &[("ledger/v1/ledger.proto", GOOD)]);
    compile(&dir, "ledger/v1/ledger.proto").unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();

    // prost's messages and tonic's stubs, as tonic-prost-build writes them.
    assert!(code.contains("pub struct Req {}"), "{code}");
    assert!(code.contains("pub mod ledger_client {"));
    assert!(code.contains("pub mod ledger_server {"));
    // The humus module: a descriptor per method with the full name, point,
    // kind and policy, merged with the policy type's changes.
    assert!(code.contains("pub mod ledger_humus {"));
    assert!(code.contains("pub const TRANSFER: &'static ::humus::codegen::Method"));
    assert!(code.contains("const CHANGES: ::humus::codegen::Changes = &[];"));
    // The names the policy type's changes are checked against, once per
    // policy type, where its client is made or its list evaluated.
    assert!(code.contains(
        r#""ledger.v1.Ledger",
            "`transfer`, `charge`, `watch`, `upload`, `chat`",
            <Self as Policy>::CHANGES,"#
    ));
    assert!(code.contains("let () = <P as Descriptors>::CHECK_CHANGES;"));
    assert!(code.contains("let () = <Self as Descriptors>::CHECK_CHANGES;"));
    assert!(code.contains(r#"full_name: "/ledger.v1.Ledger/Transfer""#));
    assert!(code.contains(r#"point: "grpc:ledger.v1.Ledger/Transfer""#));
    assert!(code.contains("code: ::humus::codegen::Code::Unavailable"));
    assert!(code.contains("retry: ::humus::codegen::Verdict::Success"));
    assert!(code.contains("breaker: ::humus::codegen::Outcome::Ignored"));
    assert!(code.contains("never_retry: true"));
    assert!(code.contains("kind: ::humus::codegen::RpcKind::ServerStreaming"));
    assert!(code.contains("kind: ::humus::codegen::RpcKind::ClientStreaming"));
    assert!(code.contains("kind: ::humus::codegen::RpcKind::Streaming"));
    assert!(code.contains("pub type LedgerProtoClient = Client<ProtoPolicy>;"));
    // Proto comments become docs, made safe for rustdoc.
    assert!(code.contains("/// Charges a card: never twice."));
    assert!(
        code.contains(r"/// Moves money \[between\] accounts, see <https://example.com/ledger.>")
    );
    assert!(code.contains("#[deprecated]"));
    // Neither the options file nor what only it imports is generated.
    let files: Vec<String> = fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(files, ["ledger.v1.rs"]);
}

#[test]
fn the_client_and_server_stubs_can_be_left_out() {
    let dir = workspace("no-stubs", &[("ledger.proto", GOOD)]);
    builder(&dir)
        .build_client(false)
        .build_server(false)
        .compile_protos(&[dir.join("proto/ledger.proto")], &[dir.join("proto")])
        .unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();
    assert!(!code.contains("ledger_client"));
    assert!(!code.contains("ledger_server"));
    assert!(code.contains("pub mod ledger_humus {"));

    let dir = workspace("no-humus", &[("ledger.proto", GOOD)]);
    builder(&dir)
        .build_humus_client(false)
        .build_server(false)
        .compile_protos(&[dir.join("proto/ledger.proto")], &[dir.join("proto")])
        .unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();
    assert!(code.contains("pub mod ledger_client {"));
    assert!(!code.contains("ledger_server"));
    assert!(!code.contains("ledger_humus"));
}

#[test]
fn prost_and_tonic_options_pass_through() {
    let dir = workspace("pass-through", &[("ledger.proto", GOOD)]);
    builder(&dir)
        .type_attribute("ledger.v1.Req", "#[derive(Hash)]")
        .field_attribute("ledger.v1.Req", "#[doc = \"field\"]")
        .client_mod_attribute("ledger.v1", "#[cfg(feature = \"tonic-client\")]")
        .disable_comments(["ledger.v1.Ledger.Charge"])
        .include_file("all.rs")
        .file_descriptor_set_path(dir.join("out/set.bin"))
        .compile_protos(&[dir.join("proto/ledger.proto")], &[dir.join("proto")])
        .unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();
    assert!(code.contains("#[derive(Hash)]"));
    assert!(code.contains("#[cfg(feature = \"tonic-client\")]"));
    assert!(!code.contains("Charges a card"));
    let include = fs::read_to_string(dir.join("out/all.rs")).unwrap();
    assert!(include.contains("pub mod ledger {"), "{include}");

    // The descriptor set keeps the humus option.
    let set = fs::read(dir.join("out/set.bin")).unwrap();
    let pool = prost_reflect::DescriptorPool::decode(set.as_slice()).unwrap();
    let extension = pool.get_extension_by_name("humus.v1.policy").unwrap();
    let charge = pool
        .get_service_by_name("ledger.v1.Ledger")
        .unwrap()
        .methods()
        .find(|m| m.name() == "Charge")
        .unwrap();
    assert!(charge.options().has_extension(&extension));
}

#[test]
fn extern_paths_reach_the_humus_client() {
    let dir = workspace(
        "extern",
        &[
            (
                "money.proto",
                "syntax = \"proto3\"; package money; message Cents { int64 value = 1; }",
            ),
            (
                "ledger.proto",
                "syntax = \"proto3\"; package ledger.v1; import \"money.proto\";\n\
                 import \"google/protobuf/empty.proto\";\n\
                 service Ledger { rpc Pay(money.Cents) returns (google.protobuf.Empty); }",
            ),
        ],
    );
    builder(&dir)
        .extern_path(".money", "::money_crate")
        .compile_protos(&[dir.join("proto/ledger.proto")], &[dir.join("proto")])
        .unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();
    assert!(
        code.contains("::humus::codegen::IntoRequest<::money_crate::Cents>"),
        "{code}"
    );
    assert!(code.contains("::humus::codegen::Call<'_, ()>"), "{code}");
}

#[test]
fn a_service_without_package_is_named_without_one() {
    let dir = workspace(
        "no-package",
        &[(
            "echo.proto",
            "syntax = \"proto3\"; message Msg {} service Echo { rpc Say(Msg) returns (Msg); }",
        )],
    );
    compile(&dir, "echo.proto").unwrap();
    let code = fs::read_to_string(dir.join("out/_.rs")).unwrap();
    assert!(code.contains(r#"full_name: "/Echo/Say""#));
    assert!(code.contains(r#"point: "grpc:Echo/Say""#));
}

#[test]
fn a_proto_that_does_not_compile_fails_with_protox_message() {
    let error = error_of(
        "syntax",
        "syntax = \"proto3\";\npackage ledger.v1;\nmessage Req { string id = 1 }\n",
    );
    assert!(error.is_compile());
    assert!(error.problems().is_empty());
    let text = text_of("syntax", &error);
    assert!(text.starts_with("ledger.proto:3:"), "{text}");
    assert!(text.contains("expected ';'"), "{text}");

    let error = error_of(
        "unknown-type",
        "syntax = \"proto3\";\npackage ledger.v1;\nservice Ledger { rpc Pay(Nope) returns (Nope); }\n",
    );
    assert!(error.is_compile());
    assert!(error.to_string().contains("Nope"), "{error}");

    let error = error_of(
        "unknown-option",
        &ledger("  rpc Pay(Req) returns (Resp) { option (humus.v1.polcy).never_retry = true; }"),
    );
    assert!(error.is_compile());
    assert!(error.to_string().contains("humus.v1.polcy"), "{error}");
}

#[test]
fn a_misspelled_field_in_braces_names_the_field_line_method_and_fix() {
    let error = error_of(
        "misspelled-brace",
        &ledger(
            r#"  rpc Pay(Req) returns (Resp) {
    option (humus.v1.policy) = {
      never_retyr: true
    };
  }"#,
        ),
    );
    assert!(!error.is_compile());
    assert_eq!(
        text_of("misspelled-brace", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:9: ledger.v1.Ledger/Pay: unknown field \
         `never_retyr` in the humus.v1.policy option (humus.v1.MethodPolicy has `never_retry`, \
         `classify`); did you mean `never_retry`?"
    );
}

#[test]
fn an_unquoted_code_says_to_quote_it() {
    let error = error_of(
        "unquoted-code",
        &ledger(
            r#"  rpc Pay(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: ABORTED retry: "RETRY" breaker: "SUCCESS" }
    };
  }"#,
        ),
    );
    assert_eq!(
        text_of("unquoted-code", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:9: ledger.v1.Ledger/Pay: `code: ABORTED`: \
         humus.v1.CodeRule's `code` is a string; quote it: `code: \"ABORTED\"`"
    );
}

#[test]
fn a_misspelled_field_in_a_dotted_path_names_the_field_line_method_and_fix() {
    let error = error_of(
        "misspelled-dotted",
        &ledger(
            "  rpc Pay(Req) returns (Resp);\n  rpc Charge(Req) returns (Resp) {\n    \
             option (humus.v1.policy).never_retyr = true;\n  }",
        ),
    );
    let [problem] = error.problems() else {
        panic!("one problem: {error}");
    };
    assert_eq!(problem.line(), Some(9));
    assert_eq!(problem.service(), "ledger.v1.Ledger");
    assert_eq!(problem.method(), "Charge");
    assert!(
        problem.message().starts_with("unknown field `never_retyr`")
            && problem.message().ends_with("did you mean `never_retry`?"),
        "{error}"
    );
}

#[test]
fn a_misspelled_field_in_a_classify_entry_names_the_field_line_method_and_fix() {
    let error = error_of(
        "misspelled-entry",
        &ledger(
            r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: "ABORTED" retry: "RETRY" breaker: "SUCCESS" }
      classify: {
        code: "UNAVAILABLE"
        retyr: "RETRY" breaker: "FAILURE"
      }
    };
  }
  rpc Pay(Req) returns (Resp) {
    option (humus.v1.policy).classify = { code: "ABORTED" retry: "STOP" breakr: "FAILURE" };
  }"#,
        ),
    );
    let found: Vec<String> = error
        .problems()
        .iter()
        .map(|p| {
            format!(
                "{}:{}: {}/{}: {}",
                p.file().rsplit('/').next().unwrap(),
                p.line().unwrap(),
                p.service(),
                p.method(),
                p.message()
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            "ledger.proto:12: ledger.v1.Ledger/Transfer: unknown field `retyr` in the \
             humus.v1.policy option (humus.v1.CodeRule has `code`, `retry`, `breaker`); did you \
             mean `retry`?",
            "ledger.proto:17: ledger.v1.Ledger/Pay: unknown field `breakr` in the \
             humus.v1.policy option (humus.v1.CodeRule has `code`, `retry`, `breaker`); did you \
             mean `breaker`?",
        ],
        "{error}"
    );
}

#[test]
fn an_unknown_code_names_file_line_service_and_method() {
    let error = error_of(
        "unknown-code",
        &ledger(
            r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: "ABORTD" retry: "RETRY" breaker: "SUCCESS" }
    };
  }"#,
        ),
    );
    assert!(!error.is_compile());
    let [problem] = error.problems() else {
        panic!("one problem: {error}");
    };
    assert!(
        problem.file().ends_with("/proto/ledger.proto"),
        "{}",
        problem.file()
    );
    assert_eq!(problem.line(), Some(9));
    assert_eq!(problem.service(), "ledger.v1.Ledger");
    assert_eq!(problem.method(), "Transfer");
    assert_eq!(
        text_of("unknown-code", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:9: ledger.v1.Ledger/Transfer: \
         classify entry 1: unknown gRPC status code \"ABORTD\"; did you mean \"ABORTED\"? (one of \
         OK, CANCELLED, UNKNOWN, INVALID_ARGUMENT, DEADLINE_EXCEEDED, NOT_FOUND, ALREADY_EXISTS, \
         PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION, ABORTED, OUT_OF_RANGE, \
         UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS, UNAUTHENTICATED)"
    );
}

#[test]
fn a_code_listed_twice_is_an_error() {
    let error = error_of(
        "twice",
        &ledger(
            r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: "ABORTED" retry: "RETRY" breaker: "SUCCESS" }
      classify: { code: "UNAVAILABLE" retry: "RETRY" breaker: "FAILURE" }
      classify: { code: "Aborted" retry: "STOP" breaker: "FAILURE" }
    };
  }"#,
        ),
    );
    assert_eq!(
        text_of("twice", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:11: ledger.v1.Ledger/Transfer: \
         classify lists ABORTED twice (entries 1 and 3); keep one"
    );
}

#[test]
fn a_retry_of_ok_is_an_error() {
    let error = error_of(
        "retry-ok",
        &ledger(
            r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy).classify = { code: "OK" retry: "RETRY" breaker: "SUCCESS" };
  }"#,
        ),
    );
    assert_eq!(
        text_of("retry-ok", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:8: ledger.v1.Ledger/Transfer: \
         classify entry 1 retries OK; an attempt that succeeded is never sent again"
    );
}

#[test]
fn ok_counted_as_a_failure_is_an_error() {
    let error = error_of(
        "ok-failure",
        &ledger(
            r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy).classify = { code: "OK" retry: "STOP" breaker: "FAILURE" };
  }"#,
        ),
    );
    assert_eq!(
        text_of("ok-failure", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:8: ledger.v1.Ledger/Transfer: \
         classify entry 1 counts OK as a FAILURE: every successful call would count against \
         the dependency and open its breaker; use \"SUCCESS\" (or \"IGNORED\")"
    );
}

#[test]
fn a_retry_entry_on_a_never_retry_method_is_an_error() {
    let error = error_of(
        "never-retry",
        &ledger(
            r#"  rpc Charge(Req) returns (Resp) {
    option (humus.v1.policy) = {
      never_retry: true
      classify: { code: "ABORTED" retry: "STOP" breaker: "FAILURE" }
      classify: { code: "UNAVAILABLE" retry: "RETRY" breaker: "FAILURE" }
    };
  }"#,
        ),
    );
    assert_eq!(
        text_of("never-retry", &error),
        "1 bad humus.v1.policy annotation:\n  ledger.proto:11: ledger.v1.Ledger/Charge: \
         classify entry 2 retries UNAVAILABLE, but the method is never_retry; use \"STOP\" or \
         drop never_retry"
    );
}

#[test]
fn unknown_or_missing_verdicts_and_outcomes_are_errors() {
    let error = error_of(
        "verdicts",
        &ledger(
            r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: "ABORTED" retry: "AGAIN" breaker: "BROKEN" }
      classify: { code: "UNAVAILABLE" }
      classify: { retry: "RETRY" breaker: "FAILURE" }
    };
  }"#,
        ),
    );
    let messages: Vec<&str> = error.problems().iter().map(|p| p.message()).collect();
    assert_eq!(
        messages,
        [
            "classify entry 1: unknown retry verdict \"AGAIN\"; expected \"RETRY\", \"STOP\" or \"SUCCESS\"",
            "classify entry 1: unknown breaker outcome \"BROKEN\"; expected \"SUCCESS\", \"FAILURE\" or \"IGNORED\"",
            "classify entry 2 has no `retry`; expected \"RETRY\", \"STOP\" or \"SUCCESS\"",
            "classify entry 2 has no `breaker`; expected \"SUCCESS\", \"FAILURE\" or \"IGNORED\"",
            "classify entry 3 has no `code`; set a gRPC status code such as \"ABORTED\"",
        ]
    );
}

#[test]
fn every_mistake_is_reported_at_once() {
    let dir = workspace(
        "all-at-once",
        &[
            (
                "ledger.proto",
                &ledger(
                    r#"  rpc Transfer(Req) returns (Resp) {
    option (humus.v1.policy) = {
      classify: { code: "ABORTD" retry: "RETRY" breaker: "SUCCESS" }
      classify: { code: "OK" retry: "RETRY" breaker: "SUCCESS" }
    };
  }
  rpc Charge(Req) returns (Resp) {
    option (humus.v1.policy) = {
      never_retry: true
      classify: { code: "ABORTED" retry: "RETRY" breaker: "SUCCESS" }
      classify: { code: "ABORTED" retry: "STOP" breaker: "SUCCESS" }
    };
  }"#,
                ),
            ),
            (
                "wallet.proto",
                r#"syntax = "proto3";
package wallet.v1;
import "humus/v1/options.proto";
message Req {}
service Wallet {
  rpc Pay(Req) returns (Req) {
    option (humus.v1.policy).classify = { code: "NOPE" retry: "RETRY" breaker: "SUCCESS" };
  }
}
"#,
            ),
        ],
    );
    let error = builder(&dir)
        .compile_protos(
            &[
                dir.join("proto/ledger.proto"),
                dir.join("proto/wallet.proto"),
            ],
            &[dir.join("proto")],
        )
        .expect_err("the build fails");
    let lines: Vec<String> = error
        .problems()
        .iter()
        .map(|p| {
            format!(
                "{}:{}: {}/{}",
                p.file().rsplit('/').next().unwrap(),
                p.line().unwrap(),
                p.service(),
                p.method()
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            "ledger.proto:9: ledger.v1.Ledger/Transfer",
            "ledger.proto:10: ledger.v1.Ledger/Transfer",
            "ledger.proto:16: ledger.v1.Ledger/Charge",
            "ledger.proto:17: ledger.v1.Ledger/Charge",
            "wallet.proto:7: wallet.v1.Wallet/Pay",
        ],
        "{error}"
    );
    assert!(
        error
            .to_string()
            .starts_with("5 bad humus.v1.policy annotations:\n")
    );
    // Nothing is written when an annotation is wrong.
    assert_eq!(fs::read_dir(dir.join("out")).unwrap().count(), 0);
}

#[test]
fn the_options_file_is_shipped() {
    assert!(humus_build::OPTIONS_PROTO.contains("extend google.protobuf.MethodOptions"));
    assert!(humus_build::OPTIONS_PROTO.contains("MethodPolicy policy = 51917;"));
}

/// `path` (absolute) relative to the current folder, as a `build.rs` names
/// its files (cargo runs it in the package's folder).
fn relative_to_cwd(path: &Path) -> PathBuf {
    let cwd = std::env::current_dir().unwrap();
    let common = cwd
        .components()
        .zip(path.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut relative = PathBuf::new();
    for _ in cwd.components().skip(common) {
        relative.push("..");
    }
    relative.extend(path.components().skip(common));
    relative
}

#[test]
fn errors_name_the_file_as_the_build_gave_it() {
    // Line 18 of proto/payments/v1/payments.proto is the mistake, in both.
    let head = |padding: usize| {
        "syntax = \"proto3\";\npackage payments.v1;\nimport \"humus/v1/options.proto\";\n\
         message Req {}\nmessage Resp {}\n"
            .to_owned()
            + &"// padding\n".repeat(padding)
    };
    let bad_syntax = head(11) + "service Payments {\n  rpc Charge(Req) returns (Resp) }\n";
    let bad_option = head(8)
        + "service Payments {\n  rpc Charge(Req) returns (Resp) {\n    option (humus.v1.policy) = {\n\
           \n      classify: { code: \"ABORTD\" retry: \"RETRY\" breaker: \"SUCCESS\" }\n    };\n  }\n}\n";
    for (name, text) in [
        ("as-given-syntax", bad_syntax),
        ("as-given-option", bad_option),
    ] {
        let dir = workspace(name, &[("payments/v1/payments.proto", &text)]);
        // As a build.rs gives them: relative to its package's folder.
        let include = relative_to_cwd(&dir).join("proto");
        let file = include.join("payments/v1/payments.proto");
        assert!(file.is_relative() && file.is_file(), "{}", file.display());
        let error = builder(&dir)
            .compile_protos(&[&file], &[&include])
            .expect_err("the build fails");
        let text = error.to_string();
        let want = format!("{}:18", file.display());
        assert!(
            text.starts_with(&want) || text.contains(&format!("\n  {want}: ")),
            "{name}: {text}"
        );
        assert!(!text.contains(" payments/v1/payments.proto"), "{text}");
    }
}

/// The generated Rust of one `ledger.proto` holding `text`.
fn generated(name: &str, text: &str) -> String {
    let dir = workspace(name, &[("ledger.proto", text)]);
    compile(&dir, "ledger.proto").unwrap();
    fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap()
}

#[test]
fn a_message_whose_module_is_the_humus_modules_name_moves_it() {
    let code = generated(
        "message-module",
        &ledger("  rpc Pay(Req) returns (Resp);\n}\nmessage LedgerHumus {\n  message Inner {}\n"),
    );
    // prost's module of the message, and the humus module beside it.
    assert!(code.contains("pub mod ledger_humus {"), "{code}");
    assert!(code.contains("pub mod ledger_humus_ {"), "{code}");
    assert!(code.contains("because prost's module of message `LedgerHumus`"));
    // Without the clash, the usual name.
    let code = generated(
        "no-message-module",
        &ledger("  rpc Pay(Req) returns (Resp);"),
    );
    assert!(code.contains("pub mod ledger_humus {"));
    assert!(!code.contains("ledger_humus_"));
}

#[test]
fn rpcs_named_like_the_clients_items_take_their_names() {
    // Without tonic's client stub, which has a `new` of its own.
    let dir = workspace(
        "rpc-names",
        &[(
            "ledger.proto",
            &ledger(
                "  rpc Methods(Req) returns (Resp);\n  rpc Client(Req) returns (Resp);\n  \
                 rpc IntoClient(Req) returns (Resp);\n  rpc New(Req) returns (Resp);",
            ),
        )],
    );
    builder(&dir)
        .build_client(false)
        .compile_protos(&[dir.join("proto/ledger.proto")], &[dir.join("proto")])
        .unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();
    // The RPCs' descriptors and methods.
    assert!(code.contains("pub const METHODS: &'static ::humus::codegen::Method ="));
    assert!(code.contains("pub fn client(\n            &self,\n            request"));
    assert!(code.contains("pub fn into_client(\n            &self,\n            request"));
    assert!(code.contains("pub fn new(\n            &self,\n            request"));
    // Not the fixed items they would clash with; From, AsRef and
    // Descriptors::METHODS remain.
    assert!(!code.contains("<P as Descriptors>::METHODS"), "{code}");
    assert!(!code.contains("pub fn client(&self)"));
    assert!(!code.contains("pub fn into_client(self)"));
    assert!(!code.contains("pub fn new(client"));
    assert!(code.contains("From<::humus::codegen::Client> for Client<P>"));
    assert!(code.contains("AsRef<::humus::codegen::Client> for Client<P>"));
    assert!(code.contains("const METHODS: &'static [&'static ::humus::codegen::Method]"));

    let code = generated("rpc-plain-names", &ledger("  rpc Pay(Req) returns (Resp);"));
    assert!(code.contains("<P as Descriptors>::METHODS"));
    assert!(code.contains("pub fn client(&self)"));
    assert!(code.contains("pub fn into_client(self)"));
    assert!(code.contains("pub fn new(client"));
}

#[test]
fn two_rpcs_with_one_rust_name_fail_the_build() {
    let error = error_of(
        "snake-clash",
        &ledger(
            "  rpc GetFoo(Req) returns (Resp);\n  rpc Pay(Req) returns (Resp);\n  rpc get_foo(Req) returns (Resp);",
        ),
    );
    assert!(!error.is_compile());
    let [problem] = error.problems() else {
        panic!("one problem: {error}");
    };
    assert_eq!(problem.line(), Some(9));
    assert_eq!(problem.method(), "get_foo");
    assert_eq!(
        text_of("snake-clash", &error),
        "1 RPC name clash in the generated Rust code:\n  ledger.proto:9: ledger.v1.Ledger/get_foo: \
         RPCs `GetFoo` and `get_foo` are both `get_foo` in Rust, so the generated clients \
         would define it twice; rename one of them"
    );
}

#[test]
fn an_rpc_named_as_a_method_of_tonics_client_stub_fails_the_build() {
    let error = error_of(
        "stub-clash",
        &ledger(
            "  rpc Pay(Req) returns (Resp);\n  rpc New(Req) returns (Resp);\n  rpc Connect(Req) returns (Resp);",
        ),
    );
    assert!(!error.is_compile());
    let [new, connect] = error.problems() else {
        panic!("two problems: {error}");
    };
    assert_eq!((new.line(), connect.line()), (Some(8), Some(9)));
    assert_eq!(new.method(), "New");
    assert_eq!(
        text_of("stub-clash", &error),
        "2 RPC name clashes in the generated Rust code:\n  ledger.proto:8: ledger.v1.Ledger/New: \
         RPC `New` is `new` in Rust, a method tonic's generated client \
         (`ledger_client::LedgerClient`) defines of its own, so it would be defined twice; \
         rename the RPC, or turn tonic's client stubs off (`build_client(false)`)\n  \
         ledger.proto:9: ledger.v1.Ledger/Connect: RPC `Connect` is `connect` in Rust, a \
         method tonic's generated client (`ledger_client::LedgerClient`) defines of its own, \
         so it would be defined twice; rename the RPC, or turn tonic's transport helpers off \
         (`build_transport(false)`)"
    );
}

#[test]
fn an_rpc_named_as_a_stub_method_passes_when_that_stub_method_is_off() {
    let text = ledger("  rpc New(Req) returns (Resp);\n  rpc Connect(Req) returns (Resp);");
    let dir = workspace("stub-off", &[("ledger.proto", &text)]);
    let build = |b: humus_build::Builder| {
        b.compile_protos(&[dir.join("proto/ledger.proto")], &[dir.join("proto")])
    };
    // No transport helpers: `Connect` is free, `New` is not.
    let error = build(builder(&dir).build_transport(false)).unwrap_err();
    let [problem] = error.problems() else {
        panic!("one problem: {error}");
    };
    assert_eq!(problem.method(), "New");
    // No client stub: both are free.
    build(builder(&dir).build_client(false)).unwrap();
    let code = fs::read_to_string(dir.join("out/ledger.v1.rs")).unwrap();
    assert!(code.contains("async fn connect("), "{code}");
}

#[test]
fn a_missing_proto_is_named_with_the_include_folders() {
    let dir = workspace("missing", &[("ledger.proto", &ledger(""))]);
    let error = compile(&dir, "nope.proto").unwrap_err();
    assert!(error.is_compile());
    assert_eq!(
        text_of("missing", &error),
        format!(
            "`nope.proto`: no such .proto file (include folders: `{}`); check the path given \
             to compile_protos",
            dir.join("proto").display()
        )
        .replace(&format!("{}/", dir.join("proto").display()), "")
    );
}

#[test]
fn a_proto_outside_the_include_folders_says_so() {
    let dir = workspace("outside", &[("ledger.proto", &ledger(""))]);
    fs::create_dir_all(dir.join("elsewhere")).unwrap();
    fs::write(dir.join("elsewhere/other.proto"), "syntax = \"proto3\";\n").unwrap();
    let error = builder(&dir)
        .compile_protos(&[dir.join("elsewhere/other.proto")], &[dir.join("proto")])
        .unwrap_err();
    assert!(error.is_compile());
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "`{}` is not under any include folder (`{}`)",
            dir.join("elsewhere/other.proto").display(),
            dir.join("proto").display()
        )),
        "{text}"
    );
    assert!(
        text.contains("add the folder its imports are relative to"),
        "{text}"
    );
}

#[test]
fn a_missing_import_says_where_it_was_looked_for() {
    let error = error_of(
        "missing-import",
        "syntax = \"proto3\";\nimport \"money/v1/money.proto\";\n",
    );
    assert!(error.is_compile());
    let text = text_of("missing-import", &error);
    assert!(
        text.starts_with("ledger.proto:2:1: import 'money/v1/money.proto' not found: looked for among humus/v1/options.proto and the well-known types (google/protobuf/*.proto), then under the include folders (`"),
        "{text}"
    );
    assert!(
        text.ends_with("add the folder that holds it to the include folders"),
        "{text}"
    );
}

#[test]
fn the_policy_option_without_its_import_says_to_add_it() {
    let error = error_of(
        "no-options-import",
        &ledger("  rpc Pay(Req) returns (Resp) { option (humus.v1.policy).never_retry = true; }")
            .replace("import \"humus/v1/options.proto\";\n", ""),
    );
    assert!(error.is_compile());
    let text = text_of("no-options-import", &error);
    assert!(text.starts_with("ledger.proto:"), "{text}");
    assert!(text.contains("'humus.v1.policy' is not defined"), "{text}");
    assert!(
        text.ends_with("add `import \"humus/v1/options.proto\";` to the file"),
        "{text}"
    );
}

/// A tree that carries its own copy of the well-known types (googleapis
/// does, for protoc) builds with humus-build's: its `descriptor.proto` may
/// use syntax protox cannot read (`extensions 1000 [declaration = ...]`),
/// and the generated code uses prost-types' anyway.
#[test]
fn the_well_known_types_are_humus_builds_own_whatever_the_tree_holds() {
    let dir = workspace(
        "own-well-known-types",
        &[
            (
                "google/protobuf/timestamp.proto",
                "this is not a .proto file the build may read\n",
            ),
            (
                "google/protobuf/descriptor.proto",
                "syntax = \"proto2\";\npackage google.protobuf;\nmessage X { extensions 1000 [declaration = { number: 1000 }]; }\n",
            ),
            (
                "ledger.proto",
                "syntax = \"proto3\";\npackage ledger.v1;\nimport \"google/protobuf/timestamp.proto\";\nimport \"google/protobuf/descriptor.proto\";\nmessage At { google.protobuf.Timestamp at = 1; }\nservice Ledger { rpc Get(At) returns (At); }\n",
            ),
        ],
    );
    compile(&dir, "ledger.proto").expect("built with the built-in well-known types");
}
