//! The standalone binaries' exit codes: 78 for a bad setting, naming every
//! bad variable; 1 for settings that each pass their check but that the
//! ledger client refuses together (a fault in the code).

use std::process::{Command, Output};

fn run(bin: &str, vars: &[(&str, &str)]) -> Output {
    let mut command = Command::new(bin);
    command.env_clear();
    for (k, v) in vars {
        command.env(k, v);
    }
    command.output().expect("the binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_wallet_names_every_bad_variable_and_exits_78() {
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[
            ("LEDGER_TIMEOUT", "soon"),
            ("LEDGER_MAX_ATTEMPTS", "0"),
            ("WALLET_FAULT_INJECTION", "maybe"),
        ],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    for var in [
        "LEDGER_ADDR: not set",
        "LEDGER_TIMEOUT: \"soon\" is not a duration",
        "LEDGER_MAX_ATTEMPTS:",
        "WALLET_FAULT_INJECTION: \"maybe\" is neither on nor off",
        "WALLET_PLAINTEXT: is not on",
    ] {
        assert!(err.contains(var), "{var:?} not in {err:?}");
    }
}

#[test]
fn the_wallet_checks_the_ledger_address_with_the_clients_check() {
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[("LEDGER_ADDR", "dns:///ledger:50051")],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(stderr(&out).contains("LEDGER_ADDR: "), "{}", stderr(&out));
}

#[test]
fn settings_the_client_refuses_together_exit_1() {
    // Each passes its own check; a ceiling below the base takes both to
    // see, which only the client's constructor does.
    let out = run(
        env!("CARGO_BIN_EXE_wallet"),
        &[
            ("LEDGER_ADDR", "127.0.0.1:9"),
            ("WALLET_LISTEN_ADDR", "127.0.0.1:0"),
            ("WALLET_PLAINTEXT", "on"),
            ("LEDGER_BACKOFF_BASE", "2s"),
            ("LEDGER_BACKOFF_MAX", "1s"),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("backoff_max"), "{}", stderr(&out));
}

#[test]
fn the_ledger_names_a_bad_listen_address_and_exits_78() {
    let out = run(
        env!("CARGO_BIN_EXE_ledger"),
        &[("LEDGER_LISTEN_ADDR", "ledger:50051")],
    );
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("LEDGER_LISTEN_ADDR: \"ledger:50051\" is not an IP address and port"),
        "{}",
        stderr(&out)
    );
}
